"""Image specs, plan files, the YAML loader's limits, KV advice and the check-mode docker line."""
from __future__ import annotations

import os
import shlex
import shutil
import sys
import time

import pytest
import yaml

from ansible_collections.lanekit.serving.plugins.module_utils import _yaml
from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.module_utils._image._spec import load_image_spec, resolve_image
from ansible_collections.lanekit.serving.plugins.module_utils._lane._hardware import PROFILES
from ansible_collections.lanekit.serving.plugins.plugin_utils._plan import _kvbudget
from ansible_collections.lanekit.serving.plugins.plugin_utils._plan._render import write_plan_file
from tests.unit.helpers.plans import IMAGES, REPO

NAME = "mistral-large4-vllm"


@pytest.fixture
def images(tmp_path):
    root = tmp_path / "images"
    shutil.copytree(IMAGES, root)
    return root


def spec_refusal(images, text: bytes | str) -> str:
    path = images / NAME / "image.yml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(LanekitError) as err:
        load_image_spec(str(images), NAME)
    assert str(path) in str(err.value)
    return str(err.value)


def original(images) -> str:
    return (images / NAME / "image.yml").read_text()


def test_an_image_spec_that_is_not_utf8_names_the_file(images):
    assert "not UTF-8" in spec_refusal(images, original(images).encode() + b"# caf\xe9\n")


def test_an_image_spec_with_a_duplicate_key_is_refused(images):
    assert "'name' twice" in spec_refusal(images, original(images) + f"name: {NAME}\n")


def test_an_empty_image_spec_is_refused(images):
    assert "is empty" in spec_refusal(images, "")


def test_a_digest_given_as_a_number_in_the_spec_is_refused(images):
    text = yaml.safe_load(original(images))
    text["upstream"]["digests"]["arm64"] = 1234
    assert "upstream.digests.arm64' is 1234 (a number)" in spec_refusal(images, yaml.safe_dump(text))


def test_a_tag_given_as_a_number_in_the_spec_is_refused(images):
    text = yaml.safe_load(original(images))
    text["upstream"]["tag"] = 26.1
    assert "upstream.tag' is 26.1 (a number)" in spec_refusal(images, yaml.safe_dump(text))


def test_a_digest_override_given_as_a_number_is_refused():
    spec = load_image_spec(IMAGES, NAME)
    with pytest.raises(LanekitError, match=r"lanekit_image_digests\['mistral-large4-vllm'\]\['arm64'\] is 7"):
        resolve_image(spec, "arm64", {NAME: {"arm64": 7}})


def test_a_parsed_spec_of_the_wrong_kind_names_no_internal_type():
    from ansible._internal._datatag._tags import TrustedAsTemplate
    data = yaml.safe_load(open(os.path.join(IMAGES, NAME, "image.yml"), encoding="utf-8"))
    data["entrypoint"] = TrustedAsTemplate().tag("vllm serve")
    with pytest.raises(LanekitError) as err:
        load_image_spec(IMAGES, NAME, data=TrustedAsTemplate().tag(data))
    assert "_Ansible" not in str(err.value) and "'vllm serve' (a string)" in str(err.value)


# --- plan_file ---------------------------------------------------------------------------------

def test_plan_file_that_is_a_directory_says_so(tmp_path):
    with pytest.raises(LanekitError, match=f"plan_file {tmp_path} is a directory"):
        write_plan_file(str(tmp_path), {"a": 1})


