#!/usr/bin/python
# Copyright: lanekit developers
# Apache-2.0
"""Build one thin lanekit image on the builder: decide what to build, restore, push and lock, then do it."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: image_build
short_description: Build a thin lanekit image over a pinned upstream base, idempotently
version_added: 0.1.0
description:
  - Builds C(lanekit/<name>:<content hash 12>) on the host it runs on (the builder) from the image
    spec C(<images_dir>/<name>/image.yml) and its patches, which the C(lanekit.serving.image) role
    copies there.
  - Renders the Dockerfile (C(FROM <repository>@sha256:<digest>) only, patches copied in and
    applied by C(RUN), explicit C(ENTRYPOINT), C(io.lanekit.*) labels including the content hash of
    the whole build context) into a fresh context directory and runs C(docker build) there.
  - Refuses a base that is not pinned by a full digest, naming the variable to set. Before building,
    makes the base resolve to the pinned digest (pulling it by digest when absent) and checks that
    it and the docker engine are of the node architecture O(arch); otherwise stops.
  - Rebuilds only when the content hash changes (O(rebuild=changed)); reports C(changed) only if
    the image under the reference really changed (its Id moved, or it was pushed or restored).
  - Compares the result with the lock (O(lock)); a disagreement stops the build unless
    O(lock_update=true). Optionally pushes the image to a registry and returns the registry digest.
author:
  - lanekit developers (!UNKNOWN)
options:
  name:
    description: The image name, a directory under O(images_dir).
    type: str
    required: true
  images_dir:
    description:
      - Directory on the builder that holds C(<name>/image.yml) (unless O(spec) is given) and the
        patch files under C(<name>/).
      - It is made mode C(0700) if missing. An existing one must belong to the user the module runs as
        and be writable by nobody else, as must every directory above it unless sticky (C(/var/tmp));
        otherwise the module stops, since another user could swap a patch between hashing and build.
    type: path
    required: true
  spec:
    description:
      - The parsed content of C(image.yml). When given, the file is not read on the builder, which
        then needs no PyYAML. The patch files must still be present under O(images_dir).
    type: dict
  files:
    description:
      - The spec's patch files, mapping the path relative to the spec directory (as in C(image.yml))
        to the file's text. When given, the module writes them under C(<images_dir>/<name>/) before
        anything else, so the role needs no separate copy tasks.
    type: dict
    default: {}
  file_modes:
    description:
      - Mode per entry of O(files) (V(0644) or V(0755)); the content hash covers the executable bit.
    type: dict
    default: {}
  arch:
    description: Architecture of the lane's nodes; the base and the docker engine must match it.
    type: str
    required: true
    choices: [amd64, arm64]
  digest_overrides:
    description:
      - C(lanekit_image_digests), mapping image name to architecture to full base digest. Takes
        precedence over the digests in C(image.yml).
    type: dict
    default: {}
  expected_content_hash:
    description:
      - The content hash the controller computed (C(lanekit_plan.image.content_hash)). When set, the
        build stops if the builder computes another one, which means the copied context differs.
    type: str
  rebuild:
    description:
      - V(changed) builds when the reference is absent or its content-hash label differs.
      - V(never) builds only when the reference is absent.
      - V(always) builds every time; C(changed) is still reported only if the image Id moved.
    type: str
    choices: [changed, never, always]
    default: changed
  pull_base:
    description:
      - V(missing) pulls the base by digest when it is not present on the builder.
      - V(never) requires the base to be present already.
    type: str
    choices: [missing, never]
    default: missing
  build_dir:
    description:
      - Where the rendered build context is written; default C(<images_dir>/.build/<name>).
      - Checked and made like O(images_dir).
    type: path
  buildkit:
    description:
      - Set E(DOCKER_BUILDKIT) for the build (V(true) BuildKit, V(false) the classic builder).
        Unset leaves the engine default.
    type: bool
  registry:
    description:
      - A registry (C(host[:port])) to push the image to after building, as
        C(<registry>/lanekit/<name>:<content hash 12>). Empty does not push.
    type: str
    default: ""
  restore_from:
    description:
      - A registry reference by digest (the lock's C(registry_ref)). When the image is absent on the
        builder it is pulled from there instead of rebuilt, so the builder gets back exactly the
        locked image. Ignored when O(rebuild=always).
    type: str
    default: ""
  lock:
    description:
      - The parsed lock document (C(images/<name>/image.lock.yml)) or empty. Its entry for O(arch)
        is compared with what is built.
    type: dict
  lock_file:
    description: The lock's path on the controller, used in messages.
    type: str
    default: image.lock.yml
  lock_update:
    description: Accept a disagreement with the lock (the role then rewrites the lock).
    type: bool
    default: false
extends_documentation_fragment:
  - lanekit.serving.attributes
  - lanekit.serving.docker_cli
attributes:
  check_mode:
    support: full
    details:
      - Reports what would be built, pulled, restored or pushed and why, without doing it. The base
        architecture is checked only when the base is already present.
  diff_mode:
    support: full
    details:
      - The diff shows the image under the reference before and after (Id, content hash, layers).
  idempotent:
    support: partial
    details:
      - With O(rebuild=always) the image is rebuilt on every run (reported as changed only if its Id
        moved).
notes:
  - The local image Id is reported but never used as the pin; it changes with the image store.
    The pin is the content-hash label plus the digest of the layer list (RV(rootfs)).
seealso:
  - module: lanekit.serving.image_distribute
  - module: lanekit.serving.image_info
"""

