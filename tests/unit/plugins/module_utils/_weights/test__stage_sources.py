"""Stage sources (module_utils/_weights/_stage_sources.py): which files of a source are staged, and the hub
source: weights_stage with source=hf, the real huggingface_hub client against a local Hub look-alike
(the fake_hub fixture, which skips these tests when huggingface_hub is not installed)."""
from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.module_utils._weights import _staging
from ansible_collections.lanekit.serving.plugins.module_utils._weights._manifest import FileSpec
from ansible_collections.lanekit.serving.plugins.module_utils._weights._stage_sources import HubSource, filter_paths
from ansible_collections.lanekit.serving.plugins.module_utils._weights._staging import Stager


def test_filter_paths_keeps_allowed_folders_and_drops_ignored_globs():
    assert list(filter_paths(["a/b.json", "x.bin", "a/c.bin"], ["a/"], ["*.bin"])) == ["a/b.json"]


def test_filter_paths_without_patterns_keeps_everything_and_accepts_one_string():
    assert list(filter_paths(["b", "a"])) == ["b", "a"]
    assert list(filter_paths(["x.json", "y.bin"], "*.json")) == ["x.json"]


# -- the hub source, staged through Stager against fake_hub ------------------------------------------
IGNORE = ["original/*", "README.md"]


def hub_stage(hub, dest, revision=None, **kw):
    src = HubSource(hub.repo_id, revision or hub.commit, endpoint=hub.endpoint, token=kw.pop("token", None),
                    allow_patterns=kw.pop("allow_patterns", None),
                    ignore_patterns=kw.pop("ignore_patterns", IGNORE))
    kw.setdefault("retry_delay", 0.01)
    return Stager(src, dest, model_id=hub.repo_id, revision=revision or hub.commit, **kw).run()


def check_staged(hub, dest, names):
    man = json.load(open(os.path.join(dest, "MANIFEST.json")))
    assert man["revision"] == hub.commit and man["source"]["kind"] == "hf"
    assert {f["path"] for f in man["files"]} == set(names)
    for f in man["files"]:
        data = open(os.path.join(dest, f["path"]), "rb").read()
        assert data == hub.files[f["path"]]
        assert f["sha256"] == hashlib.sha256(data).hexdigest()
    return man


def test_stage_from_hub_then_rerun_needs_no_network(fake_hub, tmp_path):
    dest = str(tmp_path / "model")
    r = hub_stage(fake_hub, dest, token="hf_test_token")
    names = [p for p in fake_hub.files if not p.startswith("original/") and p != "README.md"]
    assert r["changed"] and r["files_fetched"] == len(names)
    assert r["huggingface_hub_version"]
    check_staged(fake_hub, dest, names)
    kinds = [k for (_unused, k, _unused) in fake_hub.log]
    assert kinds[:2] == ["info", "tree"]
    assert all(t == "Bearer hf_test_token" for t in fake_hub.tokens_seen)
    assert "hf_test_token" not in json.dumps(r)
    assert not os.path.exists(os.path.join(dest, "original"))
    before = len(fake_hub.log)
    r2 = hub_stage(fake_hub, dest)
    assert not r2["changed"] and r2["listed_from"] == "manifest"
    assert len(fake_hub.log) == before  # immutable commit + manifest: not even a listing


def test_paginated_tree_and_allow_patterns(fake_hub, tmp_path):
    fake_hub.page_size = 2
    r = hub_stage(fake_hub, str(tmp_path / "m"), allow_patterns=["*.json"], ignore_patterns=None)
    assert sorted(f["path"] for f in r["files"]) == ["consolidated.safetensors.index.json", "params.json",
                                                     "tekken.json"]


@pytest.mark.parametrize("rev", ["main", "abc1234", "v1.0", "A" * 40])
def test_floating_revision_is_refused_before_any_request(fake_hub, tmp_path, rev):
    with pytest.raises(LanekitError, match="40-hex"):
        hub_stage(fake_hub, str(tmp_path / "m"), revision=rev)
    assert fake_hub.log == []


def test_unknown_commit_and_repo_are_sentences(fake_hub, tmp_path):
    with pytest.raises(LanekitError, match="RevisionNotFound.*check model.revision"):
        hub_stage(fake_hub, str(tmp_path / "m"), revision="b" * 40)
    src = HubSource("nobody/nothing", fake_hub.commit, endpoint=fake_hub.endpoint)
    with pytest.raises(LanekitError, match="nobody/nothing"):
        Stager(src, str(tmp_path / "m"), revision=fake_hub.commit).run()


