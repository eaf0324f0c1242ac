# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The nvbandwidth check judges each rack with its baseline from the kept history."""

from __future__ import annotations

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.checks import nvbandwidth as nvbandwidth_check
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.history import pin_run, record_run
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.verification import RackPlan

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
