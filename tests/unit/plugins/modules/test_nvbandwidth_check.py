# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""nvbandwidth_check as a module: in process for the argument handling, and through ansible-playbook."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from ansible.module_utils.testing import patch_module_args
from ansible_collections.gpu_fabric.mnnvl.plugins.modules import nvbandwidth_check

REPO_ROOT = Path(__file__).resolve().parents[4]
NVBW = REPO_ROOT / "tests" / "fixtures" / "nvbandwidth"
GB200 = NVBW / "gb200-2node-multinode_device_to_device_memcpy_read_ce.txt"
MN = "multinode_device_to_device_memcpy_read_ce"
NOT_RUN = "the nvbandwidth output does not show a completed run"


def run_module(args: dict, capsys) -> dict:
    """Run main() with ``args``; return the JSON it printed (exit_json and fail_json both exit)."""
    with patch_module_args(args), pytest.raises(SystemExit):
        nvbandwidth_check.main()
    return json.loads(capsys.readouterr().out)


def test_gb200_passes_85_percent_of_peak(capsys):
    result = run_module(
        {"content": GB200.read_text(), "testcase": MN, "min_fraction_of_peak": 0.85, "peak_gbps": 900},
        capsys,
    )
    assert result.get("failed") is not True
    assert result["changed"] is False
    assert result["passed"] is True
    assert result["threshold_gbps"] == 765.0
    assert result["sum"] == 45997.93
    assert result["matrix"][0][3] == 821.92
    assert result["gpus"] == 8
    assert result["failing_pairs"] == []


def test_failing_pair_fails_the_module_and_lists_it(capsys):
    degraded = GB200.read_text().replace("    821.69    821.92    821.45", "    821.69    410.50    821.45", 1)
    degraded = degraded.replace("45997.93", "45586.51")
    result = run_module({"content": degraded, "min_gbps": 765}, capsys)
    assert result["failed"] is True
    assert result["passed"] is False
    assert [(p["src"], p["dst"], p["gbps"], p["rule"]) for p in result["failing_pairs"]] == [(0, 3, 410.5, "floor")]
    assert result["summary"] == (
        "1 of 56 GPU pairs below the threshold, held against the product reference 821.41 GB/s (GB200 NVL72, "
        "2 trays x 4 GPUs, driver 580.95.05, the guide's run: 820.35-822.16 GB/s): 0->3 410.50 GB/s "
        "(nvbandwidth-test-worker-0 -> nvbandwidth-test-worker-0), below the floor 765.00"
    )
    assert result["msg"] == (
        f"nvbandwidth testcase {MN} missed its thresholds (1 failing pairs): "
        "GPU 0 -> GPU 3: 410.5 GB/s is below the threshold 765"
    )


def test_fail_on_violation_false_returns_the_verdict(capsys):
    result = run_module({"src": str(GB200), "min_gbps": 821.5, "fail_on_violation": False}, capsys)
    assert result.get("failed") is not True
    assert result["passed"] is False
    rows = [line.split()[1:] for line in GB200.read_text().splitlines() if line[:2].strip().isdigit()]
    slow = [(r, c) for r, row in enumerate(rows) for c, v in enumerate(row) if v != "N/A" and float(v) < 821.5]
    assert len(slow) == 31
    assert [(p["src"], p["dst"]) for p in result["failing_pairs"]] == slow


