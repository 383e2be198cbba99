"""The stand-ins' shared device (tests/sim/standin memory.py): an engine's memory claim lives as long as
its process, and another engine on the same node (network namespace) starts with that much less free."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from standin_helpers import STANDIN

sys.path.insert(0, STANDIN)
from lanekit_standin import memory  # noqa: E402

HOLDER = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, {standin!r})
    from lanekit_standin import memory
    memory.claim(107.245)
    print("claimed", flush=True)
    time.sleep(60)
""")


def test_a_live_claim_lowers_the_free_memory_of_the_next_engine_until_its_process_ends(monkeypatch):
    monkeypatch.setenv("STANDIN_DEVICE_CLAIMS", "1")
    before = memory.Device.from_env().free_gib
    env = dict(os.environ, STANDIN_DEVICE_CLAIMS="1")
    holder = subprocess.Popen([sys.executable, "-c", HOLDER.format(standin=STANDIN)], env=env,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "claimed"
        during = memory.Device.from_env().free_gib
        assert abs((before - during) - 107.245) < 1e-6
        memory.claim(1.5)  # this process's own claim is not counted against itself
        assert abs(memory.Device.from_env().free_gib - during) < 1e-6
    finally:
        holder.kill()
        holder.wait()
        for sock in memory._HELD:
            sock.close()
        memory._HELD.clear()
    assert abs(memory.Device.from_env().free_gib - before) < 1e-6  # the kernel dropped the dead claim


def test_claims_are_off_unless_the_image_turns_them_on(monkeypatch, tmp_path):
    monkeypatch.delenv("STANDIN_DEVICE_CLAIMS", raising=False)
    table = tmp_path / "unix"
    table.write_text("Num RefCount Protocol Flags Type St Inode Path\n"
                     "0000: 00000002 00000000 00010000 0001 01 1 @lksim-device-claim:abc:50.000\n")
    assert memory.claimed_by_others_gib(str(table)) == 0.0
    monkeypatch.setenv("STANDIN_DEVICE_CLAIMS", "1")
    assert memory.claimed_by_others_gib(str(table)) == 50.0
