"""image_info (modules/image_info.py) against a docker engine in memory: whether a node's image is
current, and a local copy named when only the tag is missing."""
from __future__ import annotations

from ansible_collections.lanekit.serving.plugins.module_utils._image._docker_cli import DockerCLI
from ansible_collections.lanekit.serving.plugins.modules.image_info import ImageInfo
from tests.unit.helpers.docker import FakeEngine, FakeModule

HASH = "c" * 64
REF = "lanekit/thin:cccccccccccc"


def info_manager(engine, **params):
    module = FakeModule(dict(dict(ref=REF, content_hash=HASH, rootfs=None, layers=[], sizes=False), **params), check_mode=True,
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


BASE = ["sha256:" + "11" * 32, "sha256:" + "22" * 32]
PATCHED = BASE + ["sha256:" + "33" * 32]


def test_image_info_counts_the_bottom_layers_a_node_holds_in_any_image():
    """Issue 28 part 4: the role's auto method reads how much of the image each node lacks."""
    engine = FakeEngine()
    engine.add("example/base:v1", layers=BASE)
    result = info_manager(engine, layers=PATCHED)[0].run()
    assert result["current"] is False and result["held_layers"] == 2
    assert info_manager(FakeEngine(), layers=PATCHED)[0].run()["held_layers"] == 0
    # Without the option nothing is listed; a current node holds every layer without a listing.
    assert info_manager(engine)[0].run()["held_layers"] == 0
    engine.add(REF, labels={"io.lanekit.content-hash": HASH}, layers=PATCHED)
    info, module = info_manager(engine, layers=PATCHED)
    assert info.run()["held_layers"] == 3
    assert not any(call[1:3] == ["image", "ls"] and "--all" in call for call in module.calls)


def test_image_info_reports_the_layers_and_their_sizes_from_the_history():
    engine = FakeEngine()
    engine.add(REF, labels={"io.lanekit.content-hash": HASH}, layers=PATCHED)
    # Newest first, as docker prints it: a CMD with no layer between the base and the patch layer.
    engine.histories[REF] = '4096 "RUN [\\"python3\\", \\"/opt/lanekit/patches/p.py\\"]"\n0 "CMD [\\"bash\\"]"\n' \
                            '2000 "RUN apt-get install"\n9000 "ADD rootfs.tar /"\n'
    result = info_manager(engine, sizes=True)[0].run()
    assert result["image_layers"] == PATCHED and result["layer_sizes"] == [9000, 2000, 4096]
    assert info_manager(engine)[0].run()["layer_sizes"] == []
    # A history that does not match the layers gives no sizes (the role then falls back to the stream).
    engine.histories[REF] = '4096 "RUN a"\n'
    assert info_manager(engine, sizes=True)[0].run()["layer_sizes"] == []
