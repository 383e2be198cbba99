# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""Thin image specs: load ``images/<name>/image.yml``, check the pin, render the Dockerfile and
compute the content hash of the whole build context.

Pure functions (file reads only). The controller uses them to name the image a lane will run
(``lanekit/<name>:<content hash 12>``) without contacting any host; the image module uses the
same functions on the builder so both sides agree on the hash.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
from typing import Any, cast

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError

try:
    from ansible_collections.lanekit.serving.plugins.module_utils._yaml import describe, load_file, plain, yaml
except ImportError:  # pragma: no cover - a host without the collection's loader gets parsed data
    yaml = None
    load_file = None  # type: ignore[assignment]  # only read after the `yaml is None` check

    def describe(value: Any) -> str:
        return repr(value)

    def plain(value: Any, _depth: int = 0) -> Any:
        return value

# Always used with fullmatch: '$' alone accepts a trailing newline ("sha256:...\n" counted as pinned).
DIGEST_RE = re.compile(r"sha256:[0-9a-f]{64}")
DIGEST_PREFIX_RE = re.compile(r"^(sha256:)?[0-9a-f]{4,63}…?$")
NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
# A Dockerfile ARG name; anything else (a space, '=', a newline) would change the instruction.
BUILD_ARG_KEY_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Control characters: a newline ends the ARG line and starts a new instruction of the value's choosing.
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")
ARCHES = ("amd64", "arm64")
LABEL_PREFIX = "io.lanekit"
IMAGE_REPOSITORY_PREFIX = "lanekit/"
PATCH_DIR_IN_IMAGE = "/opt/lanekit/patches"

_KIND_WORDS = {str: "text", dict: "a mapping", list: "a list"}
_SPEC_KEYS = {
    "name": str,
    "description": str,
    "upstream": dict,
    "entrypoint": list,
    "patches": list,
    "build_args": dict,
    "lanes": list,
    "labels": dict,
}


def _where(path: str, key: str) -> str:
    return f"{path}: key '{key}'"


