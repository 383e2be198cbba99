#!/usr/bin/python
# Copyright: lanekit developers
# Apache-2.0
from __future__ import annotations

DOCUMENTATION = r"""
---
module: rank_status
short_description: Report the state, new log lines and health of a lane's rank containers on one node
version_added: 0.1.0
description:
  - Runs on a lane node. For each named rank container (or each container labelled with the
    lane) it returns the C(docker inspect) state and the log lines written since a given time
    (C(docker logs --timestamps), stdout and stderr merged in time order).
  - Optionally probes, from this node, the lane's OpenAI-compatible API (port accepts,
    C(/health), C(/v1/models), one streamed chat completion) and the health servers of worker
    ranks (SGLang).
  - With O(bundle_dir) it also writes every container's full log, its full C(docker inspect)
    object and the node's C(/proc/meminfo) into that directory, for the failure bundle.
  - Used by M(lanekit.serving.lane_wait) once per poll on every node, and by the teardown and
    status playbooks. Only the docker CLI and the Python standard library are used; commands
    are argv lists.
options:
  containers:
    description: Names of the rank containers to report.
    type: list
    elements: str
    default: []
  lane:
    description:
      - Also report every container labelled C(io.lanekit.lane=<lane>) (or C(lanekit.lane=<lane>)) on this node.
    type: str
  since:
    description:
      - Per container name, an RFC 3339 time; only log lines from that time on are returned.
      - Containers not listed get their last O(tail) lines of the current run.
    type: dict
    default: {}
  tail:
    description: Lines returned for a container without a O(since) entry.
    type: int
    default: 400
  max_lines:
    description: Upper bound of lines returned per container and call.
    type: int
    default: 5000
  api_probe:
    description:
      - Probe the lane's API from this node. Keys C(url) (base URL, for example
        V(http://10.0.0.1:8000)), C(model) (served model name), C(chat) (bool, run one
        streamed chat completion), C(timeout) and C(chat_timeout) (seconds).
    type: dict
  health_probes:
    description:
      - Health URLs to GET from this node, each C({name, url}); SGLang worker ranks serve
        C(/health) on their C(--port).
    type: list
    elements: dict
    default: []
  listen_ports:
    description:
      - Local TCP ports (for example the head's rendezvous port) whose established peers to
        report, read from C(/proc/net/tcp) and C(/proc/net/tcp6) of this node's network
        namespace (rank containers use the host network).
    type: list
    elements: int
    default: []
  bundle_dir:
    description:
      - Directory on the node to write C(<container>.log), C(<container>.inspect.json) and
        C(meminfo.txt) into. Created if missing.
    type: path
  command_timeout:
    description: Seconds after which one docker command is abandoned.
    type: int
    default: 60
author:
  - lanekit developers
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  idempotent:
    support: full
    details: Reads only; O(bundle_dir) files are rewritten with the current logs.
"""

EXAMPLES = r"""
---
- name: Status of this node's rank
  lanekit.serving.rank_status:
    containers: [lanekit-mistral-large4-nvfp4-8x-vllm-r0]
    api_probe:
      url: http://127.0.0.1:8000
      model: mistral-large-4
      chat: true
"""

RETURN = r"""
containers:
  description: One entry per container.
  returned: always
  type: list
  elements: dict
  contains:
    name: {description: Container name., type: str}
    exists: {description: Whether the container exists., type: bool}
    running: {description: Whether the container runs., type: bool}
    rank: {description: "Node rank from the C(io.lanekit.rank) label.", type: int}
    role: {description: "Role from the C(io.lanekit.role) label (head, worker).", type: str}
    inspect: {description: "Subset of C(docker inspect): Id, Name, State, RestartCount, Config.Image, Config.Labels.", type: dict}
    lines: {description: Log lines with docker timestamps, oldest first., type: list, elements: str}
    log_error: {description: Why the log could not be read, if it could not., type: str}
api:
  description: API probe result (accepts, health_status, models, model_listed, chat_ok, ttft_s, error).
  returned: when api_probe is given
  type: dict
health:
  description: Health probe results by name (status, error).
  returned: always
  type: dict
tcp_peers:
  description: For each of O(listen_ports), the remote IP addresses of established connections.
  returned: always
  type: dict
meminfo:
  description: Selected /proc/meminfo figures in kB.
  returned: always
  type: dict
now:
  description: The node's clock (epoch seconds) when the status was taken.
  returned: always
  type: float
bundle_files:
  description: Files written under O(bundle_dir).
  returned: when bundle_dir is given
  type: list
  elements: str
"""

