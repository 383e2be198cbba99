"""The yaml_file lookup reads YAML through the collection's safe loader and fails with a sentence."""
from __future__ import annotations

import pytest
from ansible.errors import AnsibleLookupError

from ansible_collections.lanekit.serving.plugins.lookup.yaml_file import LookupModule


def test_a_lock_file_reads_as_its_mapping(tmp_path):
    lock = tmp_path / "image.lock.yml"
    lock.write_text("version: 1\nname: thin\narches: {amd64: {content_hash: abc}}\n")
    assert LookupModule().run([str(lock)]) == [{"version": 1, "name": "thin", "arches": {"amd64": {"content_hash": "abc"}}}]


@pytest.mark.parametrize("content, words", [
    (b"version: 1\nversion: 2\n", "'version' twice"),
    (b"name: caf\xe9\n", "not UTF-8"),
    (b"arches: [\n", "not valid YAML"),
])
def test_a_damaged_file_fails_with_a_sentence_naming_it(tmp_path, content, words):
    lock = tmp_path / "image.lock.yml"
    lock.write_bytes(content)
    with pytest.raises(AnsibleLookupError) as err:
        LookupModule().run([str(lock)])
    text = str(err.value)
    assert str(lock) in text and words in text and "\n" not in text, text
