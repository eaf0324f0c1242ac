# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The simulated rack for fleet verification (every tray of every rack): a full NVL72 nvbandwidth
run (18 workers x 4 GPUs = 72 ranks), the per-rack matrix faults, the rack label and the tray
faults ``missing-gpu`` and ``busy-node``.

The generator, fault-parameter and node-state tests need no rack; the last ones (``-m sim``)
switch the tray faults on the live rack (any size with at least 2 racks x 3 trays).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT / "sim"))

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.nvbandwidth import parse_nvbandwidth  # noqa: E402
from simrack import FAULTS, faultspec, logs, nodes  # noqa: E402
from simrack.controllers import podlogs  # noqa: E402

TESTCASE = "multinode_device_to_device_memcpy_read_ce"
FIXTURE_TEXT = logs.NVBANDWIDTH_FIXTURE.read_text()


def fixture_cells() -> list[str]:
    """The measured cells of the real GB200 run as printed, row-major (read apart from simrack.logs)."""
    block = FIXTURE_TEXT.split("bandwidth (GB/s)\n", 1)[1].split("\n\n", 1)[0].splitlines()[1:]
    return [tok for row in block for tok in row.split()[1:] if tok != "N/A"]


def nvl72_text(**run: Any) -> str:
    hosts, devices = logs.ranks_for("nvbandwidth-rack1", workers=18, slots=4)
    return logs.nvbandwidth_text(logs.NvbandwidthRun(hosts, devices, **run))


