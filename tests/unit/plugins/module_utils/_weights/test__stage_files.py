"""The stager's per-file steps (module_utils/_weights/_stage_files.py): phases, the worker pool,
verify of a present file, and the real-directory guard. The whole pipeline is test__staging.py's."""
from __future__ import annotations

import os
import threading

import pytest

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.module_utils._weights._stage_files import Phase
from ansible_collections.lanekit.serving.plugins.module_utils._weights._stage_sources import LocalSource
from ansible_collections.lanekit.serving.plugins.module_utils._weights._staging import Stager
from tests.unit.plugins.module_utils._weights.test__staging import make_source


def test_a_phase_counts_files_and_bytes_from_many_threads():
    phase = Phase("fetch")
    threads = [threading.Thread(target=lambda: [phase.add(1 << 20) for _i in range(100)]) for _t in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    phase.seconds = 0.5
    assert phase.as_dict() == {"files": 400, "bytes": 400 << 20, "seconds": 0.5, "gib_per_s": 0.781}
    assert Phase("plan").as_dict()["gib_per_s"] == 0.0


def test_the_pool_raises_the_first_real_failure_not_the_aborts_it_caused(tmp_path):
    stager = Stager(LocalSource(str(tmp_path)), str(tmp_path / "dest"), workers=2)
    plans = [type("Plan", (), {"spec": type("Spec", (), {"size": size, "path": f"f{size}"})()})() for size in (1, 2, 3)]

    def work(plan, digests):
        if plan.spec.size == 3:  # the largest runs first
            raise LanekitError("f3 is corrupt.")
        stager.abort.wait(5)
        raise LanekitError(f"Staging of {plan.spec.path} was aborted because another file failed.")

    with pytest.raises(LanekitError, match="f3 is corrupt"):
        stager._run_pool(plans, work, {})


def test_a_link_on_the_way_into_the_destination_is_refused(tmp_path):
    make_source(tmp_path / "src", n=1, size=10)
    dest = tmp_path / "dest"
    (dest / "sub").parent.mkdir()
    os.symlink(tmp_path, dest / "sub")
    stager = Stager(LocalSource(str(tmp_path / "src")), str(dest))
    with pytest.raises(LanekitError, match="is a symlink; lanekit writes only into real directories"):
        stager._real_dirs("sub/deeper", create=True)
    assert stager._real_dirs("other/deeper", create=False) == str(dest / "other")