import heapq
import json
import os
import re
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request

from ansible.module_utils.basic import AnsibleModule

_TS = re.compile(r"^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(?:\.(\d{1,9}))?Z")
# The plan labels containers io.lanekit.<key>; plain lanekit.<key> is read too.
LABEL_PREFIXES = ("io.lanekit", "lanekit")
MEMINFO_KEYS = ("MemTotal", "MemFree", "MemAvailable", "Buffers", "Cached", "SwapTotal", "SwapFree",
                "Dirty", "Writeback", "Shmem", "Unevictable")


def ts_key(line):
    """Sort key for a docker --timestamps line: (seconds text, nanoseconds)."""
    match = _TS.match(line)
    if not match:
        return ("", 0)
    return (match.group(1), int((match.group(2) or "0").ljust(9, "0")))


def merge_streams(out_lines, err_lines):
    """Merge stdout and stderr lines of ``docker logs --timestamps`` in time order (stable)."""
    return list(heapq.merge(out_lines, err_lines, key=ts_key))


def parse_meminfo(text):
    figures = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        if key in MEMINFO_KEYS:
            parts = rest.split()
            if parts and parts[0].isdigit():
                figures[key] = int(parts[0])
    return figures


def _hex_ip(text):
    """Address of /proc/net/tcp{,6} (hex, per-32-bit-word little endian) as text."""
    import socket as _socket
    import struct
    raw = bytes.fromhex(text)
    words = b"".join(struct.pack("<I", struct.unpack(">I", raw[i:i + 4])[0]) for i in range(0, len(raw), 4))
    if len(words) == 4:
        return _socket.inet_ntop(_socket.AF_INET, words)
    if words[:12] == b"\x00" * 10 + b"\xff\xff":
        return _socket.inet_ntop(_socket.AF_INET, words[12:])
    return _socket.inet_ntop(_socket.AF_INET6, words)


def parse_proc_tcp(text, ports):
    """{port: sorted remote IPs} of ESTABLISHED connections whose local port is in ports."""
    wanted = set(int(p) for p in ports)
    peers = dict((p, set()) for p in wanted)
    for line in text.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 4 or fields[3] != "01":
            continue
        local_ip, local_port = fields[1].split(":")
        remote_ip, _ = fields[2].split(":")
        port = int(local_port, 16)
        if port in wanted:
            peers[port].add(_hex_ip(remote_ip))
    return dict((p, sorted(ips)) for p, ips in peers.items())


def tcp_peers(ports):
    result = dict((int(p), []) for p in ports)
    for path in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(path, encoding="ascii") as handle:
                text = handle.read()
        except OSError:
            continue
        for port, ips in parse_proc_tcp(text, ports).items():
            result[port] = sorted(set(result[port]) | set(ips))
    return result


def read_meminfo():
    try:
        with open("/proc/meminfo", encoding="utf-8") as handle:
            return handle.read()
    except OSError:
        return ""


class Docker:
    def __init__(self, module, binary, timeout):
        self.module = module
        self.binary = binary
        self.timeout = timeout

    def run(self, args, stdout=subprocess.PIPE, stderr=subprocess.PIPE):
        argv = [self.binary] + list(args)
        try:
            proc = subprocess.run(argv, stdout=stdout, stderr=stderr, timeout=self.timeout, check=False)
        except subprocess.TimeoutExpired:
            return 124, b"", ("docker %s did not answer within %ss" % (args[0], self.timeout)).encode()
        return proc.returncode, proc.stdout or b"", proc.stderr or b""

    def inspect(self, names):
        """name -> inspect object for the containers that exist."""
        if not names:
            return {}
        rc, out, err = self.run(["inspect", "--type", "container"] + list(names))
        found = {}
        try:
            for obj in json.loads(out.decode("utf-8", "replace") or "[]"):
                found[obj.get("Name", "").lstrip("/")] = obj
        except ValueError:
            if rc != 0 and b"No such" not in err:
                self.module.fail_json(msg="docker inspect failed on this node: %s" % err.decode("utf-8", "replace").strip())
        return found

    def by_label(self, lane):
        names = []
        for prefix in LABEL_PREFIXES:
            rc, out, err = self.run(["ps", "-a", "--filter", "label=%s.lane=%s" % (prefix, lane),
                                     "--format", "{{.Names}}"])
            if rc != 0:
                self.module.fail_json(msg="docker ps failed on this node: %s" % err.decode("utf-8", "replace").strip())
            names += [n for n in out.decode("utf-8", "replace").split() if n and n not in names]
        return names

    def logs(self, name, since=None, tail=None):
        args = ["logs", "--timestamps"]
        if since:
            args += ["--since", since]
        if tail is not None:
            args += ["--tail", str(int(tail))]
        rc, out, err = self.run(args + [name])
        if rc != 0:
            return [], err.decode("utf-8", "replace").strip() or "docker logs exited with %s" % rc
        out_lines = out.decode("utf-8", "replace").splitlines()
        err_lines = err.decode("utf-8", "replace").splitlines()
        return merge_streams(out_lines, err_lines), ""

    def full_log(self, name, path):
        """Write the whole log (both streams, time-ordered) to path without holding it in memory."""
        out_path, err_path = path + ".stdout", path + ".stderr"
        with open(out_path, "wb") as out, open(err_path, "wb") as err:
            rc, _, _ = self.run(["logs", "--timestamps", name], stdout=out, stderr=err)
        with open(out_path, encoding="utf-8", errors="replace") as out, \
                open(err_path, encoding="utf-8", errors="replace") as err, \
                open(path, "w", encoding="utf-8") as dest:
            for line in heapq.merge(out, err, key=ts_key):
                dest.write(line if line.endswith("\n") else line + "\n")
        os.unlink(out_path)
        os.unlink(err_path)
        return rc


