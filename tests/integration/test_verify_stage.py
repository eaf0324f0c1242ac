# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""playbooks/verify.yml on the healthy simulated fleet: every check passes on every tray of every rack,
the report says so, nothing is left.

The integration run brings the simulated fleet up at 2 racks x 18 trays (tests/integration/conftest.py),
so each rack's nvbandwidth MPIJob has 72 ranks and its matrix is 72 x 72.
"""

from __future__ import annotations

import re
import shutil
from typing import TYPE_CHECKING

import pytest
from verify_helpers import REPO_ROOT, ZERO, gpu_trays, run_verify, verification_objects

if TYPE_CHECKING:
    from conftest import SimRack

pytestmark = pytest.mark.sim


def test_verify_passes_on_every_tray_of_every_rack(cluster_stage: SimRack, tmp_path):
    racks = gpu_trays(cluster_stage)
    assert len(racks) >= 2 and all(len(trays) >= 2 for trays in racks.values())
    run = run_verify(cluster_stage, tmp_path / "report")

    assert run.process.returncode == 0, run.output[-6000:]
    records = run.records()
    assert sorted(records) == ["cliques", "imex_channel", "nvbandwidth"]
    for check in records:
        assert sorted(records[check]) == sorted(racks), check
        for rack, record in records[check].items():
            assert record["passed"] is True, record["summary"]
            assert record["outcome"] == "passed"
            assert record["rack"] == rack
            assert record["nodes"] == racks[rack]
            assert record["trays"]["skipped"] == []
            assert record["objects_left"] == 0
            assert record["cluster"]["server_version"].startswith("v1.34")
            assert record["run_id"] and record["run_id"] == records["cliques"]["rack0"]["run_id"]

    trays = len(racks["rack0"])
    cliques = records["cliques"]["rack0"]
    assert cliques["summary"] == f"rack rack0: {trays} GPU trays in one clique ({cliques['clique']}), 4 GPUs each"

    imex = records["imex_channel"]["rack1"]
    assert [pod["node"] for pod in imex["details"]["pods"]] == racks["rack1"]
    assert all(pod["channel0"].startswith("crw-rw-rw-") for pod in imex["details"]["pods"])
    assert imex["summary"].startswith(
        f"rack rack1: channel0 is a character device (major 501, minor 0) in {trays} of {trays} pods, one per tray"
    )

    bandwidth = records["nvbandwidth"]["rack0"]["details"]
    gpus = 4 * trays
    assert bandwidth["gpus_per_node"] == 4
    assert bandwidth["gpu_product"] == "NVIDIA-GB200"
    assert bandwidth["threshold_gbps"] == 765.0
    assert len(bandwidth["matrix"]) == gpus and all(len(row) == gpus for row in bandwidth["matrix"])
    assert bandwidth["failing_pairs"] == [] and bandwidth["low_gpus"] == []
    # the sim cycles the seed guide's real GB200 cells (820.35-822.16 GB/s) over the rack's ranks
    assert bandwidth["min"] == 820.35 and bandwidth["max"] == 822.16
    assert records["nvbandwidth"]["rack0"]["summary"].startswith(
        f"rack rack0: {gpus * (gpus - 1)} of {gpus * (gpus - 1)} GPU pairs at or above 765.00 GB/s"
    )

    report = run.report()
    assert report["passed"] is True
    assert report["coverage"]["verified"] == [tray for trays in racks.values() for tray in trays]
    assert report["coverage"]["counts"] == {
        "trays": 36,
        "declared": 0,  # the sim's inventory declares no rack and no trays per clique
        "found": 36,
        "verified": 36,
        "failed": 0,
        "skipped": 0,
        "unverified": 0,
        "unmeasured": 0,
        "missing": 0,
    }
    assert report["coverage"]["skipped"] == []
    assert "| rack0 | PASS | PASS | PASS |" in run.markdown()
    assert f"Report: {run.report_dir / 'report.md'}" in run.output
    assert verification_objects(cluster_stage, run.prefix) == ZERO

    def namespaces_gone() -> bool:
        names = [n["metadata"]["name"] for n in cluster_stage.get_json("namespaces")["items"]]
        return not any(name.startswith(run.prefix) for name in names)

    cluster_stage.wait_until("the namespace controller to remove the emptied namespaces", namespaces_gone, timeout=180)


def test_a_tagged_run_reports_only_its_own_checks(cluster_stage: SimRack, tmp_path):
    first = run_verify(cluster_stage, tmp_path / "report", "--tags", "cliques")
    assert first.process.returncode == 0, first.output[-4000:]
    second = run_verify(cluster_stage, tmp_path / "report", "--tags", "imex_channel")
    assert second.process.returncode == 0, second.output[-4000:]

    checks = {entry["check"] for entry in second.report()["checks"]}
    assert checks == {"imex_channel"}
    # the clique records of the first run are still on disk, but not reported as this run's
    assert sorted(second.records()) == ["cliques", "imex_channel"]


@pytest.mark.parametrize("report_dir", [None, "out/fabric"])
def test_a_relative_report_dir_is_relative_to_where_the_play_runs(cluster_stage: SimRack, tmp_path, report_dir):
    """Every writer and the last message resolve it one way: from ansible-playbook's working directory."""
    cwd = tmp_path / "site"
    cwd.mkdir()
    run = run_verify(cluster_stage, report_dir, "--tags", "cliques", cwd=cwd)
    assert run.process.returncode == 0, run.output[-4000:]
    written = cwd / (report_dir or "report") / "report.md"
    assert written.is_file() and sorted(run.records()) == ["cliques"]
    assert f"Report: {written}" in run.output
    assert not (REPO_ROOT / "playbooks" / "report").exists() and not (REPO_ROOT / "playbooks" / "out").exists()


