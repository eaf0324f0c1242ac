# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The MPIJob checks' judge of the launcher's log (``MpiJobCheck.judge``, as ``measure`` calls it with the trays of
the workers in rank order): each planned tray's GPUs first, on the logs the simulated rack's stand-ins print
(sim/simrack/logs.py) for a healthy rack and for one whose tray lost a GPU."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.checks.nccl import NcclCheck
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.checks.nvbandwidth import (
    NvbandwidthCheck,
    judge_nvbandwidth_log,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.judges import judge_nccl_log
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.rack_plan import RackPlan
from mpi_settings import MPI

REPO_ROOT = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(REPO_ROOT / "sim"))
from simrack import logs  # noqa: E402

TESTCASE = "multinode_device_to_device_memcpy_read_ce"
NVBANDWIDTH = {"testcase": TESTCASE, "min_fraction_of_peak": 0.85, "min_gbps": 0}
NCCL = {
    "binary": "all_reduce_perf",
    "require_mnnvl": True,
    "min_fraction_of_reference": 0.9,
    "min_fraction_of_peak": 0.6,
}
NCCL_ARGS = ["-b", "1G", "-e", "8G", "-f", "2", "-g", "1", "-x", "NCCL_DEBUG=INFO"]
TRAYS = [f"gb200-r0-t{i}" for i in range(18)]


def run_of(trays=TRAYS) -> SimpleNamespace:
    return SimpleNamespace(plan=RackPlan("rack0", ["c.1"], trays, trays, [], 4, "NVIDIA-GB200"))


def nvbandwidth_check() -> NvbandwidthCheck:
    return NvbandwidthCheck(
        "img", MPI, TESTCASE, [], lambda log, plan, nodes: judge_nvbandwidth_log(log, plan, NVBANDWIDTH, nodes)
    )


def nccl_check() -> NcclCheck:
    return NcclCheck(
        "img", MPI, "all_reduce_perf", NCCL_ARGS, [], lambda log, plan, nodes: judge_nccl_log(log, plan, NCCL, nodes)
    )


def sim_nvbandwidth(hosts, devices) -> str:
    return logs.nvbandwidth_text(logs.NvbandwidthRun(hostnames=hosts, local_devices=devices))


def test_the_simulated_healthy_rack_passes_nvbandwidth_with_every_tray_covered():
    hosts, devices = logs.ranks_for("nvbandwidth-rack0", workers=18, slots=4)
    result = nvbandwidth_check().judge(run_of(), sim_nvbandwidth(hosts, devices), TRAYS)
    assert result.passed is True, result.summary
    assert (result.details["expected_gpus"], result.details["missing_gpus"]) == (72, {})


def test_a_simulated_tray_that_lost_a_gpu_fails_nvbandwidth_naming_it_in_the_record():
    # worker 5 (on t5) started 3 ranks: the world is 71, the ranks after it one lower
    hosts, devices = logs.ranks_for("nvbandwidth-rack0", workers=18, slots=4)
    del hosts[23], devices[23]
    result = nvbandwidth_check().judge(run_of(), sim_nvbandwidth(hosts, devices), TRAYS)
    assert result.passed is False
    assert result.failed_nodes == ["gb200-r0-t5"]
    assert result.node_problems == {
        "gb200-r0-t5": "GPU 3 (rank 23) not in the nvbandwidth output (no Process line names it; not in the matrix): "
        "a GPU off the bus or a rank that never started"
    }
    assert result.summary.startswith("the nvbandwidth output shows 71 of the 72 GPUs planned, no figure is judged: ")


def test_the_simulated_healthy_rack_passes_nccl_and_a_rack_short_of_a_tray_names_it():
    hosts = logs.ranks_for("nccl-rack0", workers=18, slots=4)[0]
    text = logs.all_reduce_perf_text(NCCL_ARGS, len(hosts), hosts, logs.mean_measured_cell())
    assert nccl_check().judge(run_of(), text, TRAYS).passed is True
    short = nccl_check().judge(run_of([*TRAYS, "gb200-r0-t18"]), text, [*TRAYS, "gb200-r0-t18"])
    assert short.passed is False
    assert short.failed_nodes == ["gb200-r0-t18"]