def _opener():
    # Probes go to the lane's own addresses: never through a proxy from the environment.
    return urllib.request.build_opener(urllib.request.ProxyHandler({}))


def http_get(url, timeout):
    """(status, body text, error)"""
    try:
        with _opener().open(urllib.request.Request(url, method="GET"), timeout=timeout) as resp:
            return resp.status, resp.read(1 << 20).decode("utf-8", "replace"), ""
    except urllib.error.HTTPError as exc:
        return exc.code, "", ""
    except (urllib.error.URLError, OSError, ValueError) as exc:
        return None, "", str(getattr(exc, "reason", exc))


def first_token(base, model, timeout):
    """Stream one chat completion; (ok, seconds to the first token, token text, error)."""
    body = json.dumps({
        "model": model,
        "messages": [{"role": "user", "content": "Reply with the single word: ready"}],
        "max_tokens": 8,
        "temperature": 0,
        "stream": True,
    }).encode()
    req = urllib.request.Request(base.rstrip("/") + "/v1/chat/completions", data=body, method="POST",
                                 headers={"Content-Type": "application/json", "Accept": "text/event-stream"})
    start = time.monotonic()
    try:
        with _opener().open(req, timeout=timeout) as resp:
            for raw in resp:
                if time.monotonic() - start > timeout:
                    return False, None, "", "no first token within %ss" % timeout
                line = raw.decode("utf-8", "replace").strip()
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    break
                try:
                    chunk = json.loads(data)
                except ValueError:
                    continue
                for choice in chunk.get("choices") or []:
                    delta = choice.get("delta") or {}
                    text = delta.get("content") or delta.get("reasoning_content") or delta.get("reasoning")
                    if text or delta.get("tool_calls"):
                        return True, round(time.monotonic() - start, 3), (text or "")[:40], ""
        return False, None, "", "the stream ended without a token"
    except urllib.error.HTTPError as exc:
        return False, None, "", "chat completion answered HTTP %s" % exc.code
    except (urllib.error.URLError, OSError, ValueError) as exc:
        return False, None, "", "chat completion failed: %s" % getattr(exc, "reason", exc)


def probe_api(spec):
    url = spec.get("url") or "http://127.0.0.1:8000"
    timeout = float(spec.get("timeout") or 5)
    result = {"url": url, "accepts": False}
    parsed = urllib.parse.urlparse(url)
    try:
        with socket.create_connection((parsed.hostname, parsed.port or 80), timeout=timeout):
            result["accepts"] = True
    except OSError as exc:
        result["error"] = str(exc)
        return result
    status, _, error = http_get(url.rstrip("/") + "/health", timeout=max(timeout, 25))
    result["health_status"] = status
    if status != 200:
        result["error"] = error or "/health answered %s" % status
        return result
    status, body, error = http_get(url.rstrip("/") + "/v1/models", timeout=timeout)
    result["models_status"] = status
    try:
        models = [m.get("id") for m in (json.loads(body).get("data") or [])] if status == 200 else []
    except (ValueError, AttributeError):
        models = []
    result["models"] = models
    wanted = spec.get("model")
    result["model_listed"] = bool(models) and (not wanted or wanted in models)
    if not result["model_listed"]:
        result["error"] = error or "/v1/models lists %s, not %s" % (models or "nothing", wanted)
        return result
    if spec.get("chat"):
        ok, ttft, token, error = first_token(url, wanted or models[0], float(spec.get("chat_timeout") or 120))
        result.update(chat_ok=ok, ttft_s=ttft, first_token=token)
        if error:
            result["error"] = error
    return result