def matrix_lines(text: str) -> list[str]:
    """The header and the rows of the one matrix, as printed."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.endswith("bandwidth (GB/s)")) + 1
    end = lines.index("", start)
    return lines[start:end]


def parsed_matrix(text: str):
    output = parse_nvbandwidth(text)
    return output, output.testcases[TESTCASE].matrix_named()


def printed_sum(matrix) -> float:
    return round(sum(matrix.values()), 2)


# ------------------------------------------------------------------------------------------------
# A full NVL72 run: 18 workers x 4 slots (no rack needed)
# ------------------------------------------------------------------------------------------------


def test_72_ranks_print_padded_process_lines_like_the_real_tool():
    text = nvl72_text()
    process = [line for line in text.splitlines() if line.startswith("Process")]
    assert len(process) == 72
    # nvbandwidth pads the rank to the width of the largest one (71: two digits)
    assert process[0] == "Process  0 (nvbandwidth-rack1-worker-0): device 0: NVIDIA GB200 (00000008:01:00)"
    assert process[9] == "Process  9 (nvbandwidth-rack1-worker-2): device 1: NVIDIA GB200 (00000009:01:00)"
    assert process[10] == "Process 10 (nvbandwidth-rack1-worker-2): device 2: NVIDIA GB200 (00000018:01:00)"
    assert process[71] == "Process 71 (nvbandwidth-rack1-worker-17): device 3: NVIDIA GB200 (00000019:01:00)"
    for rank, line in enumerate(process):
        assert re.fullmatch(rf"Process {rank:>2} \(nvbandwidth-rack1-worker-{rank // 4}\): device {rank % 4}: .*", line)


def test_72_ranks_print_one_722_character_line_per_row():
    block = matrix_lines(nvl72_text())
    assert len(block) == 73  # header + 72 rows
    assert {len(line) for line in block} == {2 + 72 * 10}
    assert block[0].split() == [str(c) for c in range(72)]
    for r, line in enumerate(block[1:]):
        assert line[:2] == f"{r:>2}"
        cells = [line[2 + 10 * c : 12 + 10 * c] for c in range(72)]
        assert cells[r] == "       N/A"
        assert all(re.fullmatch(r" *\d+\.\d\d", cell) for c, cell in enumerate(cells) if c != r)


def test_72_ranks_parse_to_a_72x72_matrix_whose_sum_is_its_cells():
    output, matrix = parsed_matrix(nvl72_text())
    assert matrix.shape == (72, 72)
    assert all(matrix.rows[i][i] is None for i in range(72))
    cells = fixture_cells()
    assert matrix.values() == [float(cells[k % len(cells)]) for k in range(72 * 71)]
    assert matrix.reported_sum == printed_sum(matrix)
    assert [d.host for d in output.devices] == [
        f"nvbandwidth-rack1-worker-{w}" for w in range(18) for _slot in range(4)
    ]
    assert [d.device for d in output.devices] == [s for _worker in range(18) for s in range(4)]


def test_degraded_gpu_scales_its_row_and_column_and_the_sum():
    plain = parsed_matrix(nvl72_text())[1]
    text = nvl72_text(gpu_factors={6: 0.944})
    matrix = parsed_matrix(text)[1]
    for r in range(72):
        for c in range(72):
            if r == c:
                continue
            if 6 in (r, c):
                assert matrix.rows[r][c] == round(plain.rows[r][c] * 0.944, 2), (r, c)
            else:
                assert matrix.rows[r][c] == plain.rows[r][c], (r, c)
    assert max(matrix.rows[6][c] or 0 for c in range(72)) < 0.95 * min(plain.values())
    assert matrix.reported_sum == printed_sum(matrix)
    assert matrix.reported_sum < plain.reported_sum
    # printed with two decimals in the same 10-character columns
    assert {len(line) for line in matrix_lines(text)} == {722}


def test_degraded_link_and_gpu_together_the_link_cell_wins():
    text = nvl72_text(degraded={(0, 5): 400.0, (6, 7): 123.4}, gpu_factors={6: 0.5})
    plain = parsed_matrix(nvl72_text())[1]
    matrix = parsed_matrix(text)[1]
    assert matrix.rows[0][5] == 400.0
    assert matrix.rows[6][7] == 123.4  # in the degraded GPU's row, set to the link's value
    assert matrix.rows[7][6] == round(plain.rows[7][6] * 0.5, 2)
    assert matrix.rows[1][2] == plain.rows[1][2]
    assert matrix.reported_sum == printed_sum(matrix)


def test_two_degraded_gpus_take_the_slower_end_in_the_cell_between_them():
    plain = parsed_matrix(nvl72_text())[1]
    matrix = parsed_matrix(nvl72_text(gpu_factors={3: 0.5, 40: 0.8}))[1]
    assert matrix.rows[3][40] == round(plain.rows[3][40] * 0.5, 2)
    assert matrix.rows[40][3] == round(plain.rows[40][3] * 0.5, 2)
    assert matrix.rows[3][4] == round(plain.rows[3][4] * 0.5, 2)
    assert matrix.rows[40][41] == round(plain.rows[40][41] * 0.8, 2)


@pytest.mark.parametrize(
    ("value", "gpus"),
    [("6", [6]), ("1,4,6", [1, 4, 6]), ("0-3,10", [0, 1, 2, 3, 10]), ("all", list(range(16))), ("2,2-3", [2, 3])],
)
def test_degraded_gpu_names_one_gpu_a_list_a_range_or_all(value, gpus):
    assert faultspec.gpu_list(value, 16) == gpus
    assert faultspec.validate("degraded-gpu", {"gpu": value}, 1, 4)["gpu"] == value
    cells, factors, notes = faultspec.matrix_faults({"degraded-gpu": {"gpu": value, "factor": "0.944"}}, 0, 16)
    assert (cells, sorted(factors), set(factors.values()) or {0.944}, notes) == ({}, gpus, {0.944}, [])


BISECT = "multinode_bisect_write_ce"


def test_bisect_prints_nvbandwidths_own_n_by_1_rows_of_gpu_pairs():
    text = nvl72_text(testcase=BISECT)
    lines = text.splitlines()
    start = lines.index(f"Running {BISECT}.")
    # multinode_testcases.cpp: the description names no unit; the labels are "<i>-><peer>", padded, and set
    # the label column's width (6), each cell setw(10)
    assert lines[start + 1] == "Bisect benchmarking, simultaneous write CE BW"
    assert lines[start + 2] == " " * 6 + f"{0:>10}"
    assert lines[start + 3] == f" 0->36{fixture_cells()[0]:>10}"
    assert lines[start + 3 + 36].startswith("36-> 0")
    matrix = parse_nvbandwidth(text).testcases[BISECT].matrix_named()
    assert matrix.shape == (72, 1) and matrix.unit == "GB/s"
    assert matrix.reported_sum == printed_sum(matrix)


def test_bisect_slows_both_rows_of_a_degraded_gpu_and_only_peer_links():
    plain = parse_nvbandwidth(nvl72_text(testcase=BISECT)).testcases[BISECT].matrix_named()
    text = nvl72_text(testcase=BISECT, gpu_factors={41: 0.944}, degraded={(0, 36): 700.0, (1, 5): 1.0})
    matrix = parse_nvbandwidth(text).testcases[BISECT].matrix_named()
    low = {r for r in range(72) if matrix.rows[r][0] != plain.rows[r][0]}
    assert low == {0, 5, 41}  # 41->5 and 5->41 for GPU 41; 0->36 set; 1->5 is no bisect pair
    assert matrix.rows[5][0] == round(plain.rows[5][0] * 0.944, 2)
    assert matrix.rows[0][0] == 700.0


def test_a_factor_of_one_leaves_the_real_run_byte_for_byte():
    hosts, devices = logs.ranks_for("nvbandwidth-test", workers=2, slots=4)
    run = logs.NvbandwidthRun(hosts, devices, gpu_factors={2: 1.0})
    assert logs.nvbandwidth_text(run) == FIXTURE_TEXT


# ------------------------------------------------------------------------------------------------
# Fault parameters (no rack needed)
# ------------------------------------------------------------------------------------------------


def test_every_fault_has_a_parameter_spec_and_a_description():
    assert set(FAULTS) == set(faultspec.PARAMS)
    for name in ("degraded-link", "degraded-gpu", "missing-gpu", "busy-node"):
        assert "rack=" in FAULTS[name] or "node=" in FAULTS[name], name


def test_todays_fault_forms_are_accepted_unchanged():
    assert faultspec.validate("degraded-link", {"src": "0", "dst": "5", "gbps": "120"}, 2, 4) == {
        "src": "0",
        "dst": "5",
        "gbps": "120",
    }
    assert faultspec.validate("degraded-link", {}, 1, 4) == {}
    assert faultspec.validate("split-clique", {"rack": "1"}, 2, 4) == {"rack": "1"}
    assert faultspec.validate("unlabelled-node", {"node": "gb200-r0-t3"}, 1, 4) == {"node": "gb200-r0-t3"}
    assert faultspec.validate("launcher-fails", {}, 1, 4) == {}
    assert faultspec.validate("launcher-fails", {"code": "2"}, 1, 4) == {"code": "2"}


def test_new_faults_record_their_defaults():
    assert faultspec.validate("degraded-gpu", {"gpu": "6"}, 2, 18) == {"gpu": "6", "rack": "0", "factor": "0.944"}
    assert faultspec.validate("degraded-gpu", {"rack": "1", "gpu": "71", "factor": "1"}, 2, 18) == {
        "rack": "1",
        "gpu": "71",
        "factor": "1",
    }
    assert faultspec.validate("degraded-link", {"rack": "1", "src": "0", "dst": "5", "gbps": "400"}, 2, 18) == {
        "rack": "1",
        "src": "0",
        "dst": "5",
        "gbps": "400",
    }
    assert faultspec.validate("missing-gpu", {"node": "gb200-r1-t3"}, 2, 4) == {"node": "gb200-r1-t3"}
    assert faultspec.validate("busy-node", {"node": "gb200-r0-t2"}, 2, 4) == {"node": "gb200-r0-t2"}


@pytest.mark.parametrize(
    ("name", "params", "message"),
    [
        ("missing-gpu", {"node": "gb200-r9-t3"}, "missing-gpu: node=gb200-r9-t3 is not a tray of this sim"),
        ("missing-gpu", {}, "missing-gpu needs node=<tray>"),
        ("busy-node", {"node": "sim-control-plane"}, "busy-node: node=sim-control-plane is not a tray of this sim"),
        ("busy-node", {"node": "gb200-r0-t4"}, "busy-node: node=gb200-r0-t4 is not a tray of this sim"),
        ("degraded-gpu", {"gpu": "16"}, "degraded-gpu: gpu=16 is out of range (rack 0 has GPUs 0..15)"),
        ("degraded-gpu", {"gpu": "-1"}, "degraded-gpu: gpu=-1 is out of range"),
        ("degraded-gpu", {"gpu": "x"}, "degraded-gpu: gpu=x is not an integer"),
        ("degraded-gpu", {}, "degraded-gpu needs gpu=<index in the rack's matrix, 0..15>"),
        ("degraded-gpu", {"gpu": "1", "factor": "0"}, "degraded-gpu: factor=0 must be in (0, 1]"),
        ("degraded-gpu", {"gpu": "1", "factor": "1.5"}, "degraded-gpu: factor=1.5 must be in (0, 1]"),
        ("degraded-gpu", {"gpu": "1", "factor": "nan"}, "degraded-gpu: factor=nan is not a finite number"),
        ("degraded-gpu", {"gpu": "1", "rack": "2"}, "degraded-gpu: rack=2 is not in this sim (racks 0..1)"),
        ("degraded-gpu", {"gpu": "1", "fator": "0.5"}, "degraded-gpu: unknown parameter fator (known: rack, gpu"),
        ("degraded-link", {"rack": "5"}, "degraded-link: rack=5 is not in this sim (racks 0..1)"),
        ("degraded-link", {"src": "3", "dst": "3"}, "degraded-link: src and dst are both 3"),
        ("degraded-link", {"src": "0", "dst": "16"}, "degraded-link: dst=16 is out of range (rack 0 has GPUs 0..15)"),
        ("degraded-link", {"gbps": "fast"}, "degraded-link: gbps=fast is not a number"),
        ("degraded-link", {"gbps": "-1"}, "degraded-link: gbps=-1 must not be negative"),
        (
            "channel-missing",
            {"node": "gb200-r0-t0"},
            "channel-missing: unknown parameter node (it takes no parameters)",
        ),
    ],
)
def test_bad_fault_parameters_are_refused_in_one_line(name: str, params: dict[str, str], message: str):
    with pytest.raises(ValueError) as err:
        faultspec.validate(name, params, 2, 4)
    assert str(err.value).startswith(message)
    assert "\n" not in str(err.value)


def test_matrix_faults_apply_to_the_rack_they_name_only():
    faults = {
        "degraded-link": {"rack": "1", "src": "0", "dst": "5", "gbps": "400"},
        "degraded-gpu": {"rack": "0", "gpu": "6", "factor": "0.944"},
    }
    assert faultspec.matrix_faults(faults, 1, 72) == ({(0, 5): 400.0}, {}, [])
    assert faultspec.matrix_faults(faults, 0, 72) == ({}, {6: 0.944}, [])
    assert faultspec.matrix_faults(faults, 2, 72) == ({}, {}, [])
    assert faultspec.matrix_faults(faults, None, 72) == ({}, {}, [])


def test_matrix_faults_without_rack_mean_rack_0_with_todays_defaults():
    assert faultspec.matrix_faults({"degraded-link": {}}, 0, 8) == ({(0, 1): 400.0}, {}, [])
    assert faultspec.matrix_faults({"degraded-link": {"src": "1", "dst": "6", "gbps": "401.25"}}, 0, 8)[0] == {
        (1, 6): 401.25
    }
    assert faultspec.matrix_faults({"degraded-gpu": {"gpu": "2"}}, 0, 8)[1] == {2: 0.944}
    assert faultspec.matrix_faults({"degraded-link": {}}, 1, 8) == ({}, {}, [])


def test_a_degraded_link_of_many_gpus_sets_a_whole_row_or_column():
    row = faultspec.matrix_faults({"degraded-link": {"src": "5", "dst": "all", "gbps": "700"}}, 0, 8)[0]
    assert row == {(5, d): 700.0 for d in range(8) if d != 5}
    column = faultspec.matrix_faults({"degraded-link": {"src": "all", "dst": "2"}}, 0, 8)[0]
    assert sorted(column) == [(s, 2) for s in range(8) if s != 2]
    assert faultspec.validate("degraded-link", {"src": "0-3", "dst": "all"}, 2, 4)["dst"] == "all"
    with pytest.raises(ValueError, match=r"^degraded-link: src=0-99 is out of range \(rack 0 has GPUs 0..15\)$"):
        faultspec.validate("degraded-link", {"src": "0-99"}, 2, 4)


def test_matrix_faults_that_do_not_fit_the_job_are_noted_not_applied():
    cells, factors, notes = faultspec.matrix_faults(
        {"degraded-link": {"src": "0", "dst": "20"}, "degraded-gpu": {"gpu": "9"}}, 0, 8
    )
    assert (cells, factors) == ({}, {})
    assert notes == [
        "degraded-link: pair (0, 20) is outside a 8-rank matrix",
        "degraded-gpu: gpu 9 (factor 0.944) does not fit a 8-rank matrix",
    ]


# ------------------------------------------------------------------------------------------------
# The rack of an MPIJob, and its launcher log (no rack needed)
# ------------------------------------------------------------------------------------------------


def mpijob(name: str = "nvb", workers: int = 2, slots: int = 4, worker_spec: dict | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": name, "namespace": "ns", "uid": "u-1"},
        "spec": {
            "slotsPerWorker": slots,
            "mpiReplicaSpecs": {
                "Launcher": {
                    "template": {"spec": {"containers": [{"name": "l", "image": "i", "command": ["mpirun"]}]}}
                },
                "Worker": {
                    "replicas": workers,
                    "template": {"spec": {"containers": [{"name": "w", "image": "i"}], **(worker_spec or {})}},
                },
            },
        },
    }


def hostname_affinity(*trays: str) -> dict[str, Any]:
    """The node affinity the verify roles give their workers."""
    term = {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": list(trays)}]}
    return {
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}
    }


def worker(index: int, node: str | None) -> dict[str, Any]:
    return {
        "metadata": {"name": f"nvb-worker-{index}", "namespace": "ns"},
        "spec": {"nodeName": node} if node else {},
    }


def launcher_pod() -> dict[str, Any]:
    return {
        "metadata": {"name": "nvb-launcher-abcde", "namespace": "ns", "annotations": {}},
        "spec": {"containers": [{"name": "l", "command": ["mpirun"], "args": ["nvbandwidth", "-t", TESTCASE]}]},
    }


def test_the_rack_of_an_mpijob_is_that_of_its_bound_workers():
    job = mpijob(worker_spec=hostname_affinity("gb200-r0-t0", "gb200-r0-t1"))
    # bound workers win over what the template names
    assert podlogs.mpijob_rack(job, [worker(0, "gb200-r1-t0"), worker(1, "gb200-r1-t3")]) == 1
    assert podlogs.mpijob_rack(job, [worker(0, "gb200-r1-t2"), worker(1, None)]) == 1
    # workers on two racks: no single rack, no matrix fault
    assert podlogs.mpijob_rack(job, [worker(0, "gb200-r0-t0"), worker(1, "gb200-r1-t0")]) is None


def test_the_rack_of_an_mpijob_falls_back_to_its_worker_template():
    trays = [f"gb200-r1-t{t}" for t in range(18)]
    assert podlogs.mpijob_rack(mpijob(worker_spec=hostname_affinity(*trays)), []) == 1
    assert podlogs.mpijob_rack(mpijob(worker_spec=hostname_affinity(*trays)), [worker(0, None)]) == 1
    assert podlogs.mpijob_rack(mpijob(worker_spec={"nodeSelector": {"gpu-fabric.sim/rack": "rack3"}}), []) == 3
    assert podlogs.mpijob_rack(mpijob(worker_spec={"nodeSelector": {"kubernetes.io/hostname": "gb200-r2-t5"}}), []) == 2
    assert podlogs.mpijob_rack(mpijob(worker_spec=hostname_affinity("gb200-r0-t0", "gb200-r1-t0")), []) is None
    assert podlogs.mpijob_rack(mpijob(), []) is None
    broken = mpijob()
    broken["spec"]["mpiReplicaSpecs"]["Worker"]["template"] = None
    assert podlogs.mpijob_rack(broken, []) is None


def test_launcher_log_carries_the_faults_of_the_jobs_rack_only():
    faults = {
        "degraded-link": {"rack": "1", "src": "0", "dst": "5", "gbps": "400"},
        "degraded-gpu": {"rack": "1", "gpu": "6", "factor": "0.944"},
    }
    job = mpijob(workers=18)
    on_rack1 = [worker(w, f"gb200-r1-t{w}") for w in range(18)]
    on_rack0 = [worker(w, f"gb200-r0-t{w}") for w in range(18)]
    plain = parsed_matrix(podlogs.launcher_log(launcher_pod(), job, {}, on_rack1))[1]
    hit = parsed_matrix(podlogs.launcher_log(launcher_pod(), job, faults, on_rack1))[1]
    spared = parsed_matrix(podlogs.launcher_log(launcher_pod(), job, faults, on_rack0))[1]
    assert hit.shape == spared.shape == (72, 72)
    assert spared.rows == plain.rows
    assert hit.rows[0][5] == 400.0
    assert hit.rows[6][0] == round(plain.rows[6][0] * 0.944, 2)
    assert hit.rows[0][6] == round(plain.rows[0][6] * 0.944, 2)
    assert hit.rows[1][2] == plain.rows[1][2]
    assert hit.reported_sum == printed_sum(hit)
    # today's form (no rack=): rack 0
    legacy = {"degraded-link": {"src": "0", "dst": "5", "gbps": "402.11"}}
    assert parsed_matrix(podlogs.launcher_log(launcher_pod(), job, legacy, on_rack0))[1].rows[0][5] == 402.11
    assert parsed_matrix(podlogs.launcher_log(launcher_pod(), job, legacy, on_rack1))[1].rows[0][5] != 402.11


# ------------------------------------------------------------------------------------------------
# Trays: the rack label, missing-gpu and busy-node as objects (no rack needed)
# ------------------------------------------------------------------------------------------------


def test_trays_carry_the_rack_label_and_annotation():
    body = nodes.tray_node(1, 3, "v1.34.4")
    assert body["metadata"]["labels"]["gpu-fabric.sim/rack"] == "rack1"
    assert body["metadata"]["annotations"]["gpu-fabric.sim/rack"] == "1"
    assert body["status"]["capacity"]["nvidia.com/gpu"] == "4"
    assert nodes.desired_tray_labels(2, 2, {})["gb200-r1-t0"] == {
        "nvidia.com/gpu.clique": nodes.clique_value(1),
        "gpu-fabric.sim/rack": "rack1",
        "nvidia.com/gpu.count": "4",
    }


def test_missing_gpu_wants_three_gpus_on_that_tray_only():
    faults = {"missing-gpu": {"node": "gb200-r1-t3"}}
    gpus = nodes.desired_gpus(2, 4, faults)
    assert gpus["gb200-r1-t3"] == 3
    assert {n: g for n, g in gpus.items() if n != "gb200-r1-t3"} == {n: 4 for n in gpus if n != "gb200-r1-t3"}
    assert nodes.desired_tray_labels(2, 4, faults)["gb200-r1-t3"]["nvidia.com/gpu.count"] == "3"
    with pytest.raises(ValueError, match="not a tray of this sim"):
        nodes.desired_gpus(2, 4, {"missing-gpu": {"node": "gb200-r7-t0"}})


def test_tray_changes_patch_only_what_differs():
    current = [nodes.tray_node(r, t, "v1.34.4") for r in range(2) for t in range(2)]
    del current[0]["metadata"]["labels"]["gpu-fabric.sim/rack"]  # a tray made before the label existed
    assert nodes.tray_changes(current, 2, 2, {}) == {"gb200-r0-t0": {"labels": {"gpu-fabric.sim/rack": "rack0"}}}
    faults = {"missing-gpu": {"node": "gb200-r1-t1"}, "unlabelled-node": {"node": "gb200-r1-t0"}}
    changes = nodes.tray_changes(current, 2, 2, faults)
    assert changes["gb200-r1-t1"] == {"labels": {"nvidia.com/gpu.count": "3"}, "gpus": 3}
    assert changes["gb200-r1-t0"] == {"labels": {"nvidia.com/gpu.clique": None}}
    # a node at 3 whose fault was cleared goes back to 4
    faulted = nodes.tray_node(1, 1, "v1.34.4", gpus=3)
    assert nodes.tray_changes([faulted], 2, 2, {}) == {
        "gb200-r1-t1": {"labels": {"nvidia.com/gpu.count": "4"}, "gpus": 4}
    }


def test_busy_pod_is_bound_and_holds_every_gpu_of_the_tray():
    pod = nodes.busy_pod("gb200-r0-t2")
    assert (pod["metadata"]["namespace"], pod["metadata"]["name"]) == ("gpu-fabric-sim-busy", "busy-gb200-r0-t2")
    assert pod["spec"]["nodeName"] == "gb200-r0-t2"
    assert pod["spec"]["containers"][0]["resources"] == {"limits": {"nvidia.com/gpu": "4"}}
    assert nodes.busy_nodes({"busy-node": {"node": "gb200-r0-t2"}}) == ["gb200-r0-t2"]
    assert nodes.busy_nodes({}) == []


# ------------------------------------------------------------------------------------------------
# The live rack (-m sim)
# ------------------------------------------------------------------------------------------------


def tray(sim_rack, name: str) -> dict[str, Any]:
    return sim_rack.get_json("node", name)


def gpu_state(node: dict[str, Any]) -> tuple[str, str, str]:
    return (
        node["status"]["capacity"]["nvidia.com/gpu"],
        node["status"]["allocatable"]["nvidia.com/gpu"],
        node["metadata"]["labels"]["nvidia.com/gpu.count"],
    )


def gpu_requests_on(sim_rack, node: str) -> int:
    """What the collection sums: nvidia.com/gpu requests of the node's non-terminated pods."""
    pods = sim_rack.get_json("pods", "-A", "--field-selector", f"spec.nodeName={node}")["items"]
    return sum(
        int(c.get("resources", {}).get("requests", {}).get("nvidia.com/gpu", 0))
        for p in pods
        if p["status"].get("phase") not in ("Succeeded", "Failed")
        for c in p["spec"]["containers"]
    )


