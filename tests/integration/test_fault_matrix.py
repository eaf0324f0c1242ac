# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fault matrix: each hardware fault of the simulated rack's model (``sim/simrack/hardware.py``) on a tray of its
own of one fleet (2 racks x 18 trays), every registered check in one ``verify.yml`` run.

Each faulted tray must be refused by exactly the checks that ``hardware.CATCHES`` names for its fault, with the
outcome named there; every other tray must pass every check. ``docs/verification.md``'s table of what each check
catches is rendered from the same ``CATCHES`` (a unit test, ``tests/unit/test_fault_matrix_doc.py``, keeps the two
equal), so the documented table is the one this run proves.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from verify_helpers import CHECKS, ZERO, faults, gpu_trays, run_verify, verification_objects

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT / "sim"))
from simrack import hardware  # noqa: E402

if TYPE_CHECKING:
    from conftest import SimRack

pytestmark = pytest.mark.sim

# Each fault on its own tray, apart from its neighbours (a rack's first tray stays healthy: the clique's first
# member). degraded-gpu names its GPU by its index in the rack's nvbandwidth matrix: 4 x tray 11 + GPU 2.
PLACED: dict[str, tuple[str, dict[str, str]]] = {
    "missing-gpu": ("gb200-r0-t2", {"gpu": "3"}),
    "gpu-off-bus": ("gb200-r0-t5", {"gpu": "1"}),
    "nvlink-down": ("gb200-r0-t8", {"gpu": "2", "links": "1"}),
    "row-remap-pending": ("gb200-r0-t11", {"gpu": "0"}),
    "xid": ("gb200-r1-t2", {"gpu": "3", "code": "79"}),
    "nvlink-errors": ("gb200-r1-t5", {"gpu": "1", "link": "4", "count": "2"}),
    "fabric-unhealthy": ("gb200-r1-t8", {"gpu": "0"}),
    "degraded-gpu": ("gb200-r1-t11", {"rack": "1", "gpu": str(4 * 11 + 2), "factor": "0.944"}),
}

REFUSED = ("failed", "error")


def fault_specs() -> list[tuple[str, dict[str, str]]]:
    specs = []
    for fault, (tray, params) in PLACED.items():
        specs.append((fault, params if fault == "degraded-gpu" else {"node": tray, **params}))
    return specs


def names(entries: Any) -> list[str]:
    """The tray names of a record's list of trays: names, or entries ``{"node": ..., "reason": ...}``."""
    return [entry["node"] if isinstance(entry, dict) else entry for entry in entries or []]


def tray_outcomes(record: dict[str, Any]) -> dict[str, str]:
    """tray -> what one rack's record says of it: failed, error, skipped, missing or passed.

    A tray the record names as failed (``failed_nodes``) failed; a tray it skipped or misses is that, whatever the
    rack's verdict; a tray of a rack whose record is an error (the check could not judge it) is an error; the rest of
    the trays it found passed.
    """
    trays = record.get("trays") or {}
    outcome: dict[str, str] = {}
    for name in names(trays.get("found")):
        outcome[name] = "error" if record.get("verdict") == "error" else "passed"
    for name in names(trays.get("skipped")):
        outcome[name] = "skipped"
    for name in names(trays.get("missing")):
        outcome[name] = "missing"
    for name in record.get("failed_nodes") or []:
        outcome[name] = "failed"
    return outcome


def test_each_hardware_fault_is_refused_by_the_checks_that_see_it_and_the_rest_of_the_fleet_passes(
    cluster_stage: SimRack, tmp_path
):
    assert set(PLACED) == set(hardware.CATCHES), "every hardware fault of the model is placed on a tray"
    fleet = gpu_trays(cluster_stage)
    assert [len(trays) for trays in fleet.values()] == [18, 18], "the matrix runs on 2 racks x 18 trays"
    every_check = sorted(CHECKS)
    assert sorted(hardware.CHECK_ORDER) == every_check, "the documented matrix has a column per registered check"

    with faults(cluster_stage, *fault_specs()):
        run = run_verify(
            cluster_stage,
            tmp_path / "report",
            extra_vars={
                "gpu_fabric_verify_nccl": True,
                "verify_nccl_image": "registry.invalid/nccl-tests:2.13-sim",
                "gpu_fabric_verify_checks": ["gpu_health", "dcgm_diag"],
            },
        )

    assert run.process.returncode != 0, "a faulted fleet fails the run"
    records = run.records()
    assert sorted(records) == every_check, run.output[-3000:]

    seen: dict[str, dict[str, str]] = {}  # tray -> check -> outcome
    for check, racks in records.items():
        for rack in fleet:
            for tray, outcome in tray_outcomes(racks[rack]).items():
                seen.setdefault(tray, {})[check] = outcome

    faulted = {tray: fault for fault, (tray, _params) in PLACED.items()}
    wrong = []
    for tray in [name for names in fleet.values() for name in names]:
        refused = {check: outcome for check, outcome in seen.get(tray, {}).items() if outcome in REFUSED}
        expected = hardware.CATCHES[faulted[tray]] if tray in faulted else {}
        if refused != expected:
            wrong.append(f"{tray} ({faulted.get(tray, 'healthy')}): refused by {refused}, expected {expected}")
        if tray not in faulted:
            not_passed = {check: outcome for check, outcome in seen.get(tray, {}).items() if outcome != "passed"}
            if not_passed or set(seen.get(tray, {})) != set(every_check):
                wrong.append(f"{tray} (healthy): {seen.get(tray)}; every check must pass it")
    assert not wrong, "\n".join(wrong)

    # The report names each faulted tray; nothing is left behind.
    markdown = run.markdown()
    assert all(tray in markdown for tray in faulted)
    assert verification_objects(cluster_stage, run.prefix) == ZERO