def test_transient_error_and_corrupt_body_are_retried(fake_hub, tmp_path):
    shard = "consolidated-00001-of-00002.safetensors"
    fake_hub.fail_status[shard] = [500]
    fake_hub.corrupt["params.json"] = 1
    r = hub_stage(fake_hub, str(tmp_path / "m"), retries=2)
    assert r["changed"]
    assert fake_hub.gets(shard) == 2 and fake_hub.gets("params.json") == 2
    wanted = [p for p in fake_hub.files if p not in ("README.md",) and not p.startswith("original/")]
    check_staged(fake_hub, str(tmp_path / "m"), wanted)


def test_persistent_corruption_fails_naming_the_file(fake_hub, tmp_path):
    fake_hub.corrupt["consolidated-00002-of-00002.safetensors"] = 10
    dest = str(tmp_path / "m")
    with pytest.raises(LanekitError, match="consolidated-00002-of-00002.safetensors.*sha256"):
        hub_stage(fake_hub, dest, retries=1)
    assert not os.path.exists(os.path.join(dest, "consolidated-00002-of-00002.safetensors"))
    assert not os.path.exists(os.path.join(dest, "MANIFEST.json"))


def test_flipped_byte_is_repaired_from_the_hub(fake_hub, tmp_path):
    dest = str(tmp_path / "m")
    hub_stage(fake_hub, dest)
    victim = os.path.join(dest, "consolidated-00002-of-00002.safetensors")
    with open(victim, "r+b") as fh:
        fh.write(b"\x00")
    r = hub_stage(fake_hub, dest, verify="full")
    assert r["repaired"] == ["consolidated-00002-of-00002.safetensors"] and r["files_fetched"] == 1
    assert fake_hub.gets("consolidated-00001-of-00002.safetensors") == 1


def test_scratch_on_another_directory_is_copied_and_cleaned(fake_hub, tmp_path):
    dest, scratch = str(tmp_path / "m"), str(tmp_path / "scratch")
    r = hub_stage(fake_hub, dest, scratch_dir=scratch)
    assert r["changed"]
    left = [p for p in Path(scratch).rglob("*") if p.is_file() and ".hub-cache" not in p.parts
            and ".cache" not in p.parts]
    assert left == []


RUNNER = r"""
import sys
sys.path.insert(0, sys.argv[1])
from ansible_collections.lanekit.serving.plugins.module_utils._weights._stage_sources import HubSource
from ansible_collections.lanekit.serving.plugins.module_utils._weights._staging import Stager
endpoint, repo, commit, dest = sys.argv[2:6]
src = HubSource(repo, commit, endpoint=endpoint, ignore_patterns=["original/*", "README.md"])
Stager(src, dest, revision=commit, workers=1, block_size=65536).run()
"""