EXAMPLES = r"""
---
- name: Build the SGLang image on the builder
  lanekit.serving.image_build:
    name: mistral-large4-sglang
    images_dir: /var/tmp/lanekit/images
    spec: "{{ lookup('ansible.builtin.file', 'images/mistral-large4-sglang/image.yml') | from_yaml }}"
    arch: arm64
    digest_overrides: "{{ lanekit_image_digests }}"
    expected_content_hash: "{{ lanekit_plan.image.content_hash }}"
  register: built

- name: Say what would be built, and why
  lanekit.serving.image_build:
    name: mistral-large4-vllm
    images_dir: /var/tmp/lanekit/images
    arch: arm64
    digest_overrides: "{{ lanekit_image_digests }}"
  check_mode: true

- name: Build and push to the registry on the builder
  lanekit.serving.image_build:
    name: mistral-large4-vllm
    images_dir: /var/tmp/lanekit/images
    arch: arm64
    digest_overrides: "{{ lanekit_image_digests }}"
    registry: "spark-01:5000"
"""

RETURN = r"""
ref:
  description: The image reference built, C(lanekit/<name>:<content hash 12>).
  returned: always
  type: str
  sample: lanekit/mistral-large4-sglang:ad92b7fe46ee
content_hash:
  description: Content hash of the build context (Dockerfile, patch files and modes, build args, platform).
  returned: always
  type: str
image_id:
  description: The local image Id on the builder (informational; store dependent).
  returned: when the image exists
  type: str
rootfs:
  description: sha256 over the image's ordered layer digests; with the content hash, the pin.
  returned: when the image exists
  type: str
config:
  description:
    - sha256 over the image's run-relevant configuration (entrypoint, command, env, user, labels, ...), platform
      and layers; part of the pin, recorded in the lock.
  returned: when the image exists
  type: str
repo_digests:
  description: The image's C(RepoDigests) on the builder.
  returned: always
  type: list
  elements: str
base_ref:
  description: The base, C(<repository>@sha256:<digest>).
  returned: always
  type: str
base_digest:
  description: The pinned base digest.
  returned: always
  type: str
base_arch:
  description: Architecture of the base image as inspected (empty when it was not inspected).
  returned: always
  type: str
arch:
  description: The architecture built for.
  returned: always
  type: str
built:
  description: Whether C(docker build) ran (or would run, in check mode).
  returned: always
  type: bool
restored:
  description: Whether the image was pulled back from O(restore_from) instead of rebuilt.
  returned: always
  type: bool
pushed:
  description: Whether layers were uploaded to O(registry).
  returned: always
  type: bool
registry_ref:
  description: C(<registry>/lanekit/<name>@sha256:<digest>) after a push; empty otherwise.
  returned: always
  type: str
registry_digest:
  description: The manifest digest in the registry after a push; empty otherwise.
  returned: always
  type: str
reason:
  description: Why the image was (or would be) built, restored or left alone.
  returned: always
  type: str
  sample: "lanekit/mistral-large4-vllm:0123456789ab is not present on spark-01"
actions:
  description: What was done (or would be done in check mode), one sentence each.
  returned: always
  type: list
  elements: str
command:
  description: The C(docker build) argv that ran or would run (empty when no build is needed).
  returned: always
  type: list
  elements: str
commands:
  description: Every docker argv that ran (inspections excluded).
  returned: always
  type: list
  elements: list
dockerfile:
  description: The rendered Dockerfile.
  returned: always
  type: str
labels:
  description: The C(io.lanekit.*) labels the image carries.
  returned: always
  type: dict
lock_entry:
  description: What the lock should record for O(arch) (empty in check mode when nothing is built yet).
  returned: always
  type: dict
lock_document:
  description: The whole lock document with RV(lock_entry) recorded for O(arch) (what the role writes); empty when there is no entry.
  returned: always
  type: dict
lock_status:
  description: V(absent) (no entry yet), V(match), V(update) (differs and O(lock_update=true)), or V(unknown) in check mode before a build.
  returned: always
  type: str
"""

