# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The bench's controller-side helpers: the API check of the gate, the tools' virtualenv, the
collection's version, the progress line read from the tools' event streams.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import urllib.error
import urllib.request
from typing import Any

from ansible_collections.lanekit.serving.plugins.module_utils._http import direct_opener

TOOLS = ("tool-eval-bench", "llama-benchy")


def api_url(plan: dict[str, Any], address: str | None = None) -> str:
    """The lane's OpenAI base URL (…/v1) from the plan (the head's fabric address)."""
    api = plan.get("api") or {}
    host = address or api.get("address") or api.get("host") or ""
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"http://{host}:{api.get('port')}/v1"


def check_api(base_url: str, model: str, api_key: str | None = None, timeout: float = 10.0) -> dict[str, Any]:
    """GET /v1/models directly (no proxy): {ok, url, error, models}."""
    req = urllib.request.Request(f"{base_url}/models")
    if api_key:
        req.add_header("Authorization", f"Bearer {api_key}")
    opener = direct_opener()  # no proxy, no redirect: the key goes to this address only
    try:
        with opener.open(req, timeout=timeout) as resp:
            body = json.loads(resp.read().decode("utf-8", "replace") or "{}")
    except urllib.error.HTTPError as exc:
        return {"ok": False, "url": base_url, "error": f"HTTP {exc.code} from /v1/models", "models": []}
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        return {"ok": False, "url": base_url, "error": f"{reason}", "models": []}
    models = [m.get("id") for m in (body.get("data") or []) if isinstance(m, dict)]
    if model not in models:
        return {"ok": False, "url": base_url, "models": models,
                "error": f"/v1/models does not list {model!r} (it lists {', '.join(map(str, models)) or 'nothing'})"}
    return {"ok": True, "url": base_url, "error": "", "models": models}


def venv_problem(venv: str, requirements: str = "requirements-bench.txt") -> str:
    """A sentence when the bench virtualenv lacks a tool, else ''."""
    missing = [t for t in TOOLS if not os.access(os.path.join(venv, "bin", t), os.X_OK)]
    if not os.access(os.path.join(venv, "bin", "python"), os.X_OK):
        missing.append("python")
    if missing:
        # Both fixes work from an installed collection (no checkout, no make).
        return (f"The bench virtualenv {venv} lacks {', '.join(missing)}: install the pinned tools into it "
                f"({venv}/bin/python -m pip install -r {requirements}), or leave bench_venv unset and the bench "
                "makes its own on first use.")
    return ""


def tool_versions(venv: str) -> dict[str, str]:
    """Installed versions from the venv's dist-info directories (no import, no subprocess)."""
    out: dict[str, str] = {}
    libs = os.path.join(venv, "lib")
    names = {"tool_eval_bench": "tool-eval-bench", "llama_benchy": "llama-benchy", "matplotlib": "matplotlib"}
    try:
        pydirs = [os.path.join(libs, d, "site-packages") for d in os.listdir(libs)]
    except OSError:
        return out
    for site in pydirs:
        try:
            entries = os.listdir(site)
        except OSError:
            continue
        for entry in entries:
            m = re.match(r"^([A-Za-z0-9_.]+)-([^-]+)\.dist-info$", entry)
            if m and m.group(1).replace("-", "_").lower() in names:
                out[names[m.group(1).replace("-", "_").lower()]] = m.group(2)
    return out


def collection_version(start: str) -> str:
    """The collection's version: MANIFEST.json (installed) or galaxy.yml (checkout) above ``start``."""
    here = os.path.abspath(start)
    for _unused in range(6):
        manifest = os.path.join(here, "MANIFEST.json")
        galaxy = os.path.join(here, "galaxy.yml")
        if os.path.isfile(manifest):
            try:
                with open(manifest, encoding="utf-8") as fh:
                    return str(json.load(fh)["collection_info"]["version"])
            except (OSError, ValueError, KeyError, TypeError):
                return "unknown"
        if os.path.isfile(galaxy):
            with open(galaxy, encoding="utf-8") as fh:
                m = re.search(r"^version:\s*['\"]?([^'\"\s]+)", fh.read(), re.M)
            return m.group(1) if m else "unknown"
        here = os.path.dirname(here)
    return "unknown"


class Progress:
    """Reads the tools' event streams and says where the run is, one line.

    tool-eval-bench writes {"event": "scenario_start", "index", "total", "scenario_id"} lines;
    llama-benchy (--emit-progress) writes {"type": "request_start", "context_size",
    "concurrency", "run_index"} lines.
    """

    def __init__(self, lane: str, throughput_total: int) -> None:
        self.lane = lane
        self.throughput_total = throughput_total
        self.points: list[tuple[int, int, int]] = []
        self.scenario: tuple[int, int, str] | None = None
        self.offsets: dict[str, int] = {}

    def _new_lines(self, path: str) -> list[str]:
        try:
            with open(path, encoding="utf-8", errors="replace") as fh:
                fh.seek(self.offsets.get(path, 0))
                data = fh.read()
        except OSError:
            return []
        complete = data[:data.rfind("\n") + 1]
        self.offsets[path] = self.offsets.get(path, 0) + len(complete.encode("utf-8"))
        return complete.splitlines()

    def feed(self, events_path: str, benchy_path: str) -> None:
        for line in self._new_lines(benchy_path):
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            if ev.get("type") == "request_start":
                key = (int(ev.get("context_size") or 0), int(ev.get("concurrency") or 1), int(ev.get("run_index") or 0))
                if key not in self.points:
                    self.points.append(key)
        for line in self._new_lines(events_path):
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            if isinstance(ev, dict) and ev.get("event") == "scenario_start":
                self.scenario = (int(ev.get("index") or 0) + 1, int(ev.get("total") or 0), str(ev.get("scenario_id")))

    def line(self) -> str:
        if self.scenario:
            n, total, sid = self.scenario
            return f"bench {self.lane}: quality scenario {n} of {total} ({sid}); throughput grid done"
        if self.points:
            depth, conc, run = self.points[-1]
            return (f"bench {self.lane}: throughput scenario {len(self.points)} of {self.throughput_total} "
                    f"(depth {depth}, concurrency {conc}, run {run})")
        return f"bench {self.lane}: starting (warm-up, latency measurement)"


def draw_chart(venv: str, out_png: str, report_paths: list[str]) -> tuple[list[str], str]:
    """Run plugin_utils/_bench/_chart.py with the bench venv's Python: (series labels, error sentence)."""
    plugins = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    script = os.path.join(plugins, "plugin_utils", "_bench", "_chart.py")
    argv = [os.path.join(venv, "bin", "python"), script, out_png, *report_paths]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False,  # noqa: S603
                          env={"PATH": "/usr/bin:/bin", "MPLBACKEND": "Agg", "HOME": os.path.dirname(out_png),
                               "MPLCONFIGDIR": os.path.join(os.path.dirname(out_png), ".mpl")})
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        return [], f"The chart could not be drawn ({tail[0][:300]})."
    try:
        return json.loads(proc.stdout.strip().splitlines()[-1])["series"], ""
    except (ValueError, KeyError, IndexError):
        return [], "The chart script printed no series."
