"""The secret channel (plugin_utils/_plan/_secrets.py, _secrets.py, _redact.py) and the API lane keys as the plan renders them:
lanekit_api_key and lanekit_secret_env never in the plan, only names, the env file path and a hash."""
from __future__ import annotations

import json

import pytest

from ansible_collections.lanekit.serving.plugins.module_utils import _redact, _secrets
from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.plugin_utils._plan import _secrets as _plan_secrets
from tests.unit.helpers.plans import SGLANG, VLLM, plan

KEY = "sk-lanekit-unit-7f3a9c"
TOKEN = "hf_unitSECRETvalue42"


def keyed(lane=VLLM, key=KEY, env=None, **kw):
    extra = {"lanekit_api_key": key}
    if env is not None:
        extra["lanekit_secret_env"] = env
    result, findings = plan(lane, extra_vars=extra, **kw)
    assert findings["errors"] == [], findings["errors"]
    return result


def test_a_plan_without_secrets_has_no_secret_channel():
    base, _unused = plan(VLLM)
    assert "secrets" not in base and base["api"]["key_required"] is False
    assert all("secret_env_file" not in r and "env_file" not in r["container"] for r in base["ranks"])


@pytest.mark.parametrize("lane", [VLLM, SGLANG])
def test_no_secret_value_is_in_the_plan(lane):
    result = keyed(lane, env={"HF_TOKEN": TOKEN})
    text = json.dumps(result)
    assert KEY not in text and TOKEN not in text
    assert result["secrets"]["env_names"] == ["HF_TOKEN"]
    assert result["secrets"]["env_file"] == f"/etc/lanekit/secrets/{lane}.env"
    assert result["api"]["key_required"] is True
    for rank in result["ranks"]:
        assert rank["container"]["env_file"] == result["secrets"]["env_file"]
        argv = rank["docker_argv"]
        assert argv[argv.index("--env-file") + 1] == result["secrets"]["env_file"]
        assert "HF_TOKEN" in rank["secret_env_names"]


def test_vllm_reads_the_key_from_its_environment_and_starts_behind_the_key_guard():
    result = keyed(VLLM)
    head = result["ranks"][0]
    assert result["secrets"]["api_key_env"] == "VLLM_API_KEY"
    assert "--api-key" not in head["command"] and "VLLM_API_KEY" in head["secret_env_names"]
    # vLLM's own check leaves /tokenize, /pooling ... open: every rank starts behind KeyGuard.
    assert head["entrypoint"] == ["python3"]
    assert head["command"][:4] == ["-c", _plan_secrets.key_guard_program(), "--middleware", "vllm"]
    assert all(rank["command"][2] == "--middleware" for rank in result["ranks"])
    assert KEY not in json.dumps(result)


def test_vllm_without_a_key_starts_as_the_image_says():
    base, _unused = plan(VLLM)
    assert base["ranks"][0]["entrypoint"] == ["vllm"] and "--middleware" not in base["ranks"][0]["command"]


def test_sglang_gets_the_flag_through_a_fixed_program_that_holds_no_value():
    result = keyed(SGLANG)
    head = result["ranks"][0]
    assert result["secrets"]["api_key_env"] == "LANEKIT_API_KEY"
    # NVIDIA's entrypoint (sets up, then exec "$@") stays in front of the key's program.
    assert head["entrypoint"] == ["/opt/nvidia/nvidia_entrypoint.sh"]
    assert head["command"][:4] == ["python3", "-c", _plan_secrets.KEY_ARGV_PROGRAM, "--api-key"]
    assert head["command"][4:6] == ["sglang", "serve"]  # the engine's own argv follows, unchanged
    assert KEY not in json.dumps(result)


# --- the key's program, run for real: the key reaches the engine's sys.argv, never a kernel argv ---

ENGINE = """import json, os, sys
with open("/proc/self/cmdline", "rb") as handle:
    cmdline = handle.read().decode()
with open(os.environ["REPORT"], "w") as handle:
    json.dump({"argv": sys.argv[1:], "cmdline": cmdline, "env": os.environ.get("LANEKIT_API_KEY")}, handle)
"""


def run_key_program(tmp_path, command, key=KEY, extra_env=None):
    import os
    import subprocess
    import sys
    env = dict(os.environ, PATH=f"{tmp_path}:{os.environ['PATH']}", REPORT=str(tmp_path / "report.json"),
               PYTHONPATH=str(tmp_path), **(extra_env or {}))
    if key is not None:
        env["LANEKIT_API_KEY"] = key
    entry, wrapped = _plan_secrets.key_flag_wrap("--api-key", [], command)
    argv = [sys.executable if entry == ["python3"] else entry[0], *wrapped]
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=False)
    report = tmp_path / "report.json"
    return proc, (json.loads(report.read_text()) if report.exists() else None)


def console_script(tmp_path, name, interpreter, body=ENGINE):
    path = tmp_path / name
    path.write_text(f"#!{interpreter}\n{body}")
    path.chmod(0o755)
    return path


