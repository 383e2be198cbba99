#!/usr/bin/python
# Copyright: lanekit developers
# Apache-2.0
"""Report one node's rank containers (state, new log lines), API and health probes, rendezvous
peers and memory, and write the failure-bundle files; the docker calls go through DockerCLI."""
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
    ranks (SGLang), or runs the watch's timed streamed completion (O(watch_probe)).
  - The lane's key (O(api_key)) never goes to a health URL. Before it is sent to the API, the
    module checks that every socket listening on the API's port for that address belongs to the
    rank container that answers the API (a descendant of its init, or in its cgroup); a port held
    by another process gets no key, and the probe's C(error) names the port and the process.
  - With O(bundle_dir) it also writes every container's full log, its full C(docker inspect)
    object and the node's C(/proc/meminfo) into that directory, for the failure bundle. Secret
    values, and the values of key-like environment variables and flags, are replaced there.
  - Used by M(lanekit.serving.lane_wait) once per poll on every node, and by the teardown and
    status playbooks. Only the docker CLI (through the collection's shared wrapper) and the Python
    standard library are used; commands are argv lists.
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
        streamed chat completion), C(timeout) and C(chat_timeout) (seconds), C(container) (the
        rank container that answers the API; default the one of this node labelled C(head) or
        C(router)).
    type: dict
  watch_probe:
    description:
      - Run the watch's probe (M(lanekit.serving.lane_watch)) from this node, the lane's head, so
        that the key does not cross the network. Keys C(url), C(model), C(deadline_s) (seconds the
        streamed completion may take), C(max_tokens), C(container) (the rank container that must
        hold the API port).
      - Just before the request and just after the stream ends it reads the engine's generated-token
        counter from C(<url>/metrics), without the key (the path is open), at most 5 s and 4 MiB each;
        a port the rank container does not hold is not asked at all.
    type: dict
  health_probes:
    description:
      - Health URLs to GET from this node, each C({name, url}); SGLang worker ranks serve
        C(/health) on their C(--port). They are asked without the key.
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
        C(meminfo.txt) into. Created mode C(0700) if missing; an existing one owned by another user or
        writable by others is refused.
    type: path
  exit_watch_s:
    description:
      - Before the status is read, watch the named containers' C(docker events) for up to this many
        seconds and stop at the first exit (C(die)), so a boot wait names an exiting rank at once
        rather than at its next poll. V(0) reads at once.
    type: float
    default: 0
  exit_watch_since:
    description:
      - The node time (epoch seconds) from which the watch replays events, the previous call's
        RV(exit_watch.next_since), so an exit between two calls is not missed.
      - Default is the start of this call.
    type: str
  command_timeout:
    description: Seconds after which one docker command is abandoned.
    type: int
    default: 60
  api_key:
    description:
      - The lane's API key (C(lanekit_api_key)), sent as a bearer key by the API probe and the watch probe
        to the paths that want it, and only to a port the API's rank container holds.
      - Never returned; a value found in a log line is masked.
    type: str
  secret_values:
    description:
      - Values that must not leave the node (the lane's C(lanekit_secret_env) values and its key).
        They are replaced in the returned log lines and in the O(bundle_dir) files.
    type: list
    elements: str
    default: []
  secret_env_names:
    description:
      - Environment variables of the rank containers whose values the O(bundle_dir) inspect files
        replace (besides every variable whose name looks like a key, token or password).
    type: list
    elements: str
    default: []
author:
  - lanekit developers (!UNKNOWN)
extends_documentation_fragment:
  - lanekit.serving.attributes
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
    lines: {description: "Log lines with docker timestamps, oldest first.", type: list, elements: str}
    log_error: {description: "Why the log could not be read, if it could not.", type: str}
api:
  description:
    - API probe result (accepts, health_status, models, model_listed, chat_ok, ttft_s, error).
    - C(key_withheld) when the key was not sent because another process holds the port (C(error) says which).
  returned: when api_probe is given
  type: dict
watch_probe:
  description: The watch probe's result.
  returned: when watch_probe is given
  type: dict
  contains:
    ok: {description: "Whether the stream ended within the deadline with tokens.", type: bool}
    ttft_s: {description: "Seconds from the request's start to the first token; null without one.", type: float}
    last_token_s: {description: "Seconds from the request's start to the last token received; null without one.", type: float}
    tokens: {description: "Stream chunks that carried text (a chunk may carry several tokens).", type: int}
    tps: {description: "Chunks per second after the first; null with fewer than two.", type: float}
    total_s: {description: "Seconds the request took, to the stream's end or the deadline.", type: float}
    deadline_s: {description: "The deadline the probe was given.", type: float}
    max_tokens: {description: "The most tokens the probe asked for (the most it may have cost the engine).", type: int}
    engine_tokens_before:
      description:
        - "The engine's generated-token counter (C(vllm:generation_tokens_total) or C(sglang:generation_tokens_total),
          summed over its label sets) just before the request."
        - Null when C(/metrics) is absent (SGLang without C(--enable-metrics), a router), slow, too large or has no counter.
      type: float
    engine_tokens_after: {description: "The same counter just after the stream ended; null as above.", type: float}
    error: {description: "Why the probe did not pass; empty when it did.", type: str}
    key_withheld: {description: "Set when the key was not sent because another process holds the port.", type: bool}
    url: {description: "The API's base URL.", type: str}
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
exit_watch:
  description: The watch before the status (O(exit_watch_s)).
  returned: always
  type: dict
  contains:
    events:
      description: "The exits seen, oldest first: C(container), C(action) (C(die) or C(oom)), C(time_ns) on the node's clock, C(exit_code)."
      type: list
      elements: dict
    watched_s: {description: Seconds the watch lasted., type: float}
    error: {description: "Why no event stream could be had (the watch then waited out its time); empty otherwise.", type: str}
    next_since: {description: Where the next call's watch starts (pass it as O(exit_watch_since))., type: str}
bundle_files:
  description: Files written under O(bundle_dir).
  returned: when bundle_dir is given
  type: list
  elements: str
"""

import json
import os
import time
from collections.abc import Callable

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.lanekit.serving.plugins.module_utils._boot._events import run_watch
from ansible_collections.lanekit.serving.plugins.module_utils._boot._portowner import (
    RankContainer,
    key_refusal,
)
from ansible_collections.lanekit.serving.plugins.module_utils._boot._probes import (
    DEFAULT_URL,
    http_get,
    probe_api,
    stream_probe,
)
from ansible_collections.lanekit.serving.plugins.module_utils._boot._proc_net import tcp_peers
from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.module_utils._files import atomic_write
from ansible_collections.lanekit.serving.plugins.module_utils._image._docker_cli import DockerCLI
from ansible_collections.lanekit.serving.plugins.module_utils._lane import _engines as engines
from ansible_collections.lanekit.serving.plugins.module_utils._redact import redact_inspect, redact_text, secretish
from ansible_collections.lanekit.serving.plugins.module_utils._weights._pagecache_sys import parse_meminfo
from ansible_collections.lanekit.serving.plugins.module_utils._workdir import private_dir

# The plan labels containers io.lanekit.<key>; plain lanekit.<key> is read too.
LABEL_PREFIXES = ("io.lanekit", "lanekit")
MEMINFO_KEYS = ("MemTotal", "MemFree", "MemAvailable", "Buffers", "Cached", "SwapTotal", "SwapFree",
                "Dirty", "Writeback", "Shmem", "Unevictable")
MEMINFO_PATH = "/proc/meminfo"


def meminfo_kb(text: str) -> dict[str, int]:
    """The MEMINFO_KEYS figures of /proc/meminfo text, in kB (what lane_wait's status reads)."""
    figures = parse_meminfo(text)
    return {key: figures[key] // 1024 for key in MEMINFO_KEYS if key in figures}


def read_meminfo_text(path: str = MEMINFO_PATH) -> str:
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except OSError:
        return ""


def label(labels: dict | None, key: str) -> str | None:
    for prefix in LABEL_PREFIXES:
        value = (labels or {}).get(f"{prefix}.{key}")
        if value not in (None, ""):
            return value
    return None


def rank_of(obj: dict) -> tuple[int | None, str | None]:
    """(rank, role) of a rank container from its labels; (None, None) for others."""
    labels = (obj.get("Config") or {}).get("Labels") or {}
    text = label(labels, "rank")
    try:
        rank = int(text) if text is not None else None
    except ValueError:
        rank = None
    role = label(labels, "role") or (None if rank is None else ("head" if rank == 0 else "worker"))
    return rank, role


def inspect_subset(obj: dict) -> dict:
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


def container_names(docker: DockerCLI, containers: list[str], lane: str | None) -> list[str]:
    """The named containers, then those labelled with the lane (either label prefix), each once."""
    names = list(dict.fromkeys(containers))
    if lane:
        for prefix in LABEL_PREFIXES:
            names += [n for n in docker.containers_with_label(f"{prefix}.lane", lane) if n not in names]
    return names


def container_entry(docker: DockerCLI, name: str, obj: dict | None, params: dict) -> dict:
    """One entry of the ``containers`` result: state, rank/role and the new log lines."""
    entry: dict = {"name": name, "exists": obj is not None, "lines": [], "log_error": ""}
    if obj is None:
        return entry
    entry["inspect"] = inspect_subset(obj)
    entry["rank"], entry["role"] = rank_of(obj)
    state = obj.get("State") or {}
    entry["running"] = bool(state.get("Running"))
    asked = (params["since"] or {}).get(name)
    since = asked or state.get("StartedAt")
    if since and since.startswith("0001-"):
        since = None  # docker's zero time: the container never started
    entry["lines"], entry["log_error"] = docker.logs(name, since=since,
                                                     tail_lines=params["max_lines"] if asked else params["tail"])
    return entry


def redact_file(path: str, values: list[str]) -> None:
    """Rewrite a written log with the secret values replaced (line by line: logs can be large)."""
    if not values or not os.path.isfile(path):
        return
    tmp = path + ".redacting"
    with open(path, encoding="utf-8", errors="replace") as src, open(tmp, "w", encoding="utf-8") as dst:
        os.chmod(tmp, 0o600)
        for line in src:
            dst.write(redact_text(line, values))
    os.replace(tmp, path)


def container_secrets(obj: dict) -> tuple[list[str], list[str]]:
    """(names, values) of a container's secret variables: those its io.lanekit.secret-env label names
    (the lane's env file) and every key-like one, with their values read from its Config.Env."""
    config = obj.get("Config") or {}
    names = set(filter(None, (label(config.get("Labels"), "secret-env") or "").split(",")))
    values = []
    for item in config.get("Env") or []:
        name, _sep, value = str(item).partition("=")
        if name in names or secretish(name):
            names.add(name)
            values.append(value)
    return sorted(names), [v for v in values if v]


def write_bundle(docker: DockerCLI, bundle: str, names: list[str], found: dict, meminfo_text: str,
                 params: dict | None = None) -> list[str]:
    """Each container's inspect object (redacted) and full log, and the node's meminfo, under ``bundle``."""
    values = list((params or {}).get("secret_values") or []) + [(params or {}).get("api_key") or ""]
    values = [v for v in values if v]
    env_names = list((params or {}).get("secret_env_names") or [])
    # Logs and inspect objects carry the ranks' environment: never into a directory others can read or swap.
    bundle = private_dir(bundle, "bundle directory (bundle_dir)")
    files = []
    for name in names:
        obj = found.get(name)
        if obj is None:
            continue
        own_names, own_values = container_secrets(obj)
        path = os.path.join(bundle, f"{name}.inspect.json")
        # The whole Config.Env and argv would carry the secret env file's values and any key flag.
        clean = redact_inspect(obj, env_names + own_names, values + own_values)
        atomic_write(path, json.dumps(clean, indent=2, sort_keys=True), mode=0o600)
        files.append(path)
        path = os.path.join(bundle, f"{name}.log")
        docker.write_log(name, path)
        redact_file(path, values + own_values)
        files.append(path)
    path = os.path.join(bundle, "meminfo.txt")
    atomic_write(path, meminfo_text, mode=0o600)
    files.append(path)
    return files


def api_container(asked: str | None, found: dict) -> RankContainer | None:
    """The rank container that must hold the API port: the one the probe names, else this node's head or router."""
    name = asked or next((n for n, obj in found.items() if obj and rank_of(obj)[1] in engines.API_ROLES), None)
    return RankContainer.of(name, found.get(name)) if name else None


def key_check(url: str, container: RankContainer | None) -> Callable[[], str]:
    """The check the probes run before they send the key: the port must be the container's (issue 38)."""
    return lambda: key_refusal(url, container)


def watch_probe(spec: dict, api_key: str | None, found: dict) -> dict:
    """The watch's streamed completion, from this node to the head container's port."""
    url = str(spec.get("url") or "")
    container = api_container(spec.get("container"), found)
    return stream_probe(url, str(spec.get("model") or ""), float(spec.get("deadline_s") or 60),
                        int(spec.get("max_tokens") or 16), api_key, key_check=key_check(url, container))


def status(docker: DockerCLI, params: dict) -> dict:
    """The whole report of this node (the module's result)."""
    # the watch comes first: what follows reads the state the exit left
    watched = run_watch(docker, params["containers"], params["exit_watch_s"], params["exit_watch_since"])
    names = container_names(docker, params["containers"], params["lane"])
    # The probes' containers are inspected too (their init pid and id), but reported only when asked for.
    probed = [str(p["container"]) for p in (params["api_probe"], params.get("watch_probe")) if p and p.get("container")]
    found = docker.inspect_containers(names + [n for n in dict.fromkeys(probed) if n not in names])
    result: dict = {"changed": False, "health": {},
                    "containers": [container_entry(docker, name, found.get(name), params) for name in names]}
    key = params.get("api_key") or None
    if params["api_probe"]:
        url = str(params["api_probe"].get("url") or DEFAULT_URL)
        container = api_container(params["api_probe"].get("container"), found)
        result["api"] = probe_api(dict(params["api_probe"], api_key=key), key_check=key_check(url, container))
    if params.get("watch_probe"):
        result["watch_probe"] = watch_probe(params["watch_probe"], key, found)
    for probe in params["health_probes"]:
        # Health URLs are unauthenticated: the key is never sent there (whoever holds the port would get it).
        code, _body, error = http_get(probe["url"], timeout=float(probe.get("timeout") or 5))
        result["health"][probe.get("name") or probe["url"]] = {"status": code, "error": error}
    result["tcp_peers"] = tcp_peers(params["listen_ports"]) if params["listen_ports"] else {}
    meminfo_text = read_meminfo_text()
    result["meminfo"] = meminfo_kb(meminfo_text)
    if params["bundle_dir"]:
        result["bundle_files"] = write_bundle(docker, params["bundle_dir"], names, found, meminfo_text, params)
    values = [v for v in list(params.get("secret_values") or []) + [params.get("api_key") or ""] if v]
    for entry in result["containers"]:
        own = container_secrets(found.get(entry["name"]) or {})[1]
        if values or own:
            entry["lines"] = [redact_text(line, values + own) for line in entry["lines"]]
    result["now"] = time.time()
    result["exit_watch"] = watched
    return result


def main() -> None:
    module = AnsibleModule(
        argument_spec=dict(
            containers=dict(type="list", elements="str", default=[]),
            lane=dict(type="str"),
            since=dict(type="dict", default={}),
            tail=dict(type="int", default=400),
            max_lines=dict(type="int", default=5000),
            api_probe=dict(type="dict"),
            watch_probe=dict(type="dict"),
            health_probes=dict(type="list", elements="dict", default=[]),
            listen_ports=dict(type="list", elements="int", default=[]),
            bundle_dir=dict(type="path"),
            exit_watch_s=dict(type="float", default=0.0),
            exit_watch_since=dict(type="str"),
            command_timeout=dict(type="int", default=60),
            api_key=dict(type="str", no_log=True),
            secret_values=dict(type="list", elements="str", default=[], no_log=True),
            secret_env_names=dict(type="list", elements="str", default=[], no_log=False),  # names, not values
        ),
        supports_check_mode=True,
    )
    try:
        docker = DockerCLI(module, timeout=module.params["command_timeout"])
        result = status(docker, module.params)
    except LanekitError as err:
        module.fail_json(msg=str(err))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
