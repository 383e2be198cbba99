# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""Run the docker CLI from a module: argv lists only, JSON parsing of ``inspect``, container logs,
and the image pin helpers every image module shares (the node-to-node stream protocol is
``_image_stream``).

The modules talk to the engine through the ``docker`` CLI (``module.run_command`` with an argv
list) rather than the Docker SDK, so a node needs nothing but docker itself. Every expected
failure becomes a :class:`DockerError` (a :class:`LanekitError`) whose message is the sentence
the user reads.

The pin of an image is a key we control and that survives ``docker save``/``load``, ``push``/
``pull`` and a change of image store: the content-hash label (what the image was built from)
plus the digest of its layer list (``RootFS.Layers``, the uncompressed layer digests, which the
graphdriver and the containerd image stores report alike) plus the digest of the run-relevant
configuration (entrypoint, command, env, user, labels, ... with platform and layers; see
``_image_stream.config_digest``), so an image with the right label and layers but another
entrypoint or env is not the pinned one. The local image ``Id`` is reported but never compared: it
changes with the image store.
"""
from __future__ import annotations

import hashlib
import heapq
import json
import os
import re
import socket
import subprocess
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.module_utils._image._targate import config_digest_of_inspect

if TYPE_CHECKING:  # the modules that use DockerCLI import it; here it is only a type
    from ansible.module_utils.basic import AnsibleModule

LABEL_CONTENT_HASH = "io.lanekit.content-hash"
LABEL_BASE_DIGEST = "io.lanekit.base-digest"
LABEL_IMAGE = "io.lanekit.image"
LABEL_PROBE = "io.lanekit.probe"

# docker reports the engine architecture in Go's names; `uname -m` names appear in older outputs.
_ARCH_ALIASES = {
    "x86_64": "amd64",
    "amd64": "amd64",
    "aarch64": "arm64",
    "arm64": "arm64",
    "arm64/v8": "arm64",
}

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
# The time stamp ``docker logs --timestamps`` puts in front of every line (RFC 3339, UTC, up to ns).
_LOG_TS = re.compile(r"^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(?:\.(\d{1,9}))?Z")

_NO_SUCH = ("no such image", "no such object", "not found", "no such container")


class DockerError(LanekitError):
    """A docker command failed; the message names the command, the host and docker's words."""


def normalize_arch(value: str | None) -> str:
    """``x86_64``/``amd64`` -> ``amd64``; ``aarch64``/``arm64`` -> ``arm64``; others unchanged."""
    text = (value or "").strip().lower()
    return _ARCH_ALIASES.get(text, text)


def strip_ansi(text: str) -> str:
    """Remove terminal colour codes (docker build prints a RUN step's stderr in red)."""
    return _ANSI.sub("", text)


def tail(text: str | bytes | None, lines: int = 12) -> str:
    """The last ``lines`` non-empty lines of a command's output, for error sentences."""
    if text is None:
        return ""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    text = _ANSI.sub("", text)
    kept = [line.rstrip() for line in text.splitlines() if line.strip()]
    return "\n".join(kept[-lines:])


def log_ts_key(line: str) -> tuple[str, int]:
    """Sort key of a ``docker logs --timestamps`` line: (seconds text, nanoseconds); ('', 0) without one."""
    match = _LOG_TS.match(line)
    if not match:
        return ("", 0)
    return (match.group(1), int((match.group(2) or "0").ljust(9, "0")))


def merge_log_streams(out_lines: Iterable[str], err_lines: Iterable[str]) -> list[str]:
    """Merge the stdout and stderr lines of ``docker logs --timestamps`` in time order (stable)."""
    return list(heapq.merge(out_lines, err_lines, key=log_ts_key))


def rootfs_digest(inspect: dict | None) -> str:
    """sha256 over the image's ordered layer digests (``RootFS.Layers``); '' when unknown."""
    layers = ((inspect or {}).get("RootFS") or {}).get("Layers") or []
    if not layers:
        return ""
    return "sha256:" + hashlib.sha256("\n".join(layers).encode("ascii")).hexdigest()