@pytest.mark.parametrize(
    ("fixture", "start"),
    [
        ("invented-unknown-testcase.txt", f"{NOT_RUN}: testcase no_such_test is unknown"),
        ("invented-unknown-testcase.json", f"{NOT_RUN}: testcase no_such_test is unknown"),
        ("invented-multinode-waived.txt", f"{NOT_RUN}: no testcase ran"),
        ("invented-multinode-cuda-error.txt", f"{NOT_RUN}: nvbandwidth reported an error: [CUDA_ERROR_NOT_PERMITTED]"),
        ("invented-gb200-truncated.txt", f"{NOT_RUN}: testcase {MN} has no SUM line"),
        ("invented-latency.txt", f"{NOT_RUN}: testcase host_device_latency_sm reports ns"),
        ("invented-testcase-error.txt", f"{NOT_RUN}: testcase device_to_device_memcpy_read_ce failed inside"),
    ],
)
def test_did_not_run_fails_even_without_fail_on_violation(capsys, fixture, start):
    result = run_module({"src": str(NVBW / fixture), "fail_on_violation": False}, capsys)
    assert result["failed"] is True
    assert result["passed"] is False
    assert result["msg"].startswith(start)
    assert result["errors"]


def _gb200_with(rows_change) -> str:
    """The real GB200 capture with cells changed by ``rows_change(rows)`` and a SUM line that agrees."""
    lines = GB200.read_text().splitlines(keepends=True)
    start = next(i for i, line in enumerate(lines) if line.startswith("           0")) + 1
    rows = [[None if t == "N/A" else float(t) for t in line.split()[1:]] for line in lines[start : start + 8]]
    rows_change(rows)
    for r, row in enumerate(rows):
        lines[start + r] = f"{r:>2}" + "".join(f"{'N/A':>10}" if v is None else f"{v:>10.2f}" for v in row) + "\n"
    total = sum(v for row in rows for v in row if v is not None)
    return "".join(lines).replace("SUM " + MN + " 45997.93", f"SUM {MN} {total:.2f}")


def _lose_a_link(rows) -> None:
    for other in range(8):
        if other != 5:
            rows[5][other] = round(rows[5][other] * 0.944, 2)
            rows[other][5] = round(rows[other][5] * 0.944, 2)


def test_default_rule_from_the_product_passes_the_real_run(capsys):
    nodes = ["gb200-r0-t0", "gb200-r0-t1"]
    result = run_module(
        {
            "content": GB200.read_text(),
            "testcase": MN,
            "gpu_product": "NVIDIA-GB200",
            "nodes": nodes,
            "gpus_per_node": 4,
        },
        capsys,
    )
    assert result.get("failed") is not True
    assert result["passed"] is True
    assert result["threshold_gbps"] == 765.0
    assert result["threshold_explanation"] == "0.85 x 900.00 GB/s NVLink peak of NVIDIA-GB200"
    assert result["median_gbps"] == 821.41
    assert result["min_fraction_of_median"] == 0.97
    assert result["summary"] == (
        "56 of 56 GPU pairs at or above 765.00 GB/s and 0.97 of the product reference 821.41 (min 820.35, SUM 45997.93)"
    )
    assert result["failing_pairs"] == [] and result["low_gpus"] == []


def test_a_gpu_with_a_lost_link_fails_the_module_naming_it(capsys):
    args = {
        "content": _gb200_with(_lose_a_link),
        "gpu_product": "NVIDIA-GB200",
        "nodes": ["gb200-r0-t0", "gb200-r0-t1"],
        "gpus_per_node": 4,
    }
    result = run_module(args, capsys)
    low = (
        "GPU 5 on gb200-r0-t1: its 14 pairs average 775.30 GB/s, 0.944 of the product reference 821.41: "
        "a GPU with lost NVLinks"
    )
    held = (
        "held against the product reference 821.41 GB/s "
        "(GB200 NVL72, 2 trays x 4 GPUs, driver 580.95.05, the guide's run: 820.35-822.16 GB/s)"
    )
    assert result["failed"] is True
    assert result["passed"] is False
    assert result["errors"] == []
    assert result["threshold_gbps"] == 765.0
    assert result["median_gbps"] == 821.335
    assert result["low_gpus"] == [
        {
            "gpu": 5,
            "node": "gb200-r0-t1",
            "pairs": 14,
            "mean_gbps": 775.299,
            "median_gbps": 775.27,
            "min_gbps": 774.56,
            "fraction_of_median": 0.9439,
            "fraction_of_reference": 0.9439,
        }
    ]
    assert len(result["failing_pairs"]) == 14
    assert {(p["rule"], p["low_gpu"]) for p in result["failing_pairs"]} == {("product", 5)}
    assert result["failed_nodes"] == ["gb200-r0-t1"]
    assert result["summary"] == f"14 of 56 GPU pairs below the threshold, {held}: " + low
    assert result["msg"] == f"nvbandwidth testcase {MN} missed its thresholds (14 failing pairs): {low}"
    # The floor alone (the rule before the median rule) lets it pass.
    passed = run_module({**args, "min_fraction_of_median": 0}, capsys)
    assert passed.get("failed") is not True and passed["passed"] is True
    assert passed["min_fraction_of_median"] is None


