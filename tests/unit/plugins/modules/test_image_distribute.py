"""The image modules' managers against a docker engine in memory: what they decide and say."""
from __future__ import annotations

import json
import os
import socket
import sys
import threading

import pytest

from ansible_collections.lanekit.serving.plugins.module_utils._docker_cli import DockerCLI, image_pin
from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.module_utils._image_spec import load_image_spec, resolve_image
from ansible_collections.lanekit.serving.plugins.modules.image_build import ImageBuilder
from ansible_collections.lanekit.serving.plugins.modules.image_distribute import ImageDistributor
from ansible_collections.lanekit.serving.plugins.modules.image_serve import ImageServer

from tests.unit.helpers.docker import DIGEST, FakeEngine, FakeModule, make_spec

BASE = f"example/engine@{DIGEST}"


def build_params(images_dir, **extra):
    params = dict(name="thin", images_dir=str(images_dir), spec=None, files={}, file_modes={}, arch="amd64",
                  digest_overrides={},
                  expected_content_hash=None, rebuild="changed", pull_base="missing", build_dir=None,
                  buildkit=None, registry="", restore_from="", lock=None, lock_file="images/thin/image.lock.yml",
                  lock_update=False, docker_cli=None)
    params.update(extra)
    return params


def builder(tmp_path, engine, check_mode=False, **extra):
    make_spec(tmp_path, patches={"patches/p.py": "print('ok')\n"})
    module = FakeModule(build_params(tmp_path, **extra), check_mode=check_mode, diff=True, responder=engine)
    return ImageBuilder(module, DockerCLI(module)), module


def expected(tmp_path):
    return resolve_image(load_image_spec(str(tmp_path), "thin"), "amd64")


def build_calls(module):
    return [call for call in module.calls if call[1] == "build"]


def test_first_build_pulls_the_base_by_digest_and_builds(tmp_path):
    engine = FakeEngine()
    engine.pulls[BASE] = engine.add("tmp", arch="amd64")
    del engine.images["tmp"]
    manager, module = builder(tmp_path, engine)
    result = manager.run()
    want = expected(tmp_path)
    assert result["changed"] and result["built"] and result["ref"] == want["ref"]
    assert ["image", "pull", BASE] in [call[1:] for call in module.calls]
    assert result["lock_status"] == "absent"
    assert result["lock_entry"]["rootfs"] == result["rootfs"]
    assert result["lock_document"]["arches"]["amd64"]["content_hash"] == want["content_hash"]
    assert result["command"][1:3] == ["build", "--tag"]
    assert "because" in result["actions"][-1]


def test_second_run_keeps_the_image(tmp_path):
    engine = FakeEngine()
    engine.add(BASE)
    builder(tmp_path, engine)[0].run()
    manager, module = builder(tmp_path, engine)
    result = manager.run()
    assert not result["changed"] and not result["built"] and build_calls(module) == []
    assert result["actions"][0].startswith("nothing to do")


def test_a_tag_over_another_image_is_rebuilt(tmp_path):
    engine = FakeEngine()
    engine.add(BASE)
    manager, module = builder(tmp_path, engine)
    engine.add(expected(tmp_path)["ref"], labels={"io.lanekit.content-hash": "f" * 64})
    result = manager.run()
    assert result["built"] and "carries content hash ffffffffffff" in result["reason"]


def test_rebuild_never_keeps_a_stale_tag_with_a_warning(tmp_path):
    engine = FakeEngine()
    engine.add(BASE)
    manager, module = builder(tmp_path, engine, rebuild="never")
    engine.add(expected(tmp_path)["ref"], labels={"io.lanekit.content-hash": "f" * 64})
    result = manager.run()
    assert not result["built"] and module.warnings
    assert result["lock_entry"] == {} and result["lock_document"] == {}  # a stale image is never locked


def test_rebuild_always_builds_but_reports_no_change_for_the_same_id(tmp_path):
    engine = FakeEngine()
    engine.add(BASE)
    builder(tmp_path, engine)[0].run()
    same = dict(engine.images[expected(tmp_path)["ref"]])
    engine.build_result = lambda argv: (engine.images.__setitem__(same["RepoTags"][0], same), (0, "", ""))[1]
    manager, module = builder(tmp_path, engine, rebuild="always")
    result = manager.run()
    assert result["built"] and not result["changed"]


