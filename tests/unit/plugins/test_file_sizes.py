"""Issue 24: no file under plugins/ grows past 500 lines; a file that does mixes jobs and splits.

A module's DOCUMENTATION, EXAMPLES and RETURN strings do not count: they are the module's manual,
read by ansible-doc, and grow with its options, not with its code. Pure data tables that cannot
split by job without splitting one table are the only other exception, named below with the reason.
"""
from __future__ import annotations

import ast
import os

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
LIMIT = 500
DOC_STRINGS = ("DOCUMENTATION", "EXAMPLES", "RETURN")

# Pure data tables allowed past the limit: path -> why it stays one file. None today (the failure
# signatures, the largest table, are one data file per kind of line: _boot/_signatures_*.py).
DATA_TABLES: dict[str, str] = {}


def measured_lines(path: str) -> int:
    """Lines of the file (as ``wc -l`` counts them) less its module documentation strings."""
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    docs = 0
    for node in ast.parse(text, path).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id in DOC_STRINGS for t in node.targets):
            docs += node.end_lineno - node.lineno + 1
    return text.count("\n") - docs


def plugin_files() -> list[str]:
    out = []
    for folder, dirs, names in os.walk(os.path.join(REPO, "plugins")):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        out += [os.path.relpath(os.path.join(folder, n), REPO) for n in sorted(names) if n.endswith(".py")]
    return out


def test_no_file_under_plugins_is_over_the_limit():
    over = {path: measured_lines(os.path.join(REPO, path)) for path in plugin_files()
            if path not in DATA_TABLES}
    assert {path: n for path, n in over.items() if n > LIMIT} == {}, (
        f"over {LIMIT} lines (module documentation not counted): split the file by job (docs/architecture.md)")


def test_the_data_tables_named_exist_and_need_the_exception():
    for path in DATA_TABLES:
        assert os.path.isfile(os.path.join(REPO, path)), f"{path} is gone: remove it from DATA_TABLES"
        assert measured_lines(os.path.join(REPO, path)) > LIMIT, f"{path} is under the limit: remove it from DATA_TABLES"


def test_a_modules_documentation_does_not_count_and_its_code_does(tmp_path):
    module = tmp_path / "example.py"
    module.write_text('DOCUMENTATION = r"""\n' + "option\n" * 600 + '"""\nEXAMPLES = "x"\n\n\n'
                      + "def main():\n" + "    pass\n" * 10, encoding="utf-8")
    assert measured_lines(str(module)) == 13  # two blank lines, def main() and its ten lines
    real = os.path.join(REPO, "plugins", "modules", "image_build.py")
    with open(real, encoding="utf-8") as handle:
        assert measured_lines(real) < handle.read().count("\n")