def test_unknown_product_without_a_floor_is_a_violation(capsys):
    result = run_module({"src": str(GB200), "gpu_product": "NVIDIA-A100-SXM4-80GB", "fail_on_violation": False}, capsys)
    assert result.get("failed") is not True
    assert result["passed"] is False
    assert result["violations"][0].startswith("no NVLink peak is known for GPU product 'NVIDIA-A100-SXM4-80GB'")
    table = [{"match": "A100", "peak_gbps": 300}]
    result = run_module({"src": str(GB200), "gpu_product": "NVIDIA-A100", "peak_gbps_by_product": table}, capsys)
    assert result["passed"] is True and result["threshold_gbps"] == 255.0


def test_a_baseline_and_the_sites_references_reach_the_rule(capsys):
    args = {"src": str(GB200), "gpu_product": "NVIDIA-GB300", "fail_on_violation": False}
    result = run_module(args, capsys)
    assert result["passed"] is True
    assert [r["kind"] for r in result["references"]] == ["median"]  # and a warning says so
    baseline = {"median_gbps": 860.0, "source": "pinned run 2026-11-02"}
    result = run_module({**args, "baseline": baseline}, capsys)
    assert result["passed"] is False
    assert result["reference"] == {"kind": "baseline", "gbps": 860.0, "source": "pinned run 2026-11-02"}
    references = [{"match": "GB300", "testcase": "read_ce$", "gbps": 815.0, "source": "site acceptance"}]
    result = run_module({**args, "product_references": references}, capsys)
    assert result["passed"] is True and result["reference"]["kind"] == "median"
    assert {"kind": "product", "gbps": 815.0, "source": "site acceptance"} in result["references"]


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ({"product_references": [{"match": "GB300", "gbps": 815.0}]}, "product_references: product reference entry 0"),
        ({"baseline": {"source": "r1"}}, "baseline: median_gbps is missing; it needs median_gbps"),
    ],
)
def test_a_bad_reference_is_refused_in_one_line(capsys, bad, message):
    result = run_module({"src": str(GB200), "gpu_product": "NVIDIA-GB300", **bad}, capsys)
    assert result["failed"] is True and result["msg"].startswith(message) and "\n" not in result["msg"]


def _five_of_eight_lose_a_link(rows) -> None:
    """GPUs 0-4 each lost one NVLink of 18: every pair with one of them at either end runs at 0.944."""
    for r in range(8):
        for c in range(8):
            if r != c and (r < 5 or c < 5):
                rows[r][c] = round(rows[r][c] * 0.944, 2)


NOT_FIGURES = [float("nan"), float("inf"), True]


