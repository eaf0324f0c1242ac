# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The simulated rack's one hardware model (sim/simrack/hardware.py): each tray's and GPU's state from faults.json,
from which every stand-in renders; no rack needed."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT / "sim"))

from simrack import hardware  # noqa: E402

TRAY = "gb200-r0-t2"


def test_a_tray_without_faults_has_four_healthy_gpus_with_every_link_up():
    tray = hardware.tray({}, TRAY)
    assert (tray.rack, tray.index, tray.capacity, tray.allocatable) == (0, 2, 4, 4)
    assert [g.index for g in tray.present] == [0, 1, 2, 3]
    assert all(g.healthy and g.links_up == 18 and g.fabric_ok for g in tray.gpus)


def test_missing_gpu_leaves_gpu_3_unenumerated_by_default_and_only_on_its_tray():
    faults = {"missing-gpu": {"node": TRAY}}
    tray = hardware.tray(faults, TRAY)
    assert [g.index for g in tray.present] == [0, 1, 2]
    assert (tray.capacity, tray.allocatable) == (3, 3)
    assert hardware.tray(faults, "gb200-r0-t1").capacity == 4
    assert [g.index for g in hardware.tray({"missing-gpu": {"node": TRAY, "gpu": "1"}}, TRAY).present] == [0, 2, 3]


def test_a_gpu_off_the_bus_is_enumerated_not_reachable_and_has_xid_79():
    tray = hardware.tray({"gpu-off-bus": {"node": TRAY, "gpu": "2"}}, TRAY)
    assert (tray.capacity, tray.allocatable) == (4, 3)
    assert [g.index for g in tray.reachable] == [0, 1, 3]
    assert tray.gpu(2).xids == (79,)
    assert hardware.tray({"gpu-off-bus": {"node": TRAY}}, TRAY).gpu(0).on_bus is False  # GPU 0 by default


def test_nvlink_down_takes_the_highest_links_of_the_gpu_and_scales_its_bandwidth():
    gpu = hardware.tray({"nvlink-down": {"node": TRAY, "gpu": "1", "links": "3"}}, TRAY).gpu(1)
    assert gpu.links_down == (15, 16, 17)
    assert gpu.links_up == 15
    assert gpu.factor == pytest.approx(15 / 18)
    assert hardware.tray({"nvlink-down": {"node": TRAY}}, TRAY).gpu(0).links_down == (17,)


@pytest.mark.parametrize(("factor", "lost"), [(0.944, 1), (0.5, 9), (0.99, 1), (1.0, 0), (0.01, 18)])
def test_degraded_gpu_loses_round_18_times_the_lost_fraction_of_links_at_least_one(factor, lost):
    assert hardware.links_lost(factor) == lost


def test_degraded_gpu_names_a_gpu_by_its_rack_index_and_sets_links_down_on_that_trays_gpu():
    faults = {"degraded-gpu": {"rack": "0", "gpu": "9", "factor": "0.5"}}  # tray 2, GPU 1
    gpu = hardware.tray(faults, TRAY).gpu(1)
    assert gpu.links_up == 9
    assert gpu.factor == 0.5  # the matrix keeps the exact factor
    assert all(g.links_up == 18 for g in hardware.tray(faults, "gb200-r0-t1").gpus)
    assert all(g.links_up == 18 for g in hardware.tray(faults, "gb200-r1-t2").gpus)  # another rack
    assert hardware.tray_of_rack_gpu(0, 9) == (TRAY, 1)
    assert hardware.rack_gpu(2, 1) == 9


def test_row_remap_xid_nvlink_errors_and_fabric_set_the_gpus_state():
    faults = {
        "row-remap-pending": {"node": TRAY, "gpu": "3"},
        "xid": {"node": TRAY, "gpu": "0,2", "code": "48"},
        "nvlink-errors": {"node": TRAY, "gpu": "1", "link": "7", "count": "3"},
        "fabric-unhealthy": {"node": TRAY, "gpu": "2"},
    }
    tray = hardware.tray(faults, TRAY)
    assert (tray.gpu(3).dram_uncorrectable, tray.gpu(3).remapped_rows_uncorrectable, tray.gpu(3).remap_pending) == (
        1,
        1,
        True,
    )
    assert [g.xids for g in tray.gpus] == [(48,), (), (48,), ()]
    assert tray.gpu(1).recovery_failures == {7: 3}
    assert (tray.gpu(2).fabric_state, tray.gpu(2).fabric_status, tray.gpu(2).fabric_health) == (
        "Completed",
        "Failure",
        "Unhealthy",
    )
    assert not tray.gpu(2).fabric_ok and tray.gpu(0).fabric_ok


def test_the_knobs_that_came_from_gpu_health_still_hit_every_gpu_without_gpu():
    tray = hardware.tray({"xid": {"node": TRAY, "code": "79"}, "row-remap-pending": {"node": TRAY}}, TRAY)
    assert all(g.xids == (79,) and g.remap_pending for g in tray.gpus)


def test_rank_factors_follow_the_trays_the_ranks_run_on():
    faults = {"nvlink-down": {"node": TRAY, "gpu": "1", "links": "2"}}
    ranks = [("gb200-r0-t1", g) for g in range(4)] + [(TRAY, g) for g in range(4)]
    assert hardware.rank_factors(faults, ranks) == {5: pytest.approx(16 / 18)}
    assert hardware.rank_factors({}, ranks) == {}


def test_every_hardware_fault_has_catches_naming_known_checks_and_outcomes():
    checks = {"cliques", "imex_channel", "nvbandwidth", "nccl", "gpu_health", "dcgm_diag"}
    assert set(hardware.CATCHES) == set(hardware.HARDWARE_FAULTS)
    for fault, caught in hardware.CATCHES.items():
        assert caught, fault
        assert set(caught) <= checks, fault
        assert set(caught.values()) <= {"failed", "error"}, fault
