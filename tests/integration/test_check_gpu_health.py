# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The check gpu_health on the simulated fleet (2 racks x 18 trays): ``verify.yml --tags gpu_health`` passes on the
healthy fleet, and each fault of its stand-in (sim/simrack/programs/gpu_health.py) fails the rack it is on, naming
the tray and the GPU, in the record, the report and JUnit; nothing is left behind."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from verify_helpers import ZERO, faults, gpu_trays, run_verify, verification_objects

if TYPE_CHECKING:
    from conftest import SimRack

pytestmark = pytest.mark.sim


def test_the_healthy_fleet_passes_on_every_tray_of_both_racks(cluster_stage: SimRack, tmp_path):
    run = run_verify(cluster_stage, tmp_path / "report", "--tags", "gpu_health")

    assert run.process.returncode == 0, run.output[-3000:]
    records = run.records()
    assert set(records) == {"gpu_health"}, "only the check the tags name runs"
    trays = gpu_trays(cluster_stage)
    for rack in ("rack0", "rack1"):
        record = records["gpu_health"][rack]
        assert record["passed"] is True, record["summary"]
        assert record["summary"].startswith(f"rack {rack}: GPU health signals: no problem on {len(trays[rack])} of ")
        assert sorted(record["details"]["trays"]) == sorted(trays[rack])
    assert run.report()["racks"]["rack1"]["checks"]["gpu_health"] == "passed"
    assert verification_objects(cluster_stage, run.prefix) == ZERO


def test_each_fault_fails_its_rack_naming_the_tray_and_the_gpu(cluster_stage: SimRack, tmp_path):
    with faults(
        cluster_stage,
        ("xid", {"node": "gb200-r1-t5", "gpu": "2", "code": "79"}),
        ("nvlink-errors", {"node": "gb200-r1-t9", "gpu": "1", "link": "4", "count": "2"}),
        ("row-remap-pending", {"node": "gb200-r1-t11", "gpu": "3"}),
    ):
        run = run_verify(cluster_stage, tmp_path / "report", "--tags", "gpu_health")

    assert run.process.returncode != 0
    records = run.records()["gpu_health"]
    assert records["rack0"]["passed"] is True
    rack1 = records["rack1"]
    assert rack1["passed"] is False and rack1["verdict"] == "failed"
    assert rack1["failed_nodes"] == ["gb200-r1-t5", "gb200-r1-t9", "gb200-r1-t11"]
    problems = rack1["node_problems"]
    assert problems["gb200-r1-t5"].startswith("GPU 2: Xid 79 (GPU has fallen off the bus)")
    assert problems["gb200-r1-t9"] == "GPU 1 NVLink 4: Link recovery failed events 2"
    assert "GPU 3: a row remapping is pending" in problems["gb200-r1-t11"]
    assert rack1["summary"].startswith("rack rack1: GPU health signals: problems on 3 of 18 trays: gb200-r1-t5: GPU 2")
    failures = run.junit_failures()
    failed = {name: text for name, text in failures.items() if text and "gpu_health" in " ".join(name)}
    assert len(failed) == 1 and "gb200-r1-t5" in next(iter(failed.values()))
    report = run.report()
    assert report["racks"]["rack1"]["checks"]["gpu_health"] == "failed"
    assert "gb200-r1-t9" in run.markdown()
    assert verification_objects(cluster_stage, run.prefix) == ZERO
