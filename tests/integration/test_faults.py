# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every fault the simulated rack can play makes the matching check fail, with a message that names the
problem; the report is still written and no object of the verification is left behind.

The rack is shared: each test switches its fault on, runs, and clears it at once (``fault_on``).
"""

from __future__ import annotations

import contextlib
import json
from typing import TYPE_CHECKING

import pytest
from verify_helpers import ZERO, run_verify, verification_objects

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
    assert "gb200-r0-t2" in record["summary"]
    assert record["details"]["unlabelled_nodes"] == ["gb200-r0-t2"]
    assert "| cliques | FAIL |" in run.markdown()
    assert "| (no label) | gb200-r0-t2 |" in run.markdown()
    assert "gb200-r0-t2" in run.junit_failures()["cliques"]
    assert "cliques (" in run.output and "gb200-r0-t2" in run.output


def test_split_clique_fails_the_clique_check_naming_the_rack(cluster_stage: SimRack, tmp_path):
    with fault_on(cluster_stage, "split-clique", rack=0):

        def two_cliques():
            nodes = [n for n in cluster_stage.get_json("nodes")["items"] if n["metadata"]["name"].startswith("gb200-")]
            return len({n["metadata"]["labels"].get("nvidia.com/gpu.clique") for n in nodes}) == 2

        cluster_stage.wait_until("two cliques in rack 0", two_cliques, timeout=60)
        run = run_verify(cluster_stage, tmp_path / "report", "--tags", "cliques")

    assert run.process.returncode != 0
    record = run.record("cliques")
    assert record["passed"] is False
    assert "rack0" in record["summary"]
    assert len(record["details"]["cliques"]) == 2
    assert sorted(node for nodes in record["details"]["cliques"].values() for node in nodes) == [
        "gb200-r0-t0",
        "gb200-r0-t1",
        "gb200-r0-t2",
        "gb200-r0-t3",
    ]
    assert "rack0" in run.junit_failures()["cliques"]


def test_degraded_link_fails_nvbandwidth_naming_the_pair(cluster_stage: SimRack, tmp_path):
    with fault_on(cluster_stage, "degraded-link", src=0, dst=5, gbps=402.11):
        run = run_verify(cluster_stage, tmp_path / "report", "--tags", "nvbandwidth", extra_vars=FAST)

    assert run.process.returncode != 0
    record = run.record("nvbandwidth")
    assert record["passed"] is False
    assert record["summary"].startswith("1 of 56 GPU pairs below 765.00 GB/s: 0->5 402.11 GB/s")
    assert record["details"]["failing_pairs"] == [{"src": 0, "dst": 5, "gbps": 402.11}]
    assert record["details"]["matrix"][0][5] == 402.11
    markdown = run.markdown()
    assert "| nvbandwidth | FAIL | 1 of 56 GPU pairs below 765.00 GB/s: 0->5 402.11 GB/s" in markdown
    assert "| 0 | 5 | 402.11 |" in markdown
    assert "pair 0 -> 5: 402.11 GB/s" in run.junit_failures()["nvbandwidth"]
    html = run.html()
    assert html.count('class="cell-fail"') == 1
    assert 'title="GPU 0 -&gt; GPU 5: 402.11 GB/s (below the threshold)">402.11</td>' in html
    assert record["objects_left"] == 0
    assert verification_objects(cluster_stage, run.namespaces) == ZERO


def test_failing_launcher_stops_nvbandwidth_naming_the_launcher(cluster_stage: SimRack, tmp_path):
    with fault_on(cluster_stage, "launcher-fails"):
        run = run_verify(cluster_stage, tmp_path / "report", "--tags", "nvbandwidth", extra_vars=FAST)

    assert run.process.returncode != 0
    record = run.record("nvbandwidth")
    assert record["passed"] is False
    summary = record["summary"]
    assert "MPIJob nvbandwidth-test failed" in summary
    assert "launcher pod nvbandwidth-test-launcher" in summary
    assert "exit code 1" in summary
    assert "MPI_ABORT" in summary or "CUDA_ERROR_NOT_PERMITTED" in summary
    # stopped early: far less than the 60 s wait budget was spent waiting
    assert "still not done" not in summary
    assert "MPIJob nvbandwidth-test failed" in run.junit_failures()["nvbandwidth"]
    assert verification_objects(cluster_stage, run.namespaces) == ZERO


def test_compute_domain_not_ready_fails_imex_naming_the_domain(cluster_stage: SimRack, tmp_path):
    with fault_on(cluster_stage, "compute-domain-not-ready"):
        run = run_verify(cluster_stage, tmp_path / "report", "--tags", "imex_channel", extra_vars=FAST)

    assert run.process.returncode != 0
    record = run.record("imex_channel")
    assert record["passed"] is False
    assert "ComputeDomain imex-channel-injection" in record["summary"]
    assert "NotReady" in record["summary"]
    assert "imex_channel" in run.junit_failures() and run.junit_failures()["imex_channel"]
    assert record["objects_left"] == 0
    assert verification_objects(cluster_stage, run.namespaces) == ZERO


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
    assert verification_objects(cluster_stage, run.namespaces) == ZERO


def test_missing_channel_fails_imex_naming_the_pod_and_node(cluster_stage: SimRack, tmp_path):
    with fault_on(cluster_stage, "channel-missing"):
        run = run_verify(cluster_stage, tmp_path / "report", "--tags", "imex_channel", extra_vars=FAST)

    assert run.process.returncode != 0
    record = run.record("imex_channel")
    assert record["passed"] is False
    assert record["summary"].startswith(
        "channel0 is missing from /dev/nvidia-caps-imex-channels in pod imex-channel-injection on node gb200-r0-t"
    )
    assert "No such file or directory" in record["summary"]
    assert record["details"]["channel0"] is None
    assert "| imex_channel | FAIL | channel0 is missing" in run.markdown()
    assert verification_objects(cluster_stage, run.namespaces) == ZERO


def test_apiserver_restart_mid_run_still_writes_every_record(cluster_stage: SimRack, tmp_path):
    cluster_stage.fault("apiserver-restart", after=8)
    run = run_verify(cluster_stage, tmp_path / "report", extra_vars=FAST)
    cluster_stage.wait_until(
        "the API server back", lambda: cluster_stage.kubectl("get", "--raw", "/readyz", check=False).returncode == 0
    )

    records = run.records()
    assert sorted(records) == ["cliques", "imex_channel", "nvbandwidth"]
    # a check either rode out the restart or failed and said so; the play's exit code follows the records
    assert (run.process.returncode == 0) == all(record["passed"] for record in records.values())
    report = json.loads((run.report_dir / "report.json").read_text())
    assert report["totals"]["checks"] == 3
    cluster_stage.wait_until(
        "the verification's objects to be gone",
        lambda: verification_objects(cluster_stage, run.namespaces) == ZERO,
        timeout=120,
    )
