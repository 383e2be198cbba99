"""playbooks/plan-lane.yml -e recipe=... end to end on the controller: the seed's recommended choice planned on an
example inventory (notes printed, the plan written), and a choice the nodes cannot run failing with its sentence."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.unit.helpers.recipes import REPO, SEED

PLAYBOOK = os.path.join(REPO, "playbooks", "plan-lane.yml")
ANSIBLE_PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")

pytestmark = pytest.mark.skipif(not os.path.exists(ANSIBLE_PLAYBOOK), reason="ansible-playbook is not beside python")


def _plan(inventory, *extra, reports, recipe=SEED):
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    argv = [ANSIBLE_PLAYBOOK, PLAYBOOK, "-i", os.path.join(REPO, "inventories", inventory), "-e", f"recipe={recipe}",
            "-e", f"lanekit_reports_dir={reports}"]
    for item in extra:
        argv += ["-e", item]
    return subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=180, check=False)


def test_the_h200_inventory_plans_the_seed_tp16_and_prints_its_notes(tmp_path):
    proc = _plan("h200", "recipe_strategy=multi_node_tp", reports=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lane = "mistral-large-4-1t-a52b-fp8-h200-multi-node-tp-2n"
    assert f"lane {lane} (vllm), plan " in proc.stdout
    assert "note    H200: two 8-GPU nodes" in proc.stdout and "[image-pin]" in proc.stdout + proc.stderr
    plan = json.loads((tmp_path / lane / "plan.json").read_text(encoding="utf-8"))
    assert [r["host"] for r in plan["ranks"]] == ["h200-01", "h200-02"]
    assert plan["topology"]["tensor_parallel"] == 16
    assert (tmp_path / lane / f"{lane}.yml").is_file()
    assert (tmp_path / lane / "images" / "mistral-large-4-1t-a52b-vllm" / "image.yml").is_file()


def test_a_choice_for_other_hardware_fails_the_play_with_one_sentence(tmp_path):
    proc = _plan("h200", "recipe_strategy=multi_node_tp", "recipe_hardware=gb300", reports=tmp_path)
    assert proc.returncode != 0
    assert "the choice is for gb300 hardware but the nodes of inventory" in proc.stdout
    assert "Traceback" not in proc.stdout + proc.stderr and not list(tmp_path.iterdir())


def test_plan_refuses_the_old_strategy_name_naming_the_new_one(tmp_path):
    # -e strategy= is an Ansible play keyword: every run warned "reserved name" before the rename.
    proc = _plan("h200", "strategy=multi_node_tp", reports=tmp_path)
    out = " ".join(proc.stdout.split())
    assert proc.returncode != 0
    assert "-e strategy is an old name that lanekit no longer reads" in out and "pass -e recipe_strategy instead." in out
    assert not list(tmp_path.iterdir())


def test_no_strategy_takes_the_recipes_recommended_one_and_says_so(tmp_path):
    # Issue 23: "refuses the choice hardware=gb300 strategy=None" before; now the recipe site's choice.
    proc = _plan("gb300", reports=tmp_path)
    out = " ".join(proc.stdout.split())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "single_node_tp on 1x gb300" in out and "None" not in out
    assert "No -e recipe_strategy was given: took the recommended strategy of the recipe for these nodes (on gb300 " \
           "it offers single_node_tp, multi_node_tp" in out


@pytest.mark.parametrize("inventory, hardware, device", [
    ("tpu-v6e", "trillium", "--device /dev/vfio"), ("xeon6", "xeon6", "--ipc host --shm-size 16g -v"),
    ("arc-b60", "arc_pro_b60", "--device /dev/dri"), ("ascend", "ascend_950pr", "--device /dev/davinci_manager"),
    ("rtx-pro-6000", "rtx_pro_6000_8x", "--gpus all"),
])
def test_each_accelerator_inventory_plans_the_fixture_recipe_on_the_controller(inventory, hardware, device, tmp_path):
    # Issue 27: the playbook a check-mode deploy starts with (plan-lane runs lane_plan on the controller only).
    from tests.unit.helpers.recipes import FIXTURES, TREE
    recipe = os.path.join(FIXTURES, "models", "acme", "Tiny-Dense.yaml")
    proc = _plan(inventory, f"recipe_root={TREE}", reports=tmp_path, recipe=recipe)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lane = f"tiny-dense-default-{hardware.replace('_', '-')}-single-node-tp"
    plan = json.loads((tmp_path / lane / "plan.json").read_text(encoding="utf-8"))
    assert plan["hardware"] == hardware and device in " ".join(plan["ranks"][0]["docker_argv"])
