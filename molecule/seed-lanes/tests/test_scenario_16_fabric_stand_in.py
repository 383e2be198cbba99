"""Scenario 16: the fabric gate on a stand-in lane. The stand-in images carry no torch, so the gate
says it cannot run, never a silent pass: with inventories/sim's fabric_gate=warn the run goes on, a
strict gate refuses the lane, and the report records cannot_run. (The gate for real, on the real vLLM
lane's CPU nodes: real-vllm's scenario 14.) Test code only (not part of the collection)."""
from __future__ import annotations

import json
import os

from simlib import ROOT, flat, run_playbook


def report(lane: str) -> dict:
    with open(os.path.join(ROOT, "reports", lane, "fabric.json"), encoding="utf-8") as fh:
        return json.load(fh)


def test_a_stand_in_lane_says_the_gate_cannot_run():
    # inventories/sim sets fabric_gate: warn for its stand-in lanes (no torch in their images). The
    # converge's deploy measured it already, and a result the image owes is held (no probe starts again).
    lane = "mistral-large4-nvfp4-8x-vllm"
    warned = run_playbook("fabric_lane.yml", lane=lane, timeout=900)
    text = flat(warned.stdout)
    assert warned.returncode == 0, text[-3000:]
    assert "The fabric gate cannot run on lane" in text and "no usable torch" in text
    assert "fabric_gate=warn: the deploy goes on." in text
    strict = run_playbook("fabric_lane.yml", lane=lane, extra=["-e", "fabric_gate=strict"], timeout=900)
    assert strict.returncode != 0 and "The fabric gate cannot run on lane" in flat(strict.stdout)
    assert report(lane)["verdict"]["status"] == "cannot_run"
