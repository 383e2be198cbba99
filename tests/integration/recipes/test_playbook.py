"""playbooks/recipe-lane.yml end to end on the controller: a commands file written, a refusal failing the play."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.unit.helpers.recipes import REPO

PLAYBOOK = os.path.join(REPO, "playbooks", "recipe-lane.yml")
ANSIBLE_PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")

pytestmark = pytest.mark.skipif(not os.path.exists(ANSIBLE_PLAYBOOK), reason="ansible-playbook is not beside python")


def _run(*extra, cwd):
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    argv = [ANSIBLE_PLAYBOOK, PLAYBOOK, "-e", f"recipe={os.path.join(REPO, 'recipes/mistralai/Mistral-Large-4-1T-A52B.json')}"]
    for item in extra:
        argv += ["-e", item]
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=180, check=False)


def test_the_play_writes_the_commands_and_prints_the_notes(tmp_path):
    out = tmp_path / "pd.json"
    proc = _run("recipe_hardware=gb300", "recipe_strategy=pd_cluster",
                'recipe_pd={"prefill": {"nodes": 1, "parallelism": "dep"}, "decode": {"nodes": 1, "parallelism": "tp"}}',
                f"commands_file={out}", cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    commands = json.loads(out.read_text(encoding="utf-8"))
    assert [c["role"] for c in commands["commands"]] == ["prefill", "decode"]
    assert commands["pools"]["prefill"]["parallelism"] == "dep"
    assert "Troubleshooting: NIXL_ERR_BACKEND" in proc.stdout


def test_a_refused_choice_fails_the_play_with_its_sentence(tmp_path):
    proc = _run("recipe_hardware=h200", "recipe_strategy=single_node_tp", "recipe_variant=fp8", cwd=str(tmp_path))
    assert proc.returncode != 0
    assert "rule strategy_unsupported_on_hardware" in proc.stdout and "Traceback" not in proc.stdout + proc.stderr
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize(("old", "sentence"), [
    (["strategy=pd_cluster"], "-e strategy is an old name that lanekit no longer reads"),
    (["nodes=2", "hardware=gb300"], "-e hardware, -e nodes are old names that lanekit no longer reads"),
])
def test_the_old_names_of_the_choice_are_refused_naming_the_new_ones(tmp_path, old, sentence):
    proc = _run(*old, cwd=str(tmp_path))
    out = " ".join(proc.stdout.split())
    assert proc.returncode != 0 and sentence in out
    new = ", ".join(f"-e recipe_{item.split('=')[0]}" for item in sorted(old))
    assert f"pass {new} instead." in out and "Traceback" not in proc.stdout + proc.stderr
    assert not list(tmp_path.iterdir())


def test_recipe_list_prints_the_offer_and_writes_nothing(tmp_path):
    proc = _run("recipe_list=true", cwd=str(tmp_path))
    out = " ".join(proc.stdout.split())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "recipe mistralai/Mistral-Large-4-1T-A52B offers" in out and "gb300: strategies single_node_tp" in out
    assert "Compile the recipe for the choice" not in out and not list(tmp_path.iterdir())
