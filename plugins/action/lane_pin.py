# Copyright: lanekit developers
# Apache-2.0
"""Controller-side pinning: the lane image's upstream digests and the lane model's Hub revision.

No node is contacted; the registry is read with docker buildx imagetools or skopeo, the Hub with
huggingface_hub. The documentation lives in plugins/modules/lane_pin.py; the decisions are in
plugin_utils/_image/_pin.py, plugin_utils/_lane/_revision.py and plugin_utils/_yaml_edit.py.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from typing import Any

from ansible import context

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.module_utils._files import write_output
from ansible_collections.lanekit.serving.plugins.module_utils._image._spec import load_image_spec
from ansible_collections.lanekit.serving.plugins.module_utils._yaml import read_limited
from ansible_collections.lanekit.serving.plugins.plugin_utils._action import LanekitAction
from ansible_collections.lanekit.serving.plugins.plugin_utils._image import _pin
from ansible_collections.lanekit.serving.plugins.plugin_utils._lane import _revision
from ansible_collections.lanekit.serving.plugins.plugin_utils._lane._load import read_lane_file
from ansible_collections.lanekit.serving.plugins.plugin_utils._plan._paths import find_spec_dir
from ansible_collections.lanekit.serving.plugins.plugin_utils._recipe._cluster import node_arch
from ansible_collections.lanekit.serving.plugins.plugin_utils._yaml_edit import set_scalars

COLLECTION_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))
RESOLVE_TIMEOUT_S = 120

ARGUMENT_SPEC = {
    "lane": {"type": "str", "required": True},
    "lanes_dir": {"type": "path"},
    "images_dir": {"type": "path"},
    "image": {"type": "bool", "default": True},
    "model": {"type": "bool", "default": True},
    "arches": {"type": "list", "elements": "str", "default": []},
    "revision": {"type": "str", "default": "main"},
    "hf_token": {"type": "str", "no_log": True},
    "resolver": {"type": "str", "default": "auto", "choices": ["auto", "docker", "skopeo"]},
    "digest_overrides": {"type": "raw"},
}


def read_manifest(ref: str, resolver: str) -> bytes:
    """The registry's raw manifest of ``ref`` through the first resolver that works; a failure is one sentence."""
    tools = [resolver] if resolver != "auto" else [t for t in _pin.TOOLS if shutil.which(t)]
    if not tools:
        _pin.choose_tool(shutil.which)  # raises the sentence naming both tools
    last = ""
    for tool in tools:
        try:
            proc = subprocess.run(_pin.resolver_argv(tool, ref), capture_output=True, timeout=RESOLVE_TIMEOUT_S,
                                  check=False)
        except FileNotFoundError:
            raise LanekitError(f"{tool} is not on the controller's PATH; install it or leave -e pin_resolver unset.") from None
        except subprocess.TimeoutExpired:
            raise LanekitError(f"reading the manifest of {ref} took more than {RESOLVE_TIMEOUT_S} s; check the "
                               f"controller's network, then re-run.") from None
        if proc.returncode == 0:
            return proc.stdout
        stderr = proc.stderr.decode("utf-8", "replace")
        last = _pin.failure_sentence(tool, ref, proc.returncode, stderr)
        # docker without its buildx plugin: skopeo may still answer.
        if tool == "docker" and ("is not a docker command" in stderr or "unknown command" in stderr):
            continue
        break
    raise LanekitError(last)


def hub_fetch(token: str | None, endpoint: str | None) -> Any:
    """``fetch(repo, ref) -> commit`` over huggingface_hub (imported here: only pin and staging need it)."""
    try:
        from huggingface_hub import HfApi  # pylint: disable=import-outside-toplevel
    except ImportError:
        raise LanekitError("huggingface_hub is not installed in the controller's Python, and pin reads the model's "
                           "revision with it; pip install huggingface_hub, or pass -e pin_model=false.") from None
    api = HfApi(endpoint=endpoint, token=token or None)
    return lambda repo, ref: api.model_info(repo, revision=ref).sha


class ActionModule(LanekitAction):
    ARGUMENT_SPEC = ARGUMENT_SPEC
    _requires_connection = False

    def lanekit_run(self, args: dict[str, Any], task_vars: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
        check = bool(self._task.check_mode or context.CLIARGS.get("check"))
        cwd = os.getcwd()
        # The playbook passes lanekit_lanes_dir / lanekit_images_dir, already templated.
        lanes_dir = find_spec_dir("lanes", args.get("lanes_dir"), None, cwd, COLLECTION_ROOT)
        images_dir = find_spec_dir("images", args.get("images_dir"), None, cwd, COLLECTION_ROOT)
        lane_file, lane = read_lane_file(lanes_dir, args["lane"])
        edits: list[tuple[str, dict[tuple[str, ...], str]]] = []
        notes: list[str] = []
        if args["image"]:
            spec = load_image_spec(images_dir, str(lane.get("image")))
            hardware = lane.get("hardware")
            implied = node_arch(hardware) if isinstance(hardware, str) and hardware else None
            arches = _pin.wanted_arches(spec, args["arches"], implied)
            if not args["arches"] and not spec["upstream"]["digests"] and implied:
                notes.append(f"{spec['spec_path']} listed no architecture: pinned {implied}, the architecture of the "
                             f"lane's hardware {hardware} (-e pin_arches=... to choose).")
            ref = f"{spec['upstream']['repository']}:{spec['upstream']['tag']}"
            found = _pin.manifest_digests(read_manifest(ref, args["resolver"]), ref)
            digests = _pin.pin_digests(spec, found, arches)
            edits.append((spec["spec_path"], {("upstream", "digests", arch): d for arch, d in digests.items()}))
            notes.extend(_pin.overridden(spec, args.get("digest_overrides"), arches))
            result["digests"] = digests
        if args["model"]:
            model = _revision.hub_model(lane_file, lane)
            if model is None:
                notes.append(f"{lane_file}: model.source.kind is local, so there is no Hub revision to pin.")
            else:
                sha = _revision.resolve_revision(model, args["revision"],
                                                 hub_fetch(args.get("hf_token"), model.endpoint), lane_file)
                edits.append((lane_file, {("model", "revision"): sha}))
                result["revision"] = sha
        changes: list[str] = []
        diffs: list[dict[str, str]] = []
        for path, wanted in edits:
            before = read_limited(path).decode("utf-8")
            after, lines = set_scalars(before, path, wanted)
            if not lines:
                changes.append(f"{path}: already pinned")
                continue
            changes.extend(f"{path} {line}" for line in lines)
            diffs.append({"before": before, "after": after, "before_header": path, "after_header": path})
            if not check:
                # Atomic (temporary name, fsync, rename) and keeps the file's mode.
                write_output(path, after, f"{path}", mode=os.stat(path).st_mode & 0o7777)
        result.update(changed=bool(diffs), changes=changes, notes=notes, diff=diffs, lane_file=lane_file,
                      check_mode=check)
        return result
