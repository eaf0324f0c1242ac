# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The nvbandwidth check judges each rack with its baseline from the kept history."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.bandwidth_thresholds import ONE_LOST_LINK_OF_18
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.checks import nvbandwidth as nvbandwidth_check
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.checks.base import NotRun
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.history_runs import pin_run, record_run
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.rack_plan import RackPlan

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from nvbandwidth_emitter import Matrix, Testcase, emit_run  # noqa: E402

TESTCASE = "device_to_device_memcpy_read_ce"


def params(history_dir: str) -> dict:
    return {
        "check": "nvbandwidth",
        "registry": "",
        "image_overrides": {},
        "mpi": {},
        "run_id": "r3",
        "history_dir": history_dir,
        "nvbandwidth": {"image": "nvbandwidth:test", "testcase": TESTCASE, "extra_args": []},
    }


def plan(name: str) -> RackPlan:
    return RackPlan(name=name, cliques=[], found=[], nodes=["t0", "t1"], skipped=[], gpus_per_tray=4, gpu_product="")


def kept(history_dir, run_id, day, **racks):
    """Run ``run_id`` with rack -> (median, verdict)."""
    records = []
    for rack, (median, verdict) in racks.items():
        details = {"testcase": TESTCASE, "median_gbps": median, "matrix": [[None, median], [median, None]]}
        details["references"] = [{"kind": "product", "gbps": 821.41, "source": "GB200 NVL72, driver 580.95.05"}]
        started = f"2026-12-0{day}T10:00:00Z"
        records.append(
            {"check": "nvbandwidth", "rack": rack, "verdict": verdict, "started": started, "details": details}
        )
    record_run(history_dir, run_id, records)


def judged_options(monkeypatch, history_dir: str, rack: str) -> dict:
    seen = {}

    def judge(log, rack_plan, options, nodes):
        seen.update(options)
        return {"passed": True, "summary": "ok", "details": {}, "failed_nodes": []}

    monkeypatch.setattr(nvbandwidth_check, "judge_nvbandwidth_log", judge)
    check = nvbandwidth_check.NvbandwidthCheck.from_params(params(history_dir))
    check.judge_log("log", plan(rack), ["t0", "t1"])
    return seen


def test_each_rack_gets_its_pinned_or_last_passing_run_as_baseline(monkeypatch, tmp_path):
    history_dir = str(tmp_path / "runs")
    kept(history_dir, "r1", 1, rack0=(815.0, "passed"))
    kept(history_dir, "r2", 2, rack0=(821.0, "passed"), rack1=(700.0, "failed"))
    assert judged_options(monkeypatch, history_dir, "rack0")["baseline"]["source"] == "last passing run r2"
    pin_run(history_dir, "r1")
    baseline = judged_options(monkeypatch, history_dir, "rack0")["baseline"]
    assert (baseline["run_id"], baseline["median_gbps"], baseline["source"]) == ("r1", 815.0, "pinned run r1")
    # rack1 never passed: the key is set, with no baseline
    assert judged_options(monkeypatch, history_dir, "rack1")["baseline"] is None


def test_without_a_history_dir_the_options_have_no_baseline(monkeypatch):
    assert "baseline" not in judged_options(monkeypatch, "", "rack0")


class Run:
    """What the check reads of the rack's run before its job starts: the plan."""

    def __init__(self, rack: str) -> None:
        self.plan = plan(rack)


def test_a_kept_record_whose_median_is_no_number_refuses_the_check_before_its_job(tmp_path):
    history_dir = str(tmp_path / "runs")
    kept(history_dir, "r1", 1, rack0=(float("nan"), "passed"))
    pin_run(history_dir, "r1")
    check = nvbandwidth_check.NvbandwidthCheck.from_params(params(history_dir))
    with pytest.raises(NotRun) as refused:
        check.measure(Run("rack0"))  # before the MPIJob: the fake run has nothing else to give
    assert str(refused.value) == (
        f"the kept record {history_dir}/r1/nvbandwidth/rack0.json (pinned run r1) cannot be the baseline of "
        "nvbandwidth/rack0: median_gbps nan is not a finite number; matrix row 0 column 1 nan is not a finite number; "
        "matrix row 1 column 0 nan is not a finite number; remove that run from the history, or pin a run you trust "
        "(gpu_fabric_verify_baseline_run)"
    )
    # the judge, reached any other way, refuses it too: it never judges against a NaN baseline
    with pytest.raises(NotRun, match="cannot be the baseline of nvbandwidth/rack0"):
        check.judge_log("log", plan("rack0"), ["t0", "t1"])