def test_check_mode_says_what_and_why_and_does_nothing(tmp_path):
    engine = FakeEngine()
    manager, module = builder(tmp_path, engine, check_mode=True)
    result = manager.run()
    assert result["changed"] and result["built"]
    assert any(a.startswith(f"would pull the base {BASE}") for a in result["actions"])
    assert any(a.startswith("would build lanekit/thin:") and "is not present" in a for a in result["actions"])
    assert not [c for c in module.calls if c[1] in ("build", "run") or c[1:3] == ["image", "pull"]]
    assert result["diff"]["after"]["image_id"] == "unknown"


def test_unpinned_base_is_refused_before_docker_is_asked(tmp_path):
    engine = FakeEngine()
    manager, module = builder(tmp_path, engine, digest_overrides={"thin": {"amd64": "sha256:abab"}})
    with pytest.raises(LanekitError) as err:
        manager.run()
    assert "lanekit_image_digests['thin']['amd64']" in str(err.value)
    assert module.calls == []


def test_base_of_another_architecture_stops_the_build(tmp_path):
    engine = FakeEngine()
    engine.add(BASE, arch="arm64")
    manager, module = builder(tmp_path, engine)
    with pytest.raises(LanekitError) as err:
        manager.run()
    assert "is a linux/arm64 image, but the lane's nodes are amd64" in str(err.value)
    assert build_calls(module) == []


def test_builder_of_another_architecture_stops_the_build(tmp_path):
    engine = FakeEngine(arch="arm64")
    engine.add(BASE, arch="amd64")
    manager, module = builder(tmp_path, engine)
    with pytest.raises(LanekitError) as err:
        manager.run()
    assert "runs a linux/arm64 docker engine" in str(err.value) and "image_builder" in str(err.value)
    assert build_calls(module) == []


def test_controller_and_builder_must_agree_on_the_hash(tmp_path):
    manager, _ = builder(tmp_path, FakeEngine(), expected_content_hash="0" * 64)
    with pytest.raises(LanekitError) as err:
        manager.run()
    assert "differs from images/thin" in str(err.value)


def test_lock_mismatch_stops_before_building(tmp_path):
    engine = FakeEngine()
    engine.add(BASE)
    lock = {"version": 1, "name": "thin", "arches": {"amd64": {"content_hash": "0" * 64, "base_digest": DIGEST}}}
    manager, module = builder(tmp_path, engine, lock=lock)
    with pytest.raises(LanekitError) as err:
        manager.run()
    assert "images/thin/image.lock.yml pins image 'thin' for amd64" in str(err.value)
    assert "-e image_lock_update=true" in str(err.value)
    assert build_calls(module) == []


def test_lock_update_accepts_and_returns_the_new_document(tmp_path):
    engine = FakeEngine()
    engine.add(BASE)
    lock = {"version": 1, "name": "thin", "arches": {"amd64": {"content_hash": "0" * 64},
                                                      "arm64": {"content_hash": "1" * 64}}}
    result = builder(tmp_path, engine, lock=lock, lock_update=True)[0].run()
    assert result["lock_status"] == "update"
    assert result["lock_document"]["arches"]["arm64"] == {"content_hash": "1" * 64}
    assert result["lock_document"]["arches"]["amd64"]["content_hash"] == result["content_hash"]


def test_rebuilt_layers_disagree_with_the_lock(tmp_path):
    engine = FakeEngine()
    engine.add(BASE)
    first = builder(tmp_path, engine)[0].run()
    del engine.images[first["ref"]]
    lock = first["lock_document"]
    lock["arches"]["amd64"]["rootfs"] = "sha256:" + "9" * 64  # what an earlier build produced
    with pytest.raises(LanekitError) as err:
        builder(tmp_path, engine, lock=lock)[0].run()
    assert "rebuilt from the same spec but its layers differ" in str(err.value)


