# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""playbooks/verify.yml on the healthy simulated rack: every check passes, the report says so, nothing is left."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from verify_helpers import ZERO, run_verify, verification_objects

if TYPE_CHECKING:
    from conftest import SimRack

pytestmark = pytest.mark.sim


def test_verify_passes_on_the_healthy_rack(cluster_stage: SimRack, tmp_path):
    run = run_verify(cluster_stage, tmp_path / "report")

    assert run.process.returncode == 0, run.output[-6000:]
    records = run.records()
    assert sorted(records) == ["cliques", "imex_channel", "nvbandwidth"]
    assert {check: record["passed"] for check, record in records.items()} == {
        "cliques": True,
        "imex_channel": True,
        "nvbandwidth": True,
    }
    cliques = records["cliques"]["details"]
    assert cliques["gpu_nodes"] == 4
    assert list(cliques["cliques"].values()) == [["gb200-r0-t0", "gb200-r0-t1", "gb200-r0-t2", "gb200-r0-t3"]]
    assert cliques["unlabelled_nodes"] == []

    imex = records["imex_channel"]["details"]
    assert imex["channel0"].startswith("crw-rw-rw-")
    assert imex["node"].startswith("gb200-r0-t")
    assert records["imex_channel"]["summary"].startswith("channel0 is a character device (major 501, minor 0)")

    bandwidth = records["nvbandwidth"]["details"]
    # 2 trays x 4 GB200 (allocatable nvidia.com/gpu), threshold 0.85 x 900 GB/s
    assert bandwidth["nodes"] == ["gb200-r0-t0", "gb200-r0-t1"]
    assert bandwidth["gpus_per_node"] == 4
    assert bandwidth["gpu_product"] == "NVIDIA-GB200"
    assert bandwidth["threshold_gbps"] == 765.0
    assert len(bandwidth["matrix"]) == 8
    assert all(len(row) == 8 for row in bandwidth["matrix"])
    assert bandwidth["failing_pairs"] == []
    # the sim serves the seed guide's real GB200 run for 2 x 4 ranks
    assert bandwidth["sum"] == 45997.93
    assert bandwidth["min"] == 820.35
    for record in records.values():
        assert record["objects_left"] == 0
        assert record["cluster"]["server_version"].startswith("v1.34")

    assert "**PASSED**: 3 of 3 checks passed" in run.markdown()
    assert run.junit_failures() == {"cliques": "", "imex_channel": "", "nvbandwidth": ""}
    assert 'class="cell-fail"' not in run.html()
    assert run.html().count('class="cell-ok"') == 56
    assert f"Report: {run.report_dir / 'report.md'}" in run.output
    assert verification_objects(cluster_stage, run.namespaces) == ZERO


def test_verify_runs_nccl_when_asked(cluster_stage: SimRack, tmp_path):
    run = run_verify(
        cluster_stage,
        tmp_path / "report",
        "--tags",
        "nccl",
        extra_vars={"gpu_fabric_verify_nccl": True, "verify_nccl_image": "registry.invalid/nccl-tests:2.13-sim"},
    )

    assert run.process.returncode == 0, run.output[-6000:]
    record = run.record("nccl")
    assert record["passed"] is True
    details = record["details"]
    assert details["ranks"] == 8
    assert details["threshold_gbps"] == 540.0
    assert [row["size_bytes"] for row in details["rows"]] == [1 << 30, 1 << 31, 1 << 32, 1 << 33]
    assert details["avg_busbw_gbps"] > 540.0
    assert details["violations"] == []
    assert sorted(run.records()) == ["nccl"]
    assert run.junit_failures() == {"nccl": ""}
    assert verification_objects(cluster_stage, run.namespaces) == ZERO


def test_verify_nccl_without_an_image_fails_with_the_hint(cluster_stage: SimRack, tmp_path):
    run = run_verify(cluster_stage, tmp_path / "report", "--tags", "nccl", extra_vars={"gpu_fabric_verify_nccl": True})

    assert run.process.returncode != 0
    record = run.record("nccl")
    assert record["passed"] is False
    assert "verify_nccl_image is empty" in record["summary"]
    assert "nccl (" in run.output
    assert verification_objects(cluster_stage, run.namespaces) == ZERO


def test_check_mode_creates_nothing(cluster_stage: SimRack, tmp_path):
    run = run_verify(cluster_stage, tmp_path / "report", "--check")

    assert run.process.returncode == 0, run.output[-6000:]
    assert not (tmp_path / "report" / "records").exists()
    assert "the IMEX channel check would create namespace" in run.output
    assert verification_objects(cluster_stage, run.namespaces) == ZERO
