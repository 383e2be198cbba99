"""roles/image distributes by one task file per method (issue 24, part 4): main.yml includes
distribute_<method>.yml after the method was checked and chosen (image_method, or auto's choice in
method.yml, issue 28 part 4), and no file asks which method runs."""
from __future__ import annotations

import os

import pytest
import yaml

from tests.unit.helpers.recipes import REPO

TASKS = os.path.join(REPO, "roles", "image", "tasks")
METHODS = ("registry", "stream", "relay")


def _load(name: str) -> list[dict]:
    with open(os.path.join(TASKS, name), encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def test_the_methods_the_role_accepts_each_have_their_file():
    with open(os.path.join(REPO, "roles", "image", "meta", "argument_specs.yml"), encoding="utf-8") as handle:
        spec = yaml.safe_load(handle)["argument_specs"]["main"]["options"]["image_method"]
    assert sorted(spec["choices"]) == sorted(METHODS + ("auto",)) and spec["default"] == "auto"
    assert sorted(f for f in os.listdir(TASKS) if f.startswith("distribute")) == sorted(
        f"distribute_{m}.yml" for m in METHODS)


def test_main_includes_the_file_of_the_method_after_checking_it():
    main = _load("main.yml")
    names = [t["name"] for t in main]
    include = next(t for t in main if t["name"] == "Distribute the image to the nodes")
    assert include["ansible.builtin.include_tasks"]["file"] == "distribute_{{ __image_method_used }}.yml"
    assert names.index("Check the inputs and read the lock") < names.index("Choose how to distribute the image") \
        < names.index("Distribute the image to the nodes")
    assert "image_method in ['auto', 'registry', 'stream', 'relay']" in str(_load("preflight.yml"))
    used = next(t for t in _load("method.yml") if t["name"] == "Note this run's method")
    assert used["ansible.builtin.set_fact"]["__image_method_used"] == (
        "{{ __image_choice.method if image_method == 'auto' else image_method }}")


@pytest.mark.parametrize("method", METHODS)
def test_each_file_distributes_by_its_own_method_without_asking(method):
    tasks = _load(f"distribute_{method}.yml")
    calls = [t["lanekit.serving.image_distribute"] for t in tasks if "lanekit.serving.image_distribute" in t]
    assert [c["method"] for c in calls] == [method]
    for name in (f"distribute_{method}.yml", "stream_server.yml", "stream_finish.yml"):
        assert "image_method" not in str(_load(name)), name  # the tasks; comments may name it


def test_only_the_relay_passes_the_relay_settings_and_only_the_registry_a_registry_reference():
    by = {m: next(t["lanekit.serving.image_distribute"] for t in _load(f"distribute_{m}.yml")
                  if "lanekit.serving.image_distribute" in t) for m in METHODS}
    assert {m for m, call in by.items() if "relay_chain" in call} == {"relay"}
    assert {m for m, call in by.items() if "registry_ref" in call} == {"registry"}
    assert {m for m, call in by.items() if "origin_key" in call} == {"stream", "relay"}
