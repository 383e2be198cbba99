"""Issue 23: plan_lane's output is what a person checks: with --diff what changed since the previous
plan.json, rank by rank; and no screen of per-host "skipping" lines for the node checks a plan does not do."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.unit.helpers.plans import REPO, VLLM

PLAYBOOK = os.path.join(REPO, "playbooks", "plan_lane.yml")
ANSIBLE_PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")

pytestmark = pytest.mark.skipif(not os.path.exists(ANSIBLE_PLAYBOOK), reason="ansible-playbook is not beside python")


def _plan(tmp_path, *extra):
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    argv = [ANSIBLE_PLAYBOOK, PLAYBOOK, "-i", os.path.join(REPO, "inventories", "spark8"), "-e", f"lane={VLLM}",
            "-e", f"lanekit_reports_dir={tmp_path}", *extra]
    proc = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def test_diff_names_what_changed_since_the_previous_plan_and_no_host_is_skipped_per_check(tmp_path):
    first = _plan(tmp_path, "--diff")
    assert f"no previous plan at {tmp_path}/{VLLM}/plan.json: every rank is new." in first
    # Eight nodes, five node checks a plan leaves out: these were 43 lines; what is left is run once.
    assert first.count("skipping:") <= 3, first

    second = _plan(tmp_path, "--diff", "-e", 'lane_cli_overrides={"serve": {"args": {"--max-num-seqs": 64}}}')
    assert "ranks 0-7 argv --max-num-seqs: 128 -> 64" in second
    assert '"--max-num-seqs"' not in second  # a list of changes, not a JSON dump

    quiet = _plan(tmp_path, "-e", 'lane_cli_overrides={"serve": {"args": {"--max-num-seqs": 64}}}')
    assert "changes since the plan" not in quiet and "no rank changed" not in quiet


def test_a_run_from_a_subdirectory_of_the_users_repository_reads_its_lanes_and_says_where_from(tmp_path):
    """Issue 37, item 5: run from <repo>/inventories, the plan used the collection's copy of a lane and wrote
    reports/ under inventories/; once the user had a lanes/ folder the collection's lanes were not found at all."""
    import shutil

    import yaml

    repo = tmp_path / "my-cluster"
    shutil.copytree(os.path.join(REPO, "inventories", "spark8"), repo / "inventories" / "spark8")
    (repo / "lanes").mkdir(parents=True)
    with open(os.path.join(REPO, "lanes", f"{VLLM}.yml"), encoding="utf-8") as handle:
        lane = yaml.safe_load(handle)
    lane["serve"]["args"]["--max-num-seqs"] = 77  # the user's edit
    (repo / "lanes" / f"{VLLM}.yml").write_text(yaml.safe_dump(lane, sort_keys=False), encoding="utf-8")
    for folder in (repo, repo / "lanes", repo / "inventories"):
        os.chmod(folder, 0o755)
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_NOCOLOR="1")

    def plan(lane_name):
        argv = [ANSIBLE_PLAYBOOK, PLAYBOOK, "-i", "spark8", "-e", f"lane={lane_name}"]
        return subprocess.run(argv, cwd=repo / "inventories", env=env, capture_output=True, text=True, timeout=300,
                              check=False)

    mine = plan(VLLM)
    assert mine.returncode == 0, mine.stdout + mine.stderr
    text = " ".join(mine.stdout.split())
    assert f"from lane {repo}/lanes/{VLLM}.yml" in text, text[-3000:]
    assert "--max-num-seqs 77" in text or "--max-num-seqs', '77'" in text or "77" in text
    assert (repo / "reports" / VLLM / "plan.json").is_file(), "the reports belong in the user's repository"
    assert not (repo / "inventories" / "reports").exists()

    # A lane the user's folder lacks falls back to the collection's copy by name, and says so.
    theirs = plan("mistral-large4-nvfp4-8x-sglang")
    assert theirs.returncode == 0, theirs.stdout + theirs.stderr
    assert f"from lane {REPO}/lanes/mistral-large4-nvfp4-8x-sglang.yml" in " ".join(theirs.stdout.split()) or \
        "/lanes/mistral-large4-nvfp4-8x-sglang.yml" in theirs.stdout
