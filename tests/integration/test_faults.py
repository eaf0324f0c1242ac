# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every fault the simulated rack can play makes the matching check fail, with a message that names the
problem; the report is still written and no object of the verification is left behind.

The rack is shared: each test switches its fault on, runs, and clears it at once (``fault_on``). The faults
that play on one rack (rack 0 by default) must leave the other racks of the same run passing.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

import pytest
from verify_helpers import ZERO, gpu_trays, run_verify, verification_objects

if TYPE_CHECKING:
    from conftest import SimRack

pytestmark = pytest.mark.sim

FAST = {"verify_imex_channel_timeout": 45, "verify_nvbandwidth_timeout": 60}


@contextlib.contextmanager
def fault_on(sim_rack: SimRack, name: str, **params):
    sim_rack.fault(name, **params)
    try:
        yield
    finally:
        sim_rack.clear_faults()


def wait_for_labels(sim_rack: SimRack, expected_unlabelled: int) -> None:
    def settled():
        nodes = [n for n in sim_rack.get_json("nodes")["items"] if n["metadata"]["name"].startswith("gb200-")]
        return sum(1 for n in nodes if "nvidia.com/gpu.clique" not in n["metadata"].get("labels", {})) == (
            expected_unlabelled
        )

    sim_rack.wait_until("the clique labels to follow the fault", settled, timeout=60)


def test_unlabelled_node_fails_the_clique_check_naming_the_node(cluster_stage: SimRack, tmp_path):
    with fault_on(cluster_stage, "unlabelled-node", node="gb200-r0-t2"):
        wait_for_labels(cluster_stage, 1)
        run = run_verify(cluster_stage, tmp_path / "report", "--tags", "cliques")
    wait_for_labels(cluster_stage, 0)

    assert run.process.returncode != 0
    record = run.record("cliques")
    assert record["passed"] is False
    assert "GPU node gb200-r0-t2 has no nvidia.com/gpu.clique label" in record["summary"]
    assert record["failed_nodes"] == ["gb200-r0-t2"]
    assert record["details"]["unlabelled_nodes"] == ["gb200-r0-t2"]
    assert run.record("cliques", "rack1")["passed"] is True
    assert "gb200-r0-t2" in run.junit_failures()[("gpu_fabric.cliques", "rack0")]
    assert "gb200-r0-t2" in run.output


def test_split_clique_fails_the_clique_check_naming_the_rack(cluster_stage: SimRack, tmp_path):
    rack0 = gpu_trays(cluster_stage)["rack0"]
    with fault_on(cluster_stage, "split-clique", rack=0):

        def two_cliques():
            nodes = [n for n in cluster_stage.get_json("nodes")["items"] if n["metadata"]["name"] in rack0]
            return len({n["metadata"]["labels"].get("nvidia.com/gpu.clique") for n in nodes}) == 2

        cluster_stage.wait_until("two cliques in rack 0", two_cliques, timeout=60)
        run = run_verify(cluster_stage, tmp_path / "report", "--tags", "cliques")

    assert run.process.returncode != 0
    record = run.record("cliques")
    assert record["passed"] is False
    assert "rack rack0 spans 2 cliques" in record["summary"]
    assert len(record["details"]["cliques"]) == 2
    assert {node for nodes in record["details"]["cliques"].values() for node in nodes} == set(rack0)
    assert run.record("cliques", "rack1")["passed"] is True


def test_degraded_link_fails_nvbandwidth_naming_the_pair(cluster_stage: SimRack, tmp_path):
    with fault_on(cluster_stage, "degraded-link", src=0, dst=5, gbps=402.11):
        run = run_verify(cluster_stage, tmp_path / "report", "--tags", "nvbandwidth", extra_vars=FAST)

    assert run.process.returncode != 0
    record = run.record("nvbandwidth")
    assert record["passed"] is False
    assert record["summary"].startswith("rack rack0: 1 of ")
    # GPUs 0-3 are worker 0's, 4-7 worker 1's: the trays the scheduler put those workers on
    first, second = record["details"]["rank_nodes"][:2]
    assert f"0->5 402.11 GB/s ({first} -> {second})" in record["summary"]
    (pair,) = record["details"]["failing_pairs"]
    assert (pair["src"], pair["dst"], pair["gbps"], pair["src_node"], pair["dst_node"], pair["rule"]) == (
        0,
        5,
        402.11,
        first,
        second,
        "floor",
    )
    assert record["details"]["matrix"][0][5] == 402.11
    assert sorted(record["failed_nodes"]) == sorted([first, second])
    assert run.record("nvbandwidth", "rack1")["passed"] is True
    assert "402.11" in run.junit_failures()[("gpu_fabric.nvbandwidth", "rack0")]
    assert run.junit_failures()[("gpu_fabric.nvbandwidth", "rack1")] == ""
    assert record["objects_left"] == 0
    assert verification_objects(cluster_stage, run.prefix) == ZERO


