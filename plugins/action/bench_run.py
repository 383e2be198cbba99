# Copyright: lanekit developers
# Apache-2.0
"""Run the bench tools against a serving lane, offline, with a live progress line.

One job: the measurement. Checks the gate's "before" half (every rank up on the plan's hash,
the API answering), writes the prompt corpus into a private HOME where llama-benchy finds it
cached, runs tool-eval-bench (which drives llama-benchy for the throughput grid) from the bench
virtualenv with a scrubbed environment, prints "scenario n of N" while it runs, and leaves the
tools' raw outputs plus ``run.json`` (settings, times, the "before" snapshot, the tool's
summary) in the run directory. ``bench_report`` closes the gate and writes the report.

With ``bench_host`` the task is delegated to that host: the inputs are prepared here as always, then
copied into a private run directory there (``bench_exec``), the tool runs there detached from the
host's bench venv (``bench_host_venv`` made it) with the same scrubbed environment, this action
polls its event streams for the progress line, and fetches ``raw/`` back before removing the run
directory there.
"""
from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from datetime import UTC, datetime
from typing import Any

from ansible.errors import AnsibleError
from ansible.utils.display import Display

from ansible_collections.lanekit.serving.plugins.module_utils._bench import _api as api
from ansible_collections.lanekit.serving.plugins.module_utils._bench import _host as bhost
from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.module_utils._files import atomic_write
from ansible_collections.lanekit.serving.plugins.module_utils._redact import REDACTED
from ansible_collections.lanekit.serving.plugins.module_utils._workdir import private_dir
from ansible_collections.lanekit.serving.plugins.plugin_utils import _become_files as becomefiles
from ansible_collections.lanekit.serving.plugins.plugin_utils._action import LanekitAction
from ansible_collections.lanekit.serving.plugins.plugin_utils._bench import _corpus as corpus
from ansible_collections.lanekit.serving.plugins.plugin_utils._bench import _gate as gate
from ansible_collections.lanekit.serving.plugins.plugin_utils._bench import _report as report
from ansible_collections.lanekit.serving.plugins.plugin_utils._bench import _settings as bset

display = Display()

ARGUMENT_SPEC = dict(
    plan=dict(type="dict", required=True),
    lane_settings=dict(type="raw"),
    cli_settings=dict(type="raw"),
    run_dir=dict(type="path"),
    venv=dict(type="path"),
    tokenizer=dict(type="path"),
    containers=dict(type="list", elements="dict", default=[]),
    unreachable=dict(type="list", elements="str", default=[]),
    api_address=dict(type="str"),
    api_key=dict(type="str", no_log=True),
    poll_s=dict(type="float", default=2.0),
    bench_host=dict(type="str", default=""),
    host_venv=dict(type="str", default=""),
    host_root=dict(type="str", default=""),
    # Only merge and check the settings (the bench role's first step, before any host is contacted).
    settings_only=dict(type="bool", default=False),
)


