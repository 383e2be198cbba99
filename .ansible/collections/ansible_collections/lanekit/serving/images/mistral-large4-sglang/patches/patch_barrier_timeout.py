#!/usr/bin/env python3
# Copyright: lanekit developers
# Apache-2.0
"""Make SGLang's post-load barrier timeout tunable through SGLANG_UNBALANCED_LOAD_TIMEOUT_S.

Stock SGLang hard-codes ``UNBALANCED_MODEL_LOADING_TIMEOUT_S = 480`` in
``sglang/srt/model_executor/model_runner_components/load_model_utils.py`` and uses it as the
``monitored_barrier`` timeout after every rank has loaded its weights. On 8 DGX Sparks loading
568 GiB over NFS, the slowest rank can trail the fastest by far more than 480 s, and the barrier
then kills the ranks that finished (boot 4 of the bring-up report). The patch keeps 480 as the
default and lets the environment raise it.

Run at image build time. It patches the installed package in place and exits non-zero, which
fails the build, when the expected line is missing or already different: a silently unpatched
image would fail an hour into a boot instead.

Usage: patch_barrier_timeout.py [PATH_TO_load_model_utils.py]
"""
from __future__ import annotations

import importlib.util
import os
import re
import sys
import tempfile

TARGET = os.path.join("sglang", "srt", "model_executor", "model_runner_components", "load_model_utils.py")
STOCK_LINE = re.compile(r"^(?P<indent>[ \t]*)UNBALANCED_MODEL_LOADING_TIMEOUT_S = 480\b(?P<rest>.*)$", re.MULTILINE)
ANY_ASSIGNMENT = re.compile(r"^[ \t]*UNBALANCED_MODEL_LOADING_TIMEOUT_S\s*=.*$", re.MULTILINE)
PATCHED = (
    '{indent}UNBALANCED_MODEL_LOADING_TIMEOUT_S = int(__import__("os").environ.get('
    '"SGLANG_UNBALANCED_LOAD_TIMEOUT_S", "480"))  # lanekit patch_barrier_timeout{rest}'
)


class PatchError(Exception):
    pass


def find_target() -> str:
    spec = importlib.util.find_spec("sglang")
    if spec is None or not spec.submodule_search_locations:
        raise PatchError("the sglang package is not importable in this image, so there is nothing to patch")
    root = os.path.dirname(list(spec.submodule_search_locations)[0])
    return os.path.join(root, TARGET)


def patch_text(text: str) -> str:
    """Return the patched module text, or raise PatchError saying why it cannot be patched."""
    matches = list(STOCK_LINE.finditer(text))
    if len(matches) != 1:
        others = [m.group(0).strip() for m in ANY_ASSIGNMENT.finditer(text)]
        if any("SGLANG_UNBALANCED_LOAD_TIMEOUT_S" in line for line in others):
            raise PatchError("the barrier timeout is already patched; rebuild from the pinned upstream image")
        if others:
            raise PatchError(
                "UNBALANCED_MODEL_LOADING_TIMEOUT_S is assigned differently than expected "
                f"({others[0]!r}); the upstream code changed, review the patch before building"
            )
        raise PatchError("the line 'UNBALANCED_MODEL_LOADING_TIMEOUT_S = 480' was not found; the upstream code changed")
    match = matches[0]
    replacement = PATCHED.format(indent=match.group("indent"), rest=match.group("rest"))
    return text[: match.start()] + replacement + text[match.end():]


def patch_file(path: str) -> None:
    if not os.path.isfile(path):
        raise PatchError(f"{path} does not exist")
    with open(path, encoding="utf-8") as handle:
        original = handle.read()
    patched = patch_text(original)
    directory = os.path.dirname(path)
    fd, tmp = tempfile.mkstemp(prefix=".lanekit-patch-", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(patched)
        os.chmod(tmp, os.stat(path).st_mode & 0o777)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    # A stale bytecode cache would keep the stock constant alive.
    cache = os.path.join(directory, "__pycache__")
    if os.path.isdir(cache):
        stem = os.path.splitext(os.path.basename(path))[0] + "."
        for name in os.listdir(cache):
            if name.startswith(stem):
                os.unlink(os.path.join(cache, name))


def main(argv: list[str]) -> int:
    try:
        path = argv[1] if len(argv) > 1 else find_target()
        patch_file(path)
    except PatchError as err:
        print(f"patch_barrier_timeout: cannot patch: {err}.", file=sys.stderr)
        return 1
    print(f"patch_barrier_timeout: {path}: barrier timeout now reads SGLANG_UNBALANCED_LOAD_TIMEOUT_S (default 480).")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