def test_restore_from_the_registry_instead_of_rebuilding(tmp_path):
    engine = FakeEngine()
    engine.add(BASE)
    first = builder(tmp_path, engine)[0].run()
    locked = engine.images.pop(first["ref"])
    registry_ref = "reg:5000/lanekit/thin@sha256:" + "7" * 64
    engine.pulls[registry_ref] = dict(locked, RepoDigests=[registry_ref])
    manager, module = builder(tmp_path, engine, restore_from=registry_ref, lock=first["lock_document"])
    result = manager.run()
    assert result["restored"] and not result["built"] and build_calls(module) == []
    assert result["rootfs"] == first["rootfs"] and result["lock_status"] == "match"


def test_refused_patch_is_reported_as_such(tmp_path):
    engine = FakeEngine()
    engine.add(BASE)
    engine.build_result = lambda argv: (1, "Step 4/12 : RUN python3 /opt/lanekit/patches/p.py\n"
                                           "patch_barrier_timeout: cannot patch: the line 'X = 480' was not found.\n", "")
    manager, _ = builder(tmp_path, engine)
    with pytest.raises(LanekitError) as err:
        manager.run()
    text = str(err.value)
    assert "a baked patch refused its target" in text and "was not found" in text and "no image was tagged" in text


def test_push_reports_the_registry_digest(tmp_path):
    engine = FakeEngine()
    engine.add(BASE)
    digest = "sha256:" + "5" * 64

    def responder(argv):
        if argv[1:3] == ["image", "push"]:
            ref = argv[3]
            repo = ref.rsplit(":", 1)[0]
            for image in list(engine.images.values()):
                if image["Config"]["Labels"].get("io.lanekit.image") == "thin":
                    image["RepoDigests"] = [f"{repo}@{digest}"]
            return 0, f"abc: Pushed\n{ref.rsplit(':', 1)[1]}: digest: {digest} size: 527\n", ""
        return engine(argv)

    make_spec(tmp_path)
    module = FakeModule(build_params(tmp_path, registry="reg:5000"), responder=responder)
    result = ImageBuilder(module, DockerCLI(module)).run()
    assert result["pushed"] and result["registry_digest"] == digest
    assert result["registry_ref"] == f"reg:5000/lanekit/thin@{digest}"
    assert result["lock_entry"]["registry_digest"] == digest


# -- distribution ---------------------------------------------------------------------------------
HASH = "a" * 64


def distributor(engine, check_mode=False, **extra):
    params = dict(ref="lanekit/thin:aaaaaaaaaaaa", content_hash=HASH, rootfs=None, method="registry",
                  registry_ref="reg:5000/lanekit/thin@sha256:" + "7" * 64, source=None, token=None, client_name="",
                  connect_timeout=5, delta=True, probe="always", probe_command=["/bin/sh", "-c", "true"], probe_timeout=10,
                  docker_cli=None)
    params.update(extra)
    module = FakeModule(params, check_mode=check_mode, diff=True, responder=engine)
    return ImageDistributor(module, DockerCLI(module)), module


def test_current_node_is_left_alone_but_probed():
    engine = FakeEngine()
    engine.add("lanekit/thin:aaaaaaaaaaaa", labels={"io.lanekit.content-hash": HASH})
    manager, module = distributor(engine)
    result = manager.run()
    assert not result["changed"] and result["action"] == "current" and result["probe"]["ready"]
    assert not [c for c in module.calls if c[1:3] == ["image", "pull"]]


def test_missing_image_is_pulled_by_digest_and_tagged():
    engine = FakeEngine()
    registry_ref = "reg:5000/lanekit/thin@sha256:" + "7" * 64
    engine.pulls[registry_ref] = engine.add("x", labels={"io.lanekit.content-hash": HASH}, repo_digests=[registry_ref])
    del engine.images["x"]
    manager, module = distributor(engine, probe="arrival")
    result = manager.run()
    assert result["changed"] and result["action"] == "pulled"
    assert result["pin"]["repo_digests"] == [registry_ref]
    assert result["probe"]["ready"]