def label(labels, key):
    for prefix in LABEL_PREFIXES:
        value = (labels or {}).get("%s.%s" % (prefix, key))
        if value not in (None, ""):
            return value
    return None


def rank_of(obj):
    """(rank, role) of a rank container from its labels; (None, None) for others."""
    labels = (obj.get("Config") or {}).get("Labels") or {}
    rank = label(labels, "rank")
    try:
        rank = int(rank) if rank is not None else None
    except ValueError:
        rank = None
    role = label(labels, "role") or (None if rank is None else ("head" if rank == 0 else "worker"))
    return rank, role


def inspect_subset(obj):
    config = obj.get("Config") or {}
    return {
        "Id": obj.get("Id"),
        "Name": obj.get("Name"),
        "Created": obj.get("Created"),
        "State": obj.get("State"),
        "RestartCount": obj.get("RestartCount"),
        "Config": {"Image": config.get("Image"), "Labels": config.get("Labels") or {}},
        "Image": obj.get("Image"),
    }


def main():
    module = AnsibleModule(
        argument_spec=dict(
            containers=dict(type="list", elements="str", default=[]),
            lane=dict(type="str"),
            since=dict(type="dict", default={}),
            tail=dict(type="int", default=400),
            max_lines=dict(type="int", default=5000),
            api_probe=dict(type="dict"),
            health_probes=dict(type="list", elements="dict", default=[]),
            listen_ports=dict(type="list", elements="int", default=[]),
            bundle_dir=dict(type="path"),
            command_timeout=dict(type="int", default=60),
        ),
        supports_check_mode=True,
    )
    params = module.params
    docker = Docker(module, module.get_bin_path("docker", required=True), params["command_timeout"])
    names = list(dict.fromkeys(params["containers"]))
    if params["lane"]:
        names += [n for n in docker.by_label(params["lane"]) if n not in names]
    found = docker.inspect(names)
    result = {"changed": False, "containers": [], "health": {}}

    for name in names:
        obj = found.get(name)
        entry = {"name": name, "exists": obj is not None, "lines": [], "log_error": ""}
        if obj is not None:
            entry["inspect"] = inspect_subset(obj)
            entry["rank"], entry["role"] = rank_of(obj)
            entry["running"] = bool((obj.get("State") or {}).get("Running"))
            since = (params["since"] or {}).get(name) or (obj.get("State") or {}).get("StartedAt")
            if since and since.startswith("0001-"):
                since = None
            tail = params["max_lines"] if (params["since"] or {}).get(name) else params["tail"]
            entry["lines"], entry["log_error"] = docker.logs(name, since=since, tail=tail)
        result["containers"].append(entry)

    if params["api_probe"]:
        result["api"] = probe_api(params["api_probe"])
    for probe in params["health_probes"]:
        status, _, error = http_get(probe["url"], timeout=float(probe.get("timeout") or 5))
        result["health"][probe.get("name") or probe["url"]] = {"status": status, "error": error}

    result["tcp_peers"] = tcp_peers(params["listen_ports"]) if params["listen_ports"] else {}
    meminfo_text = read_meminfo()
    result["meminfo"] = parse_meminfo(meminfo_text)

    if params["bundle_dir"]:
        bundle = params["bundle_dir"]
        os.makedirs(bundle, exist_ok=True)
        files = []
        for name in names:
            obj = found.get(name)
            if obj is None:
                continue
            path = os.path.join(bundle, name + ".inspect.json")
            with open(path, "w", encoding="utf-8") as handle:
                json.dump(obj, handle, indent=2, sort_keys=True)
            files.append(path)
            path = os.path.join(bundle, name + ".log")
            docker.full_log(name, path)
            files.append(path)
        path = os.path.join(bundle, "meminfo.txt")
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(meminfo_text)
        files.append(path)
        result["bundle_files"] = files

    result["now"] = time.time()
    module.exit_json(**result)


if __name__ == "__main__":
    main()