def test_failing_launcher_stops_nvbandwidth_naming_the_launcher(cluster_stage: SimRack, tmp_path):
    # The launcher's failed pod and its log must outlive the Job's failure (restartPolicy Never): with the
    # operator's default OnFailure the Job controller deletes the pod, and no error line can be quoted.
    with fault_on(cluster_stage, "launcher-fails"):
        run = run_verify(cluster_stage, tmp_path / "report", "--tags", "nvbandwidth", extra_vars=FAST)

    assert run.process.returncode != 0
    record = run.record("nvbandwidth")
    assert record["passed"] is False
    summary = record["summary"]
    assert "MPIJob nvbandwidth-rack0 failed" in summary
    assert "launcher pod nvbandwidth-rack0-launcher" in summary
    assert "exit code 1" in summary
    assert "MPI_ABORT" in summary or "CUDA_ERROR_NOT_PERMITTED" in summary
    # stopped early: far less than the 60 s wait budget was spent waiting
    assert "still not done" not in summary
    assert verification_objects(cluster_stage, run.prefix) == ZERO


def test_compute_domain_not_ready_fails_imex_naming_the_domain(cluster_stage: SimRack, tmp_path):
    with fault_on(cluster_stage, "compute-domain-not-ready"):
        run = run_verify(cluster_stage, tmp_path / "report", "--tags", "imex_channel", extra_vars=FAST)

    assert run.process.returncode != 0
    record = run.record("imex_channel")
    assert record["passed"] is False
    assert f"ComputeDomain {run.prefix}-imex-channel-rack0/imex-channel-rack0" in record["summary"]
    assert "NotReady" in record["summary"]
    assert record["objects_left"] == 0
    assert verification_objects(cluster_stage, run.prefix) == ZERO


def test_missing_deviceclass_fails_imex_naming_the_class(cluster_stage: SimRack, tmp_path):
    with fault_on(cluster_stage, "missing-deviceclass"):
        cluster_stage.wait_until(
            "the DeviceClass to go",
            lambda: (
                cluster_stage.kubectl(
                    "get", "deviceclass", "compute-domain-default-channel.nvidia.com", check=False
                ).returncode
                != 0
            ),
            timeout=60,
        )
        run = run_verify(cluster_stage, tmp_path / "report", "--tags", "imex_channel", extra_vars=FAST)

    assert run.process.returncode != 0
    record = run.record("imex_channel")
    assert record["passed"] is False
    assert "compute-domain-default-channel.nvidia.com" in record["summary"]
    assert "Pending" in record["summary"]
    assert verification_objects(cluster_stage, run.prefix) == ZERO


def test_missing_channel_fails_imex_naming_the_pod_and_node(cluster_stage: SimRack, tmp_path):
    with fault_on(cluster_stage, "channel-missing"):
        run = run_verify(cluster_stage, tmp_path / "report", "--tags", "imex_channel", extra_vars=FAST)

    assert run.process.returncode != 0
    record = run.record("imex_channel")
    trays = gpu_trays(cluster_stage)["rack0"]
    assert record["passed"] is False
    assert record["summary"].startswith(
        f"rack rack0: channel0 not injected in {len(trays)} of {len(trays)} pods: gb200-r0-t0, gb200-r0-t1, "
        f"gb200-r0-t2 and {len(trays) - 3} more: channel0 is missing (listing: ls: cannot access"
    )
    assert "No such file or directory" in record["summary"]
    assert record["failed_nodes"] == trays
    assert record["node_problems"]["gb200-r0-t1"].startswith("channel0 is missing")
    assert verification_objects(cluster_stage, run.prefix) == ZERO


def test_apiserver_restart_mid_run_still_writes_every_record(cluster_stage: SimRack, tmp_path):
    done = cluster_stage.apiserver_restarts_done()
    cluster_stage.fault("apiserver-restart", after=8)
    run = run_verify(cluster_stage, tmp_path / "report", extra_vars=FAST)
    cluster_stage.wait_apiserver_restarts_done(done + 1)

    records = run.records()
    assert sorted(records) == ["cliques", "imex_channel", "nvbandwidth"]
    assert all(sorted(by_rack) == sorted(gpu_trays(cluster_stage)) for by_rack in records.values())
    every = [record for by_rack in records.values() for record in by_rack.values()]
    # a check either rode out the restart or failed and said so in one line; the exit code follows the records
    assert (run.process.returncode == 0) == all(record["passed"] for record in every)
    assert all("Traceback" not in record["summary"] and "HTTP response" not in record["summary"] for record in every)
    assert len(run.report()["checks"]) == len(every)
    cluster_stage.wait_until(
        "the verification's objects to be gone",
        lambda: verification_objects(cluster_stage, run.prefix) == ZERO,
        timeout=120,
    )