def test_the_key_reaches_a_console_script_in_process_and_no_process_argv_holds_it(tmp_path):
    import sys
    console_script(tmp_path, "fake-sglang", sys.executable)
    proc, report = run_key_program(tmp_path, ["fake-sglang", "serve", "--tp", "8"])
    assert proc.returncode == 0, proc.stderr
    assert report["argv"] == ["serve", "--tp", "8", "--api-key", KEY]
    assert KEY not in report["cmdline"], "the key is on the kernel's argv of the engine process"
    assert report["env"] is None, "the carrier variable is left in the engine's environment"


def test_the_key_reaches_python_dash_m_in_process(tmp_path):
    (tmp_path / "fake_launch_server.py").write_text(ENGINE)
    proc, report = run_key_program(tmp_path, ["python3", "-m", "fake_launch_server", "--port", "30000"])
    assert proc.returncode == 0, proc.stderr
    assert report["argv"] == ["--port", "30000", "--api-key", KEY]
    assert KEY not in report["cmdline"]


def test_a_script_of_another_python_is_rerun_under_it_once_with_the_key_still_off_argv(tmp_path):
    import sys
    shim = tmp_path / "python-shim"
    shim.write_text(f'#!/bin/sh\necho shim >> "{tmp_path}/shim.log"\nexec {sys.executable} "$@"\n')
    shim.chmod(0o755)
    console_script(tmp_path, "fake-engine", str(shim))
    proc, report = run_key_program(tmp_path, ["fake-engine", "serve"])
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "shim.log").read_text() == "shim\n", "the shim interpreter ran not exactly once"
    assert report["argv"] == ["serve", "--api-key", KEY] and KEY not in report["cmdline"]


@pytest.mark.parametrize("make, why", [
    (lambda p: console_script(p, "fake-engine", "/bin/sh", "echo $0\n"), "runs under /bin/sh, not Python"),
    (lambda p: None, "not on PATH"),
])
def test_a_program_that_cannot_take_the_key_in_process_stops_with_a_sentence_and_no_key(tmp_path, make, why):
    make(tmp_path)
    proc, report = run_key_program(tmp_path, ["fake-engine", "serve"])
    assert proc.returncode != 0 and report is None
    assert "lanekit: cannot hand the API key to 'fake-engine serve'" in proc.stderr and why in proc.stderr
    assert KEY not in proc.stderr + proc.stdout


def test_a_missing_carrier_stops_before_the_engine_runs(tmp_path):
    import sys
    console_script(tmp_path, "fake-engine", sys.executable)
    proc, report = run_key_program(tmp_path, ["fake-engine", "serve"], key=None)
    assert proc.returncode != 0 and report is None
    assert "LANEKIT_API_KEY is not in the rank's environment" in proc.stderr


def test_a_changed_secret_moves_every_spec_hash():
    one, two = keyed(env={"HF_TOKEN": TOKEN}), keyed(env={"HF_TOKEN": TOKEN + "x"})
    base, _unused = plan(VLLM)
    assert one["plan_hash"] != two["plan_hash"] != base["plan_hash"]
    assert all(a["spec_hash"] != b["spec_hash"] for a, b in zip(one["ranks"], two["ranks"], strict=True))
    assert keyed(env={"HF_TOKEN": TOKEN})["plan_hash"] == one["plan_hash"]


def test_a_lane_that_requires_a_key_refuses_without_one():
    with pytest.raises(LanekitError, match="api.key_required.*lanekit_api_key"):
        plan(VLLM, overrides={"api": {"key_required": True}})
    assert keyed(overrides={"api": {"key_required": True}})["api"]["key_required"]


@pytest.mark.parametrize("key, env, words", [
    ("two words", None, "lanekit_api_key is not a usable key"),
    ("line\nbreak", None, "lanekit_api_key is not a usable key"),
    (KEY, {"HF_TOKEN": "a\nb"}, "lanekit_secret_env.HF_TOKEN must be one line"),
    (KEY, {"1BAD": "x"}, "not an environment variable name"),
    (KEY, {"VLLM_HOST_IP": "x"}, "which the plan sets"),
    (KEY, {"VLLM_API_KEY": "x"}, "from lanekit_api_key"),
    (KEY, ["HF_TOKEN"], "lanekit_secret_env is not a mapping"),
])
def test_bad_secrets_are_sentences_without_the_value(key, env, words):
    with pytest.raises(LanekitError) as err:
        keyed(key=key, env=env)
    assert words in str(err.value)
    assert "a\nb" not in str(err.value) and "two words" not in str(err.value)


def test_the_bind_address_is_a_lane_key():
    result, _unused = plan(VLLM, overrides={"api": {"bind": "10.100.0.11"}})
    head = result["ranks"][0]["command"]
    assert head[head.index("--host") + 1] == "10.100.0.11"
    sglang, _unused = plan(SGLANG, overrides={"api": {"bind": "10.100.0.11"}})
    worker = sglang["ranks"][3]["command"]
    assert worker[worker.index("--host") + 1] == "127.0.0.1"  # a worker cannot bind the head's address
    with pytest.raises(LanekitError, match="api.bind"):
        plan(VLLM, overrides={"api": {"bind": "everywhere"}})