def chain_ids(layers: list) -> list:
    """Docker's chain IDs of a layer list: element i names layers 0..i stacked in that order.

    A node that has chain i has every layer below it too, so ``docker load`` skips those layers.
    """
    chains: list[str] = []
    for layer in layers or []:
        chains.append(layer if not chains else
                      "sha256:" + hashlib.sha256(f"{chains[-1]} {layer}".encode("ascii")).hexdigest())
    return chains


def image_labels(inspect: dict | None) -> dict:
    return dict(((inspect or {}).get("Config") or {}).get("Labels") or {})


def image_pin(inspect: dict | None) -> dict:
    """The pin a node reports for one image (empty values when the image is absent)."""
    if not inspect:
        return {"present": False, "content_hash": "", "rootfs": "", "config": "", "image_id": "", "arch": "",
                "repo_digests": [], "repo_tags": []}
    labels = image_labels(inspect)
    return {
        "present": True,
        "content_hash": labels.get(LABEL_CONTENT_HASH, ""),
        "rootfs": rootfs_digest(inspect),
        "config": config_digest_of_inspect(inspect),
        "image_id": inspect.get("Id", ""),
        "arch": normalize_arch(inspect.get("Architecture")),
        "repo_digests": sorted(inspect.get("RepoDigests") or []),
        "repo_tags": sorted(inspect.get("RepoTags") or []),
    }


def pin_mismatch(pin: dict, content_hash: str, rootfs: str | None = None, config: str | None = None) -> str | None:
    """Why ``pin`` is not the wanted image (a short phrase), or None when it is."""
    if not pin.get("present"):
        return "the image is not present"
    if pin.get("content_hash") != content_hash:
        found = (pin.get("content_hash") or "")[:12] or "no content-hash label"
        return f"the tag points at another image (content hash {found}, wanted {content_hash[:12]})"
    if rootfs and pin.get("rootfs") != rootfs:
        return (f"the image has the right content hash but other layers (rootfs {pin.get('rootfs', '')[7:19]}, "
                f"pinned {rootfs[7:19]}): it was rebuilt elsewhere")
    if config and pin.get("config") != config:
        return (f"the image has the right content hash and layers but another configuration (entrypoint, command, "
                f"env, user or labels; config {pin.get('config', '')[7:19]}, pinned {config[7:19]})")
    return None


def registry_digest_for(repo_digests: list, repository: str) -> str:
    """The ``sha256:...`` digest recorded for ``repository`` in ``RepoDigests``, or ''."""
    for item in repo_digests or []:
        name, _at, digest = item.partition("@")
        if name == repository and digest:
            return digest
    return ""


def split_repository(ref: str) -> str:
    """``host:5000/a/b:tag`` -> ``host:5000/a/b``; ``a/b@sha256:..`` -> ``a/b``."""
    name = ref.split("@", 1)[0]
    slash = name.rfind("/")
    colon = name.rfind(":")
    if colon > slash:
        name = name[:colon]
    return name


