# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The check dcgm_diag on the simulated fleet (2 racks x 18 trays): ``verify.yml --tags dcgm_diag`` passes on the
healthy fleet, and the faults of its stand-in (sim/simrack/programs/dcgm_diag.py) fail the rack they are on, naming
the tray and the GPU, in the record, the report and JUnit; DCGM's IMEX alarm (code 122) does not fail its tray; a
tray whose GPUs a job holds is skipped with its reason; nothing is left behind."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from verify_helpers import ZERO, faults, gpu_trays, run_verify, verification_objects

if TYPE_CHECKING:
    from conftest import SimRack

pytestmark = pytest.mark.sim

# the check's own wait is 1020 s at level 1 (a real tray pulls the DCGM image): the sim's pods need seconds
FAST = {"verify_checks_timeout": 180}
ROW_REMAP = (
    "GPU 2: software failed: GPU 2 had memory errors and row remappings are pending Check DCGM and system logs for "
    "errors. Reset GPU. Restart DCGM. Rerun diagnostics. (DCGM_FR code 85)"
)


def test_the_healthy_fleet_passes_on_every_tray_of_both_racks(cluster_stage: SimRack, tmp_path):
    run = run_verify(cluster_stage, tmp_path / "report", "--tags", "dcgm_diag", extra_vars=FAST)

    assert run.process.returncode == 0, run.output[-3000:]
    records = run.records()
    assert set(records) == {"dcgm_diag"}, "only the check the tags name runs"
    trays = gpu_trays(cluster_stage)
    for rack in ("rack0", "rack1"):
        record = records["dcgm_diag"][rack]
        assert record["passed"] is True, record["summary"]
        assert record["summary"].startswith(
            f"rack {rack}: DCGM diagnostics (level 1): no failure on {len(trays[rack])} of {len(trays[rack])} trays"
        )
        assert sorted(record["details"]["trays"]) == sorted(trays[rack])
        tray = record["details"]["trays"][trays[rack][0]]
        assert (tray["exit_code"], tray["gpus"], tray["tests"]) == (0, [0, 1, 2, 3], ["software"])
    assert run.report()["racks"]["rack1"]["checks"]["dcgm_diag"] == "passed"
    assert verification_objects(cluster_stage, run.prefix) == ZERO


def test_each_fault_fails_its_rack_naming_the_tray_and_the_gpu(cluster_stage: SimRack, tmp_path):
    with faults(
        cluster_stage,
        ("dcgm-fail", {"node": "gb200-r1-t5", "gpu": "2", "test": "software", "code": "85"}),
        ("dcgm-runtime-error", {"node": "gb200-r1-t9"}),
        ("dcgm-imex-unhealthy", {"node": "gb200-r1-t11"}),
        ("busy-node", {"node": "gb200-r0-t2"}),
    ):
        run = run_verify(cluster_stage, tmp_path / "report", "--tags", "dcgm_diag", extra_vars=FAST)

    assert run.process.returncode != 0
    records = run.records()["dcgm_diag"]
    rack0 = records["rack0"]
    assert rack0["passed"] is True, rack0["summary"]
    assert "1 tray skipped: gb200-r0-t2 GPUs in use: 4 of 4 nvidia.com/gpu held by" in rack0["summary"]
    rack1 = records["rack1"]
    assert rack1["passed"] is False and rack1["verdict"] == "failed"
    assert rack1["failed_nodes"] == ["gb200-r1-t5", "gb200-r1-t9"], "IMEX unhealthy (122) fails no tray"
    problems = rack1["node_problems"]
    assert problems["gb200-r1-t5"] == ROW_REMAP
    assert problems["gb200-r1-t9"].startswith("dcgmi diag did not run: Error: Unable to complete diagnostic")
    imex = rack1["details"]["trays"]["gb200-r1-t11"]
    assert imex["problems"] == [] and "(DCGM_FR code 122), not counted" in imex["notes"][0]
    assert rack1["summary"].startswith(
        "rack rack1: DCGM diagnostics: problems on 2 of 18 trays: gb200-r1-t5: GPU 2: software failed: GPU 2 had "
        "memory errors and row remappings are pending"
    )
    failures = run.junit_failures()
    failed = {name: text for name, text in failures.items() if text and "dcgm_diag" in " ".join(name)}
    assert len(failed) == 1 and "gb200-r1-t5: GPU 2: software failed" in next(iter(failed.values()))
    report = run.report()
    assert report["racks"]["rack1"]["checks"]["dcgm_diag"] == "failed"
    assert report["racks"]["rack0"]["checks"]["dcgm_diag"] == "passed"
    assert "gb200-r1-t9" in run.markdown() and "DCGM_FR code 85" in run.markdown()
    assert verification_objects(cluster_stage, run.prefix) == ZERO