@pytest.mark.parametrize("name", ["mistral\n", "mistral\nFROM evil", "mis tral", "mistral\t", "-dash"])
def test_served_name_is_one_plain_line(name):
    with pytest.raises(LanekitError, match="model.served_name"):
        plan(VLLM, overrides={"model": {"served_name": name}})


def test_the_env_file_is_one_line_per_secret():
    secrets = _secrets.Secrets(api_key=KEY, env={"HF_TOKEN": TOKEN})
    assert _secrets.env_file_text(secrets.file_env("VLLM_API_KEY")) == f"HF_TOKEN={TOKEN}\nVLLM_API_KEY={KEY}\n"


def test_redaction_of_inspect_argv_and_text():
    obj = {"Args": ["--model", "m", "--api-key", KEY, "--hf-token=" + TOKEN],
           "Config": {"Env": ["PATH=/bin", "HF_TOKEN=" + TOKEN, "MY_SECRET=zz", "OTHER=" + KEY],
                      "Cmd": ["--api-key", KEY], "Labels": {"note": "key " + KEY}}}
    out = _redact.redact_inspect(obj, names=["OTHER"], values=[KEY, TOKEN])
    text = json.dumps(out)
    assert KEY not in text and TOKEN not in text and "zz" not in text
    assert "PATH=/bin" in out["Config"]["Env"] and out["Args"][:3] == ["--model", "m", "--api-key"]
    assert _redact.redact_text(f"server_args=ServerArgs(api_key='{KEY}')", [KEY, "ab"]) == \
        "server_args=ServerArgs(api_key='********')"


def test_the_plan_file_is_private(tmp_path):
    import os
    import stat

    from ansible_collections.lanekit.serving.plugins.plugin_utils._plan._render import write_plan_file
    path = tmp_path / "reports" / "lane" / "plan.json"
    assert write_plan_file(str(path), {"lane": "x"})
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(path.parent).st_mode) == 0o700
    os.chmod(path, 0o644)
    assert not write_plan_file(str(path), {"lane": "x"})
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


def test_ranks_carry_the_names_of_their_secrets_as_a_label():
    result = keyed(env={"HF_TOKEN": TOKEN})
    assert result["ranks"][0]["labels"]["io.lanekit.secret-env"] == "HF_TOKEN,VLLM_API_KEY"


def test_the_secrets_hash_is_salted_by_lane_and_is_not_a_plain_digest():
    import hashlib
    secrets = _secrets.Secrets(api_key="sk-short", env={})
    first, second = secrets.digest("lane-a", "VLLM_API_KEY"), secrets.digest("lane-b", "VLLM_API_KEY")
    assert first != second  # the same key on two lanes does not hash alike
    data = json.dumps({"lane": "lane-a", "env": {"VLLM_API_KEY": "sk-short"}}, sort_keys=True, separators=(",", ":"))
    fast = {hashlib.sha256(data.encode()).hexdigest(), hashlib.sha256(("lanekit-secrets-v1\n" + data).encode()).hexdigest()}
    assert first not in fast  # a copy of plan.json does not allow fast offline guessing
    assert first == secrets.digest("lane-a", "VLLM_API_KEY")


VLLM_LIKE = """import importlib, json, os, subprocess, sys
module, name = sys.argv[sys.argv.index("--middleware") + 1].rsplit(".", 1)
guard = getattr(importlib.import_module(module), name)  # as vLLM's register.py loads it
child = subprocess.run([sys.executable, "-c", "import lanekit_keyguard"], check=False).returncode
with open(os.environ["REPORT"], "w") as handle:
    json.dump({"argv": sys.argv[1:], "guard": guard.__name__, "child_imports": child == 0}, handle)
"""


def test_the_key_guard_launcher_gives_vllm_an_importable_middleware_its_children_can_import_too(tmp_path):
    import os
    import subprocess
    import sys
    console_script(tmp_path, "vllm", sys.executable, VLLM_LIKE)
    entry, wrapped = _plan_secrets.key_guard_wrap("--middleware", [], ["vllm", "serve", "/models/x", "--port", "8000"])
    env = dict(os.environ, PATH=f"{tmp_path}:{os.environ['PATH']}", REPORT=str(tmp_path / "report.json"),
               VLLM_API_KEY=KEY)
    env.pop("PYTHONPATH", None)
    proc = subprocess.run([sys.executable, *wrapped], env=env, capture_output=True, text=True, timeout=60, check=False)
    assert entry == ["python3"] and proc.returncode == 0, proc.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["argv"] == ["serve", "/models/x", "--port", "8000", "--middleware", "lanekit_keyguard.KeyGuard"]
    assert report["guard"] == "KeyGuard" and report["child_imports"], "a spawned API server could not load it"