@pytest.mark.parametrize("bad", NOT_FIGURES)
@pytest.mark.parametrize(
    ("table", "message"),
    [
        (
            lambda bad: {"product_references": [{"match": "GB200", "testcase": "read_ce$", "gbps": bad}]},
            "product_references: product reference entry 0 ",
        ),
        (lambda bad: {"peak_gbps_by_product": [{"match": "GB200", "peak_gbps": bad}]}, "peak_gbps_by_product: "),
        (lambda bad: {"baseline": {"median_gbps": bad, "source": "pinned run r1"}}, "baseline: median_gbps "),
        (
            lambda bad: {"baseline": {"median_gbps": 821.0, "matrix": [[None, bad], [821.0, None]]}},
            "baseline: matrix row 0 column 1 ",
        ),
    ],
)
def test_a_figure_that_is_no_number_is_refused_in_one_line(capsys, table, message, bad):
    """Before: a NaN or True reference let a GB200 rack with 5 of 8 GPUs one link down pass."""
    args = {"content": _gb200_with(_five_of_eight_lose_a_link), "gpu_product": "NVIDIA-GB200", **table(bad)}
    result = run_module(args, capsys)
    assert result["failed"] is True
    assert result["msg"].startswith(message) and "\n" not in result["msg"]
    assert repr(bad) in result["msg"]


@pytest.mark.parametrize("name", ["min_gbps", "peak_gbps", "min_sum_gbps"])
def test_a_threshold_that_is_not_finite_is_refused_in_one_line(capsys, name):
    result = run_module({"content": GB200.read_text(), "gpu_product": "NVIDIA-GB200", name: "nan"}, capsys)
    assert result["failed"] is True
    assert result["msg"].startswith(f"{name} is nan; it must be")


def _three_of_eight_lose_a_link(rows) -> None:
    for r in range(8):
        for c in range(8):
            if r != c and (r in (1, 4, 6) or c in (1, 4, 6)):
                rows[r][c] = round(rows[r][c] * 0.944, 2)


def test_with_min_gbps_and_no_product_the_product_the_output_names_is_the_reference(capsys):
    """Before: min_gbps without gpu_product left the run's median as the only reference, and 3 of 8 GPUs one
    link down moved the median with them and passed."""
    result = run_module({"content": _gb200_with(_three_of_eight_lose_a_link), "min_gbps": 765}, capsys)
    assert result["failed"] is True and result["passed"] is False
    assert result["reference"]["kind"] == "product" and result["reference"]["gbps"] == 821.41
    assert [g["gpu"] for g in result["low_gpus"]] == [1, 4, 6]
    assert {p["rule"] for p in result["failing_pairs"]} == {"product"}
    assert result["threshold_gbps"] == 765.0  # the floor stays the one asked for


def test_missing_src(capsys, tmp_path):
    result = run_module({"src": str(tmp_path / "nvbandwidth.log")}, capsys)
    assert result["failed"] is True
    assert result["msg"] == (
        f"src {tmp_path / 'nvbandwidth.log'} does not exist on the target; write the nvbandwidth output there first"
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"min_fraction_of_peak": 0.85}, "min_fraction_of_peak needs the peak: set peak_gbps, or gpu_product"),
        ({"min_fraction_of_peak": 85, "peak_gbps": 900}, "min_fraction_of_peak is 85.0; it must be from 0 to 1"),
        ({"min_fraction_of_peak": 0.85, "peak_gbps": -1}, "peak_gbps is -1.0; it must be a positive GB/s value"),
        ({"min_fraction_of_median": 1.5}, "min_fraction_of_median is 1.5; it must be from 0 to 1"),
        ({"gpus_per_node": 0, "nodes": ["a"]}, "gpus_per_node is 0; it must be 1 or more"),
        ({"peak_gbps_by_product": [{"match": "GB200"}]}, "peak_gbps_by_product: peak table entry 0"),
    ],
)
def test_argument_errors(capsys, args, message):
    result = run_module({"content": GB200.read_text(), **args}, capsys)
    assert result["failed"] is True
    assert message in result["msg"]


def test_content_and_src_are_exclusive(capsys):
    result = run_module({"content": "x", "src": str(GB200)}, capsys)
    assert result["failed"] is True
    assert "mutually exclusive: content|src" in result["msg"]


def test_build_module_spec():
    with patch_module_args({"content": "x"}):
        module = nvbandwidth_check.build_module()
    assert module.check_mode is False
    assert module.params["format"] == "auto"
    assert module.params["fail_on_violation"] is True


