"""Issue 23: plan_lane --diff says what changed since the previous plan.json, rank by rank (_plan/_plandiff.py)."""
from __future__ import annotations

import copy
import json

from ansible_collections.lanekit.serving.plugins.plugin_utils._plan._plandiff import plan_changes, split_argv
from ansible_collections.lanekit.serving.plugins.plugin_utils._plan._planfile import read_previous_plan
from tests.unit.helpers.plans import plan

WHERE = "reports/x/plan.json"


def _plan(**kwargs):
    built, findings = plan(purpose="plan", **kwargs)
    assert built is not None, findings
    return json.loads(json.dumps(built))


def test_a_lane_wide_flag_and_a_host_env_are_named_per_rank_with_old_and_new_values():
    old = _plan()
    new = _plan(group_overrides={"serve": {"args": {"--max-num-seqs": 64}}},
                host_overrides={"spark-03": {"serve": {"env": {"NCCL_DEBUG": "INFO"}}}})
    lines = plan_changes(old, new, WHERE)
    assert lines[0].startswith(f"changes since the plan at {WHERE} (plan {old['plan_hash'][:12]} -> ")
    assert lines[1:] == ["ranks 0-7 argv --max-num-seqs: 128 -> 64", "rank 2 env NCCL_DEBUG: unset -> INFO"]


def test_the_same_plan_is_one_line_and_no_previous_plan_says_so():
    same = _plan()
    assert plan_changes(same, copy.deepcopy(same), WHERE) == [
        f"no rank changed since the plan at {WHERE} (plan {same['plan_hash'][:12]})."]
    assert plan_changes(None, same, WHERE) == [f"no previous plan at {WHERE}: every rank is new."]


def test_a_flag_that_went_a_rank_that_went_and_the_image_are_said():
    old = _plan()
    new = copy.deepcopy(old)
    new["ranks"][0]["command"] = [t for t in new["ranks"][0]["command"] if t != "--enable-prefix-caching"]
    new["image"]["ref"] = "lanekit/x:new"
    removed = new["ranks"].pop()
    new["plan_hash"] = "f" * 64
    lines = plan_changes(old, new, WHERE)
    assert f"lane image: {old['image']['ref']} -> lanekit/x:new" in lines
    assert "rank 0 argv --enable-prefix-caching: (no value) -> unset" in lines
    assert f"rank 7 ({removed['host']}): removed" in lines


def test_argv_is_read_as_flags_and_values_not_as_positions():
    assert split_argv(["vllm", "serve", "/m", "--a", "1", "--b", "--c=x", "--a", "2", "--d", "-1"]) == (
        ["vllm", "serve", "/m"], {"--a": "1 | 2", "--b": "", "--c": "x", "--d": "-1"})
    moved_old = ["vllm", "serve", "--x", "1", "--y", "2"]
    moved_new = ["vllm", "serve", "--y", "2", "--x", "1"]
    assert split_argv(moved_old)[1] == split_argv(moved_new)[1]


def test_a_previous_plan_that_is_not_a_plan_is_no_previous_plan(tmp_path):
    bad = tmp_path / "plan.json"
    bad.write_text("{not json")
    assert read_previous_plan(str(bad)) is None
    assert read_previous_plan(str(tmp_path / "absent.json")) is None
    bad.write_text(json.dumps({"ranks": []}))
    assert read_previous_plan(str(bad)) == {"ranks": []}


def test_a_secret_looking_env_or_flag_value_is_said_to_change_but_never_shown():
    """Issue 38 (item 11): serve.env / serve.args values under key-like names (only --api-key is refused) reach
    the plan; the diff says they changed, came or went, and shows neither the old nor the new value."""
    old = _plan(group_overrides={"serve": {"env": {"HF_TOKEN": "hf_oldoldoldoldoldoldoldoldoldoldold"},
                                           "args": {"--max-num-batched-tokens": 8192}}})
    new = _plan(group_overrides={"serve": {"env": {"HF_TOKEN": "hf_newnewnewnewnewnewnewnewnewnewnew",
                                                   "WANDB_API_KEY": "wandb-secret-value"},
                                           "args": {"--max-num-batched-tokens": 16384,
                                                    "--hf-token": "hf_flagflagflagflagflagflagflagflag"}}})
    lines = plan_changes(old, new, WHERE)
    text = "\n".join(lines)
    for secret in ("oldold", "newnew", "wandb-secret-value", "flagflag"):
        assert secret not in text, text
    assert "ranks 0-7 env HF_TOKEN: ******** -> ********" in lines
    assert "ranks 0-7 env WANDB_API_KEY: unset -> ********" in lines
    assert "ranks 0-7 argv --hf-token: unset -> ********" in lines
    # tuning whose name merely contains a key-like word is still shown
    assert "ranks 0-7 argv --max-num-batched-tokens: 8192 -> 16384" in lines
