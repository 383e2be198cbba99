"""Shared helpers of the scenario tests: run a playbook the way a user does, read what changed,
look at the rank containers inside the simulated nodes. Test code only (not part of the collection)."""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import subprocess
import time

LANE = os.environ.get("LANEKIT_LANE", "mistral-large4-nvfp4-8x-vllm")
SGLANG_LANE = "mistral-large4-nvfp4-8x-sglang"
ROOT = os.environ.get("LANEKIT_ROOT", os.getcwd())
PLAYBOOK = os.path.join(ROOT, ".venv", "bin", "ansible-playbook")
HOSTS = [f"spark-{i:02d}" for i in range(1, 9)]
NODES = [f"lksim-{h}" for h in HOSTS]
STAGING_NODE = "lksim-stage"
ANSI = re.compile(r"\x1b\[[0-9;]*m")


@contextlib.contextmanager
def staging_host_held():
    """Hold the staging host for a while. CI runs the CPU-node scenarios (real-vllm, recipes) beside the
    stand-in ones (tests/test-all.sh), and every lane stages through the one staging host:
    the real lane's playbooks hold it, and a test that kills a module there or inspects what was left
    there takes it first, so neither sees the other's work in flight."""
    os.makedirs(os.path.join(ROOT, ".sim"), exist_ok=True)
    with open(os.path.join(ROOT, ".sim", "staging-host.lock"), "w", encoding="utf-8") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def node_of(host: str) -> str:
    return f"lksim-{host}"


