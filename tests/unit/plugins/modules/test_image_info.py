"""image_info (modules/image_info.py) against a docker engine in memory: whether a node's image is
current, and a local copy named when only the tag is missing."""
from __future__ import annotations

from ansible_collections.lanekit.serving.plugins.module_utils._image._docker_cli import DockerCLI
from ansible_collections.lanekit.serving.plugins.modules.image_info import ImageInfo
from tests.unit.helpers.docker import FakeEngine, FakeModule

HASH = "c" * 64
REF = "lanekit/thin:cccccccccccc"


def info_manager(engine, **params):
    module = FakeModule(dict(dict(ref=REF, content_hash=HASH, rootfs=None), **params), check_mode=True,
                        responder=engine)
    return ImageInfo(module, DockerCLI(module)), module


def test_image_info_reports_current_only_against_a_content_hash():
    engine = FakeEngine(arch="arm64")
    engine.add(REF, labels={"io.lanekit.content-hash": HASH}, arch="arm64")
    result = info_manager(engine)[0].run()
    assert result["current"] and result["mismatch"] == "" and result["engine"] == {"arch": "arm64"}
    assert result["pin"]["arch"] == "arm64" and not result["changed"]
    result = info_manager(engine, content_hash=None)[0].run()
    assert not result["current"] and result["mismatch"] == "" and result["pin"]["present"]
    result = info_manager(engine, content_hash="d" * 64)[0].run()
    assert not result["current"] and "points at another image" in result["mismatch"]


def test_image_info_names_a_local_copy_when_only_the_tag_is_missing():
    """A node whose tag was removed but which still holds the pinned image (a running rank keeps it)
    is repaired by a re-tag: image_info says so, and the role leaves it out of the stream's clients."""
    engine = FakeEngine()
    kept = engine.add("lanekit/thin:kept-under-another-name", labels={"io.lanekit.content-hash": HASH})
    info, _unused = info_manager(engine)
    result = info.run()
    assert result["current"] is False and "not present" in result["mismatch"]
    assert result["local_copy"] == kept["Id"]
    engine.add(REF, labels={"io.lanekit.content-hash": HASH})
    current = info_manager(engine)[0].run()
    assert current["current"] is True and current["local_copy"] == ""
    # Another image under the tag and no pinned copy anywhere: a transfer is needed.
    other = FakeEngine()
    other.add(REF, labels={"io.lanekit.content-hash": "d" * 64})
    replaced = info_manager(other)[0].run()
    assert replaced["current"] is False and replaced["local_copy"] == ""