def test_plan_file_under_a_file_names_that_file(tmp_path):
    blocker = tmp_path / "reports"
    blocker.write_text("x")
    with pytest.raises(LanekitError, match=f"{blocker} is a file, not a directory"):
        write_plan_file(str(blocker / "lane" / "plan.json"), {"a": 1})


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write anywhere")
def test_plan_file_whose_directory_cannot_be_created_says_why(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    try:
        with pytest.raises(LanekitError, match="cannot be created"):
            write_plan_file(str(locked / "sub" / "plan.json"), {"a": 1})
    finally:
        locked.chmod(0o700)


def test_plan_file_in_a_directory_that_cannot_be_created_says_why(tmp_path, monkeypatch):
    def refuse(*_args, **_kwargs):
        raise PermissionError(13, "Permission denied")
    monkeypatch.setattr(os, "makedirs", refuse)
    with pytest.raises(LanekitError, match="its directory .* cannot be created \\(Permission denied\\)"):
        write_plan_file(str(tmp_path / "new" / "plan.json"), {"a": 1})


def test_plan_file_is_written_once_and_then_unchanged(tmp_path):
    path = str(tmp_path / "deep" / "plan.json")
    assert write_plan_file(path, {"a": 1}) is True
    assert write_plan_file(path, {"a": 1}) is False


# --- the loader's limits --------------------------------------------------------------------------

def test_an_alias_bomb_is_refused_in_bounded_time():
    levels = ["a: &a [" + ", ".join(["x"] * 10) + "]"]
    for depth in range(1, 12):
        prev, cur = chr(96 + depth), chr(97 + depth)
        levels.append(f"{cur}: &{cur} [" + ", ".join([f"*{prev}"] * 10) + "]")
    start = time.monotonic()
    with pytest.raises(LanekitError, match="alias bomb"):
        _yaml.load_text("\n".join(levels), "bomb.yml")
    assert time.monotonic() - start < 2


def test_many_aliases_are_refused():
    text = "a: &a 1\nb: [" + ", ".join(["*a"] * (_yaml.MAX_ALIASES + 1)) + "]\n"
    with pytest.raises(LanekitError, match="more than .* aliases"):
        _yaml.load_text(text, "many.yml")


def test_deep_nesting_is_refused_without_a_recursion_error():
    depth = sys.getrecursionlimit() * 2
    with pytest.raises(LanekitError, match="nests deeper"):
        _yaml.load_text("[" * depth + "]" * depth, "deep.yml")


def test_a_huge_file_is_refused_before_parsing(tmp_path):
    path = tmp_path / "huge.yml"
    path.write_text("description: " + "x" * (_yaml.MAX_BYTES + 10) + "\n")
    with pytest.raises(LanekitError, match="huge.yml is .* bytes, more than"):
        _yaml.load_file(str(path))


def test_merge_keys_and_a_few_aliases_still_load():
    assert _yaml.load_text("a: &x {p: 1}\nb: *x\nc: {<<: *x, q: 2}\n", "ok.yml") == {
        "a": {"p": 1}, "b": {"p": 1}, "c": {"p": 1, "q": 2}}


def test_the_collections_own_lanes_and_images_load():
    for folder in ("lanes", "images"):
        for root, _dirs, files in os.walk(os.path.join(REPO, folder)):
            for name in files:
                if name.endswith(".yml"):
                    assert _yaml.load_file(os.path.join(root, name)) is not None


# --- KV advice ------------------------------------------------------------------------------------

GB10 = PROFILES["dgx_spark_gb10"]


def assess(fraction, max_len, weights=73.8):
    return _kvbudget.assess(fraction, max_len, 51226, GB10["device_memory_gib"], weights, 5.0,
                            GB10["admission_free_gib"])


def test_no_fraction_can_fit_weights_that_fill_the_device():
    text = _kvbudget.explain(assess(0.89, 131072, weights=120), "--gpu-memory-utilization")
    assert "No --gpu-memory-utilization can work" in text
    assert "to 0" not in text and "at least" not in text


def test_a_request_longer_than_any_fraction_holds_gets_the_longest_that_fits():
    result = assess(0.89, 4_000_000)
    text = _kvbudget.explain(result, "--gpu-memory-utilization")
    assert "at most 621,568" in text and "at least" not in text
    assert assess(0.90, 621_568)["fits"] is True


def test_a_fitting_fraction_is_still_advised_as_before():
    assert "at least 0.87" in _kvbudget.explain(assess(0.85, 524288), "--gpu-memory-utilization")


# --- check mode ---------------------------------------------------------------------------------------

def test_check_mode_prints_each_rank_line_shell_quoted():
    with open(os.path.join(REPO, "roles", "ranks", "tasks", "main.yml"), encoding="utf-8") as handle:
        tasks = yaml.safe_load(handle)
    task = next(t for t in tasks if t["name"].startswith("Show the ranks that check mode cannot preview"))
    assert "map('quote') | join(' ')" in task["ansible.builtin.debug"]["msg"]
    from ansible.plugins.filter.core import quote
    argv = ["docker", "run", "-e", "X=a b; rm -rf /", "--label", "k=$(id)"]
    assert shlex.split(" ".join(quote(a) for a in argv)) == argv
