# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""Redaction of secrets in evidence: free text, docker env lists, argv and ``docker inspect`` objects.

One job: blank what must not leave a node or reach a report. Known values (``lanekit_api_key``,
``lanekit_secret_env``) are replaced wherever they appear; values of key-like names (``*_TOKEN``,
``*API_KEY``, ``--api-key X``) are replaced even when lanekit does not know them.
"""
from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

REDACTED = "********"
# Names whose values are treated as secrets wherever they appear (env of a container, flags in argv).
SECRETISH_RE = re.compile(r"(?i)(api[_-]?key|token|secret|passw|credential|auth|private[_-]?key|_key\b|^key$)")
# A value shorter than this is not searched for in free text (it would blank unrelated words).
MIN_REDACT_LEN = 4


def _known(values: Iterable[str] | None) -> list[str]:
    return sorted({str(v) for v in values or () if v and len(str(v)) >= MIN_REDACT_LEN}, key=len, reverse=True)


def redact_text(text: str, values: Iterable[str] | None) -> str:
    """``text`` with every known secret value replaced."""
    for value in _known(values):
        text = text.replace(value, REDACTED)
    return text


def secretish(name: str) -> bool:
    return bool(SECRETISH_RE.search(name))


def redact_env(env: list | None, names: Iterable[str] | None = None) -> list:
    """docker's ``NAME=value`` list with the values of secret and key-like names replaced."""
    wanted = set(names or ())
    out = []
    for item in env or []:
        name, sep, _value = str(item).partition("=")
        out.append(f"{name}={REDACTED}" if sep and (name in wanted or secretish(name)) else item)
    return out


def redact_argv(argv: list | None) -> list:
    """argv with the value of every key-like flag (``--api-key X``, ``--hf-token=X``) replaced."""
    out: list = []
    hide_next = False
    for arg in argv or []:
        text = str(arg)
        if hide_next:
            out.append(REDACTED)
            hide_next = False
            continue
        flag, sep, _value = text.partition("=")
        if flag.startswith("-") and secretish(flag.lstrip("-")):
            if sep:
                out.append(f"{flag}={REDACTED}")
            else:
                out.append(text)
                hide_next = True
            continue
        out.append(arg)
    return out


def redact_obj(obj: Any, values: Iterable[str] | None) -> Any:
    """Every string inside ``obj`` with the known secret values replaced."""
    known = _known(values)
    if isinstance(obj, str):
        return redact_text(obj, known)
    if isinstance(obj, list):
        return [redact_obj(item, known) for item in obj]
    if isinstance(obj, dict):
        return {k: redact_obj(v, known) for k, v in obj.items()}
    return obj


def redact_inspect(obj: dict, names: Iterable[str] | None = None, values: Iterable[str] | None = None) -> dict:
    """A ``docker inspect`` object without secrets: Config.Env, Args and Config.Cmd redacted, known values blanked."""
    obj = json.loads(json.dumps(obj, default=str))
    config = obj.get("Config") or {}
    if "Env" in config:
        config["Env"] = redact_env(config.get("Env"), names)
    for holder, key in ((config, "Cmd"), (config, "Entrypoint"), (obj, "Args")):
        if isinstance(holder.get(key), list):
            holder[key] = redact_argv(holder[key])
    return redact_obj(obj, values)