def test_tag_replaced_by_another_image_is_repaired_by_retagging_a_local_copy():
    engine = FakeEngine()
    good = engine.add("reg:5000/lanekit/thin:aaaaaaaaaaaa", labels={"io.lanekit.content-hash": HASH})
    engine.add("lanekit/thin:aaaaaaaaaaaa", labels={"io.lanekit.content-hash": "b" * 64})
    manager, _ = distributor(engine, rootfs=image_pin(good)["rootfs"])
    result = manager.run()
    assert result["action"] == "retagged" and result["pin"]["content_hash"] == HASH
    assert "points at another image" in result["reason"]


def test_same_label_but_other_layers_is_not_current():
    engine = FakeEngine()
    engine.add("lanekit/thin:aaaaaaaaaaaa", labels={"io.lanekit.content-hash": HASH})
    manager, _ = distributor(engine, rootfs="sha256:" + "0" * 64, check_mode=True)
    result = manager.run()
    assert result["changed"] and result["action"] == "would-fetch" and "other layers" in result["reason"]


def test_fetch_that_yields_another_image_fails():
    engine = FakeEngine()
    registry_ref = "reg:5000/lanekit/thin@sha256:" + "7" * 64
    engine.pulls[registry_ref] = engine.add("x", labels={"io.lanekit.content-hash": "b" * 64})
    del engine.images["x"]
    with pytest.raises(LanekitError) as err:
        distributor(engine)[0].run()
    assert "still does not hold the pinned image" in str(err.value)


# -- the stream, end to end over loopback (docker save/load replaced by small python processes) ---
class StreamDocker(DockerCLI):
    def __init__(self, module, argv_for):
        super().__init__(module)
        self.argv_for = argv_for

    def popen(self, args, **kwargs):
        import subprocess
        self.commands.append(list(args))
        return subprocess.Popen(self.argv_for(args), **kwargs)


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.parametrize("clients", [1, 3])
def test_stream_from_server_to_nodes(tmp_path, clients):
    payload = 5 * (1 << 20) + 123
    port = free_port()
    ref = "lanekit/thin:aaaaaaaaaaaa"
    source_engine = FakeEngine()
    source_engine.add(ref, labels={"io.lanekit.content-hash": HASH})
    save = [sys.executable, "-c", f"import sys; sys.stdout.buffer.write(bytes(range(256)) * ({payload} // 256) + b'x' * ({payload} % 256))"]
    server_module = FakeModule(dict(ref=ref, content_hash=HASH, rootfs=None, bind="127.0.0.1", port=port, token="t0ken",
                                    clients=clients, idle_timeout=20, max_seconds=60, spool_dir=str(tmp_path / "spool"),
                                    docker_cli=None), responder=source_engine)
    server = ImageServer(server_module, StreamDocker(server_module, lambda args: save))
    outcome = {}
    thread = threading.Thread(target=lambda: outcome.update(server.run()))
    thread.start()

    results = []
    for index in range(clients):
        out = tmp_path / f"loaded-{index}"
        load = [sys.executable, "-c", f"import shutil, sys; shutil.copyfileobj(sys.stdin.buffer, open({str(out)!r}, 'wb'))"]

        def responder(argv, out=out):
            if argv[1:3] == ["image", "inspect"] and out.exists() and out.stat().st_size == payload:
                return 0, json.dumps([{"Id": "sha256:1", "Architecture": "amd64", "RepoTags": [ref],
                                       "Config": {"Labels": {"io.lanekit.content-hash": HASH}},
                                       "RootFS": {"Layers": ["sha256:" + "1" * 64]}}]), ""
            return FakeEngine()(argv)

        module = FakeModule(dict(ref=ref, content_hash=HASH, rootfs=None, method="stream", registry_ref=None,
                                 source=f"127.0.0.1:{port}", token="t0ken", client_name=f"node-{index}",
                                 connect_timeout=10, delta=True, probe="arrival", probe_command=["/bin/sh", "-c", "true"],
                                 probe_timeout=10, docker_cli=None), diff=False, responder=responder)
        results.append(ImageDistributor(module, StreamDocker(module, lambda args, load=load: load)).run())
    thread.join(timeout=60)
    assert all(r["action"] == "loaded" and r["bytes"] == payload and r["probe"]["ready"] for r in results)
    assert outcome["loaded"] == clients and outcome["bytes"] == payload
    assert not os.listdir(tmp_path / "spool")  # the spool is removed when the server ends


