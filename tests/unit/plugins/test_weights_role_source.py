# Copyright: lanekit developers
# Apache-2.0
"""The weights role passes the lane's model.source endpoint and patterns to the stager (roles/weights/defaults)."""
from __future__ import annotations

from pathlib import Path

import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

DEFAULTS = Path(__file__).parents[3] / "roles" / "weights" / "defaults" / "main.yml"


def render(source: dict) -> dict:
    defaults = yaml.safe_load(DEFAULTS.read_text())
    variables = {k: trust_as_template(v) if isinstance(v, str) else v for k, v in defaults.items()}
    variables["lanekit_plan"] = {"weights": {"path": "/mnt/nfs/models/m", "model_id": "org/m", "source": source}}
    templar = Templar(loader=DataLoader(), variables=variables)
    return {k: templar.template(trust_as_template("{{ " + k + " }}")) for k in
            ("weights_hf_endpoint", "weights_allow_patterns", "weights_ignore_patterns")}


def test_the_lanes_endpoint_and_patterns_reach_the_stager():
    got = render({"kind": "hf", "endpoint": "https://hub.mirror.example", "allow_patterns": ["*.safetensors"],
                  "ignore_patterns": []})
    assert got == {"weights_hf_endpoint": "https://hub.mirror.example", "weights_allow_patterns": ["*.safetensors"],
                   "weights_ignore_patterns": []}


def test_without_them_the_public_hub_and_the_engine_files():
    got = render({"kind": "hf"})
    assert got["weights_hf_endpoint"] == ""
    assert "*.safetensors" in got["weights_allow_patterns"] and "original/*" in got["weights_ignore_patterns"]


def in_use(workloads: dict) -> object:
    """weights_in_use_json for the nodes' registered node_workloads results, parsed."""
    import json
    defaults = yaml.safe_load(DEFAULTS.read_text())
    variables = {k: trust_as_template(v) if isinstance(v, str) else v for k, v in defaults.items()}
    variables["groups"] = {"lane_nodes": sorted(workloads)}
    variables["hostvars"] = {h: ({"weights_workloads": w} if w is not None else {}) for h, w in workloads.items()}
    templar = Templar(loader=DataLoader(), variables=variables)
    return json.loads(str(templar.template(trust_as_template("{{ weights_in_use_json }}"))).strip())


def rank(path: str | None) -> dict:
    labels = {"io.lanekit.lane": "l"}
    if path:
        labels["io.lanekit.weights"] = path
    return {"Config": {"Labels": labels}}


def test_in_use_lists_what_the_ranks_read_or_is_unknown():
    other = {"Config": {"Labels": {"maintainer": "x"}}}
    assert in_use({"n1": {"containers": [rank("/w/m/.revisions/a"), other]},
                   "n2": {"containers": [rank("/w/m/.revisions/a")]}}) == ["/w/m/.revisions/a"]
    assert in_use({"n1": {"containers": []}}) == []
    assert in_use({"n1": {"containers": [rank("/w/m/.revisions/a")]}, "n2": None}) is None, "a node not asked"
    assert in_use({"n1": {"containers": [rank(None)]}}) is None, "a rank deployed before the label"