def run_playbook(name: str, overrides: dict | None = None, extra: list[str] | None = None, timeout: int = 900,
                 lane: str | None = None, wait: bool = True, env: dict | None = None, inventory: str = "sim"):
    """Run playbooks/<name> on inventories/sim. With wait=False, return the Popen (stdout to a file).
    ``env`` adds environment variables (e.g. a fresh ANSIBLE_SSH_CONTROL_PATH_DIR); ``inventory`` names
    the inventory under inventories/ (sim-cpu: the CPU nodes of the real vLLM lane)."""
    argv = [PLAYBOOK, os.path.join(ROOT, "playbooks", name), "-i", os.path.join(ROOT, "inventories", inventory),
            "-e", f"lane={lane or LANE}"]
    if overrides is not None:
        argv += ["-e", "lane_cli_overrides=" + json.dumps(overrides)]
    argv += extra or []
    # Molecule exports ANSIBLE_FORCE_COLOR for its own runs; these outputs are parsed, so no colour.
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_FORCE_COLOR="0", **(env or {}))
    if not wait:
        out = open(os.path.join(ROOT, ".sim", f"scenario-{name}-{int(time.time())}.log"), "w")
        return subprocess.Popen(argv, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    started = time.monotonic()
    try:
        proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as expired:
        # What the test waited for, in words (pytest names the test): the playbook, the lane, the budget,
        # and where the run was when it was stopped.
        out = expired.stdout.decode("utf-8", "replace") if isinstance(expired.stdout, bytes) else expired.stdout or ""
        tasks = re.findall(r"^TASK \[(.*)\]", ANSI.sub("", out), re.MULTILINE)
        raise AssertionError(
            f"{name} on lane {lane or LANE} (inventories/{inventory}) did not finish within its {timeout} s budget; "
            f"it was at task {tasks[-1] if tasks else '(none yet)'!r}. The end of its output:\n{out[-3000:]}") from None
    proc.seconds = time.monotonic() - started
    print(proc.stdout[-6000:])
    print(proc.stderr[-2000:])
    return proc


def changed_tasks(output: str) -> list[str]:
    """Names of the tasks that reported a change, from the default callback's output."""
    tasks, current = [], None
    for line in ANSI.sub("", output).splitlines():
        match = re.match(r"^TASK \[(.*)\] \*+", line)
        if match:
            current = match.group(1)
        elif line.startswith("changed:") and current and current not in tasks:
            tasks.append(current)
    return tasks


def changed_hosts(output: str, ignore: tuple[str, ...] = ("lanekit.serving.preflight : Plan the lane",)) -> set[str]:
    """Hosts that reported a change in a task not named in ``ignore`` (prefixes). Writing the plan
    file on the controller shows as a change of the first host and says nothing about the nodes."""
    hosts, current = set(), None
    for line in ANSI.sub("", output).splitlines():
        match = re.match(r"^TASK \[(.*)\] \*+", line)
        if match:
            current = match.group(1)
            continue
        match = re.match(r"^changed: \[([^\]\s]+)", line)
        if match and current and not current.startswith(ignore):
            hosts.add(match.group(1))
    return hosts


def failure_text(output: str) -> str:
    """The msg lines of failed tasks, joined (what the user reads)."""
    text = ANSI.sub("", output)
    return "\n".join(line for line in text.splitlines() if "FAILED" in line or "msg" in line or "fatal" in line)


def docker(node: str, *argv: str, check: bool = True) -> subprocess.CompletedProcess:
    """The docker CLI of one simulated node."""
    return subprocess.run(["docker", "exec", node, "docker", *argv], capture_output=True, text=True, check=check)


def forget_killed_payload(container: str, module: str) -> None:
    """Remove what a module killed with SIGKILL leaves: Ansible's AnsiballZ payload directory in the
    node's /tmp (removed in a finally that a killed process never runs). A node that really died
    restarts with an empty /tmp; the tests that kill a module on purpose call this so that scenario
    11's "nothing left in a shared temp dir", which is about what lanekit leaves, is not answered by
    the test's own kill."""
    subprocess.run(["docker", "exec", container, "sh", "-c", f"rm -rf /tmp/ansible_lanekit.serving.{module}_payload_*"],
                   check=True)
    # An async task's job directory in the login user's Ansible temp dir (its wrapper was killed too).
    subprocess.run(["docker", "exec", container, "sh", "-c",
                    f"grep -l . /home/*/.ansible/tmp/ansible-tmp-*/AnsiballZ_{module}.py 2>/dev/null"
                    " | xargs -r -n1 dirname | xargs -r rm -rf"], check=False)


def rank_containers(node: str, lane: str | None = None) -> list[dict]:
    proc = docker(node, "ps", "-a", "--filter", f"label=io.lanekit.lane={lane or LANE}", "--format", "{{json .}}")
    return [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]


def lane_containers(lane: str | None = None) -> dict[str, tuple[str, str]]:
    """{container name: (id, state)} of a lane's ranks over all nodes."""
    return {c["Names"]: (c["ID"], c["State"]) for node in NODES for c in rank_containers(node, lane)}


def plan(lane: str | None = None) -> dict:
    with open(os.path.join(ROOT, "reports", lane or LANE, "plan.json"), encoding="utf-8") as fh:
        return json.load(fh)


def flat(output: str) -> str:
    """The output with colours removed and every run of white space one space: the YAML callback
    wraps long messages, and a sentence must be found wherever the line broke."""
    return re.sub(r"\s+", " ", ANSI.sub("", output))


def assert_no_traceback(output: str) -> None:
    at = output.find("Traceback (most recent call last)")
    # The task that printed it and the traceback itself: the failure says where to look.
    assert at < 0, f"a traceback reached the user: {flat(output[max(0, at - 600):at + 2400])}"


def record_timing(what: str, seconds: float, detail: str = "") -> None:
    """Append how long a scenario's playbook took to reports/scenario-timings.txt (for the notes;
    nothing asserts on it)."""
    os.makedirs(os.path.join(ROOT, "reports"), exist_ok=True)
    with open(os.path.join(ROOT, "reports", "scenario-timings.txt"), "a", encoding="utf-8") as fh:
        fh.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {what}: playbook {seconds:.0f} s{'; ' + detail if detail else ''}\n")


def api_status(node: str, port: int, key: str | None, path: str = "/v1/models") -> int:
    """HTTP status of GET <path> on a node's loopback, with or without the API key."""
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    script = (f"import urllib.request,urllib.error\nreq=urllib.request.Request('http://127.0.0.1:{port}{path}',"
              f"headers={headers!r})\ntry:\n print(urllib.request.urlopen(req,timeout=10).status)\n"
              "except urllib.error.HTTPError as e:\n print(e.code)")
    proc = subprocess.run(["docker", "exec", node, "python3", "-c", script], capture_output=True, text=True,
                          check=True)
    return int(proc.stdout.strip())


def cmdlines_holding(node: str, container: str, word: str) -> list[str]:
    """The command lines of the processes in a rank container that hold ``word`` (what `ps` shows)."""
    script = ("import glob\nfor p in glob.glob('/proc/[0-9]*/cmdline'):\n try:\n  t=open(p,'rb').read()\n"
              " except OSError:\n  continue\n print(t.replace(b'\\0',b' ').decode('utf-8','replace'))")
    proc = docker(node, "exec", container, "python3", "-c", script)
    return [line[:200] for line in proc.stdout.splitlines() if word in line]


def files_holding(root: str, words: tuple[str, ...]) -> list[str]:
    """Every ``path: word`` for a file under ``root`` whose bytes hold one of ``words`` (a secret that
    reached a report, a plan or an archive)."""
    found = []
    for base, _dirs, files in os.walk(root):
        for name in files:
            path = os.path.join(base, name)
            with open(path, "rb") as handle:
                data = handle.read()
            found += [f"{path}: {w}" for w in words if w.encode() in data]
    return found
