# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""history_retention: which runs the history keeps (count, age, the pin, last passes, baselines)."""

from __future__ import annotations

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.history_baseline import (
    baseline_for,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.history_retention import last_passing_runs, retained
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.history_runs import pin_run, record_run
from kept_runs import NOW, TESTCASE, keep, nvb_record, run_ids


def test_retention_by_count_keeps_the_pinned_run(tmp_path):
    keep(tmp_path, "r1", 1)
    pin_run(str(tmp_path), "r1")
    for day in (2, 3, 4):
        result = record_run(
            str(tmp_path), f"r{day}", [nvb_record(f"r{day}", started=f"2026-12-0{day}T10:00:00Z")], keep_runs=2, now=NOW
        )
    assert run_ids(tmp_path) == ["r4", "r3", "r1"]
    assert result["removed_runs"] == ["r2"]
    assert not (tmp_path / "r2").exists()
    assert (tmp_path / "r1" / "nvbandwidth" / "rack0.json").exists()


def test_retention_by_age_keeps_the_pinned_and_the_current_run():
    runs = [
        {"run_id": "old", "started": "2026-08-01T00:00:00Z"},
        {"run_id": "pinned", "started": "2026-07-01T00:00:00Z", "pinned": True},
        {"run_id": "recent", "started": "2026-12-01T00:00:00Z"},
        {"run_id": "now", "started": "2026-01-01T00:00:00Z"},
    ]
    kept, removed, _held, _baselines = retained(runs, keep_runs=0, keep_days=30, now=NOW, current="now")
    assert [e["run_id"] for e in kept] == ["recent", "pinned", "now"]
    assert [e["run_id"] for e in removed] == ["old"]
    kept, removed, _held, _baselines = retained(runs, keep_runs=0, keep_days=0, now=NOW)
    assert removed == []


def test_retention_keeps_each_checks_last_passing_run_of_each_rack(tmp_path):
    def run(run_id, day, rack0, rack1, cliques=None):
        started = f"2026-12-0{day}T10:00:00Z"
        records = [nvb_record(run_id, "rack0", verdict=rack0, started=started)]
        records.append(nvb_record(run_id, "rack1", verdict=rack1, started=started))
        if cliques:
            records.append({"check": "cliques", "rack": "rack0", "verdict": cliques, "started": started})
        return record_run(str(tmp_path), run_id, records, keep_runs=2, now=NOW)

    run("r1", 1, "passed", "passed", cliques="failed")
    run("r2", 2, "failed", "passed", cliques="passed")
    run("r3", 3, "failed", "passed", cliques="failed")
    result = run("r4", 4, "failed", "passed", cliques="failed")
    # r1: the last pass of nvbandwidth on rack0; r2: of cliques on rack0; rack1 passed in r3 and r4
    assert result["removed_runs"] == []
    assert result["kept_last_passing"] == {"r1": ["nvbandwidth/rack0"], "r2": ["cliques/rack0"]}
    assert run_ids(tmp_path) == ["r4", "r3", "r2", "r1"]
    assert baseline_for(str(tmp_path), "nvbandwidth", "rack0", TESTCASE)["source"] == "last passing run r1"
    # rack0 passes again: r1 and r2 hold nothing any more
    result = run("r5", 5, "passed", "passed", cliques="passed")
    assert (result["removed_runs"], result["kept_last_passing"]) == (["r3", "r2", "r1"], {})
    assert run_ids(tmp_path) == ["r5", "r4"]


def test_retention_by_age_keeps_a_last_pass_and_says_so():
    runs = [
        {"run_id": "old-pass", "started": "2026-06-01T00:00:00Z", "verdicts": {"nvbandwidth/rack0": "passed"}},
        {"run_id": "old-fail", "started": "2026-07-01T00:00:00Z", "verdicts": {"nvbandwidth/rack0": "failed"}},
        {"run_id": "now", "started": "2026-12-03T00:00:00Z", "verdicts": {"nvbandwidth/rack0": "failed"}},
    ]
    kept, removed, held, _baselines = retained(runs, keep_runs=0, keep_days=30, now=NOW, current="now")
    assert ([e["run_id"] for e in kept], [e["run_id"] for e in removed]) == (["now", "old-pass"], ["old-fail"])
    assert held == {"old-pass": ["nvbandwidth/rack0"]}
    assert last_passing_runs(runs) == {"nvbandwidth/rack0": "old-pass"}


def test_retention_keeps_the_baseline_run_of_each_testcase_as_baseline_for_chooses_it(tmp_path):
    def run(run_id, day, testcase, product=True):
        record = nvb_record(run_id, started=f"2026-12-0{day}T10:00:00Z")
        record["details"]["testcase"] = testcase
        if not product:
            record["details"]["references"] = [{"kind": "median", "gbps": 820.0}]
        return record_run(str(tmp_path), run_id, [record], keep_runs=1, keep_days=0, now=NOW)

    run("r1", 1, TESTCASE)
    run("r2", 2, "device_to_device_memcpy_write_ce")
    result = run("r3", 3, TESTCASE, product=False)  # the newest pass, against its own median: no baseline
    assert result["removed_runs"] == []
    assert result["kept_baseline"] == {
        "r1": [f"nvbandwidth/rack0/{TESTCASE}"],
        "r2": ["nvbandwidth/rack0/device_to_device_memcpy_write_ce"],
    }
    assert baseline_for(str(tmp_path), "nvbandwidth", "rack0", TESTCASE)["run_id"] == "r1"
    assert baseline_for(str(tmp_path), "nvbandwidth", "rack0", "device_to_device_memcpy_write_ce")["run_id"] == "r2"
    # the pin is the baseline of the testcase it holds: r1 goes; r2 stays the baseline of the other testcase
    pin_run(str(tmp_path), "r3")
    result = run("r4", 4, TESTCASE, product=False)
    assert result["removed_runs"] == ["r1"]
    assert result["kept_baseline"] == {"r2": ["nvbandwidth/rack0/device_to_device_memcpy_write_ce"]}
    assert run_ids(tmp_path) == ["r4", "r3", "r2"]
