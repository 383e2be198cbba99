# Copyright: lanekit developers
# Apache-2.0
"""Controller-side pinning: the lane image's upstream digests and the lane model's Hub revision.

No node is contacted; the registry is read with docker buildx imagetools or skopeo, the Hub with
huggingface_hub. The documentation lives in plugins/modules/lane_pin.py; the decisions are in
plugin_utils/_image/_pin.py, plugin_utils/_lane/_revision.py and plugin_utils/_yaml_edit.py.
"""
from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
from collections.abc import Iterable
from typing import Any

from ansible import context

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.module_utils._files import write_output
from ansible_collections.lanekit.serving.plugins.module_utils._image._spec import load_image_spec
from ansible_collections.lanekit.serving.plugins.module_utils._weights._stage_sources import check_endpoint
from ansible_collections.lanekit.serving.plugins.module_utils._yaml import read_limited
from ansible_collections.lanekit.serving.plugins.plugin_utils._action import LanekitAction
from ansible_collections.lanekit.serving.plugins.plugin_utils._image import _pin
from ansible_collections.lanekit.serving.plugins.plugin_utils._lane import _revision
from ansible_collections.lanekit.serving.plugins.plugin_utils._lane._load import read_lane_file
from ansible_collections.lanekit.serving.plugins.plugin_utils._plan._paths import check_not_shared, find_spec_dir
from ansible_collections.lanekit.serving.plugins.plugin_utils._recipe._cluster import node_arch
from ansible_collections.lanekit.serving.plugins.plugin_utils._yaml_edit import set_scalars

COLLECTION_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))
RESOLVE_TIMEOUT_S = 120
# A Hub token is a few dozen characters; a file much longer than that is not a token file.
TOKEN_FILE_MAX_BYTES = 4096
# Variables that carry a Hub token into pin; on the command line (-e) they show in ps and the shell history.
TOKEN_VARIABLES = ("pin_hf_token", "weights_hf_token")

ARGUMENT_SPEC = {
    "lane": {"type": "str", "required": True},
    "lanes_dir": {"type": "path"},
    "images_dir": {"type": "path"},
    "image": {"type": "bool", "default": True},
    "model": {"type": "bool", "default": True},
    "arches": {"type": "list", "elements": "str", "default": []},
    "revision": {"type": "str", "default": "main"},
    "hf_token": {"type": "str", "no_log": True},
    "hf_token_file": {"type": "path"},
    "use_host_token": {"type": "bool", "default": False},
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


def read_token_file(path: str) -> str:
    """The Hub token in ``path``: a regular file only its owner can read, one line, nothing else."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise LanekitError(f"The Hub token file {path} cannot be read ({exc.strerror}); check -e pin_hf_token_file.") \
            from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > TOKEN_FILE_MAX_BYTES:
            raise LanekitError(f"The Hub token file {path} is not a small regular file; point -e pin_hf_token_file at "
                               "a file that holds the token only.")
        if info.st_mode & 0o077:
            # Like ssh with a private key: a token others can read is already leaked, so say so now.
            raise LanekitError(f"The Hub token file {path} is readable by other users (mode "
                               f"{stat.S_IMODE(info.st_mode):04o}); run chmod 600 {path}, then pin again.")
        data = os.read(fd, TOKEN_FILE_MAX_BYTES + 1)
    finally:
        os.close(fd)
    token = data.decode("utf-8", "replace").strip()
    if not token:
        raise LanekitError(f"The Hub token file {path} holds no token; write the token into it (one line).")
    if any(ch.isspace() or not ch.isprintable() for ch in token):
        raise LanekitError(f"The Hub token file {path} must hold the token on one line and nothing else.")
    return token


def hub_token(args: dict[str, Any]) -> str | bool:
    """What the Hub client is told to send: the given token, the one in ``hf_token_file``, the controller's own
    saved one (True, only with ``use_host_token``), or none at all (False).

    Never None: huggingface_hub reads None as "the saved token" (HF_TOKEN or the ``hf auth login`` file)
    and would send it to whatever mirror a lane file names."""
    if args.get("hf_token"):
        return str(args["hf_token"])
    if args.get("hf_token_file"):
        return read_token_file(str(args["hf_token_file"]))
    return bool(args.get("use_host_token"))


def command_line_token_warnings(extra_vars: Iterable[str]) -> list[str]:
    """A warning for each token variable given on the command line (-e name=... or -e '{json}'), without its value.

    ``-e @file`` is a file and is not warned about."""
    found: list[str] = []
    for item in extra_vars or ():
        text = str(item).strip()
        if text.startswith("@"):
            continue
        try:
            names = list(json.loads(text)) if text.startswith("{") else []
        except ValueError:
            names = []
        names += [part.split("=", 1)[0].strip() for part in text.split() if "=" in part]
        found += [name for name in TOKEN_VARIABLES if name in names and name not in found]
    return [f"{name} was given on the command line (-e), where ps and the shell history show it to other users of "
            f"this controller; put the token in a file only you can read (chmod 600) and pass -e pin_hf_token_file="
            f"PATH, or export HF_TOKEN and pass -e pin_hf_use_host_token=true." for name in found]


def hub_fetch(token: str | bool | None, endpoint: str | None) -> Any:
    """``fetch(repo, ref) -> commit`` over huggingface_hub (imported here: only pin and staging need it).

    The endpoint passes the weights staging path's own check first: a token goes over https (or to this
    machine's loopback) to the endpoint the lane names, and never to an HF_ENDPOINT the lane does not name."""
    token = token or False
    endpoint = check_endpoint(endpoint, token is not False, env_too=True)
    try:
        import huggingface_hub  # pylint: disable=import-outside-toplevel
    except ImportError:
        raise LanekitError("huggingface_hub is not installed in the controller's Python, and pin reads the model's "
                           "revision with it; pip install huggingface_hub, or pass -e pin_model=false.") from None
    if token is True and not huggingface_hub.get_token():
        raise LanekitError("pin_hf_use_host_token is set but the controller has no Hub token (no HF_TOKEN, no token "
                           "saved by hf auth login); log in, export HF_TOKEN or pass -e pin_hf_token_file=PATH.")
    api = huggingface_hub.HfApi(endpoint=endpoint, token=token)
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
        # pin rewrites these files, and deploys run what they say as root on the nodes.
        check_not_shared(lane_file, "the lane file")
        edits: list[tuple[str, dict[tuple[str, ...], str]]] = []
        notes: list[str] = []
        if args["image"]:
            spec = load_image_spec(images_dir, str(lane.get("image")))
            check_not_shared(os.path.dirname(spec["spec_path"]), "the lane's image spec folder")
            check_not_shared(spec["spec_path"], "the lane's image spec")
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
                token = hub_token(args)
                if args.get("hf_token"):
                    # Still honoured, so no run breaks; the warning says where the token leaked and the fix.
                    result.setdefault("warnings", []).extend(
                        command_line_token_warnings(context.CLIARGS.get("extra_vars") or ()))
                try:
                    fetch = hub_fetch(token, model.endpoint)
                except LanekitError as exc:
                    # The endpoint check's sentence, with the lane file that names the endpoint.
                    raise LanekitError(f"{lane_file}: {exc}") from None
                sha = _revision.resolve_revision(model, args["revision"], fetch, lane_file)
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