import dataclasses
import os
import shutil
import tempfile

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.module_utils._files import atomic_write
from ansible_collections.lanekit.serving.plugins.module_utils._image._build import (
    BuildPlan,
    build_argv,
    build_root,
    decide,
)
from ansible_collections.lanekit.serving.plugins.module_utils._image._docker_cli import (
    DockerCLI,
    DockerError,
    image_pin,
    normalize_arch,
    registry_digest_for,
    strip_ansi,
    tail,
)
from ansible_collections.lanekit.serving.plugins.module_utils._image._docker_module import (
    DockerManager,
    run_docker_module,
)
from ansible_collections.lanekit.serving.plugins.module_utils._image._spec import (
    load_image_spec,
    lock_entry,
    lock_verdict,
    merge_lock,
    resolve_image,
)
from ansible_collections.lanekit.serving.plugins.module_utils._workdir import private_dir


# -- the execution (docker and the builder's files) -----------------------------------------------
class ImageBuilder(DockerManager):
    """Resolve, decide, then build (or restore), check, push and record: one image on one builder."""

    def __init__(self, module: AnsibleModule, docker: DockerCLI) -> None:
        super().__init__(module, docker)
        self.actions: list[str] = []

    @staticmethod
    def docker_env(params: dict) -> dict:
        # Unset buildkit leaves the engine's default builder: the variable is not set at all.
        if params["buildkit"] is None:
            return {}
        return {"DOCKER_BUILDKIT": "1" if params["buildkit"] else "0"}

    # -- inputs ----------------------------------------------------------------------------------
    def _write_files(self, images_dir: str) -> None:
        """Write the patch files given inline under images_dir/<name> (only where they differ)."""
        spec_dir = os.path.realpath(os.path.join(images_dir, self.params["name"]))
        for rel, text in sorted((self.params["files"] or {}).items()):
            target = os.path.realpath(os.path.join(spec_dir, rel))
            if not target.startswith(spec_dir + os.sep):
                raise LanekitError(f"files: {rel!r} is not a path inside the image spec directory.")
            data = str(text).encode("utf-8")
            mode = int(str((self.params["file_modes"] or {}).get(rel, "0644")), 8)
            current = None
            if os.path.isfile(target):
                with open(target, "rb") as handle:
                    current = handle.read()
            if current != data:
                os.makedirs(os.path.dirname(target), mode=0o755, exist_ok=True)
                atomic_write(target, data, mode)
            elif os.stat(target).st_mode & 0o777 != mode:
                os.chmod(target, mode)

    def _resolve(self) -> dict:
        # Private before the patches are hashed: nobody else may swap one between hash and build.
        images_dir = private_dir(self.params["images_dir"], "image work directory (images_dir)",
                                 create=not self.check_mode)
        scratch = None
        if self.params["files"]:
            if self.check_mode:
                # Check mode writes nothing under images_dir; the files are hashed from a scratch copy.
                scratch = images_dir = tempfile.mkdtemp(prefix="lanekit-check-")
            self._write_files(images_dir)
        try:
            spec = load_image_spec(images_dir, self.params["name"], data=self.params["spec"])
            resolved = resolve_image(spec, self.params["arch"], self.params["digest_overrides"])
        finally:
            if scratch:
                shutil.rmtree(scratch, ignore_errors=True)
        return self._check_resolved(spec, resolved)

    def _check_resolved(self, spec: dict, resolved: dict) -> dict:
        if not resolved["pinned"]:
            raise LanekitError(resolved["pin_problem"])
        expected = self.params["expected_content_hash"]
        if expected and expected != resolved["content_hash"]:
            raise LanekitError(
                f"the builder {self.host} computes content hash {resolved['content_hash'][:12]} for image "
                f"'{resolved['name']}', but the controller computed {expected[:12]}: the context copied to "
                f"{os.path.join(self.params['images_dir'], resolved['name'])} differs from images/{resolved['name']} "
                f"(a patch file's content or mode, or the base digest). Re-run so the role copies it again."
            )
        resolved["spec"] = spec
        return resolved

    def _check_lock(self, resolved: dict, current: dict, announce: bool = True) -> str:
        status, sentence = lock_verdict(self.params, resolved, current)
        if sentence and announce:
            self.actions.append(sentence)
        return status

    # -- docker steps ----------------------------------------------------------------------------
    def _ensure_base(self, resolved: dict) -> str:
        """Make the pinned base present; return its architecture ('' if unknown in check mode)."""
        base_ref = resolved["base_ref"]
        base = self.docker.inspect_image(base_ref)
        if base is None:
            if self.params["pull_base"] == "never":
                raise LanekitError(
                    f"the base {base_ref} is not present on {self.host} and pull_base is never; "
                    f"load it there or allow pulling it (pull_base: missing)."
                )
            if self.check_mode:
                self.actions.append(f"would pull the base {base_ref}")
                return ""
            try:
                self.docker.pull(base_ref)
            except DockerError as err:
                raise LanekitError(
                    f"the pinned base {base_ref} could not be pulled on {self.host}: {err}. "
                    f"Check that lanekit_image_digests['{resolved['name']}']['{resolved['arch']}'] is the digest of "
                    f"{resolved['repository']}:{resolved['tag']} for linux/{resolved['arch']} and that the registry is reachable."
                ) from None
            self.actions.append(f"pulled the base {base_ref}")
            base = self.docker.inspect_image(base_ref)
            if base is None:
                raise LanekitError(f"docker pulled {base_ref} on {self.host} but cannot inspect it afterwards.")
        base_arch = normalize_arch(base.get("Architecture"))
        if base_arch != resolved["arch"]:
            raise LanekitError(
                f"the base {base_ref} is a linux/{base_arch or 'unknown'} image, but the lane's nodes are "
                f"{resolved['arch']}: lanekit_image_digests['{resolved['name']}']['{resolved['arch']}'] (or "
                f"upstream.digests.{resolved['arch']} in images/{resolved['name']}/image.yml) names a digest of "
                f"another architecture. Set it to the digest of {resolved['repository']}:{resolved['tag']} for "
                f"linux/{resolved['arch']}. Nothing was built."
            )
        return base_arch

    def _check_engine_arch(self, resolved: dict) -> None:
        engine = self.docker.server_arch()
        if engine != resolved["arch"]:
            raise LanekitError(
                f"the builder {self.host} runs a linux/{engine} docker engine, but the lane's nodes are "
                f"{resolved['arch']} (lanekit_node_arch): build on a host of the lane's architecture by "
                f"putting one in the image_builder group (the default is the head node). Nothing was built."
            )

    def _write_context(self, resolved: dict) -> str:
        """Render the build context into a fresh directory under the checked build root; return it.

        The root is checked component by component (no planted link is followed, nothing found is
        chmod-ed) and the context is a new ``mkdtemp`` directory in it, so the path docker builds
        from is one this run made and nobody else can write or re-point.
        """
        root = private_dir(build_root(self.params, resolved), "build context directory (build_dir)")
        context = tempfile.mkdtemp(prefix=resolved["content_hash"][:12] + "-", dir=root)
        spec = resolved["spec"]
        for patch in spec["patches"]:
            rel = os.path.relpath(patch["path"], spec["spec_dir"])
            target = os.path.join(context, rel)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            shutil.copy2(patch["path"], target)
        with open(os.path.join(context, "Dockerfile"), "w", encoding="utf-8") as handle:
            handle.write(resolved["dockerfile"])
        return context

    def _build(self, resolved: dict, plan: BuildPlan) -> None:
        rc, out, err = self.docker.run(list(plan.build_args), check=False)
        if rc != 0:
            text = strip_ansi((out or "") + "\n" + (err or ""))
            refusals = [line.strip() for line in text.splitlines() if "cannot patch" in line]
            if refusals:
                raise LanekitError(
                    f"the build of {resolved['ref']} on {self.host} stopped because a baked patch refused its target: "
                    f"{refusals[-1]} Review the patch against the pinned base {resolved['base_ref']}; no image was tagged."
                )
            raise LanekitError(
                f"docker build of {resolved['ref']} failed on {self.host} (exit {rc}); no image was tagged. "
                f"Last output:\n{tail(text, 15)}"
            )

    def _restore(self, resolved: dict, source: str) -> bool:
        try:
            self.docker.pull(source)
        except DockerError as err:
            self.module.warn(f"could not restore {resolved['ref']} from {source} ({err}); building it instead.")
            return False
        pin = self.inspect_pin(source)
        if pin["content_hash"] != resolved["content_hash"]:
            raise LanekitError(
                f"{source} (the lock's registry_ref) carries content hash {pin['content_hash'][:12] or 'none'}, "
                f"not {resolved['content_hash'][:12]}: the registry holds another image under the locked digest."
            )
        self.docker.tag(source, resolved["ref"])
        self.actions.append(f"restored {resolved['ref']} from {source} instead of rebuilding it")
        return True

    def _push(self, resolved: dict, plan: BuildPlan, pin: dict) -> tuple[bool, str, str]:
        repository, target = plan.push_repository, plan.push_target
        if self.check_mode:
            known = registry_digest_for(pin["repo_digests"], repository) if pin["content_hash"] == resolved["content_hash"] else ""
            if known:
                self.actions.append(f"would push {target} (its digest {known} is already recorded, so probably nothing to upload)")
                return False, f"{repository}@{known}", known
            self.actions.append(f"would push {target}")
            return True, "", ""
        known_before = registry_digest_for(pin["repo_digests"], repository)
        self.docker.tag(resolved["ref"], target)
        output = self.docker.push(target)
        uploaded = any(line.strip().endswith("Pushed") for line in output.splitlines())
        image = self.docker.inspect_image(resolved["ref"]) or {}
        digest = registry_digest_for(image.get("RepoDigests") or [], repository)
        if not digest:
            for line in output.splitlines():
                if "digest: sha256:" in line:
                    digest = "sha256:" + line.split("digest: sha256:", 1)[1].split()[0]
        if not digest:
            raise LanekitError(f"docker push {target} on {self.host} did not report a digest: {tail(output, 5)}")
        # A thin image may add no layer of its own; its manifest is still new to the registry.
        uploaded = uploaded or digest != known_before
        self.actions.append(f"pushed {target} ({'uploaded' if uploaded else 'already in the registry'}), digest {digest}")
        return uploaded, f"{repository}@{digest}", digest

    def _obtain(self, resolved: dict, plan: BuildPlan, result: dict) -> str:
        """Restore or build as decided (or say what would happen); returns the action finally taken."""
        action, ref, reason = plan.action, resolved["ref"], plan.reason
        restore_from = self.params["restore_from"]
        if action == "restore":
            if self.check_mode:
                self.actions.append(f"would restore {ref} from {restore_from} ({reason})")
                result.update(changed=True, restored=True)
            elif self._restore(resolved, restore_from):
                result.update(changed=True, restored=True)
            else:
                action = "build"
        if action == "build":
            result["base_arch"] = self._ensure_base(resolved)
            self._check_engine_arch(resolved)
            result["command"] = self.docker.argv(list(plan.build_args))
            if self.check_mode:
                self.actions.append(f"would build {ref} because {reason}")
                result.update(changed=True, built=True)
            else:
                context = self._write_context(resolved)
                try:
                    built = dataclasses.replace(plan, context=context, build_args=build_argv(ref, context))
                    result["command"] = self.docker.argv(list(built.build_args))
                    self._build(resolved, built)
                finally:
                    shutil.rmtree(context, ignore_errors=True)
                result["built"] = True
                self.actions.append(f"built {ref} because {reason}")
        return action

    def _check_result_arch(self, resolved: dict, pin_after: dict) -> None:
        image_arch = pin_after["arch"]
        if image_arch and image_arch != resolved["arch"]:
            raise LanekitError(
                f"{resolved['ref']} on {self.host} is a linux/{image_arch} image, but the lane's nodes are {resolved['arch']}; "
                f"remove it there (docker image rm {resolved['ref']}) and re-run."
            )

    # -- the run ---------------------------------------------------------------------------------
    def run(self) -> dict:
        resolved = self._resolve()
        name, ref, chash = resolved["name"], resolved["ref"], resolved["content_hash"]
        lock_status = self._check_lock(resolved, {"content_hash": chash, "base_digest": resolved["base_digest"]},
                                       announce=self.check_mode)
        before = self.docker.inspect_image(ref)
        pin_before = image_pin(before)
        plan = decide(self.params, resolved, pin_before, self.host)
        if plan.warning:
            self.module.warn(plan.warning)

        result = {
            "changed": False, "ref": ref, "content_hash": chash, "arch": resolved["arch"],
            "base_ref": resolved["base_ref"], "base_digest": resolved["base_digest"], "base_arch": "",
            "built": False, "restored": False, "pushed": False, "registry_ref": "", "registry_digest": "",
            "reason": plan.reason, "command": [], "dockerfile": resolved["dockerfile"], "labels": resolved["labels"],
            "lock_status": lock_status,
        }
        action = self._obtain(resolved, plan, result)
        # In check mode nothing was built: the image "after" is the one before (shown as unknown in the diff).
        pending = self.check_mode and action != "keep"
        after = before if pending else self.docker.inspect_image(ref)
        pin_after = image_pin(after)
        if after is not None and not pending:
            self._check_result_arch(resolved, pin_after)
        if not self.check_mode and (result["built"] or result["restored"]):
            result["changed"] = pin_before["image_id"] != pin_after["image_id"]
            if not result["changed"]:
                self.actions.append(f"{ref} came out identical to the image already there (same Id)")

        restore_from = self.params["restore_from"]
        if plan.push_target and (pin_after["present"] or self.check_mode):
            uploaded, registry_ref, registry_digest = self._push(resolved, plan, pin_after)
            result.update(pushed=uploaded, registry_ref=registry_ref, registry_digest=registry_digest)
            result["changed"] = result["changed"] or uploaded
        elif pin_after["present"] and restore_from and registry_digest_for(pin_after["repo_digests"], restore_from.split("@")[0]):
            result["registry_ref"] = restore_from
            result["registry_digest"] = restore_from.split("@", 1)[1]

        entry = {}
        if pin_after["present"] and pin_after["content_hash"] == chash and not pending:
            entry = lock_entry(resolved, rootfs=pin_after["rootfs"], config=pin_after["config"], image_id=pin_after["image_id"],
                               registry_ref=result["registry_ref"], registry_digest=result["registry_digest"],
                               builder=self.host)
            lock_status = self._check_lock(resolved, entry)
        elif self.check_mode:
            lock_status = "unknown" if lock_status == "match" else lock_status
        result["lock_status"] = lock_status
        result["lock_entry"] = entry
        result["lock_document"] = merge_lock(self.params["lock"], name, resolved["arch"], entry) if entry else {}

        result.update(
            image_id=pin_after["image_id"], rootfs=pin_after["rootfs"], config=pin_after["config"],
            repo_digests=pin_after["repo_digests"],
            actions=self.actions or [f"nothing to do: {plan.reason}"], commands=self.docker.commands,
        )
        if self.module._diff:
            result["diff"] = {
                "before": {"ref": ref, "image_id": pin_before["image_id"], "content_hash": pin_before["content_hash"],
                           "rootfs": pin_before["rootfs"]},
                "after": {"ref": ref, "image_id": pin_after["image_id"] if after is not before else "unknown",
                          "content_hash": chash, "rootfs": pin_after["rootfs"] if after is not before else "unknown"},
            }
        return result


def main() -> None:
    run_docker_module(ImageBuilder, dict(
        name=dict(type="str", required=True),
        images_dir=dict(type="path", required=True),
        spec=dict(type="dict"),
        files=dict(type="dict", default={}),
        file_modes=dict(type="dict", default={}),
        arch=dict(type="str", required=True, choices=["amd64", "arm64"]),
        digest_overrides=dict(type="dict", default={}),
        expected_content_hash=dict(type="str"),
        rebuild=dict(type="str", choices=["changed", "never", "always"], default="changed"),
        pull_base=dict(type="str", choices=["missing", "never"], default="missing"),
        build_dir=dict(type="path"),
        buildkit=dict(type="bool"),
        registry=dict(type="str", default=""),
        restore_from=dict(type="str", default=""),
        lock=dict(type="dict"),
        lock_file=dict(type="str", default="image.lock.yml"),
        lock_update=dict(type="bool", default=False),
    ))


if __name__ == "__main__":
    main()