PLAYBOOK = """
- hosts: localhost
  gather_facts: false
  tasks:
    - name: Copy the launcher log to the target
      ansible.builtin.copy:
        src: {gb200}
        dest: {workdir}/launcher.log
        mode: "0644"
      check_mode: false

    - name: Judge the log on the target in check mode
      gpu_fabric.mnnvl.nvbandwidth_check:
        src: {workdir}/launcher.log
        testcase: {mn}
        min_fraction_of_peak: 0.85
        peak_gbps: 900
        expected_gpus: 8
      check_mode: true
      register: verdict

    - name: Parse the same log with the filter
      ansible.builtin.set_fact:
        parsed: "{{{{ lookup('ansible.builtin.file', log) | gpu_fabric.mnnvl.nvbandwidth_parse }}}}"
        cliques: "{{{{ nodes | gpu_fabric.mnnvl.clique_groups }}}}"
      vars:
        log: {workdir}/launcher.log
        nodes:
          - metadata: {{name: gb200-pod2-f06-node05, labels: {{nvidia.com/gpu.clique: {clique}}}}}
          - metadata: {{name: gb200-pod2-f06-node07, labels: {{nvidia.com/gpu.present: "true"}}}}

    - name: Write what a later play would read
      ansible.builtin.copy:
        content: "{{{{ {{'verdict': verdict, 'parsed_sum': parsed[\\"{mn}\\"].sum, 'cliques': cliques}} | to_json }}}}"
        dest: {workdir}/out.json
        mode: "0644"
      check_mode: false

    - name: Judge a waived run without failing on thresholds
      gpu_fabric.mnnvl.nvbandwidth_check:
        src: {waived}
        fail_on_violation: false
"""


def test_through_ansible_playbook(tmp_path):
    playbook = tmp_path / "play.yml"
    playbook.write_text(
        PLAYBOOK.format(
            gb200=GB200,
            workdir=tmp_path,
            mn=MN,
            clique="69a19a31-f41c-45a5-8245-579b6bce5bdd.32766",
            waived=NVBW / "invented-multinode-waived.txt",
        )
    )
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO_ROOT / "ansible.cfg"), ANSIBLE_LOCALHOST_WARNING="0")
    env["ANSIBLE_INVENTORY_UNPARSED_WARNING"] = "0"
    env["ANSIBLE_PYTHON_INTERPRETER"] = sys.executable  # the target is this machine, with this venv
    completed = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-playbook"), "-c", "local", "-i", "localhost,", str(playbook)],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    # The last task must fail: a waived run is never a pass, whatever fail_on_violation says.
    assert completed.returncode == 2, completed.stdout + completed.stderr
    assert "Judge a waived run without failing on thresholds" in completed.stdout
    assert "no testcase ran" in completed.stdout
    out = json.loads((tmp_path / "out.json").read_text())
    verdict = out["verdict"]
    assert verdict["changed"] is False
    assert verdict["passed"] is True
    assert verdict["threshold_gbps"] == 765.0
    assert verdict["sum"] == 45997.93
    assert verdict["min"] == 820.35
    assert out["parsed_sum"] == 45997.93
    assert out["cliques"] == {
        "69a19a31-f41c-45a5-8245-579b6bce5bdd.32766": ["gb200-pod2-f06-node05"],
        "_unlabelled": ["gb200-pod2-f06-node07"],
    }


def test_a_fifo_as_src_is_refused_at_once(tmp_path, capsys):
    fifo = tmp_path / "nvbandwidth.log"
    os.mkfifo(fifo)
    result = run_module({"src": str(fifo)}, capsys)  # it blocked forever before
    assert result["failed"] is True
    assert result["msg"] == (
        f"src {fifo} is a FIFO (named pipe), not a regular file; refusing to read it (it could block forever or"
        " never end). Point the path at the file itself."
    )