@pytest.fixture
def two_racks(sim_rack):
    """The live rack, 2 racks x 3 trays at least; ``two_racks.set_fault`` switches a fault on and the
    fixture clears it by name afterwards (the rack may be shared: other faults are left alone)."""
    status = sim_rack.status()
    if status["racks"] < 2 or status["trays_per_rack"] < 3:
        pytest.skip("needs a rack of at least 2 racks x 3 trays (sim/rack up --racks 2 --trays-per-rack 4)")
    names: list[str] = []

    def set_fault(name: str, **params: Any):
        names.append(name)
        return sim_rack.fault(name, **params)

    sim_rack.set_fault = set_fault
    sim_rack.size = (status["racks"], status["trays_per_rack"])
    yield sim_rack
    for name in dict.fromkeys(names):
        sim_rack.rack("fault", "--clear", name, check=False)


@pytest.mark.sim
def test_every_tray_is_labelled_with_its_rack(sim_rack):
    table = sim_rack.kubectl("get", "nodes", "-L", "gpu-fabric.sim/rack", "--no-headers").stdout.splitlines()
    for row in table:
        name, *_rest, rack = row.split()
        parsed = nodes.parse_tray_name(name)
        if parsed is None:
            assert name == "sim-control-plane"
            continue
        assert rack == f"rack{parsed[0]}", row
    selected = sim_rack.get_json("nodes", "-l", "gpu-fabric.sim/rack=rack1")["items"]
    assert selected and all(n["metadata"]["name"].startswith("gb200-r1-") for n in selected)


