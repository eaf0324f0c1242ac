# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Load held: playbooks/verify.yml again and again on the healthy simulated fleet, then once on 3 racks.

Every run must pass every check on every tray (a failure here is a false verdict: nothing is broken) and
leave no object behind. ``GPU_FABRIC_SOAK_RUNS`` sets the count (default 5, what ``make test`` runs;
docs/RELIABILITY.md records a longer run). Each run's wall time and verdict are printed as a table.
"""

from __future__ import annotations

import os
import sys
import time
from typing import TYPE_CHECKING

import pytest
from verify_helpers import ZERO, gpu_trays, run_verify, verification_objects

if TYPE_CHECKING:
    from conftest import SimRack

pytestmark = pytest.mark.sim

RUNS = int(os.environ.get("GPU_FABRIC_SOAK_RUNS", "5"))


def soak(sim_rack: SimRack, tmp_path, runs: int) -> list[tuple[int, float, str]]:
    rows = []
    for index in range(runs):
        started = time.monotonic()
        run = run_verify(sim_rack, tmp_path / f"run{index}")
        wall = time.monotonic() - started
        every = [record for by_rack in run.records().values() for record in by_rack.values()]
        false = [record["summary"] for record in every if not record["passed"]]
        left = verification_objects(sim_rack, run.prefix)
        rows.append((index + 1, wall, "passed" if not false and run.process.returncode == 0 else "FALSE VERDICT"))
        assert run.process.returncode == 0 and not false, (
            f"run {index + 1}: a false verdict: {false or run.output[-3000:]}"
        )
        assert sorted(run.records()) == ["cliques", "imex_channel", "nvbandwidth"]
        assert all(sorted(by_rack) == sorted(gpu_trays(sim_rack)) for by_rack in run.records().values())
        sim_rack.wait_until(
            f"run {index + 1}'s objects to be gone",
            lambda prefix=run.prefix: verification_objects(sim_rack, prefix) == ZERO,
            timeout=60,
        )
        assert left["pods"] == 0 and left.get("mpijobs.kubeflow.org", 0) == 0, left
    sys.stderr.write("\nsoak: run  wall (s)  verdict\n")
    for index, wall, verdict in rows:
        sys.stderr.write(f"soak: {index:>3}  {wall:8.1f}  {verdict}\n")
    return rows


def test_repeated_runs_on_the_healthy_fleet_pass_and_leave_nothing(cluster_stage: SimRack, tmp_path):
    assert len(soak(cluster_stage, tmp_path, RUNS)) == RUNS


def test_a_run_on_three_full_racks_passes_and_leaves_nothing(cluster_stage: SimRack, tmp_path):
    status = cluster_stage.status()
    racks, trays = status["racks"], status["trays_per_rack"]
    cluster_stage.rack("up", "--racks", "3", "--trays-per-rack", "18")
    try:
        third = {f"gb200-r2-t{tray}" for tray in range(18)}

        def published() -> bool:
            slices = cluster_stage.get_json("resourceslices")["items"]
            return third <= {item["spec"].get("nodeName") for item in slices}

        cluster_stage.wait_until("the third rack's trays to publish their devices", published, timeout=180)
        soak(cluster_stage, tmp_path, 1)
    finally:
        cluster_stage.rack("up", "--racks", str(racks), "--trays-per-rack", str(trays))