def load_image_spec(images_dir: str, name: str, data: dict | None = None) -> dict:
    """Read and validate ``images/<name>/image.yml``; raise LanekitError with a sentence.

    ``data`` is the already-parsed content of that file (a host without PyYAML gets it from the
    controller); the patch files must still exist under ``images_dir/<name>``.
    """
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise LanekitError(
            f"image name {name!r} is not valid: use lower-case letters, digits, '.', '_' or '-' "
            f"(a directory under {images_dir})."
        )
    spec_dir = os.path.join(images_dir, name)
    path = os.path.join(spec_dir, "image.yml")
    if data is None and os.path.isdir(path):
        raise LanekitError(f"{path} is a directory, not an image spec file; image '{name}' needs its settings in "
                           f"{path} as a YAML file (name, upstream, entrypoint).")
    if data is None and not os.path.isfile(path):
        known = sorted(d for d in os.listdir(images_dir) if os.path.isfile(os.path.join(images_dir, d, "image.yml"))) \
            if os.path.isdir(images_dir) else []
        raise LanekitError(
            f"{path} does not exist: the lane names image '{name}', but there is no image spec for it "
            f"(known images: {', '.join(known) or 'none'})."
        )
    if data is not None:
        spec = plain(data)
    elif yaml is None:
        raise LanekitError(f"{path} cannot be read here: PyYAML is not installed; pass the parsed spec instead.")
    else:
        spec = load_file(path)
    if spec is None:
        raise LanekitError(f"{path} is empty; an image spec is a mapping with name, upstream and entrypoint.")
    if not isinstance(spec, dict):
        raise LanekitError(f"{path} must be a mapping of image settings, found {describe(spec)}.")
    for key, value in spec.items():
        if key not in _SPEC_KEYS:
            raise LanekitError(
                f"{_where(path, key)} is not an image setting; expected one of {', '.join(sorted(_SPEC_KEYS))}."
            )
        if not isinstance(value, _SPEC_KEYS[key]):
            raise LanekitError(
                f"{_where(path, key)} must be {_KIND_WORDS[_SPEC_KEYS[key]]}, found {describe(value)}."
            )
    if spec.get("name") != name:
        raise LanekitError(f"{_where(path, 'name')} is {spec.get('name')!r}; it must equal the directory name '{name}'.")
    upstream = spec.get("upstream") or {}
    for key in ("repository", "tag", "digests"):
        if key not in upstream:
            raise LanekitError(f"{_where(path, 'upstream.' + key)} is missing; expected the upstream image's {key}.")
    if not isinstance(upstream["digests"], dict):
        raise LanekitError(f"{_where(path, 'upstream.digests')} must map an architecture (arm64, amd64) to a digest.")
    for key in ("repository", "tag"):
        if not isinstance(upstream[key], str) or not upstream[key] or any(c.isspace() for c in upstream[key]):
            raise LanekitError(f"{_where(path, 'upstream.' + key)} is {describe(upstream[key])}; expected the "
                               f"upstream image's {key} as text without spaces.")
    for arch, digest in upstream["digests"].items():
        if arch not in ARCHES:
            raise LanekitError(f"{_where(path, 'upstream.digests.' + str(arch))}: unknown architecture; use one of {', '.join(ARCHES)}.")
        if digest is not None and not isinstance(digest, str):
            raise LanekitError(f"{_where(path, 'upstream.digests.' + arch)} is {describe(digest)}; expected the "
                               f"digest as text ('sha256:' and 64 hex characters, quoted).")
    for key in ("lanes",):
        if not all(isinstance(item, str) for item in spec.get(key) or []):
            raise LanekitError(f"{_where(path, key)} must be a list of lane names (text).")
    entrypoint = spec.get("entrypoint")
    if not entrypoint or not all(isinstance(part, str) and part for part in entrypoint):
        raise LanekitError(
            f"{_where(path, 'entrypoint')} must be a non-empty list of strings (the program the image runs, "
            f"e.g. [vllm, serve]); an image without an explicit entrypoint is refused."
        )
    patches = []
    for index, patch in enumerate(spec.get("patches") or []):
        if not isinstance(patch, dict) or not isinstance(patch.get("file"), str):
            raise LanekitError(f"{_where(path, f'patches[{index}]')} must be a mapping with 'file' (a path under {spec_dir}).")
        patch_path = os.path.normpath(os.path.join(spec_dir, patch["file"]))
        if not patch_path.startswith(spec_dir + os.sep) or not os.path.isfile(patch_path):
            raise LanekitError(f"{_where(path, f'patches[{index}].file')}: {patch['file']!r} is not a file under {spec_dir}.")
        # Resolved, not only normalised: a symlink under the folder pointing outside it would put
        # (and hash) a file the spec's review never saw into the image.
        real_dir = os.path.realpath(spec_dir)
        if not os.path.realpath(patch_path).startswith(real_dir + os.sep):
            raise LanekitError(
                f"{_where(path, f'patches[{index}].file')}: {patch['file']!r} resolves to "
                f"{os.path.realpath(patch_path)}, outside {spec_dir} (a symbolic link out of the spec folder); "
                f"copy the patch into the folder instead.")
        patches.append(dict(patch, path=patch_path))
    _check_labels(path, spec.get("labels") or {})
    _check_build_args(path, spec.get("build_args") or {})
    spec = dict(spec)
    spec["patches"] = patches
    spec["spec_dir"] = spec_dir
    spec["spec_path"] = path
    spec.setdefault("build_args", {})
    spec.setdefault("lanes", [])
    spec.setdefault("labels", {})
    return spec


