# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The lane's secrets (``lanekit_api_key``, ``lanekit_secret_env``): checked, hashed, and kept out of text.

One job: the secret channel's rules on the controller. The plan carries only the secrets' names,
the path of the node's env file and a hash (so a changed secret recreates the ranks); the values
reach a node only through a root-owned 0600 env file that docker reads (evidence is redacted by
``_redact``). The env file's format and hash are ``module_utils/_secrets.py``, which the nodes
ship. Messages here never include a secret's value.
"""
from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Mapping
from typing import Any

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.module_utils._lane import _engines
from ansible_collections.lanekit.serving.plugins.module_utils._secrets import ENV_NAME_RE, Secrets, env_file_path
from ansible_collections.lanekit.serving.plugins.module_utils._yaml import plain
from ansible_collections.lanekit.serving.plugins.plugin_utils._lane._flags import effective_env
from ansible_collections.lanekit.serving.plugins.plugin_utils._lane._model import Lane
from ansible_collections.lanekit.serving.plugins.plugin_utils._lane._values import PLAN_ENV
from ansible_collections.lanekit.serving.plugins.plugin_utils._plan import _keyguard

# Carries the key into a rank whose engine takes it only as a flag (see key_flag_wrap).
KEY_CARRIER_ENV = "LANEKIT_API_KEY"


def _one_line(value: str) -> bool:
    return not re.search(r"[\x00-\x1f\x7f]", value) and value == value.strip()


def read_secrets(api_key: Any, secret_env: Any, reserved: Mapping[str, str]) -> Secrets:
    """Check ``lanekit_api_key`` and ``lanekit_secret_env``; ``reserved``: env names the plan sets -> who sets them."""
    secrets = Secrets()
    if api_key not in (None, ""):
        if not isinstance(api_key, str) or not _one_line(api_key) or any(c.isspace() for c in api_key):
            raise LanekitError(
                "lanekit_api_key is not a usable key: give it as one line of text without spaces or control "
                "characters (for example an ansible-vault encrypted string in group_vars).")
        secrets.api_key = api_key
    if secret_env in (None, "", {}):
        return secrets
    if not isinstance(secret_env, Mapping):
        raise LanekitError("lanekit_secret_env is not a mapping; give it as variable name -> value "
                           "(e.g. {HF_TOKEN: ...}), ideally ansible-vault encrypted.")
    for name, value in secret_env.items():
        if not isinstance(name, str) or not ENV_NAME_RE.fullmatch(name):
            raise LanekitError(f"lanekit_secret_env has the key {str(name)[:60]!r}, which is not an environment "
                               f"variable name (letters, digits and '_', not starting with a digit).")
        if name in reserved:
            raise LanekitError(f"lanekit_secret_env sets {name}, which the plan sets from {reserved[name]}; "
                               f"remove it from lanekit_secret_env.")
        if isinstance(value, bool) or not isinstance(value, (str, int)) or not _one_line(str(value)):
            raise LanekitError(f"lanekit_secret_env.{name} must be one line of text without control characters "
                               f"or surrounding spaces (docker's env file holds one NAME=value per line).")
        secrets.env[name] = str(value)
    return secrets


# The program run by ``key_flag_wrap``: fixed text (never a value), given to ``python3 -c``. It
# reads the key from the env file's variable and appends ``<flag> <key>`` to the engine's
# sys.argv inside the same process, then runs the engine's console script (or ``python3 -m
# <module>``) there, so the key is never in any process's kernel argv (/proc/<pid>/cmdline,
# ``ps``) — an ``exec "$@" --api-key "$KEY"`` would put it there. A console script whose shebang
# names another interpreter gets this same program re-run under that interpreter (the key stays
# in the environment); a program that is not Python cannot take the key this way and stops
# with a sentence instead of falling back to argv. The variable is KEY_CARRIER_ENV, spelled out.
KEY_ARGV_PROGRAM = r"""
import os, runpy, shutil, sys
flag, args = sys.argv[1], sys.argv[2:]
def stop(why):
    sys.exit(f"lanekit: cannot hand the API key to {' '.join(args[:3])!r} without its command line: {why}; "
             "the rank's program must be a Python console script or 'python3 -m <module>'.")
