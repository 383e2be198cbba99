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
# The words of a key-like name (``HF_TOKEN``, ``--api-key``, ``AWS_ACCESS_KEY_ID``, ``apiKey``). A word,
# not a substring: ``--max-num-batched-tokens``, ``--tokenizer`` and ``TOKENIZERS_PARALLELISM`` are
# tuning a person must see change, not secrets.
_SECRET_WORDS = frozenset({"key", "keys", "token", "secret", "secrets", "password", "passwords", "passwd", "pass",
                           "passphrase", "pwd", "credential", "credentials", "auth", "authorization", "bearer",
                           "cookie"})
# A compound word that ends in one of these is key-like too (``APIKEY``, ``HFTOKEN``, ``OAUTH``).
_SECRET_ENDS = ("key", "token", "secret", "password", "passwd", "auth")
# ... or starts with one (``PASSWORDFILE``, ``SECRETKEYREF``, ``CREDENTIALSPATH``).
_SECRET_STARTS = ("secret", "passw", "credential")
_WORD_SPLIT = re.compile(r"[^a-z0-9]+")
_CAMEL = re.compile(r"([a-z0-9])([A-Z])")
# Values that are secrets whatever their name says (a token pasted under an innocent flag): Hugging Face,
# OpenAI-style, NVIDIA NGC and GitHub tokens, by their published prefixes.
_SECRET_VALUE_RE = re.compile(r"\b(?:hf_[A-Za-z0-9]{30,}|sk-[A-Za-z0-9_-]{20,}|nvapi-[A-Za-z0-9_-]{20,}|"
                              r"gh[pousr]_[A-Za-z0-9]{30,})")
# A value shorter than this is not searched for in free text (it would blank unrelated words).
MIN_REDACT_LEN = 4


def _known(values: Iterable[str] | None) -> list[str]:
    return sorted({str(v) for v in values or () if v and len(str(v)) >= MIN_REDACT_LEN}, key=len, reverse=True)


def redact_text(text: str, values: Iterable[str] | None) -> str:
    """``text`` with every known secret value replaced."""
    for value in _known(values):
        text = text.replace(value, REDACTED)
    return text


def key_like(name: str) -> bool:
    """Whether ``name`` (an env variable or an engine flag, dashes allowed) names a secret: the one rule for
    every place lanekit shows or copies a value (evidence, the ledger's changes, the plan diff)."""
    words = [w.rstrip("0123456789") for w in _WORD_SPLIT.split(_CAMEL.sub(r"\1_\2", str(name)).lower()) if w]
    return any(w in _SECRET_WORDS or w.endswith(_SECRET_ENDS) or w.startswith(_SECRET_STARTS) for w in words if w)


def secret_value(value: str) -> bool:
    """Whether ``value`` looks like a token by its shape (``hf_...``), whatever name holds it."""
    return bool(_SECRET_VALUE_RE.search(str(value)))


def shown_value(name: str, value: str | None) -> str | None:
    """``value`` as it may be shown under ``name``: ``REDACTED`` for a key-like name or a token-shaped value;
    None (unset) and '' (a flag without a value) stay as they are, so that a diff still says it came or went."""
    if value is None or value == "":
        return value
    return REDACTED if key_like(name) or secret_value(value) else value


def secretish(name: str) -> bool:
    """The name of :func:`key_like` its first callers use."""
    return key_like(name)


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


def redact_shown_argv(argv: list | None) -> list:
    """A ``docker run`` argv as it may be printed: the value of every key-like flag (``--api-key X``), of every
    ``-e``/``--env NAME=value`` whose name is key-like, and every token-shaped value (``hf_...``) replaced."""
    out: list = []
    env_next = False
    for arg in redact_argv(argv):
        text = str(arg)
        if env_next or text.startswith("--env="):
            prefix = "--env=" if text.startswith("--env=") else ""
            name, sep, value = text[len(prefix):].partition("=")
            if sep and (key_like(name) or secret_value(value)):
                text = f"{prefix}{name}={REDACTED}"
            env_next = False
        elif text in ("-e", "--env"):
            env_next = True
        elif secret_value(text):
            text = _SECRET_VALUE_RE.sub(REDACTED, text)
        out.append(text)
    return out