def _check_labels(path: str, labels: dict) -> None:
    """Labels are text to text, and lanekit's own names (the pin, the content hash) are not the spec's to set."""
    for key, value in labels.items():
        if not isinstance(key, str) or not key or any(c.isspace() for c in key):
            raise LanekitError(f"{_where(path, 'labels')}: {describe(key)} is not a label name; use text without "
                               f"spaces (e.g. org.opencontainers.image.source).")
        if key == LABEL_PREFIX or key.startswith(LABEL_PREFIX + "."):
            raise LanekitError(
                f"{_where(path, 'labels.' + key)} uses lanekit's own label prefix {LABEL_PREFIX}., which lanekit sets "
                f"from the build itself (the pin, the content hash); rename the label (e.g. org.example.{key.rsplit('.', 1)[-1]}).")
        if not isinstance(value, str) or _CONTROL_RE.search(value):
            raise LanekitError(f"{_where(path, 'labels.' + key)} is {describe(value)}; a label value is one line of "
                               f"text (quote numbers and booleans).")


def _check_build_args(path: str, build_args: dict) -> None:
    """Refuse build args that would not stay one ``ARG key=value`` line of the rendered Dockerfile."""
    for key, value in build_args.items():
        if not isinstance(key, str) or not BUILD_ARG_KEY_RE.match(key):
            raise LanekitError(
                f"{_where(path, 'build_args')}: {key!r} is not a build argument name; use letters, digits and "
                f"'_', not starting with a digit (it becomes a Dockerfile ARG line)."
            )
        if isinstance(value, (dict, list)) or value is None:
            raise LanekitError(
                f"{_where(path, 'build_args.' + key)} must be a string or a number, found {type(value).__name__}."
            )
        text = str(value)
        if _CONTROL_RE.search(text) or text.endswith("\\"):
            raise LanekitError(
                f"{_where(path, 'build_args.' + key)} holds a newline, a control character or a trailing "
                f"backslash ({text[:60]!r}), which would add to or join the Dockerfile's next instruction; "
                f"remove it."
            )


def pin_problem(spec: dict, arch: str, digest: str | None, from_override: bool = False) -> str | None:
    """Return the sentence explaining why ``digest`` is not a usable pin, or None if it is.
    ``from_override``: the digest came from lanekit_image_digests, not from image.yml."""
    name = spec["name"]
    upstream = spec["upstream"]
    variable = f"lanekit_image_digests['{name}']['{arch}']"
    source = f"{upstream['repository']}:{upstream['tag']}"
    if not digest:
        return (
            f"{spec['spec_path']}: key 'upstream.digests.{arch}' has no digest for the node architecture {arch}; "
            f"set {variable} to the full sha256 digest of {source} for linux/{arch}."
        )
    if DIGEST_RE.fullmatch(digest):
        return None
    where = (f"the inventory or -e value {variable}" if from_override
             else f"{spec['spec_path']}: key 'upstream.digests.{arch}'")
    return (
        f"{where} is {digest!r}, which is not a full digest "
        f"(expected 'sha256:' and 64 hex characters); a tag or a truncated digest is not a pin. "
        f"Set {variable} to the full digest of {source} for linux/{arch} "
        f"(docker buildx imagetools inspect {source} prints it)."
    )


