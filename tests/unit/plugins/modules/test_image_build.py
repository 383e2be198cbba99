"""image_build (modules/image_build.py): the builder against a docker engine in memory, what it
decides and says, and its decision taken without docker: what would be built, restored, kept,
pushed and locked, and why."""
from __future__ import annotations

import os
import stat

import pytest

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.module_utils._image._build import decide, decide_action
from ansible_collections.lanekit.serving.plugins.module_utils._image._docker_cli import DockerCLI, image_pin
from ansible_collections.lanekit.serving.plugins.module_utils._image._spec import (
    load_image_spec,
    lock_verdict,
    resolve_image,
)
from ansible_collections.lanekit.serving.plugins.modules.image_build import ImageBuilder
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
    manager, _unused = builder(tmp_path, FakeEngine(), expected_content_hash="0" * 64)
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
    arches = {"amd64": {"content_hash": "0" * 64}, "arm64": {"content_hash": "1" * 64}}
    lock = {"version": 1, "name": "thin", "arches": arches}
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
    manager, _unused = builder(tmp_path, engine)
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


# -- the decision, taken without docker -----------------------------------------------------------
HASH = "a" * 64
OTHER = "b" * 64
REF = f"lanekit/thin:{HASH[:12]}"
RESOLVED = {"name": "thin", "arch": "amd64", "ref": REF, "content_hash": HASH}
PARAMS = {"rebuild": "changed", "restore_from": "", "registry": "", "build_dir": None, "images_dir": "/srv/images",
          "lock": None, "lock_file": "images/thin/image.lock.yml", "lock_update": False}


def _pin(content_hash):
    return image_pin({"Id": "sha256:" + "1" * 64, "Config": {"Labels": {"io.lanekit.content-hash": content_hash}},
                      "RootFS": {"Layers": ["sha256:" + "2" * 64]}, "Architecture": "amd64"})


ABSENT = image_pin(None)


@pytest.mark.parametrize("rebuild, restore_from, pin, action, reason_part", [
    ("changed", "", ABSENT, "build", "is not present on spark-01"),
    ("changed", "r:5000/lanekit/thin@sha256:" + "9" * 64, ABSENT, "restore", "is not present on spark-01"),
    ("changed", "", _pin(OTHER), "build", f"carries content hash {OTHER[:12]}, not {HASH[:12]}"),
    ("changed", "", _pin(HASH), "keep", f"is present on spark-01 with content hash {HASH[:12]}"),
    ("never", "", _pin(OTHER), "keep", "and rebuild is never"),
    ("never", "", ABSENT, "build", "is not present"),
    ("always", "r:5000/lanekit/thin@sha256:" + "9" * 64, _pin(HASH), "build", "rebuild is always"),
])
def test_the_action_follows_the_image_present_and_the_rebuild_policy(rebuild, restore_from, pin, action, reason_part):
    got, reason, _unused = decide_action(REF, HASH, "spark-01", pin, rebuild, restore_from)
    assert got == action and reason_part in reason


def test_keeping_a_stale_image_on_purpose_warns():
    _unused, _unused, warning = decide_action(REF, HASH, "spark-01", _pin(OTHER), "never", "")
    assert warning == f"{REF} on spark-01 does not carry content hash {HASH[:12]}; kept because rebuild is never."
    assert decide_action(REF, HASH, "spark-01", _pin(HASH), "never", "")[2] == ""


def test_the_build_runs_in_a_context_named_by_the_content_hash():
    plan = decide(PARAMS, RESOLVED, ABSENT, "spark-01")
    context = f"/srv/images/.build/thin/{HASH[:12]}"
    assert plan.context == context
    assert plan.build_args == ("build", "--tag", REF, "--file", f"{context}/Dockerfile", context)
    assert decide(dict(PARAMS, build_dir="/tmp/b"), RESOLVED, ABSENT, "h").context == f"/tmp/b/{HASH[:12]}"


def test_the_push_target_is_named_only_with_a_registry():
    assert (decide(PARAMS, RESOLVED, ABSENT, "h").push_target) == ""
    plan = decide(dict(PARAMS, registry="spark-01:5000/"), RESOLVED, ABSENT, "h")
    assert plan.push_repository == "spark-01:5000/lanekit/thin"
    assert plan.push_target == f"spark-01:5000/lanekit/thin:{HASH[:12]}"


def _lock(content_hash):
    return {"version": 1, "name": "thin", "arches": {"amd64": {"content_hash": content_hash, "base_digest": "sha256:" + "c" * 64}}}


def test_the_lock_verdict_is_absent_match_or_a_stop():
    current = {"content_hash": HASH, "base_digest": "sha256:" + "c" * 64}
    assert lock_verdict(PARAMS, RESOLVED, current) == ("absent", "")
    assert lock_verdict(dict(PARAMS, lock=_lock(HASH)), RESOLVED, current) == ("match", "")
    with pytest.raises(LanekitError, match="image.lock.yml"):
        lock_verdict(dict(PARAMS, lock=_lock(OTHER)), RESOLVED, current)


def test_an_accepted_lock_disagreement_is_announced():
    status, sentence = lock_verdict(dict(PARAMS, lock=_lock(OTHER), lock_update=True), RESOLVED,
                                    {"content_hash": HASH})
    assert status == "update"
    assert sentence.startswith("the lock images/thin/image.lock.yml will be updated: ") and "content_hash" in sentence


