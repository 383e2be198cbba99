"""Stage sources: which files of a source are staged."""
from __future__ import annotations

from ansible_collections.lanekit.serving.plugins.module_utils._stage_sources import filter_paths


def test_filter_paths_keeps_allowed_folders_and_drops_ignored_globs():
    assert list(filter_paths(["a/b.json", "x.bin", "a/c.bin"], ["a/"], ["*.bin"])) == ["a/b.json"]


def test_filter_paths_without_patterns_keeps_everything_and_accepts_one_string():
    assert list(filter_paths(["b", "a"])) == ["b", "a"]
    assert list(filter_paths(["x.json", "y.bin"], "*.json")) == ["x.json"]