def _sha256_file(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def context_files(spec: dict) -> list[dict]:
    """Files copied into the build context besides the Dockerfile: the patches, sorted."""
    files = []
    for patch in spec["patches"]:
        rel = os.path.relpath(patch["path"], spec["spec_dir"])
        files.append({
            "path": rel,
            "sha256": _sha256_file(patch["path"]),
            # Only the executable bit, as git records it: a checkout's umask (0644 vs 0664) must not
            # change the hash, or two clones of the same commit would disagree with the lock.
            "mode": "0755" if os.stat(patch["path"]).st_mode & 0o111 else "0644",
        })
    return sorted(files, key=lambda item: item["path"])


def render_dockerfile_body(spec: dict, base_ref: str) -> str:
    """The Dockerfile without the content-hash labels (those are appended after hashing)."""
    lines = [
        f"# Generated by lanekit from {os.path.basename(spec['spec_dir'])}/image.yml. Do not edit; edit image.yml.",
        f"FROM {base_ref}",
    ]
    for key in sorted(spec["build_args"]):
        lines.append(f"ARG {key}={spec['build_args'][key]}")
    if spec["patches"]:
        lines.append(f"COPY patches/ {PATCH_DIR_IN_IMAGE}/")
        for patch in spec["patches"]:
            in_image = f"{PATCH_DIR_IN_IMAGE}/{os.path.relpath(patch['path'], os.path.join(spec['spec_dir'], 'patches'))}"
            # Each patch verifies its own target and exits non-zero when the code it patches is
            # missing or already different, which fails the build instead of shipping it unpatched.
            lines.append(f"RUN {json.dumps(['python3', in_image])}")
    lines.append(f"ENTRYPOINT {json.dumps(spec['entrypoint'])}")
    return "\n".join(lines) + "\n"


def content_hash(spec: dict, base_ref: str, arch: str) -> str:
    """Deterministic hash of everything that makes the image: Dockerfile, files, args, platform, and
    the spec's own labels (they are in the image's configuration, so a changed label is a new image).
    ``lanes`` and ``description`` are bookkeeping and stay out."""
    payload: dict = {
        "dockerfile": render_dockerfile_body(spec, base_ref),
        "files": context_files(spec),
        "build_args": {k: str(v) for k, v in sorted(spec["build_args"].items())},
        "platform": f"linux/{arch}",
    }
    if spec["labels"]:
        # Only when there are any: the hashes (and committed locks) of specs without labels stay as they were.
        payload["labels"] = {str(k): str(v) for k, v in sorted(spec["labels"].items())}
    blob = json.dumps(payload, sort_keys=True, separators=(",", ":")).encode("utf-8")
    return hashlib.sha256(blob).hexdigest()


def resolve_image(spec: dict, arch: str, digest_overrides: dict | None = None) -> dict:
    """Everything a plan or a build needs to know about the image for one architecture.

    ``pinned`` is False (and ``pin_problem`` says why) when the base digest is missing or
    incomplete; callers that build or deploy must refuse in that case.
    """
    if arch not in ARCHES:
        raise LanekitError(f"node architecture {arch!r} is not supported; use one of {', '.join(ARCHES)} (lanekit_node_arch).")
    overrides = (digest_overrides or {}).get(spec["name"]) or {}
    if overrides and not isinstance(overrides, dict):
        raise LanekitError(
            f"lanekit_image_digests['{spec['name']}'] must map an architecture to a digest, found {describe(overrides)}."
        )
    if overrides.get(arch) is not None and not isinstance(overrides.get(arch), str):
        raise LanekitError(
            f"lanekit_image_digests['{spec['name']}']['{arch}'] is {describe(overrides[arch])}; expected the digest as "
            f"text ('sha256:' and 64 hex characters, quoted)."
        )
    digest = overrides.get(arch) or spec["upstream"]["digests"].get(arch)
    problem = pin_problem(spec, arch, digest, from_override=bool(overrides.get(arch)))
    repository = spec["upstream"]["repository"]
    base_ref = f"{repository}@{digest}" if not problem else f"{repository}@{digest or 'UNPINNED'}"
    chash = content_hash(spec, base_ref, arch)
    modes = {item["path"]: item["mode"] for item in context_files(spec)}
    patches = [
        {"file": os.path.relpath(p["path"], spec["spec_dir"]), "sha256": _sha256_file(p["path"]),
         "mode": modes[os.path.relpath(p["path"], spec["spec_dir"])]}
        for p in spec["patches"]
    ]
    labels = {
        f"{LABEL_PREFIX}.content-hash": chash,
        f"{LABEL_PREFIX}.base-digest": digest or "",
        f"{LABEL_PREFIX}.base": base_ref,
        f"{LABEL_PREFIX}.image": spec["name"],
        f"{LABEL_PREFIX}.patches": ",".join(f"{p['file']}={p['sha256']}" for p in patches),
        f"{LABEL_PREFIX}.lanes": ",".join(spec["lanes"]),
        f"{LABEL_PREFIX}.platform": f"linux/{arch}",
    }
    # The spec's labels first, lanekit's own over them: load_image_spec refuses the prefix, and a spec
    # passed as data must not forge the pin either.
    labels = dict({str(k): str(v) for k, v in spec["labels"].items()}, **labels)
    label_lines = "".join(f"LABEL {json.dumps(k)}={json.dumps(v)}\n" for k, v in sorted(labels.items()))
    return {
        "name": spec["name"],
        "repository": repository,
        "tag": spec["upstream"]["tag"],
        "arch": arch,
        "platform": f"linux/{arch}",
        "base_digest": digest,
        "base_ref": base_ref,
        "pinned": problem is None,
        "pin_problem": problem,
        "content_hash": chash,
        "ref": f"{IMAGE_REPOSITORY_PREFIX}{spec['name']}:{chash[:12]}",
        "entrypoint": list(spec["entrypoint"]),
        "patches": patches,
        "labels": labels,
        "dockerfile": render_dockerfile_body(spec, base_ref) + label_lines,
        "spec_dir": spec["spec_dir"],
    }


# --- The lock: images/<name>/image.lock.yml ------------------------------------------------------
# One entry per architecture. The role writes it on the controller after a build; a later build
# that disagrees with it stops the run until the lock is updated on purpose.

LOCK_VERSION = 1
# Compared fields, in the order they are reported. ``image_id`` is recorded but never compared:
# the local Id changes with the image store (graphdriver vs containerd).
LOCK_COMPARED = ("content_hash", "base_digest", "rootfs", "config", "registry_digest")
_LOCK_ENTRY_KEYS = ("ref", "content_hash", "base_ref", "base_tag", "base_digest", "rootfs", "config", "image_id",
                    "registry_ref", "registry_digest", "builder")


def lock_entry(resolved: dict, *, rootfs: str, image_id: str = "", registry_ref: str = "",
               registry_digest: str = "", builder: str = "", config: str = "") -> dict:
    """What the lock records for one built image (``resolved`` is a ``resolve_image`` result)."""
    entry = {
        "ref": resolved["ref"],
        "content_hash": resolved["content_hash"],
        "base_ref": resolved["base_ref"],
        # The tag the digest was pinned for: a later tag change without a digest change is caught (tag_problem).
        "base_tag": resolved.get("tag") or "",
        "base_digest": resolved["base_digest"] or "",
        "rootfs": rootfs or "",
        "config": config or "",
        "image_id": image_id or "",
        "registry_ref": registry_ref or "",
        "registry_digest": registry_digest or "",
        "builder": builder or "",
    }
    return {key: value for key, value in entry.items() if value}


def lock_arch_entry(lock_doc: dict | None, name: str, arch: str, lock_file: str = "image.lock.yml") -> dict | None:
    """The entry of ``lock_doc`` for ``arch``, None when there is none; a malformed lock is an error."""
    if not lock_doc:
        return None
    if not isinstance(lock_doc, dict) or not isinstance(lock_doc.get("arches", {}), dict):
        raise LanekitError(
            f"{lock_file} is not an image lock (expected 'name' and 'arches: {{<arch>: {{...}}}}'); "
            f"delete it and re-run to record a new one."
        )
    if lock_doc.get("name") not in (None, name):
        raise LanekitError(f"{lock_file}: key 'name' is {lock_doc.get('name')!r}, but the lock sits next to image '{name}'.")
    entry = (lock_doc.get("arches") or {}).get(arch)
    if entry is not None and not isinstance(entry, dict):
        raise LanekitError(f"{lock_file}: key 'arches.{arch}' must be a mapping, found {entry!r}.")
    return entry


def lock_differences(locked: dict | None, current: dict) -> list[str]:
    """Compared fields where ``current`` disagrees with ``locked``, as 'field: locked X, now Y'.

    A field missing on either side is not compared (before a build ``current`` has no rootfs; an
    image distributed without a registry has no registry digest).
    """
    if not locked:
        return []
    found = []
    for key in LOCK_COMPARED:
        old, new = locked.get(key), current.get(key)
        if old and new and old != new:
            found.append(f"{key}: locked {old}, now {new}")
    return found


def lock_problem(lock_file: str, name: str, arch: str, differences: list[str]) -> str | None:
    """The sentence that stops a run whose image disagrees with the lock, or None."""
    if not differences:
        return None
    rebuilt = all(item.startswith(("rootfs:", "config:", "registry_digest:")) for item in differences)
    cause = (
        "the image was rebuilt from the same spec but its layers differ from the locked image "
        "(for example after the builder lost it)"
        if rebuilt else
        f"images/{name} (image.yml, its patches or lanekit_image_digests) no longer builds the locked image"
    )
    return (
        f"{lock_file} pins image '{name}' for {arch}, but {cause}: {'; '.join(differences)}. "
        f"Nothing was distributed and no container was touched. If the change is intended, re-run with "
        f"-e image_lock_update=true and commit the updated lock; otherwise restore what the lock was made from."
    )


def merge_lock(lock_doc: dict | None, name: str, arch: str, entry: dict) -> dict:
    """The lock document with ``entry`` recorded for ``arch`` (other architectures kept)."""
    arches = dict((lock_doc or {}).get("arches") or {})
    arches[arch] = {key: entry[key] for key in _LOCK_ENTRY_KEYS if entry.get(key)}
    return {"version": LOCK_VERSION, "name": name, "arches": {key: arches[key] for key in sorted(arches)}}


def tag_problem(lock_file: str, locked: dict | None, resolved: dict) -> str | None:
    """The sentence for ``upstream.tag`` changed while the digest stayed the one locked for the old tag.

    Only the digest is pulled, so such an edit changes nothing in the image: the user meant a new
    image and would deploy the old one. Knowable without the network only against the lock, which
    records the tag each digest was pinned for (``base_tag``); locks written before it say nothing.
    """
    if not locked or not locked.get("base_tag") or not resolved.get("base_digest"):
        return None
    old_tag, new_tag = locked["base_tag"], resolved.get("tag")
    if old_tag == new_tag or locked.get("base_digest") != resolved["base_digest"]:
        return None
    source = f"{resolved['repository']}:{new_tag}"
    return (f"image '{resolved['name']}': upstream.tag is now {new_tag!r} but the {resolved['arch']} digest is still "
            f"{resolved['base_digest']}, the one {lock_file} pinned for tag {old_tag!r}; the digest, not the tag, "
            f"chooses the image, so this would build the old one. Set upstream.digests.{resolved['arch']} (or "
            f"lanekit_image_digests['{resolved['name']}']['{resolved['arch']}']) to the digest of {source} "
            f"(docker buildx imagetools inspect {source} prints it), or restore tag {old_tag!r}; if the same image "
            f"was only retagged, re-run with -e image_lock_update=true.")


def lock_verdict(params: dict, resolved: dict, current: dict) -> tuple[str, str]:
    """(status, sentence) of ``current`` against the lock ``params['lock']``: ``absent``, ``match``, or
    ``update`` (``params['lock_update']`` accepts the disagreement) with the sentence announcing it.
    A disagreement that is not accepted stops the run with :func:`lock_problem`'s sentence."""
    lock_file = params["lock_file"]
    locked = lock_arch_entry(params["lock"], resolved["name"], resolved["arch"], lock_file)
    if not locked:
        return "absent", ""
    retagged = tag_problem(lock_file, locked, resolved)
    if retagged and not params["lock_update"]:
        raise LanekitError(retagged)
    differences = lock_differences(locked, current)
    if retagged:
        differences = differences + [f"base_tag: locked {locked['base_tag']}, now {resolved.get('tag')}"]
    if not differences:
        return "match", ""
    if params["lock_update"]:
        return "update", f"the lock {lock_file} will be updated: {'; '.join(differences)}"
    # differences is not empty here, so lock_problem returns its sentence (never None).
    raise LanekitError(cast(str, lock_problem(lock_file, resolved["name"], resolved["arch"], differences)))