@pytest.mark.parametrize("bad", [True, float("inf"), -821.0])
def test_a_kept_record_that_is_no_bandwidth_is_refused_naming_the_entry(tmp_path, bad):
    history_dir = str(tmp_path / "runs")
    kept(history_dir, "r1", 1, rack0=(bad, "passed"))
    pin_run(history_dir, "r1")
    with pytest.raises(
        NotRun, match=rf"pinned run r1\) cannot be the baseline of nvbandwidth/rack0: median_gbps {bad!r}"
    ):
        nvbandwidth_check.NvbandwidthCheck.from_params(params(history_dir)).measure(Run("rack0"))


BISECT = "multinode_bisect_write_ce"


def bisect_log(lost_every_link: bool) -> str:
    """A bisect run of 2 trays x 4 GB200 GPUs (the real capture's cells), every GPU one link down or none."""
    cells = [820.9, 821.3, 821.1, 820.6, 821.7, 821.4, 820.8, 821.2]
    column = [[round(cell * ONE_LOST_LINK_OF_18, 2) if lost_every_link else cell] for cell in cells]
    labels = [f"{gpu}->{(gpu + 4) % 8}" for gpu in range(8)]
    matrix = Matrix(BISECT, "Bisect benchmarking, simultaneous write CE BW", column, row_labels=labels)
    return emit_run([Testcase(BISECT, [matrix])], hosts=["w0", "w1"], version="v0.7")


def test_a_bisect_rack_faulty_from_its_first_run_never_sets_its_own_bar(tmp_path):
    """Before: the faulty first run passed against its own median and became the rack's baseline."""
    history_dir = str(tmp_path / "runs")
    rack = RackPlan(name="rack0", cliques=[], found=[], nodes=["t0", "t1"], skipped=[], gpus_per_tray=4, gpu_product="")
    first = nvbandwidth_check.NvbandwidthCheck.from_params(
        dict(params(history_dir), run_id="r1", nvbandwidth={**params("")["nvbandwidth"], "testcase": BISECT})
    )
    verdict = first.judge_log(bisect_log(lost_every_link=True), rack, ["t0", "t1"])
    assert verdict["passed"] is True  # no product reference for bisect: its median alone, every row at it
    assert [r["kind"] for r in verdict["details"]["references"]] == ["median"]
    assert verdict["details"]["warnings"][0].startswith(
        "held against the run's median alone: no product reference (NVIDIA-GB200, multinode_bisect_write_ce, "
        "driver 580.95.05) and no site baseline; "
    )
    assert "this run sets no baseline" in verdict["details"]["warnings"][0]
    record = {"check": "nvbandwidth", "rack": "rack0", "verdict": "passed", "started": "2026-12-01T10:00:00Z"}
    record_run(history_dir, "r1", [dict(record, details=verdict["details"])])
    second = nvbandwidth_check.NvbandwidthCheck.from_params(
        dict(params(history_dir), run_id="r2", nvbandwidth={**params("")["nvbandwidth"], "testcase": BISECT})
    )
    assert second.options_of("rack0")["baseline"] is None
    # the site's pin is its word that the run is healthy: then it is the baseline
    pin_run(history_dir, "r1")
    assert second.options_of("rack0")["baseline"]["source"] == "pinned run r1"


def test_a_passing_run_held_against_a_product_reference_is_the_next_baseline(tmp_path):
    history_dir = str(tmp_path / "runs")
    record = {"check": "nvbandwidth", "rack": "rack0", "verdict": "passed", "started": "2026-12-01T10:00:00Z"}
    plain = {"testcase": TESTCASE, "median_gbps": 821.0, "references": [{"kind": "median", "gbps": 821.0}]}
    record_run(history_dir, "r1", [dict(record, details=plain)])
    check = nvbandwidth_check.NvbandwidthCheck.from_params(params(history_dir))
    assert check.options_of("rack0")["baseline"] is None
    held = dict(plain, references=[{"kind": "product", "gbps": 821.41}, {"kind": "median", "gbps": 821.0}])
    record_run(history_dir, "r2", [dict(record, started="2026-12-02T10:00:00Z", details=held)])
    assert check.options_of("rack0")["baseline"]["source"] == "last passing run r2"


def test_a_passed_kept_record_without_a_median_is_refused_not_passed_over(tmp_path):
    history_dir = str(tmp_path / "runs")
    kept(history_dir, "r1", 1, rack0=(None, "passed"))
    pin_run(history_dir, "r1")
    with pytest.raises(NotRun, match=r"pinned run r1\) cannot be the baseline of nvbandwidth/rack0: median_gbps None"):
        nvbandwidth_check.NvbandwidthCheck.from_params(params(history_dir)).measure(Run("rack0"))


def test_a_kept_median_written_as_a_numeric_string_is_read_as_its_number(tmp_path):
    history_dir = str(tmp_path / "runs")
    kept(history_dir, "r1", 1, rack0=("821.41", "passed"))
    baseline = nvbandwidth_check.NvbandwidthCheck.from_params(params(history_dir)).options_of("rack0")["baseline"]
    assert (baseline["median_gbps"], baseline["source"]) == (821.41, "last passing run r1")