def test_stream_with_a_wrong_token_is_refused(tmp_path):
    port = free_port()
    ref = "lanekit/thin:aaaaaaaaaaaa"
    engine = FakeEngine()
    engine.add(ref, labels={"io.lanekit.content-hash": HASH})
    server_module = FakeModule(dict(ref=ref, content_hash=HASH, rootfs=None, bind="127.0.0.1", port=port, token="right",
                                    clients=1, idle_timeout=2, max_seconds=30, spool_dir=str(tmp_path / "spool"),
                                    docker_cli=None), responder=engine)
    server = ImageServer(server_module, StreamDocker(server_module, lambda args: [sys.executable, "-c", "print('x')"]))
    thread = threading.Thread(target=server.run)
    thread.start()
    module = FakeModule(dict(ref=ref, content_hash=HASH, rootfs=None, method="stream", registry_ref=None,
                             source=f"127.0.0.1:{port}", token="wrong", client_name="n", connect_timeout=10, delta=False,
                             probe="never", probe_command=["/bin/sh"], probe_timeout=1, docker_cli=None),
                        responder=FakeEngine())
    with pytest.raises(LanekitError) as err:
        ImageDistributor(module, StreamDocker(module, lambda args: ["false"])).run()
    thread.join(timeout=30)
    assert "refused" in str(err.value) and "wrong token" in str(err.value)


def test_unreachable_source_is_a_sentence(tmp_path):
    module = FakeModule(dict(ref="lanekit/thin:aaaaaaaaaaaa", content_hash=HASH, rootfs=None, method="stream",
                             registry_ref=None, source=f"127.0.0.1:{free_port()}", token="t", client_name="n",
                             connect_timeout=1, delta=True, probe="never", probe_command=["/bin/sh"], probe_timeout=1,
                             docker_cli=None), responder=FakeEngine())
    with pytest.raises(LanekitError) as err:
        ImageDistributor(module, DockerCLI(module)).run()
    assert "could not reach the image source" in str(err.value) and "image_stream_port" in str(err.value)


def test_inline_files_are_written_and_hashed_like_the_checkout(tmp_path):
    source = tmp_path / "checkout"
    make_spec(source, patches={"patches/p.py": "print('ok')\n"})
    want = resolve_image(load_image_spec(str(source), "thin"), "amd64")
    engine = FakeEngine()
    engine.add(BASE)
    spec = {k: v for k, v in load_image_spec(str(source), "thin").items() if k not in ("spec_dir", "spec_path")}
    spec["patches"] = [{"file": "patches/p.py"}]
    builder_dir = tmp_path / "builder"
    for check_mode in (True, False):
        module = FakeModule(build_params(builder_dir, spec=spec, files={"patches/p.py": "print('ok')\n"},
                                         file_modes={"patches/p.py": "0644"},
                                         expected_content_hash=want["content_hash"]),
                            check_mode=check_mode, responder=engine)
        result = ImageBuilder(module, DockerCLI(module)).run()
        assert result["content_hash"] == want["content_hash"]
        assert (builder_dir / "thin" / "patches" / "p.py").exists() is (not check_mode)
    module = FakeModule(build_params(builder_dir, spec=spec, files={"../escape.py": "x"}), responder=engine)
    with pytest.raises(LanekitError):
        ImageBuilder(module, DockerCLI(module)).run()