@pytest.mark.sim
def test_fault_missing_gpu_makes_the_tray_report_three_until_cleared(two_racks):
    sim_rack = two_racks
    node = "gb200-r1-t2"
    assert gpu_state(tray(sim_rack, node)) == ("4", "4", "4")
    sim_rack.set_fault("missing-gpu", node=node)
    assert gpu_state(tray(sim_rack, node)) == ("3", "3", "3")
    assert gpu_state(tray(sim_rack, "gb200-r1-t1")) == ("4", "4", "4")
    # kept by `up` again, at the rack's own size (and by KWOK, which copies capacity and allocatable)
    racks, trays = sim_rack.size
    sim_rack.rack("up", "--racks", str(racks), "--trays-per-rack", str(trays))
    assert gpu_state(tray(sim_rack, node)) == ("3", "3", "3")
    assert json.loads((sim_rack.state / "faults.json").read_text())["missing-gpu"] == {"node": node}
    sim_rack.rack("fault", "--clear", "missing-gpu")
    assert gpu_state(tray(sim_rack, node)) == ("4", "4", "4")


@pytest.mark.sim
def test_fault_missing_gpu_refuses_an_unknown_node(two_racks):
    result = two_racks.rack("fault", "missing-gpu", "node=gb200-r9-t1", check=False)
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "sim/rack: missing-gpu: node=gb200-r9-t1 is not a tray of this sim (e.g. gb200-r0-t0)"
    )
    assert "missing-gpu" not in two_racks.faults()