class DockerCLI:
    """The docker CLI on the host a module runs on."""

    def __init__(self, module: AnsibleModule, docker_cli: str | None = None, env: dict | None = None,
                 timeout: float | None = None) -> None:
        self.module = module
        # With a timeout a command runs as our own child (module.run_command cannot abandon one):
        # a node whose docker hangs must not hang a poll that runs every few seconds.
        self.timeout = timeout
        self.host = socket.gethostname()
        binary = docker_cli or module.get_bin_path("docker", required=False)
        if not binary or not os.path.exists(binary):
            raise DockerError(
                f"the docker CLI was not found on {self.host} ({docker_cli or 'docker not on PATH'}); "
                f"install docker there or set docker_cli to its path."
            )
        self.binary = binary
        self.env = dict(env or {})
        self.commands: list[list[str]] = []

    def argv(self, args: list[str]) -> list[str]:
        return [self.binary] + [str(arg) for arg in args]

    def run(self, args: list[str], *, data: str | None = None, check: bool = True,
            what: str | None = None, record: bool = True) -> tuple[int, str, str]:
        """Run ``docker <args>``; raise DockerError (with docker's last words) if it fails."""
        argv = self.argv(args)
        if record:
            self.commands.append(argv)
        if self.timeout:
            rc, out, err = self._run_timed(argv, data)
        else:
            rc, out, err = self.module.run_command(argv, data=data, environ_update=self.env or None,
                                                   check_rc=False)
        if check and rc != 0:
            raise DockerError(
                f"{what or 'docker ' + ' '.join(str(a) for a in args[:2])} failed on {self.host} "
                f"(exit {rc}): {tail(err) or tail(out) or 'no output'}"
            )
        return rc, out, err

    def _child_env(self) -> dict:
        env = dict(os.environ)
        env.update(self.env)
        return env

    def _run_timed(self, argv: list[str], data: str | None) -> tuple[int, str, str]:
        try:
            proc = subprocess.run(argv, input=data, capture_output=True, encoding="utf-8", errors="replace",  # noqa: S603 - argv list
                                  env=self._child_env(), timeout=self.timeout, check=False)
        except subprocess.TimeoutExpired:
            return 124, "", f"docker {argv[1]} did not answer within {self.timeout}s"
        return proc.returncode, proc.stdout or "", proc.stderr or ""

    def popen(self, args: list[str], **kwargs: Any) -> subprocess.Popen:
        """Start ``docker <args>`` as a child process (argv, no shell) for streaming."""
        argv = self.argv(args)
        self.commands.append(argv)
        return subprocess.Popen(argv, env=self._child_env(), **kwargs)  # noqa: S603 - argv list, no shell

    def _inspect(self, kind: str, ref: str) -> dict | None:
        rc, out, err = self.run([kind, "inspect", ref], check=False, record=False)
        if rc != 0:
            if any(marker in (err or "").lower() for marker in _NO_SUCH):
                return None
            raise DockerError(f"docker {kind} inspect {ref} failed on {self.host} (exit {rc}): {tail(err) or tail(out)}")
        try:
            data = json.loads(out)
        except ValueError:
            raise DockerError(f"docker {kind} inspect {ref} on {self.host} printed something that is not JSON: {tail(out, 3)}") from None
        if not isinstance(data, list) or not data:
            return None
        return data[0]

    def inspect_image(self, ref: str) -> dict | None:
        """``docker image inspect`` as a dict, or None when there is no such image."""
        return self._inspect("image", ref)

    def inspect_container(self, name: str) -> dict | None:
        return self._inspect("container", name)

    def inspect_containers(self, names: list[str]) -> dict[str, dict]:
        """name -> ``docker inspect`` object of those of ``names`` that exist (one command for all)."""
        if not names:
            return {}
        rc, out, err = self.run(["inspect", "--type", "container"] + list(names), check=False, record=False)
        try:
            objects = json.loads(out or "[]")
        except ValueError:
            # docker prints the found objects and exits 1 when some names do not exist.
            if rc != 0 and "no such" not in (err or "").lower():
                raise DockerError(f"docker inspect failed on {self.host}: {tail(err) or tail(out) or f'exit {rc}'}") from None
            objects = []
        return {obj.get("Name", "").lstrip("/"): obj for obj in objects or [] if isinstance(obj, dict)}

    def containers_with_label(self, key: str, value: str) -> list[str]:
        """Names of the containers (running or not) labelled ``key=value``."""
        _rc, out, _err = self.run(["ps", "-a", "--filter", f"label={key}={value}", "--format", "{{.Names}}"],
                                  record=False, what="docker ps")
        return [name for name in out.split() if name]

    def logs(self, name: str, since: str | None = None, tail_lines: int | None = None) -> tuple[list[str], str]:
        """(time-stamped log lines of both streams in time order, why they could not be read or '')."""
        args = ["logs", "--timestamps"]
        if since:
            args += ["--since", since]
        if tail_lines is not None:
            args += ["--tail", str(int(tail_lines))]
        rc, out, err = self.run(args + [name], check=False, record=False)
        if rc != 0:
            return [], (err or "").strip() or f"docker logs exited with {rc}"
        return merge_log_streams((out or "").splitlines(), (err or "").splitlines()), ""

    def write_log(self, name: str, path: str) -> int:
        """Write the container's whole log (both streams, time-ordered) to ``path`` without holding
        it in memory; returns docker's exit code."""
        out_path, err_path = f"{path}.stdout", f"{path}.stderr"
        with open(out_path, "wb") as out, open(err_path, "wb") as err:
            try:
                rc = subprocess.run(self.argv(["logs", "--timestamps", name]), stdout=out, stderr=err,  # noqa: S603 - argv list
                                    env=self._child_env(), timeout=self.timeout, check=False).returncode
            except subprocess.TimeoutExpired:
                rc = 124
        with open(out_path, encoding="utf-8", errors="replace") as out, \
                open(err_path, encoding="utf-8", errors="replace") as err, \
                open(path, "w", encoding="utf-8") as dest:
            for line in heapq.merge(out, err, key=log_ts_key):
                dest.write(line if line.endswith("\n") else f"{line}\n")
        os.unlink(out_path)
        os.unlink(err_path)
        return rc

    def images_with_label(self, key: str, value: str) -> list[str]:
        """Ids of the local images labelled ``key=value``."""
        _rc, out, _err = self.run(["image", "ls", "--no-trunc", "--quiet", "--filter", f"label={key}={value}"],
                                  record=False, what="listing images")
        return sorted({line.strip() for line in out.splitlines() if line.strip()})

    def server_arch(self) -> str:
        """The engine's architecture in Go names (``amd64``, ``arm64``)."""
        _rc, out, _err = self.run(["version", "--format", "{{json .Server}}"], record=False,
                                  what="asking the docker engine for its version")
        try:
            server = json.loads(out) or {}
        except ValueError:
            server = {}
        arch = normalize_arch(server.get("Arch"))
        if not arch:
            raise DockerError(f"the docker engine on {self.host} did not report its architecture ({tail(out, 2)}).")
        return arch

    def tag(self, source: str, target: str) -> None:
        self.run(["image", "tag", source, target], what=f"docker tag {source} {target}")

    def pull(self, ref: str) -> str:
        _rc, out, _err = self.run(["image", "pull", ref], what=f"docker pull {ref}")
        return out

    def push(self, ref: str) -> str:
        _rc, out, _err = self.run(["image", "push", ref], what=f"docker push {ref}")
        return out

    def probe_exec(self, ref: str, command: list[str], timeout: float, interval: float = 2.0,
                   label: str = "", sleep: Callable[[float], None] = time.sleep,
                   clock: Callable[[], float] = time.monotonic) -> dict:
        """Prove the engine can start a container from ``ref``: run a throwaway container with the
        entrypoint overridden until it exits 0, for at most ``timeout`` seconds.

        Right after ``docker load`` an image store may still be unpacking layers, and the first
        ``docker run`` then fails with a missing file; retrying until a trivial command runs is
        the readiness proof. Nothing is left behind (``--rm``), nothing else is touched.
        """
        args = ["run", "--rm", "--pull", "never", "--network", "none", "--log-driver", "none"]
        if label:
            args += ["--label", f"{LABEL_PROBE}={label}"]
        args += ["--entrypoint", command[0], ref] + list(command[1:])
        start = clock()
        attempts = 0
        last = ""
        while True:
            attempts += 1
            rc, out, err = self.run(args, check=False, record=attempts == 1)
            if rc == 0:
                return {"ready": True, "attempts": attempts, "seconds": round(clock() - start, 2)}
            last = tail(err, 4) or tail(out, 4) or f"exit {rc}"
            if clock() - start + interval > timeout:
                break
            sleep(interval)
        raise DockerError(
            f"{self.host} cannot run {ref}: a throwaway container ({' '.join(command)}, entrypoint overridden) "
            f"still failed after {attempts} attempts in {round(clock() - start)} s: {last}. "
            f"The image may be incompletely unpacked or damaged; remove it there (docker image rm {ref}) and re-run."
        )
