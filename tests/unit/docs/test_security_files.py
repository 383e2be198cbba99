"""Issue 38: docs/security.md's "Secrets and files at a glance" says every secret's path and every file's mode.

The two tables name, in their "Code" column, the file that sets each mode. This test keeps them honest
against the code, not against their own text:

- every path named in a "Code" cell exists in the repository;
- every octal mode a "Mode" cell states (``0600``, ``0o077``...) is written literally in one of the code
  files the row names (``0o600``, ``"0600"``, ``mkdir -m 0700``), so a mode changed in the code fails here
  until the page says the new one;
- every file of the collection that creates files (``atomic_write``, ``write_output``, ``O_CREAT``,
  ``mkstemp``, ``mkdtemp``...) and every role task file that gives a ``mode:`` is named by some row,
  so a new writer fails here until the page lists what it writes.
"""
from __future__ import annotations

import glob
import os
import re

from tests.unit.helpers.plans import REPO

SECTION = "## Secrets and files at a glance"
SECRETS_TABLE = "### Secrets"
FILES_TABLE = "### Files"

# An octal mode as the page writes it: 0600, 0o600, 0700, 0o077 (not part of a longer word or number).
_MODE = re.compile(r"(?<![\w.])0o?([0-7]{3})(?!\w)")
# A repository path in a Code cell: a backticked word with a slash.
_PATH = re.compile(r"`([^`\s]+/[^`\s]+)`")
# What creates a file or a directory with a mode the code chooses (or leaves to the umask).
_WRITER = re.compile(r"\batomic_write\(|\bwrite_output\(|\bO_CREAT\b|\bmkstemp\(|\bmkdtemp\(|\bNamedTemporaryFile\(")
_ROLE_MODE = re.compile(r"^\s*(?:mode|directory_mode):\s*[\"']?0[0-7]{3}\b", re.MULTILINE)


def _lines() -> list[str]:
    with open(os.path.join(REPO, "docs", "security.md"), encoding="utf-8") as handle:
        lines = handle.read().splitlines()
    start = lines.index(SECTION)
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    return lines[start:end]


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def _table(heading: str) -> list[dict[str, str]]:
    """The rows of the first table under ``heading`` (inside the section), as {header: cell}."""
    lines = _lines()
    at = lines.index(heading)
    first = next(i for i, line in enumerate(lines[at + 1:], at + 1) if line.startswith("|"))
    rows = []
    for line in lines[first:]:
        if not line.startswith("|"):
            break
        rows.append(line)
    header = _cells(rows[0])
    assert set(rows[1].replace("|", "").strip()) <= set("-: "), f"{heading}: the second line is not a separator"
    out = []
    for line in rows[2:]:
        cells = _cells(line)
        assert len(cells) == len(header), f"{heading}: a row has {len(cells)} cells, not {len(header)}: {line}"
        out.append(dict(zip(header, cells, strict=True)))
    return out


def _column(row: dict[str, str], prefix: str) -> str:
    return next(cell for name, cell in row.items() if name.lower().startswith(prefix))


def _rows() -> list[tuple[str, dict[str, str]]]:
    return [(heading, row) for heading in (SECRETS_TABLE, FILES_TABLE) for row in _table(heading)]


def _read(rel: str) -> str:
    with open(os.path.join(REPO, rel), encoding="utf-8") as handle:
        return handle.read()


def _named() -> set[str]:
    return {path for _heading, row in _rows() for path in _PATH.findall(_column(row, "code"))}


def test_both_tables_are_there_and_name_the_secrets_and_files_that_matter():
    secrets, files = _table(SECRETS_TABLE), _table(FILES_TABLE)
    assert len(secrets) >= 10 and len(files) >= 30
    text = "\n".join(_lines())
    for name in ("lanekit_api_key", "lanekit_secret_env", "weights_hf_token", "pin_hf_token", "pin_hf_token_file",
                 "weights_hf_use_host_token", "pin_hf_use_host_token", "origin_key", "/etc/lanekit/secrets/",
                 "plan.json", "ledger.jsonl", "MANIFEST.json", "SHA256SUMS", "journal.jsonl", "image.lock.yml",
                 "fabric.json", "/var/lib/lanekit/locks/", "/var/tmp/lanekit/bundles/", ".spool/"):
        assert name in text, f"docs/security.md ({SECTION[3:]}) no longer names {name}"


def test_every_code_file_the_tables_name_exists():
    missing = sorted(path for path in _named() if not os.path.exists(os.path.join(REPO, path)))
    assert not missing, f"docs/security.md ({SECTION[3:]}) names code that does not exist: {', '.join(missing)}"


def test_every_mode_the_tables_state_is_the_literal_in_the_code_they_name():
    wrong = []
    for heading, row in _rows():
        modes = _MODE.findall(_column(row, "mode"))
        paths = [p for p in _PATH.findall(_column(row, "code")) if os.path.isfile(os.path.join(REPO, p))]
        if modes:
            assert paths, f"{heading}: a row states a mode but names no code file that sets it: {row}"
        texts = [_read(p) for p in paths]
        for digits in modes:
            literal = re.compile(rf"(?<![\w.])0o?{digits}(?!\d)")
            if not any(literal.search(text) for text in texts):
                what = " ".join(list(row.values())[:2])
                wrong.append(f"{what[:80]}: 0{digits} is in none of {', '.join(paths)}")
    assert not wrong, f"docs/security.md ({SECTION[3:]}) states modes the code does not set:\n" + "\n".join(wrong)


def test_every_file_writer_of_the_collection_is_named_in_the_files_table():
    writers = set()
    for path in glob.glob(os.path.join(REPO, "plugins", "**", "*.py"), recursive=True):
        rel = os.path.relpath(path, REPO)
        if _WRITER.search(_read(rel)):
            writers.add(rel)
    for path in glob.glob(os.path.join(REPO, "roles", "*", "tasks", "*.yml")):
        rel = os.path.relpath(path, REPO)
        if _ROLE_MODE.search(_read(rel)):
            writers.add(rel)
    assert "plugins/module_utils/_files.py" in writers and "roles/ranks/tasks/secrets.yml" in writers
    unnamed = sorted(writers - _named())
    assert not unnamed, (f"docs/security.md ({SECTION[3:]}) does not say what these write, with which mode: "
                         f"{', '.join(unnamed)}")
