# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Faults of the cluster, not of the fabric, struck while a verification runs: each run ends in a clear
one-line failure or passes, every record is written, and no object of the verification is left.

Each fault is struck at a moment the test observes (an MPIJob created, an MPIJob being deleted), not
after a fixed delay, so it lands in the step it is meant for however loaded the machine is.
"""

from __future__ import annotations

import json
import time
import xml.etree.ElementTree as ET
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Callable

import pytest
from verify_helpers import ZERO, VerifyRun, run_verify, verification_objects

if TYPE_CHECKING:
    from conftest import SimRack

pytestmark = pytest.mark.sim

FAST = {"verify_imex_channel_timeout": 60, "verify_nvbandwidth_timeout": 120}


def in_background(fn: Callable[[], VerifyRun]) -> Future:
    pool = ThreadPoolExecutor(max_workers=1)
    future = pool.submit(fn)
    pool.shutdown(wait=False)
    return future


def mpijobs(sim_rack: SimRack, prefix: str) -> list[dict[str, Any]]:
    result = sim_rack.kubectl("get", "mpijobs", "-A", "-o", "json", check=False)
    if result.returncode != 0:
        return []
    return [j for j in json.loads(result.stdout)["items"] if j["metadata"]["namespace"].startswith(prefix)]


def strike_when(
    sim_rack: SimRack, run: Future, moment: Callable[[], bool], strike: Callable[[], None], timeout: float = 240
) -> bool:
    """Poll ``moment`` while the run goes on; strike once when it holds. False: the run ended first."""
    deadline = time.monotonic() + timeout
    while not run.done() and time.monotonic() < deadline:
        if moment():
            strike()
            return True
        time.sleep(0.2)
    return False


def one_line_summaries(run: VerifyRun) -> list[dict[str, Any]]:
    every = [record for by_rack in run.records().values() for record in by_rack.values()]
    for record in every:
        assert "\n" not in record["summary"] and "Traceback" not in record["summary"], record["summary"]
        assert "HTTP response headers" not in record["summary"], record["summary"]
    return every


def nothing_left(sim_rack: SimRack, run: VerifyRun) -> None:
    sim_rack.wait_until(
        "the verification's objects to be gone", lambda: verification_objects(sim_rack, run.prefix) == ZERO, timeout=60
    )


def test_no_mpi_operator_is_said_in_one_line_and_leaves_nothing(cluster_stage: SimRack, tmp_path):
    deployment = cluster_stage.get_json("deployments", "-A", "-l", "app.kubernetes.io/name=mpi-operator")["items"][0]
    namespace, name = deployment["metadata"]["namespace"], deployment["metadata"]["name"]
    cluster_stage.kubectl("scale", "deployment", name, "-n", namespace, "--replicas=0")
    try:
        cluster_stage.wait_until(
            "the MPI operator to stop",
            lambda: not cluster_stage.get_json("deployment", name, "-n", namespace)["status"].get("readyReplicas"),
        )
        run = run_verify(cluster_stage, tmp_path / "report", "--tags", "nvbandwidth", extra_vars=FAST)
    finally:
        cluster_stage.kubectl("scale", "deployment", name, "-n", namespace, "--replicas=1")
        cluster_stage.wait_until(
            "the MPI operator back",
            lambda: cluster_stage.get_json("deployment", name, "-n", namespace)["status"].get("readyReplicas") == 1,
            timeout=120,
        )
    assert run.process.returncode != 0
    for record in one_line_summaries(run):
        assert (record["passed"], record["verdict"]) == (False, "error")
        assert "the check could not run: MPIJob " in record["summary"], record["summary"]
        assert "has no status after 60 s: no MPI operator is running" in record["summary"]
    # the pipeline sees "could not run", not "the racks are broken"
    report = run.report()
    assert report["verdict"] == "error" and report["totals"]["failed"] == 0
    assert (
        "ERROR: 2 racks, 0 of 2 checks passed; could not run (not a verdict on the fabric): nvbandwidth" in run.output
    )
    junit = ET.parse(run.report_dir / "report.junit.xml").getroot()
    assert (junit.get("errors"), junit.get("failures")) == ("2", "0")
    nothing_left(cluster_stage, run)


def test_an_api_server_restart_during_the_wait_is_ridden_out(cluster_stage: SimRack, tmp_path):
    holder: dict[str, Any] = {}
    run = in_background(
        lambda: run_verify(cluster_stage, tmp_path / "report", "--tags", "nvbandwidth", extra_vars=FAST)
    )
    struck = strike_when(
        cluster_stage,
        run,
        lambda: bool(mpijobs(cluster_stage, "verify-")),
        lambda: holder.update(restart=cluster_stage.rack("_restart-apiserver", "--delay", "0")),
    )
    result = run.result(timeout=600)
    assert struck, "the run ended before its MPIJobs were created"
    assert holder["restart"].returncode == 0
    every = one_line_summaries(result)
    # the API calls are retried through the restart: the healthy racks pass
    assert result.process.returncode == 0, [r["summary"] for r in every]
    assert all(record["passed"] for record in every)
    nothing_left(cluster_stage, result)


def test_an_api_server_restart_during_the_cleanup_still_removes_everything(cluster_stage: SimRack, tmp_path):
    holder: dict[str, Any] = {}
    run = in_background(
        lambda: run_verify(cluster_stage, tmp_path / "report", "--tags", "nvbandwidth", extra_vars=FAST)
    )

    def cleaning() -> bool:
        return any(j["metadata"].get("deletionTimestamp") for j in mpijobs(cluster_stage, "verify-"))

    struck = strike_when(
        cluster_stage,
        run,
        cleaning,
        lambda: holder.update(restart=cluster_stage.rack("_restart-apiserver", "--delay", "0")),
    )
    result = run.result(timeout=600)
    assert struck, "the run ended before its cleanup was seen"
    every = one_line_summaries(result)
    assert result.process.returncode == 0, [r["summary"] for r in every]
    assert all(record["objects_left"] == 0 for record in every)
    nothing_left(cluster_stage, result)


def test_a_tray_deleted_during_the_run_fails_its_rack_in_one_line_and_leaves_nothing(
    cluster_stage: SimRack, clean_faults, tmp_path
):
    # the launchers run 3 % of a real rack's modelled time (about 30 s for 72 GPUs): the tray goes while the
    # run is on, however busy the machine, not after a run of KWOK's few seconds
    cluster_stage.fault("rack-run-time", scale=0.03)
    status = cluster_stage.status()
    racks, trays = status["racks"], status["trays_per_rack"]
    victim = f"gb200-r{racks - 1}-t{trays - 1}"
    run = in_background(
        lambda: run_verify(cluster_stage, tmp_path / "report", "--tags", "nvbandwidth", extra_vars=FAST)
    )

    def worker_on_victim() -> bool:
        pods = cluster_stage.get_json("pods", "-A", "-l", "training.kubeflow.org/job-role=worker")["items"]
        return any(
            p["spec"].get("nodeName") == victim and p["metadata"]["namespace"].startswith("verify-") for p in pods
        )

    try:
        struck = strike_when(
            cluster_stage,
            run,
            worker_on_victim,
            lambda: cluster_stage.kubectl("delete", "node", victim, "--wait=false"),
        )
        result = run.result(timeout=600)
    finally:
        cluster_stage.rack("up", "--racks", str(racks), "--trays-per-rack", str(trays))
    assert struck, "the run ended before a worker ran on the tray"
    every = one_line_summaries(result)
    victim_rack = next(r for r in every if victim in r["nodes"] or victim in [s["node"] for s in r.get("skipped", [])])
    others = [r for r in every if r is not victim_rack]
    assert all(record["passed"] for record in others), [r["summary"] for r in others]
    # mpirun loses the tray's daemon: the rack fails, naming the tray and quoting Open MPI
    assert victim_rack["passed"] is False
    assert "ORTE has lost communication with a remote daemon" in victim_rack["summary"]
    assert f"1 tray left the cluster during the run: {victim}" in victim_rack["summary"]
    assert victim_rack["failed_nodes"] == [victim]
    assert all(record["objects_left"] == 0 for record in every), [r["cleanup_error"] for r in every]
    nothing_left(cluster_stage, result)