if os.path.basename(args[0] if args else "").startswith("python") and args[1:2] == ["-m"] and len(args) > 2:
    key = os.environ.pop("LANEKIT_API_KEY", "")
    if not key:
        stop("LANEKIT_API_KEY is not in the rank's environment (the node's env file)")
    sys.argv = [args[2], *args[3:], flag, key]
    runpy.run_module(args[2], run_name="__main__", alter_sys=True)
    sys.exit(0)
path = shutil.which(args[0]) if args else None
if not path:
    stop("the program is not on PATH")
with open(path, "rb") as handle:
    first = handle.readline(512).decode("utf-8", "replace").split()
if not first or not first[0].startswith("#!"):
    stop("it is not a script with a '#!' line")
interp = [first[0][2:], *first[1:]]
if os.path.basename(interp[0]) == "env" and len(interp) > 1:
    interp = [shutil.which(interp[1]) or interp[1]]
if not os.path.basename(interp[0]).startswith("python"):
    stop(f"it runs under {interp[0]}, not Python")
if (os.path.realpath(shutil.which(interp[0]) or interp[0]) != os.path.realpath(sys.executable)
        and not os.environ.get("LANEKIT_KEY_ARGV_REEXEC")):
    os.environ["LANEKIT_KEY_ARGV_REEXEC"] = "1"  # once: a shim interpreter must not loop
    with open("/proc/self/cmdline", "rb") as handle:
        me = handle.read().split(b"\0")[2].decode()
    os.execv(interp[0], [interp[0], "-c", me, flag, *args])
key = os.environ.pop("LANEKIT_API_KEY", "")
if not key:
    stop("LANEKIT_API_KEY is not in the rank's environment (the node's env file)")
sys.argv = [path, *args[1:], flag, key]
runpy.run_path(path, run_name="__main__")
"""


# The program run by ``key_guard_wrap``: fixed text given to ``python3 -c``. It writes lanekit's
# KeyGuard (_plan/_keyguard.py, carried in the program) to a private directory in the container, puts
# that directory first on PYTHONPATH (kept for the API server processes vLLM spawns) and execs
# the engine with ``<flag> lanekit_keyguard.KeyGuard``: no image rebuild, and the key itself
# stays in the engine's environment (VLLM_API_KEY from the node's env file).
_KEY_GUARD_TEMPLATE = r"""
import os, sys, tempfile
flag, args = sys.argv[1], sys.argv[2:]
here = tempfile.mkdtemp(prefix="lanekit-keyguard-")
with open(os.path.join(here, "lanekit_keyguard.py"), "w", encoding="utf-8") as handle:
    handle.write(KEYGUARD_SOURCE)
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (here, os.environ.get("PYTHONPATH", "")) if p)
try:
    os.execvp(args[0], [*args, flag, "lanekit_keyguard.KeyGuard"])
except (OSError, IndexError) as error:
    sys.exit(f"lanekit: cannot start the engine {' '.join(args[:2])!r} behind the key guard: {error}")
"""


@functools.cache
def key_guard_program() -> str:
    """``_KEY_GUARD_TEMPLATE`` with KeyGuard's source filled in. Read when a plan needs it, not at
    import: importing the plan must not depend on reading a source file."""
    return _KEY_GUARD_TEMPLATE.replace("KEYGUARD_SOURCE", repr(inspect.getsource(_keyguard)))


def _launch_wrap(program: str, flag: str, entrypoint: list, command: list) -> tuple[list, list]:
    wrapped = ["python3", "-c", program, flag, *command]
    if entrypoint:
        return list(entrypoint), wrapped
    return wrapped[:1], wrapped[1:]


def key_guard_wrap(flag: str, entrypoint: list, command: list) -> tuple[list, list]:
    """(entrypoint, command) that start the engine behind lanekit's KeyGuard (``key_guard_program``)."""
    return _launch_wrap(key_guard_program(), flag, entrypoint, command)


def key_flag_wrap(flag: str, entrypoint: list, command: list) -> tuple[list, list]:
    """(entrypoint, command) that hand the key to an engine taking it only as a flag.

    ``entrypoint``: the image's entrypoint the rank keeps (for example NVIDIA's
    ``nvidia_entrypoint.sh``, which ends in ``exec "$@"``), or empty; ``command``: the engine's
    argv. The program is fixed text (``KEY_ARGV_PROGRAM``): the key goes from the env file's
    variable into the engine's in-process sys.argv, so neither the plan, ``docker inspect`` nor
    ``ps`` on the node holds it.
    """
    return _launch_wrap(KEY_ARGV_PROGRAM, flag, entrypoint, command)