@pytest.mark.sim
def test_fault_busy_node_runs_a_tenant_pod_holding_every_gpu(two_racks, namespace):
    sim_rack = two_racks
    node = "gb200-r0-t2"
    sim_rack.set_fault("busy-node", node=node)
    busy = sim_rack.get_json("pod", f"busy-{node}", "-n", "gpu-fabric-sim-busy")
    assert busy["status"]["phase"] == "Running"
    assert busy["spec"]["nodeName"] == node
    assert busy["spec"]["containers"][0]["resources"]["requests"] == {"nvidia.com/gpu": "4"}
    assert gpu_requests_on(sim_rack, node) >= 4
    # the real scheduler counts it: a GPU pod pinned to that tray cannot be placed
    sim_rack.apply(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "wants-a-gpu"},
            "spec": {
                "nodeSelector": {"kubernetes.io/hostname": node},
                "terminationGracePeriodSeconds": 0,
                "containers": [
                    {
                        "name": "main",
                        "image": "registry.invalid/sim:1",
                        "resources": {"limits": {"nvidia.com/gpu": "1"}},
                    }
                ],
            },
        },
        namespace,
    )
    cond = sim_rack.wait_until(
        "wants-a-gpu unschedulable",
        lambda: [
            c
            for c in sim_rack.get_json("pod", "wants-a-gpu", "-n", namespace)["status"].get("conditions", [])
            if c["type"] == "PodScheduled" and c["status"] == "False"
        ],
    )[0]
    assert "Insufficient nvidia.com/gpu" in cond["message"]
    sim_rack.kubectl("delete", "pod", "wants-a-gpu", "-n", namespace, "--wait=false")

    sim_rack.rack("fault", "--clear", "busy-node")
    gone = sim_rack.kubectl("get", "pod", f"busy-{node}", "-n", "gpu-fabric-sim-busy", check=False)
    assert gone.returncode != 0
    sim_rack.wait_until(
        "namespace gpu-fabric-sim-busy gone",
        lambda: sim_rack.kubectl("get", "namespace", "gpu-fabric-sim-busy", check=False).returncode != 0,
        timeout=90,
    )