@pytest.mark.parametrize("buildkit, env", [(None, {}), (True, {"DOCKER_BUILDKIT": "1"}), (False, {"DOCKER_BUILDKIT": "0"})])
def test_image_build_sets_buildkit_only_when_asked(buildkit, env):
    assert ImageBuilder.docker_env({"buildkit": buildkit}) == env


# -- the work directories: nobody else may swap a patch between hashing and build ----------------
def test_an_images_dir_others_can_write_is_refused_before_hashing(tmp_path):
    engine = FakeEngine()
    engine.add(BASE)
    images = tmp_path / "images"
    images.mkdir()
    manager, module = builder(images, engine)
    os.chmod(images, 0o777)
    with pytest.raises(LanekitError, match=rf"image work directory \(images_dir\) {images} belongs to uid \d+ with mode 0777"):
        manager.run()
    assert build_calls(module) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another uid needs root")
def test_a_build_dir_of_another_user_is_refused_and_left_alone(tmp_path):
    engine = FakeEngine()
    engine.add(BASE)
    images, build = tmp_path / "images", tmp_path / "build"
    images.mkdir()
    build.mkdir(mode=0o700)
    (build / "planted").write_text("x")
    os.chown(build, 4242, 4242)
    manager, module = builder(images, engine, build_dir=str(build))
    with pytest.raises(LanekitError, match=f"build context directory \\(build_dir\\) {build} belongs to uid 4242"):
        manager.run()
    assert build_calls(module) == [] and (build / "planted").exists()


def test_the_images_dir_and_the_build_context_are_made_private(tmp_path):
    engine = FakeEngine()
    engine.add(BASE)
    images = tmp_path / "images"
    images.mkdir(mode=0o755)
    manager, _module = builder(images, engine)
    result = manager.run()
    assert result["built"]
    # Found 0755 and nobody else can write it: used, its mode left alone (lanekit chmods only what it made).
    assert stat.S_IMODE(os.stat(images).st_mode) == 0o755
    assert stat.S_IMODE(os.stat(images / ".build").st_mode) == 0o700
    assert stat.S_IMODE(os.stat(images / ".build" / "thin").st_mode) == 0o700


@pytest.fixture
def planted(tmp_path):
    """A sticky /var/tmp-like work root and a victim directory (standing in for /) a link can point to."""
    root = tmp_path / "var-tmp"
    root.mkdir()
    os.chmod(root, 0o1777)
    victim = tmp_path / "slash"
    (victim / "etc").mkdir(parents=True)
    os.chmod(victim, 0o755)
    return root, victim


@pytest.mark.parametrize("owner", [None, 4242])
def test_a_planted_images_dir_link_is_refused_and_its_target_not_chmod_ed(tmp_path, planted, owner):
    # ln -s / <work root>/images: before, image_build chmod-ed the target 0700 and built from it.
    if owner is not None and os.geteuid() != 0:
        pytest.skip("lchown to another uid needs root")
    root, victim = planted
    engine = FakeEngine()
    engine.add(BASE)
    make_spec(victim, patches={"patches/p.py": "print('ok')\n"})
    link = root / "images"
    os.symlink(victim, link)
    if owner is not None:
        os.lchown(link, owner, owner)
    module = FakeModule(build_params(link), diff=True, responder=engine)
    with pytest.raises(LanekitError, match=rf"image work directory \(images_dir\) {link} is a symlink \(to {victim}"):
        ImageBuilder(module, DockerCLI(module)).run()
    assert build_calls(module) == [] and stat.S_IMODE(os.stat(victim).st_mode) == 0o755


@pytest.mark.skipif(os.geteuid() != 0, reason="lchown to another uid needs root")
def test_a_build_dir_link_planted_by_another_user_is_refused_before_anything_is_written(tmp_path, planted):
    root, victim = planted
    engine = FakeEngine()
    engine.add(BASE)
    images = tmp_path / "images"
    images.mkdir(mode=0o700)
    link = root / "build"
    os.symlink(victim, link)
    os.lchown(link, 4242, 4242)
    manager, module = builder(images, engine, build_dir=str(link / "thin"))
    with pytest.raises(LanekitError, match=rf"build context directory \(build_dir\) {link / 'thin'} cannot be used: "
                                           rf"{link} is a symlink owned by uid 4242"):
        manager.run()
    assert build_calls(module) == [] and os.listdir(victim) == ["etc"]
    assert stat.S_IMODE(os.stat(victim).st_mode) == 0o755


def test_docker_builds_from_a_fresh_context_made_in_the_checked_build_root(tmp_path):
    # The context is mkdtemp'd under the checked root, so re-pointing a path after the checks
    # cannot change what docker reads; the directory is gone after the build.
    engine = FakeEngine()
    engine.add(BASE)
    seen = []

    def build(argv):
        context = argv[-1]
        seen.append((context, stat.S_IMODE(os.lstat(context).st_mode), os.path.islink(context),
                     sorted(os.listdir(context))))
        tag = argv[argv.index("--tag") + 1]
        engine.add(tag, labels={"io.lanekit.content-hash": expected(tmp_path / "images")["content_hash"]})
        return 0, "built", ""

    engine.build_result = build
    images = tmp_path / "images"
    images.mkdir(mode=0o700)
    manager, module = builder(images, engine)
    result = manager.run()
    (context, mode, is_link, names), = seen
    assert os.path.dirname(context) == str(images / ".build" / "thin") and mode == 0o700 and not is_link
    assert "Dockerfile" in names and "patches" in names
    assert result["command"][-1] == context and not os.path.exists(context)
