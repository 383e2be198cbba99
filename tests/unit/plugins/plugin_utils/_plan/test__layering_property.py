"""Issue 37: over generated inventories (group_vars, child-group and host_vars layers) and -e overrides, on
both seed lanes, every plan is either a refusal in one sentence or a plan in which each rank's value is
what the documented layering says. On the code before the fix it found a lane-wide variable set in one
host's host_vars (applied to every rank from the head, or ignored from another host) and one engine flag
in two spellings (both on the argv, the lints reading the first while the engine obeys the last)."""
from __future__ import annotations

import copy

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.plugin_utils._lane._schema import CLI_SOURCE, inventory_layers
from ansible_collections.lanekit.serving.plugins.plugin_utils._plan._render import plan_lane
from tests.unit.helpers.plans import IMAGES, LANES, SGLANG, VLLM, spark8_hosts

HOSTS = [f"spark-0{i}" for i in range(1, 9)]
# A tuning flag of each lane that no lint refuses at any of the generated values.
FLAG = {VLLM: "--max-num-seqs", SGLANG: "--max-running-requests"}
SHM = st.sampled_from(["32g", "48g", "64g"])
INVENTORY_SHM = spark8_hosts()[0]["vars"]["lanekit_rank_shm_size"]


def spelled(flag: str) -> st.SearchStrategy[str]:
    """The flag in a spelling the engine's parser reads as it (dashes, or underscores in any of its words)."""
    words = flag[2:].split("-")
    return st.lists(st.sampled_from(["-", "_"]), min_size=len(words) - 1, max_size=len(words) - 1).map(
        lambda seps: "--" + "".join(w + s for w, s in zip(words, seps + [""], strict=True)))


@st.composite
def inventories(draw):
    lane = draw(st.sampled_from([VLLM, SGLANG]))
    flag = FLAG[lane]
    # lanekit_rank_shm_size: in group_vars (every host), in a child group's vars (some hosts), in host_vars.
    group_shm = draw(st.one_of(st.none(), SHM))
    child = draw(st.sets(st.sampled_from(HOSTS), max_size=8))
    child_shm = draw(st.one_of(st.none(), SHM))
    host_shm = draw(st.dictionaries(st.sampled_from(HOSTS), SHM, max_size=2))
    # The flag: in the group layer, in the command line's layer, each in any spelling.
    group_flag = draw(st.one_of(st.none(), st.tuples(spelled(flag), st.integers(8, 256))))
    cli_flag = draw(st.one_of(st.none(), st.tuples(spelled(flag), st.integers(8, 256))))
    return lane, group_shm, child, child_shm, host_shm, group_flag, cli_flag


def _hosts(case):
    lane, group_shm, child, child_shm, host_shm, group_flag, cli_flag = case
    per_host = {}
    for name in HOSTS:
        # group_vars/all of the example inventory sets it; a generated group value replaces that
        value = group_shm if group_shm is not None else INVENTORY_SHM
        if name in child and child_shm is not None:
            value = child_shm  # a child group's vars beat the parent's (Ansible's order)
        if name in host_shm:
            value = host_shm[name]  # host_vars beat every group
        if value is not None:
            per_host[name] = {"lanekit_rank_shm_size": value}
    hosts = spark8_hosts(per_host_vars=per_host)
    group_layer = {"serve": {"args": {group_flag[0]: group_flag[1]}}} if group_flag else None
    for host in hosts:
        host["layers"] = [(s, layer) for s, layer in inventory_layers(host["name"], group_layer, None) if layer]
        if cli_flag:
            host["layers"].append((CLI_SOURCE, {"serve": {"args": {cli_flag[0]: cli_flag[1]}}}))
    return hosts, {h: v["lanekit_rank_shm_size"] for h, v in per_host.items()}


def _value_after(argv, flag):
    return [argv[i + 1] for i, word in enumerate(argv) if word == flag]


# database=None: no .hypothesis/ folder in the checkout; derandomize: the same 60 cases on every run (make check)
@settings(max_examples=60, deadline=None, database=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(inventories())
def test_every_plan_is_a_refusal_or_each_rank_gets_what_the_layering_says(case):
    lane, _group_shm, _child, _child_shm, _host_shm, group_flag, cli_flag = case
    hosts, shm_by_host = _hosts(case)
    try:
        plan, findings = plan_lane(LANES, IMAGES, lane, copy.deepcopy(hosts), None, "plan", None)
    except LanekitError as err:
        text = str(err)
        assert text and "\n" not in text and "Traceback" not in text
        # The only refusal these inputs earn: a lane-wide variable the hosts disagree on.
        assert len(set(shm_by_host.get(h) for h in HOSTS)) > 1, text
        assert text.startswith("lanekit_rank_shm_size is lane-wide"), text
        return
    assert plan is not None, findings["errors"]
    # Lane-wide: accepted only when every host says the same (or none says anything).
    assert len(set(shm_by_host.get(h) for h in HOSTS)) == 1
    want_shm = shm_by_host.get(HOSTS[0])
    flag = FLAG[lane]
    want_flag = str(cli_flag[1]) if cli_flag else str(group_flag[1]) if group_flag else None
    for rank in plan["ranks"]:
        argv = rank["docker_argv"]
        if want_shm is not None:
            assert _value_after(argv, "--shm-size") == [want_shm], (rank["host"], argv)
        # One flag, one spelling, one value on every rank: the one the last layer that set it gave.
        spellings = [w for w in argv if w.startswith("--") and w.replace("_", "-") == flag]
        assert spellings in ([], [flag]), spellings
        if want_flag is not None:
            assert _value_after(argv, flag) == [want_flag], (rank["host"], argv)