@pytest.mark.sim
def test_tray_faults_combine_and_clear_together(two_racks):
    sim_rack = two_racks
    sim_rack.set_fault("missing-gpu", node="gb200-r1-t0")
    sim_rack.set_fault("busy-node", node="gb200-r0-t1")
    sim_rack.set_fault("degraded-gpu", rack=1, gpu=2)
    faults = sim_rack.faults()
    assert faults["missing-gpu"] == {"node": "gb200-r1-t0"}
    assert faults["busy-node"] == {"node": "gb200-r0-t1"}
    assert faults["degraded-gpu"] == {"rack": "1", "gpu": "2", "factor": "0.944"}
    assert gpu_state(tray(sim_rack, "gb200-r1-t0")) == ("3", "3", "3")
    assert sim_rack.get_json("pod", "busy-gb200-r0-t1", "-n", "gpu-fabric-sim-busy")["status"]["phase"] == "Running"
    listing = sim_rack.rack("fault", "--list").stdout
    for name in ("missing-gpu", "busy-node", "degraded-gpu"):
        assert re.search(rf"^ON\s+{name}\s", listing, re.MULTILINE), name
    for name in ("missing-gpu", "busy-node", "degraded-gpu"):
        sim_rack.rack("fault", "--clear", name)
    assert not {"missing-gpu", "busy-node", "degraded-gpu"} & set(sim_rack.faults())
    assert gpu_state(tray(sim_rack, "gb200-r1-t0")) == ("4", "4", "4")
    assert sim_rack.kubectl("get", "pod", "busy-gb200-r0-t1", "-n", "gpu-fabric-sim-busy", check=False).returncode != 0