def test_the_verdict_is_handed_to_the_automation_as_stats(cluster_stage: SimRack, tmp_path):
    run = run_verify(cluster_stage, tmp_path / "report", "--tags", "cliques", env={"ANSIBLE_SHOW_CUSTOM_STATS": "true"})
    assert run.process.returncode == 0, run.output[-4000:]
    # printed in the callback's result format (ansible.cfg: YAML, long lines folded)
    stats = " ".join(run.output.split("CUSTOM STATS:", 1)[1].split())
    assert "gpu_fabric_verdict: passed" in stats
    assert f"json: {tmp_path / 'report' / 'report.json'}" in stats


def test_verify_runs_nccl_when_asked(cluster_stage: SimRack, tmp_path):
    run = run_verify(
        cluster_stage,
        tmp_path / "report",
        "--tags",
        "nccl",
        extra_vars={"gpu_fabric_verify_nccl": True, "verify_nccl_image": "registry.invalid/nccl-tests:2.13-sim"},
    )

    assert run.process.returncode == 0, run.output[-6000:]
    trays = len(gpu_trays(cluster_stage)["rack0"])
    record = run.record("nccl")
    assert record["passed"] is True
    details = record["details"]
    assert details["ranks"] == 4 * trays
    assert details["threshold_gbps"] == 751.11  # 0.9 x 834.57 GB/s, the published NVL72 figure at 4 GiB and more
    assert [row["size_bytes"] for row in details["rows"]] == [1 << 30, 1 << 31, 1 << 32, 1 << 33]
    assert details["judged_min_bytes"] == 4 << 30 and details["judged_busbw_gbps"] >= 751.11
    assert details["violations"] == []
    # MNNVL forced (NCCL_MNNVL_ENABLE=1, cuMem) and shown by every rank's communicator line; the threshold's source
    assert details["mnnvl_required"] is True and details["mnnvl_ranks"] == 4 * trays
    assert record["summary"].endswith(f"; MNNVL on {4 * trays} of {4 * trays} ranks")
    assert (
        "751.11 GB/s (0.9 x 834.57 GB/s, GB200 NVL72 all_reduce_perf over 72 GPUs, coreweave/nccl-tests#43"
        in record["summary"]
    )
    assert sorted(run.records()) == ["nccl"]
    assert verification_objects(cluster_stage, run.prefix) == ZERO


def test_verify_nccl_fails_when_the_log_shows_no_multi_node_nvlink(cluster_stage: SimRack, tmp_path):
    # MNNVL switched off: NCCL falls back to another transport and its communicators say MNNVL 0
    args = ["-x", "NCCL_DEBUG=INFO", "-x", "NCCL_DEBUG_SUBSYS=INIT", "-x", "NCCL_MNNVL_ENABLE=0"]
    run = run_verify(
        cluster_stage,
        tmp_path / "report",
        "--tags",
        "nccl",
        extra_vars={
            "gpu_fabric_verify_nccl": True,
            "verify_nccl_image": "registry.invalid/nccl-tests:2.13-sim",
            "verify_nccl_mpirun_args": args,
        },
    )
    assert run.process.returncode != 0
    record = run.record("nccl")
    assert record["passed"] is False
    ranks = 4 * len(gpu_trays(cluster_stage)["rack0"])
    assert f"NCCL did not use multi-node NVLink on {ranks} of {ranks} ranks (MNNVL 0: rank 0, 1," in record["summary"]
    assert verification_objects(cluster_stage, run.prefix) == ZERO