def utc_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def sha256_file(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _private_open(path: str, flags: int) -> int:
    """``open``'s opener for a new file that is 0600 from its first byte, whatever the umask."""
    return os.open(path, flags, 0o600)


def private_run_dir(paths: list[str]) -> None:
    """Make each directory 0700, also one made earlier with the umask (the role fetched into inputs/ already)."""
    for path in paths:
        os.makedirs(path, mode=0o700, exist_ok=True)
        os.chmod(path, 0o700)


def redact_bytes(data: bytes, secrets: list[str]) -> bytes:
    """``data`` with every known secret value (the API key) replaced, whatever the file's format."""
    for value in secrets:
        data = data.replace(value.encode("utf-8"), REDACTED.encode("ascii"))
    return data


def seal_run_dir(run_dir: str, secrets: list[str]) -> None:
    """After a run: every directory of ``run_dir`` 0700, every file 0600 and without a known secret value.

    The tools write what they like (a config echo with the key, request headers) with the umask's modes;
    links they made are left alone (lstat), so no chmod or rewrite lands outside the run directory."""
    os.chmod(run_dir, 0o700)
    for root, dirs, files in os.walk(run_dir):
        for name in dirs:
            path = os.path.join(root, name)
            if not os.path.islink(path):
                os.chmod(path, 0o700)
        for name in files:
            path = os.path.join(root, name)
            if os.path.islink(path) or not os.path.isfile(path):
                continue
            os.chmod(path, 0o600)
            if secrets and _holds_secret(path, secrets):
                tmp = f"{path}.redacting"
                if os.path.lexists(tmp):
                    os.unlink(tmp)  # a leftover of a killed run (or a link a tool made): never written through
                with open(path, "rb") as src, open(tmp, "xb", opener=_private_open) as dst:
                    for line in src:  # a line at a time: raw outputs can be large
                        dst.write(redact_bytes(line, secrets))
                os.replace(tmp, path)


def _holds_secret(path: str, secrets: list[str]) -> bool:
    wanted = [v.encode("utf-8") for v in secrets]
    with open(path, "rb") as handle:
        return any(any(v in line for v in wanted) for line in handle)


def mark_unreachable(containers: list[dict], unreachable: list[str], plan: dict) -> list[dict]:
    """rank_status results plus an 'unreachable' entry for each rank on a node that did not answer."""
    out = list(containers)
    for spec in plan.get("ranks") or []:
        if spec.get("host") in unreachable:
            out.append({"name": spec.get("container_name"), "unreachable": True})
    return out


class ActionModule(LanekitAction):
    ARGUMENT_SPEC = ARGUMENT_SPEC

    def lanekit_run(self, args: dict[str, Any], task_vars: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
        self._task_vars = task_vars
        return self._run(args, result)

    def lanekit_cleanup(self, args: dict[str, Any]) -> None:
        if args["bench_host"] and not args["settings_only"]:
            self._remove_tmp_path(self._connection._shell.tmpdir)

    def _run(self, args: dict, result: dict) -> dict:
        plan = args["plan"]
        lane = plan.get("lane", "?")
        settings = bset.merge(args.get("lane_settings"), args.get("cli_settings"), lane)
        if args["settings_only"]:
            result.update(changed=False, settings=settings, msg="the bench settings are valid")
            return result
        missing = [key for key in ("run_dir", "venv", "tokenizer") if not args.get(key)]
        if missing:
            raise LanekitError(f"bench_run needs {', '.join(missing)} (the bench role sets them).")
        remote = bool(args["bench_host"])
        if remote and not (args["host_venv"] and args["host_root"]):
            raise LanekitError("bench_run with bench_host needs host_venv and host_root (the bench role sets both).")
        # On a bench_host the tools run from the host's venv; the controller's only draws the chart. In
        # check mode bench_venv made no venv yet and none is needed (nothing runs).
        problem = "" if remote or self._play_context.check_mode else api.venv_problem(args["venv"])
        if problem:
            raise LanekitError(problem)
        model = (plan.get("api") or {}).get("served_model_name", "")
        base_url = api.api_url(plan, args.get("api_address"))
        before = gate.rank_snapshot(plan, mark_unreachable(args["containers"], args["unreachable"], plan))
        if remote:  # the API as the bench host reaches it: that is where the tools send their requests
            api_before = self._remote("api", {"root": "/nonexistent", "base_url": base_url, "model": model,
                                              "api_key": args.get("api_key")}, args["bench_host"])["check"]
        else:
            api_before = api.check_api(base_url, model, args.get("api_key"))
        problems = gate.check_before(lane, plan.get("plan_hash", ""), before, api_before)
        if problems:
            raise LanekitError(f"Lane {lane} cannot be benchmarked now: " + " ".join(problems))
        if not os.path.isfile(args["tokenizer"]):
            raise LanekitError(f"No tokenizer at {args['tokenizer']}: the staged model directory of lane {lane} has no "
                               "tokenizer.json; set bench_settings.tokenizer (or the lane's bench.tokenizer) to a "
                               "tokenizer.json on the controller.")
        if self._play_context.check_mode:
            result.update(skipped=True, msg="Check mode: the gate passed; no bench was run.")
            return result

        run_dir = args["run_dir"]
        raw = os.path.join(run_dir, "raw")
        inputs = os.path.join(run_dir, "inputs")
        # The run's outputs may hold what the tools echoed (the key, request headers): private from the start.
        private_run_dir([run_dir, raw, inputs])
        secrets = [str(args["api_key"])] if args.get("api_key") else []
        text = corpus.corpus_text(corpus.corpus_words_needed(settings["depths"], settings["pp"],
                                                             settings["concurrency"]), settings["seed"])
        corpus_path = os.path.join(inputs, corpus.CORPUS_NAME)
        atomic_write(corpus_path, text, mode=0o600)
        tokenizer_copy = os.path.join(inputs, "tokenizer.json")
        if os.path.abspath(args["tokenizer"]) != os.path.abspath(tokenizer_copy):
            shutil.copyfile(args["tokenizer"], tokenizer_copy)
            os.chmod(tokenizer_copy, 0o600)

        url = bset.book_url()
        corpus_cache_name = hashlib.md5(url.encode(), usedforsecurity=False).hexdigest() + ".txt"
        host = base_url.split("//", 1)[1].rsplit(":", 1)[0].strip("[]")
        paths = {"json_file": os.path.join(raw, "tool-eval-bench.json"),
                 "output_dir": os.path.join(raw, "tool-eval-bench-runs"),
                 "progress_path": os.path.join(raw, "llama-benchy-progress.jsonl"),
                 "events": os.path.join(raw, "tool-eval-bench-events.jsonl"),
                 "log": os.path.join(raw, "tool-eval-bench.log")}
        if remote:
            argv, rc, error, started, ended, tools = self._run_remote(
                args, settings, plan, base_url, model, host, url, corpus_cache_name, corpus_path, tokenizer_copy, paths)
        else:
            argv, rc, error, started, ended = self._run_local(
                args, settings, plan, base_url, model, host, url, corpus_cache_name, corpus_path, tokenizer_copy, paths)
            tools = api.tool_versions(args["venv"])

        tool_result = None
        if os.path.isfile(paths["json_file"]):
            try:
                with open(paths["json_file"], encoding="utf-8") as fh:
                    tool_result = json.load(fh)
            except (OSError, ValueError):
                error = error or "tool-eval-bench wrote an unreadable result file (raw/tool-eval-bench.json)."
        summary = report.tool_summary(tool_result, rc, error)
        record = {"lane": lane, "settings": settings, "started": started, "ended": ended, "api_url": base_url,
                  "argv": argv, "before": before, "tool": summary,
                  "tokenizer_sha256": sha256_file(tokenizer_copy), "corpus_sha256": sha256_file(corpus_path),
                  "tools": tools}
        if remote:
            record["bench_host"] = args["bench_host"]
        atomic_write(os.path.join(run_dir, "run.json"), json.dumps(record, indent=2, sort_keys=True) + "\n",
                     mode=0o600)
        seal_run_dir(run_dir, secrets)
        result.update(changed=True, run_dir=run_dir, tool=summary, started=started, ended=ended, api_url=base_url,
                      msg=f"bench {lane}: tools finished ({summary.get('status') or 'no result'}) in {run_dir}")
        return result

    def _run_local(self, args: dict, settings: dict, plan: dict, base_url: str, model: str, host: str, url: str,
                   corpus_cache_name: str, corpus_path: str, tokenizer_copy: str,
                   paths: dict[str, str]) -> tuple[list[str], int | None, str, str, str]:
        """The tools on the controller: (argv, rc, error, started, ended)."""
        # A private HOME: llama-benchy's corpus cache, no user .env, no HF cache or token.
        home = private_dir(tempfile.mkdtemp(prefix="lanekit-bench-"), "bench home")
        try:
            cache = os.path.join(home, ".cache", "llama-benchy")
            os.makedirs(cache, mode=0o700)
            shutil.copyfile(corpus_path, os.path.join(cache, corpus_cache_name))
            work = os.path.join(home, "work")  # the tool's cwd: its ./data sqlite and .env lookup stay here
            os.makedirs(work, mode=0o700)
            argv = bset.tool_argv(settings, base_url=base_url, model=model, engine=plan.get("engine", "vllm"),
                                  tokenizer=tokenizer_copy, corpus_url=url, progress_path=paths["progress_path"],
                                  json_file=paths["json_file"], output_dir=paths["output_dir"])
            env = bset.offline_env(f"{args['venv']}/bin:/usr/local/bin:/usr/bin:/bin", home, host, args.get("api_key"))
            started = utc_now()
            rc, error = self._execute(argv, env, work, paths, settings, plan.get("lane", "?"), args["poll_s"])
            return argv, rc, error, started, utc_now()
        finally:
            shutil.rmtree(home, ignore_errors=True)

    def _remote(self, mode: str, module_args: dict, bench_host: str) -> dict:
        out = self._execute_module(module_name="lanekit.serving.bench_exec", module_args=dict(module_args, mode=mode),
                                   task_vars=self._task_vars)
        if out.get("failed") or out.get("unreachable"):
            raise LanekitError(f"bench_host {bench_host}: the bench step '{mode}' failed: "
                               f"{str(out.get('msg') or 'no message').strip()[:300]}")
        return out

    def _run_remote(self, args: dict, settings: dict, plan: dict, base_url: str, model: str, host: str, url: str,
                    corpus_cache_name: str, corpus_path: str, tokenizer_copy: str,
                    paths: dict[str, str]) -> tuple[list[str], int | None, str, str, str, dict]:
        """The tools on the bench_host: (argv, rc, error, started, ended, tool versions)."""
        bench_host, venv = args["bench_host"], args["host_venv"]
        lane = plan.get("lane", "?")
        rp = bhost.run_paths(f"{args['host_root'].rstrip('/')}/{lane}-{os.path.basename(args['run_dir'].rstrip('/'))}")
        self._remote("prepare", {"root": rp["root"]}, bench_host)
        try:
            # Written as the become user: the run's directories on the bench host are root's.
            try:
                becomefiles.put(self, self._task_vars, tokenizer_copy, rp["tokenizer"])
                becomefiles.put(self, self._task_vars, corpus_path, f"{rp['cache']}/{corpus_cache_name}")
            except AnsibleError as exc:
                raise LanekitError(f"bench_host {bench_host}: copying the tokenizer and corpus failed ({exc}).") from exc
            argv = bset.tool_argv(settings, base_url=base_url, model=model, engine=plan.get("engine", "vllm"),
                                  tokenizer=rp["tokenizer"], corpus_url=url, progress_path=rp["progress_path"],
                                  json_file=rp["json_file"], output_dir=rp["output_dir"])
            # The key goes as its own no_log argument: the module adds it to the environment there.
            env = bset.offline_env(f"{venv}/bin:/usr/local/bin:/usr/bin:/bin", rp["home"], host)
            started = utc_now()
            pid = int(self._remote("start", {"root": rp["root"], "argv": argv, "env": env,
                                             "api_key": args.get("api_key")}, bench_host)["pid"])
            rc, error = self._watch_remote(bench_host, rp["root"], pid, paths, settings, lane, args["poll_s"])
            ended = utc_now()
            collected = self._remote("collect", {"root": rp["root"], "venv": venv}, bench_host)
            raw = os.path.dirname(paths["log"])
            for rel, data in (collected.get("files") or {}).items():
                target = os.path.normpath(os.path.join(raw, rel))
                if not target.startswith(raw + os.sep):
                    continue  # a name that leaves raw/ is never written
                os.makedirs(os.path.dirname(target), mode=0o700, exist_ok=True)
                # Redacted before it touches the controller's disk, and private from the first byte.
                secrets = [str(args["api_key"])] if args.get("api_key") else []
                atomic_write(target, redact_bytes(base64.b64decode(data), secrets), mode=0o600)
            return argv, rc, error, started, ended, dict(collected.get("tools") or {})
        finally:
            self._execute_module(module_name="lanekit.serving.bench_exec",
                                 module_args={"mode": "cleanup", "root": rp["root"]}, task_vars=self._task_vars)

    def _watch_remote(self, bench_host: str, root: str, pid: int, paths: dict[str, str], settings: dict, lane: str,
                      poll_s: float) -> tuple[int | None, str]:
        """Poll the remote run: mirror its event streams here for the progress line, stop it on timeout."""
        progress = api.Progress(lane, bset.scenario_count(settings) * settings["runs"])
        deadline = time.monotonic() + settings["run_timeout_s"]
        mirrors = {os.path.basename(paths[k]): paths[k] for k in ("events", "progress_path", "log")}
        offsets = dict.fromkeys(mirrors, 0)
        for path in mirrors.values():
            atomic_write(path, b"", mode=0o600)
        last = ""
        while True:
            if time.monotonic() > deadline:
                self._remote("stop", {"root": root, "pid": pid}, bench_host)
                return None, (f"tool-eval-bench ran longer than run_timeout_s ({settings['run_timeout_s']} s) on "
                              f"bench_host {bench_host} and was stopped.")
            time.sleep(poll_s)
            state = self._remote("poll", {"root": root, "pid": pid, "offsets": offsets}, bench_host)
            for name, chunk in (state.get("chunks") or {}).items():
                data = base64.b64decode(chunk.get("data") or "")
                if name in mirrors and data:
                    with open(mirrors[name], "ab") as fh:
                        fh.write(data)
                    offsets[name] += len(data)
            last = self._show(progress, paths, last)
            if not state.get("running"):
                if state.get("rc") is None:
                    return None, f"tool-eval-bench on bench_host {bench_host} stopped without an exit code."
                return int(state["rc"]), ""

    def _execute(self, argv: list[str], env: dict[str, str], cwd: str, paths: dict[str, str], settings: dict,
                 lane: str, poll_s: float) -> tuple[int | None, str]:
        """Run the tool, print progress when it changes, stop it after run_timeout_s."""
        progress = api.Progress(lane, bset.scenario_count(settings) * settings["runs"])
        deadline = time.monotonic() + settings["run_timeout_s"]
        last = ""
        with open(paths["log"], "wb", opener=_private_open) as log, \
                open(paths["events"], "wb", opener=_private_open) as events:
            proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=log, stderr=events,  # noqa: S603 - argv list
                                    stdin=subprocess.DEVNULL, start_new_session=True)
            while proc.poll() is None:
                if time.monotonic() > deadline:
                    os.killpg(proc.pid, signal.SIGTERM)
                    try:
                        proc.wait(timeout=20)
                    except subprocess.TimeoutExpired:
                        os.killpg(proc.pid, signal.SIGKILL)
                        proc.wait()
                    return proc.returncode, (f"tool-eval-bench ran longer than run_timeout_s "
                                             f"({settings['run_timeout_s']} s) and was stopped.")
                time.sleep(poll_s)
                last = self._show(progress, paths, last)
        self._show(progress, paths, last)  # where it ended, even when the last step was quicker than a poll
        return proc.returncode, ""

    @staticmethod
    def _show(progress: api.Progress, paths: dict, last: str) -> str:
        progress.feed(paths["events"], paths["progress_path"])
        line = progress.line()
        if line != last:
            display.display(line)
        return line