def test_killed_download_resumes_per_file(fake_hub, tmp_path):
    dest = str(tmp_path / "m")
    slow = "consolidated-00002-of-00002.safetensors"
    fake_hub.slow[slow] = 0.25  # ~0.8 s for the whole shard
    base = str(Path(_staging.__file__).parents[6])
    proc = subprocess.Popen([sys.executable, "-c", RUNNER, base, fake_hub.endpoint, fake_hub.repo_id,
                             fake_hub.commit, dest], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    journal = os.path.join(dest, ".lanekit", "journal.jsonl")
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            done = open(journal).read() if os.path.exists(journal) else ""
            if "consolidated-00001" in done and fake_hub.gets(slow) >= 1:
                break
            time.sleep(0.01)
        else:
            pytest.fail("the staging subprocess never reached the slow shard")
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    assert not os.path.exists(os.path.join(dest, "MANIFEST.json"))
    assert not os.path.exists(os.path.join(dest, slow))  # nothing partial under a final name
    fake_hub.slow.clear()
    r = hub_stage(fake_hub, dest)
    assert r["changed"]
    assert fake_hub.gets("consolidated-00001-of-00002.safetensors") == 1  # not fetched again
    assert fake_hub.gets(slow) == 2
    check_staged(fake_hub, dest, [p for p in fake_hub.files if p != "README.md" and not p.startswith("original/")])
    assert not list(Path(dest).rglob("*.incomplete"))  # the killed run's partial download is gone
    assert not list(Path(dest, ".lanekit", "tmp").iterdir())


def test_a_hub_download_that_resolves_outside_the_scratch_is_not_taken(tmp_path):
    """The stager moves or deletes what open_path hands over: only a file inside the scratch directory."""
    outside = tmp_path / "etc-passwd"
    outside.write_text("root:x:0:0")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    os.symlink(outside, scratch / "config.json")

    class Client:
        @staticmethod
        def hf_hub_download(**kwargs):
            return os.path.join(kwargs["local_dir"], kwargs["filename"])

    src = HubSource("org/m", "0" * 40)
    src._hf = Client()
    with pytest.raises(LanekitError, match=f"resolves to {outside}, outside the scratch directory"):
        src.open_path(FileSpec("config.json", 10), str(scratch), 0)
    (scratch / "model.json").write_text("{}")
    assert src.open_path(FileSpec("model.json", 2), str(scratch), 0) == (str(scratch / "model.json"), True)
    assert outside.read_text() == "root:x:0:0"


def test_the_token_goes_only_to_the_endpoint_the_lane_names(monkeypatch):
    monkeypatch.delenv("HF_ENDPOINT", raising=False)
    assert HubSource("o/m", "a" * 40, endpoint="https://mirror.example/", token="t").endpoint == "https://mirror.example"
    with pytest.raises(LanekitError, match="plain http: the Hub token would cross the network in clear"):
        HubSource("o/m", "a" * 40, endpoint="http://mirror.example", token="t")
    assert HubSource("o/m", "a" * 40, endpoint="http://mirror.example").endpoint == "http://mirror.example"
    with pytest.raises(LanekitError, match="not an http"):
        HubSource("o/m", "a" * 40, endpoint="mirror.example", token="t")
    monkeypatch.setenv("HF_ENDPOINT", "https://elsewhere.example")
    with pytest.raises(LanekitError, match="HF_ENDPOINT=https://elsewhere.example is set on the staging host"):
        HubSource("o/m", "a" * 40, token="t").list_files()
    assert HubSource("o/m", "a" * 40).endpoint is None, "without a token nothing secret is sent"


def test_the_endpoint_and_patterns_reach_the_hub_client(fake_hub, tmp_path):
    """The hub look-alike is a mirror at its own endpoint: every request, token included, goes there."""
    r = hub_stage(fake_hub, str(tmp_path / "m"), token="hf_test_token", allow_patterns=["*.json"],
                  ignore_patterns=["tokenizer*"])
    assert r["source"]["endpoint"] == fake_hub.endpoint
    assert r["files_total"] >= 1 and all(f.endswith(".json") and not f.startswith("tokenizer")
                                         for f in json_paths(tmp_path / "m"))


def json_paths(dest):
    return [f["path"] for f in json.load(open(os.path.join(dest, "MANIFEST.json")))["files"]]


# -- a token saved on the staging host is sent only when asked ----------------------------------------
SAVED = "hf_saved_on_the_staging_host"


@pytest.fixture
def saved_token(tmp_path, monkeypatch):
    """The staging host is logged in: a token in HF_HOME/token (and HF_TOKEN, which the client reads first)."""
    from huggingface_hub import constants
    home = tmp_path / "hf-home"
    home.mkdir()
    (home / "token").write_text(SAVED)
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(home / "token"))
    monkeypatch.setenv("HF_HOME", str(home))
    return monkeypatch


@pytest.mark.parametrize("env_token", [False, True])
def test_a_mirror_gets_no_authorization_when_no_token_is_given(fake_hub, tmp_path, saved_token, env_token):
    if env_token:
        saved_token.setenv("HF_TOKEN", SAVED)
    else:
        saved_token.delenv("HF_TOKEN", raising=False)
    r = hub_stage(fake_hub, str(tmp_path / "m"))
    assert r["files_fetched"] >= 1 and fake_hub.tokens_seen == []


def test_the_host_token_goes_only_when_asked_and_never_over_plain_http(fake_hub, tmp_path, saved_token, monkeypatch):
    saved_token.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("HF_ENDPOINT", raising=False)
    src = HubSource(fake_hub.repo_id, fake_hub.commit, endpoint=fake_hub.endpoint, use_host_token=True,
                    ignore_patterns=IGNORE)
    Stager(src, str(tmp_path / "m"), model_id=fake_hub.repo_id, revision=fake_hub.commit, retry_delay=0.01).run()
    assert fake_hub.tokens_seen and set(fake_hub.tokens_seen) == {f"Bearer {SAVED}"}
    # the refusals that guard a given token guard the host's own as well
    with pytest.raises(LanekitError, match="plain http: the Hub token would cross the network in clear"):
        HubSource("o/m", "a" * 40, endpoint="http://mirror.example", use_host_token=True)
    monkeypatch.setenv("HF_ENDPOINT", "http://mirror.example")
    with pytest.raises(LanekitError, match="HF_ENDPOINT=http://mirror.example is set on the staging host"):
        HubSource("o/m", "a" * 40, use_host_token=True).list_files()
    assert HubSource("o/m", "a" * 40, endpoint="http://mirror.example").token is False


def test_asking_for_the_host_token_without_one_is_a_sentence(fake_hub, tmp_path, monkeypatch):
    from huggingface_hub import constants
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(tmp_path / "absent"))
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("HUGGING_FACE_HUB_TOKEN", raising=False)
    with pytest.raises(LanekitError, match="use_host_token is set but the staging host has no Hub token"):
        HubSource(fake_hub.repo_id, fake_hub.commit, endpoint=fake_hub.endpoint, use_host_token=True).list_files()
    assert fake_hub.tokens_seen == []