def test_verify_nccl_without_an_image_fails_with_the_hint(cluster_stage: SimRack, tmp_path):
    run = run_verify(cluster_stage, tmp_path / "report", "--tags", "nccl", extra_vars={"gpu_fabric_verify_nccl": True})

    assert run.process.returncode != 0
    record = run.record("nccl")
    assert record["passed"] is False
    assert "set verify_nccl_image" in record["summary"]
    assert verification_objects(cluster_stage, run.prefix) == ZERO


def test_check_mode_creates_nothing(cluster_stage: SimRack, tmp_path):
    # an earlier run's records in the report directory are not this run's: check mode reports none of them
    # (before, it read them as its own, found none of this run and failed with rc 2)
    earlier = tmp_path / "report" / "records"
    shutil.copytree(REPO_ROOT / "tests" / "fixtures" / "verification_records" / "records", earlier)
    kept = {path: path.read_bytes() for path in earlier.rglob("*.json")}
    run = run_verify(cluster_stage, tmp_path / "report", "--check")

    assert run.process.returncode == 0, run.output[-6000:]
    assert {path: path.read_bytes() for path in earlier.rglob("*.json")} == kept
    assert sorted(p.name for p in (tmp_path / "report").iterdir()) == ["records"]
    assert re.search(r"check mode: run \d{8}T\d+Z has no records in \S+/records", " ".join(run.output.split()))
    assert "check mode: the IMEX channel check would create one ComputeDomain per rack" in run.output
    assert verification_objects(cluster_stage, run.prefix) == ZERO


def test_the_racks_and_trays_the_inventory_declares_and_the_cluster_lacks_fail_the_run_by_name(
    cluster_stage: SimRack, tmp_path
):
    """gpu_fabric_racks declares rack0 with one tray more than the cluster has and a rack9 the cluster does not
    show: the cliques run fails, naming the absent rack and the absent tray, in the records, the summary and JUnit."""
    racks = gpu_trays(cluster_stage)
    declared = {"rack0": [*racks["rack0"], "gb200-r0-t99"], "rack9": ["gb200-r9-t0", "gb200-r9-t1"]}
    run = run_verify(cluster_stage, tmp_path / "report", "--tags", "cliques", extra_vars={"gpu_fabric_racks": declared})

    assert run.process.returncode != 0, run.output[-4000:]
    no_node = "declared in gpu_fabric_racks, no Node of that name in the cluster"
    rack9 = run.record("cliques", "rack9")
    assert (rack9["verdict"], rack9["nodes"]) == ("error", [])
    assert rack9["summary"].startswith(
        f"rack rack9: declared in gpu_fabric_racks with 2 trays, none of them a GPU Node of the cluster (missing "
        f"gb200-r9-t0, gb200-r9-t1 ({no_node})); the cliques check did not run there"
    )
    rack0 = run.record("cliques", "rack0")
    assert (rack0["verdict"], rack0["failed_nodes"]) == ("failed", [])
    assert f"gb200-r0-t99 of rack rack0 is {no_node}" in rack0["summary"]
    assert rack0["trays"]["missing"] == [{"node": "gb200-r0-t99", "reason": no_node}]
    assert rack0["trays"]["found"] == racks["rack0"]
    assert run.record("cliques", "rack1")["passed"] is True  # the rack the inventory does not declare: as before

    report = run.report()
    assert report["verdict"] == "failed"
    counts = report["coverage"]["counts"]
    found = sum(len(trays) for trays in racks.values())
    assert (counts["found"], counts["missing"], counts["trays"]) == (found, 3, found + 3)
    assert counts["verified"] == found  # rack0's failure names its missing tray: the trays found stay verified
    assert [entry["node"] for entry in report["coverage"]["missing"]] == ["gb200-r0-t99", "gb200-r9-t0", "gb200-r9-t1"]
    assert "3 missing (gb200-r0-t99, gb200-r9-t0, gb200-r9-t1)" in report["summary"]
    assert "cliques (rack9)" in report["summary"]
    assert not [node for node in report["trays"] if node.startswith("gb200-r9")]  # no Node: no tray verdict
    junit = run.report_dir / "report.junit.xml"
    assert 'name="gpu_trays_missing" value="3"' in junit.read_text()
    assert run.junit_failures()[("gpu_fabric.cliques", "rack0")].startswith("rack rack0: 1 problem: gb200-r0-t99")
