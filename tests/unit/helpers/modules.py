"""Run a module file the way Ansible does, stage a small model with it, and check a module's
DOCUMENTATION against its argument spec (shared by the weights modules' tests)."""
from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from ansible_collections.lanekit.serving.plugins.module_utils._weights import _staging

BASE = str(Path(_staging.__file__).parents[6])
MODULES = Path(_staging.__file__).parents[2] / "modules"
REV = "0123456789abcdef0123456789abcdef01234567"


def run_module(name, args, check=False, tmp=None):
    """Run a module file the way Ansible does (args file), return its JSON result."""
    a = dict(args)
    if check:
        a["_ansible_check_mode"] = True
    a.setdefault("_ansible_tmpdir", str(tmp) if tmp else None)
    a.setdefault("_ansible_remote_tmp", str(tmp) if tmp else "/tmp")
    argsfile = Path(tmp or "/tmp") / f"args-{name}.json"
    argsfile.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": a}))
    env = dict(os.environ, PYTHONPATH=BASE + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.run([sys.executable, str(MODULES / (name + ".py")), str(argsfile)], capture_output=True,
                       text=True, env=env, timeout=120, check=False)
    out = p.stdout.strip().splitlines()
    assert out, p.stderr
    return json.loads(out[-1])


def stage_local_model(tmp_path: Path) -> Path:
    """Stage a two-shard consolidated model from tmp_path/src with weights_stage; return its dest."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "params.json").write_text('{"dim": 8}')
    (src / "tekken.json").write_text('{"vocab": []}')
    (src / "consolidated-00001-of-00002.safetensors").write_bytes(os.urandom(3 << 20))
    (src / "consolidated-00002-of-00002.safetensors").write_bytes(os.urandom(2 << 20))
    (src / "consolidated.safetensors.index.json").write_text(json.dumps({"weight_map": {
        "a": "consolidated-00001-of-00002.safetensors", "b": "consolidated-00002-of-00002.safetensors"}}))
    dest = tmp_path / "nfs" / "model"
    dest.parent.mkdir()
    r = run_module("weights_stage", {"dest": str(dest), "source": "local", "local_path": str(src),
                                     "revision": REV, "model_id": "org/m"}, tmp=tmp_path)
    assert r["changed"] and not r.get("failed"), r
    return dest


def assert_documentation_matches_argument_spec(name: str) -> None:
    mod = importlib.import_module("ansible_collections.lanekit.serving.plugins.modules." + name)
    doc = yaml.safe_load(mod.DOCUMENTATION)
    yaml.safe_load(mod.EXAMPLES)
    yaml.safe_load(mod.RETURN)
    spec = mod.argument_spec()
    assert set(doc["options"]) == set(spec)
    for opt, d in doc["options"].items():
        s = spec[opt]
        assert d["type"] == s["type"], opt
        assert d.get("default") == s.get("default"), opt
        assert d.get("choices") == s.get("choices"), opt
        assert bool(d.get("required")) == bool(s.get("required")), opt
        assert d.get("elements") == s.get("elements"), opt
    assert set(doc["attributes"]) == {"check_mode", "diff_mode", "idempotent"}