SAVE_SCRIPT = r"""
import hashlib, io, json, sys, tarfile
layers = [b"base-layer-" * 4000, b"patch-layer"]
blobs = []
for data in layers:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        info = tarfile.TarInfo("f.txt"); info.size = len(data); t.addfile(info, io.BytesIO(data))
    blobs.append(buf.getvalue())
diffs = ["sha256:" + hashlib.sha256(b).hexdigest() for b in blobs]
config = json.dumps({"architecture": "amd64", "os": "linux", "rootfs": {"type": "layers", "diff_ids": diffs}}).encode()
out = tarfile.open(fileobj=sys.stdout.buffer, mode="w|")
def add(name, blob):
    info = tarfile.TarInfo(name); info.size = len(blob); out.addfile(info, io.BytesIO(blob))
for number, blob in enumerate(blobs):
    add(f"layer{number}/VERSION", b"1.0")
    add(f"layer{number}/layer.tar", blob)
add("config.json", config)
add("manifest.json", json.dumps([{"Config": "config.json", "RepoTags": ["lanekit/thin:aaaaaaaaaaaa"],
                                   "Layers": ["layer0/layer.tar", "layer1/layer.tar"]}]).encode())
out.close()
"""


def _save_layers():
    import hashlib
    import io
    import tarfile as tf
    diffs = []
    for data in (b"base-layer-" * 4000, b"patch-layer"):
        buf = io.BytesIO()
        with tf.open(fileobj=buf, mode="w") as t:
            info = tf.TarInfo("f.txt")
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
        diffs.append("sha256:" + hashlib.sha256(buf.getvalue()).hexdigest())
    return diffs


@pytest.mark.parametrize("node_has_base", [True, False])
def test_stream_leaves_out_layers_the_node_holds(tmp_path, node_has_base):
    import tarfile as tf
    diffs = _save_layers()
    port = free_port()
    ref = "lanekit/thin:aaaaaaaaaaaa"
    source_engine = FakeEngine()
    source_engine.add(ref, labels={"io.lanekit.content-hash": HASH}, layers=diffs)
    server_module = FakeModule(dict(ref=ref, content_hash=HASH, rootfs=None, bind="127.0.0.1", port=port, token="t",
                                    clients=1, idle_timeout=20, max_seconds=60, spool_dir=str(tmp_path / "spool"),
                                    docker_cli=None), responder=source_engine)
    server = ImageServer(server_module, StreamDocker(server_module, lambda args: [sys.executable, "-c", SAVE_SCRIPT]))
    outcome = {}
    thread = threading.Thread(target=lambda: outcome.update(server.run()))
    thread.start()

    out = tmp_path / "loaded.tar"
    node = FakeEngine()
    if node_has_base:
        node.add("lanekit/thin:old", labels={"io.lanekit.content-hash": "b" * 64}, layers=diffs[:1])

    def responder(argv):
        if argv[1:3] == ["image", "inspect"] and argv[3:] == [ref]:
            if not out.exists():
                return 1, "[]", "Error: No such image"
            return 0, json.dumps([{"Id": "sha256:1", "Architecture": "amd64", "RepoTags": [ref],
                                   "Config": {"Labels": {"io.lanekit.content-hash": HASH}},
                                   "RootFS": {"Layers": diffs}}]), ""
        return node(argv)

    load = [sys.executable, "-c", f"import shutil, sys; shutil.copyfileobj(sys.stdin.buffer, open({str(out)!r}, 'wb'))"]
    module = FakeModule(dict(ref=ref, content_hash=HASH, rootfs=None, method="stream", registry_ref=None,
                             source=f"127.0.0.1:{port}", token="t", client_name="n", connect_timeout=10, delta=True,
                             probe="never", probe_command=["/bin/sh"], probe_timeout=1, docker_cli=None),
                        responder=responder)
    result = ImageDistributor(module, StreamDocker(module, lambda args: load)).run()
    thread.join(timeout=60)
    with tf.open(out) as tar:
        names = tar.getnames()
        manifest = json.load(tar.extractfile("manifest.json"))
    assert manifest[0]["Layers"] == ["layer0/layer.tar", "layer1/layer.tar"]
    assert "layer1/layer.tar" in names and "config.json" in names and "layer0/VERSION" in names
    assert ("layer0/layer.tar" in names) is (not node_has_base)
    assert result["skipped_layers"] == (1 if node_has_base else 0)
    assert outcome["served"][0]["skipped_layers"] == result["skipped_layers"]