def test_orphaned_pods_are_those_bound_to_a_node_that_is_gone():
    pods = [
        {"metadata": {"namespace": "gpu-operator", "name": "a"}, "spec": {"nodeName": "gb200-r0-t0"}},
        {"metadata": {"namespace": "gpu-operator", "name": "b"}, "spec": {"nodeName": "gb200-r9-t0"}},
        {"metadata": {"namespace": "default", "name": "pending"}, "spec": {}},
    ]
    assert nodes.orphaned_pods(pods, {"gb200-r0-t0", "sim-control-plane"}) == [("gpu-operator", "b")]


@pytest.mark.sim
def test_a_shrunk_rack_has_no_pod_of_its_removed_trays_when_up_returns(two_racks, namespace):
    """A real cluster's pod garbage collector removes the pods of deleted nodes; `up` waits for that."""
    sim_rack = two_racks
    racks, trays = sim_rack.size
    extra = nodes.tray_name(racks - 1, trays)
    try:
        sim_rack.rack("up", "--racks", str(racks), "--trays-per-rack", str(trays + 1))
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "bound-to-extra", "namespace": namespace},
            "spec": {
                "nodeName": extra,
                "tolerations": [{"operator": "Exists"}],
                "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}],
            },
        }
        sim_rack.kubectl("apply", "-f", "-", input=json.dumps(pod))
        sim_rack.wait_until(
            "the pod on the extra tray to run",
            lambda: sim_rack.get_json("pod", "bound-to-extra", "-n", namespace)["status"].get("phase") == "Running",
        )
    finally:
        shrunk = sim_rack.rack("up", "--racks", str(racks), "--trays-per-rack", str(trays))
    assert "pods of trays that are gone" in shrunk.stdout + shrunk.stderr
    everywhere = sim_rack.get_json("pods", "-A")["items"]
    assert [p["metadata"]["name"] for p in everywhere if p["spec"].get("nodeName") == extra] == []