# --- the plan's side ----------------------------------------------------------------------

def secret_carrier(engine: _engines.Engine) -> str:
    """The env file's variable that carries the API key into a rank of ``engine``."""
    return engine.api_key_env or KEY_CARRIER_ENV


def plan_secrets(lane: Lane, secrets: Secrets) -> dict[str, Any] | None:
    """The plan's record of the secrets: names, the node's env file and a hash; never a value."""
    if not secrets:
        return None
    engine = lane["_engine"]
    carrier = secret_carrier(engine)
    return {
        "api_key": bool(secrets.api_key),
        "api_key_env": carrier,
        "env_names": sorted(secrets.env),
        "env_file": env_file_path(lane["lane"]),
        "hash": secrets.digest(lane["lane"], carrier),
    }


def secret_spec(spec: dict, hashed: dict, engine: _engines.Engine, record: dict) -> None:
    """Point one rank at the env file. A flag-only engine gets the key through ``key_flag_wrap``; an
    engine whose own check leaves paths open starts behind lanekit's KeyGuard (``key_guard_wrap``)."""
    spec["secret_env_file"] = record["env_file"]
    spec["secret_env_names"] = sorted(record["env_names"] + ([record["api_key_env"]] if record["api_key"] else []))
    if record["api_key"] and (engine.key_guard_flag or not engine.api_key_env):
        entry = list(spec["entrypoint"])
        prewrap: list[str]
        if not entry:
            prewrap, command = [], list(engine.program) + spec["command"]
        elif _is_engine_program(entry[0], engine):
            prewrap, command = [], entry + spec["command"]
        else:  # an image entrypoint that sets up and ends in `exec "$@"` (NVIDIA's) stays in front
            prewrap, command = entry, spec["command"]
        if engine.api_key_env:  # the engine reads the key itself; lanekit adds the paths it leaves open
            spec["entrypoint"], spec["command"] = key_guard_wrap(engine.key_guard_flag, prewrap, command)
        else:
            spec["entrypoint"], spec["command"] = key_flag_wrap(engine.api_key_flag, prewrap, command)
        hashed.update(entrypoint=spec["entrypoint"], command=spec["command"])
    hashed["secrets"] = record["hash"]


def _is_engine_program(path: str, engine: _engines.Engine) -> bool:
    """True when ``path`` is the engine's program itself (its console script or a Python), not a
    setup script that ends in ``exec "$@"``."""
    name = path.rsplit("/", 1)[-1]
    return name.startswith("python") or name == engine.program[0].rsplit("/", 1)[-1]


def lane_secrets(lane: Lane, head_vars: dict[str, Any], engine: _engines.Engine) -> Secrets:
    """``lanekit_api_key`` and ``lanekit_secret_env`` checked against the lane (values never in messages)."""
    reserved = dict(PLAN_ENV, **{engine.host_ip_env: "the inventory's fabric_ip"})
    reserved.update({name: "the lane's serve.env" for name in effective_env(lane)})
    reserved[secret_carrier(engine)] = "lanekit_api_key"
    secrets = read_secrets(plain(head_vars.get("lanekit_api_key")), plain(head_vars.get("lanekit_secret_env")),
                           reserved)
    if (lane.get("api") or {}).get("key_required") and not secrets.api_key:
        raise LanekitError(
            f"{lane['_source']}: the lane sets api.key_required, but no lanekit_api_key is set; give the key in the "
            f"inventory (an ansible-vault encrypted group_vars value) or with -e @secrets.yml.")
    if secrets.api_key and (lane.get("topology") or {}).get("layout") == "pd":
        # The P/D lane's API is its router, and the recipe's router command takes no key: the pools
        # would check it while the router answered anyone. Refused rather than half-enforced.
        raise LanekitError(
            f"{lane['_source']}: lanekit_api_key cannot be enforced on a P/D lane (topology.layout: pd): its "
            f"router, the lane's API, has no API key option; deploy it without lanekit_api_key behind a proxy "
            f"that checks keys, or use a tp or dp layout.")
    return secrets
