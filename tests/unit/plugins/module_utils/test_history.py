# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

import json
import multiprocessing
import os
import threading
from datetime import datetime, timezone

import pytest
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import history
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.bandwidth_thresholds import Baseline
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.history import (
    HistoryError,
    baseline_for,
    options_with_baseline,
    pin_run,
    read_index,
    record_run,
    retained,
    trends,
)

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=timezone.utc)
TESTCASE = "device_to_device_memcpy_read_ce"


def nvb_record(run_id, rack="rack0", median=820.0, verdict="passed", started="2026-12-01T10:00:00Z", low=None):
    matrix = [[None, median], [median, None]]
    return {
        "check": "nvbandwidth",
        "rack": rack,
        "run_id": run_id,
        "verdict": verdict,
        "passed": verdict == "passed",
        "outcome": verdict,
        "started": started,
        "finished": started.replace(":00Z", ":30Z"),
        "nodes": ["tray0", "tray1"],
        "details": {
            "testcase": "device_to_device_memcpy_read_ce",
            "median_gbps": median,
            "min": low if low is not None else median,
            "matrix": matrix,
            "rank_nodes": ["tray0", "tray1"],
            # held against a product reference: a passing run of it is a baseline (history.baseline_for)
            "references": [{"kind": "product", "gbps": 821.41, "source": "GB200 NVL72, driver 580.95.05"}],
        },
    }


def keep(tmp_path, run_id, day, **kwargs):
    started = f"2026-12-{day:02d}T10:00:00Z"
    return record_run(str(tmp_path), run_id, [nvb_record(run_id, started=started, **kwargs)], now=NOW)


def run_ids(tmp_path):
    return [e["run_id"] for e in read_index(str(tmp_path))["runs"]]


def test_two_runs_keep_both(tmp_path):
    keep(tmp_path, "r1", 1)
    keep(tmp_path, "r2", 2, median=700.0, verdict="failed")
    assert run_ids(tmp_path) == ["r2", "r1"]
    index = read_index(str(tmp_path))
    assert index["runs"][0]["verdicts"] == {"nvbandwidth/rack0": "failed"}
    assert index["runs"][1]["started"] == "2026-12-01T10:00:00Z"
    assert index["runs"][1]["pinned"] is False
    for run_id, median in (("r1", 820.0), ("r2", 700.0)):
        with open(tmp_path / run_id / "nvbandwidth" / "rack0.json", encoding="utf-8") as handle:
            assert json.load(handle)["details"]["median_gbps"] == median
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".tmp-")]


def test_checks_of_one_run_merge_into_one_entry(tmp_path):
    keep(tmp_path, "r1", 1)
    cliques = {"check": "cliques", "rack": "rack0", "verdict": "passed", "started": "2026-12-01T09:59:00Z"}
    record_run(str(tmp_path), "r1", [cliques], now=NOW)
    (entry,) = read_index(str(tmp_path))["runs"]
    assert entry["verdicts"] == {"cliques/rack0": "passed", "nvbandwidth/rack0": "passed"}
    assert entry["started"] == "2026-12-01T09:59:00Z"
    assert entry["finished"] == "2026-12-01T10:00:30Z"
    # the same check again in the same run replaces its racks: rack1 only now
    record_run(str(tmp_path), "r1", [nvb_record("r1", rack="rack1")], now=NOW)
    (entry,) = read_index(str(tmp_path))["runs"]
    assert entry["verdicts"] == {"cliques/rack0": "passed", "nvbandwidth/rack1": "passed"}
    assert sorted(os.listdir(tmp_path / "r1" / "nvbandwidth")) == ["rack1.json"]


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


def test_pin_names_one_run_and_refuses_an_unknown_one(tmp_path):
    keep(tmp_path, "r1", 1)
    keep(tmp_path, "r2", 2)
    assert pin_run(str(tmp_path), "r1") is True
    assert pin_run(str(tmp_path), "r1") is False
    pin_run(str(tmp_path), "r2")
    assert [e["run_id"] for e in read_index(str(tmp_path))["runs"] if e["pinned"]] == ["r2"]
    with pytest.raises(HistoryError, match=r"the baseline run r9 is not in the history .* \(newest runs: r2, r1\)"):
        pin_run(str(tmp_path), "r9")


def test_a_run_id_that_is_no_directory_name_is_refused(tmp_path):
    with pytest.raises(HistoryError, match=r"run id '\.\./x' cannot name a history directory"):
        record_run(str(tmp_path), "../x", [nvb_record("x")])
    with pytest.raises(HistoryError, match=r"a record of run r1 has check 'nvbandwidth' and rack '\.\./etc'"):
        record_run(str(tmp_path), "r1", [nvb_record("r1", rack="../etc")])
    assert not os.path.exists(tmp_path / "r1")


def test_a_missing_index_is_rebuilt_with_a_warning_and_a_new_history_without(tmp_path):
    warnings = []
    assert read_index(str(tmp_path / "new"), warnings) == {"version": 1, "runs": []}
    assert warnings == []
    keep(tmp_path, "r1", 1)
    keep(tmp_path, "r2", 2, verdict="failed")
    os.unlink(tmp_path / "index.json")
    assert [(e["run_id"], e["verdicts"], e["pinned"]) for e in read_index(str(tmp_path), warnings)["runs"]] == [
        ("r2", {"nvbandwidth/rack0": "failed"}, False),
        ("r1", {"nvbandwidth/rack0": "passed"}, False),
    ]
    assert warnings == [
        f"the history index {tmp_path}/index.json is missing; rebuilt it from the 2 run directories of {tmp_path} "
        "(no run is pinned now: pin the baseline run again if one was (gpu_fabric_verify_baseline_run))"
    ]


def _writer(directory, name, count):
    for i in range(count):
        run_id = f"{name}{i:02d}"
        record_run(directory, run_id, [nvb_record(run_id, started=f"2026-12-01T10:{i:02d}:00Z")], keep_runs=0, now=NOW)


def test_two_concurrent_processes_leave_an_intact_index(tmp_path):
    context = multiprocessing.get_context("fork")
    writers = [context.Process(target=_writer, args=(str(tmp_path), name, 15)) for name in ("a", "b")]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join(60)
    assert [w.exitcode for w in writers] == [0, 0]
    ids = run_ids(tmp_path)
    assert sorted(ids) == sorted([f"a{i:02d}" for i in range(15)] + [f"b{i:02d}" for i in range(15)])
    assert all((tmp_path / run_id / "nvbandwidth" / "rack0.json").exists() for run_id in ids)


def test_two_concurrent_threads_leave_an_intact_index(tmp_path):
    threads = [threading.Thread(target=_writer, args=(str(tmp_path), name, 10)) for name in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert len(run_ids(tmp_path)) == 20


def test_baseline_is_the_last_passing_run_skipping_failed_ones(tmp_path):
    keep(tmp_path, "r1", 1, median=810.0)
    keep(tmp_path, "r2", 2, median=821.5)
    keep(tmp_path, "r3", 3, median=600.0, verdict="failed")
    baseline = baseline_for(str(tmp_path), "nvbandwidth", "rack0", "device_to_device_memcpy_read_ce")
    assert baseline == {
        "run_id": "r2",
        "recorded_at": "2026-12-02T10:00:30Z",
        "median_gbps": 821.5,
        "matrix": [[None, 821.5], [821.5, None]],
        "rank_nodes": ["tray0", "tray1"],
        "driver_version": None,
        "source": "last passing run r2",
    }
    # the run being judged never is its own baseline; another testcase or rack has none
    assert baseline_for(str(tmp_path), "nvbandwidth", "rack0", exclude_run="r2")["run_id"] == "r1"
    assert baseline_for(str(tmp_path), "nvbandwidth", "rack0", "host_to_device_memcpy_ce") is None
    assert baseline_for(str(tmp_path), "nvbandwidth", "rack9") is None
    assert baseline_for(str(tmp_path / "none"), "nvbandwidth", "rack0") is None


def test_the_nvbandwidth_rule_reads_the_baseline_as_given(tmp_path):
    keep(tmp_path, "r1", 1, median=821.5)
    baseline = Baseline.from_record(baseline_for(str(tmp_path), "nvbandwidth", "rack0", TESTCASE))
    assert (baseline.median_gbps, baseline.source) == (821.5, "last passing run r1")
    assert (baseline.matrix, baseline.nodes) == ([[None, 821.5], [821.5, None]], ["tray0", "tray1"])


def test_baseline_prefers_the_pinned_run(tmp_path):
    keep(tmp_path, "r1", 1, median=815.0)
    keep(tmp_path, "r2", 2, median=821.5)
    pin_run(str(tmp_path), "r1")
    baseline = baseline_for(str(tmp_path), "nvbandwidth", "rack0")
    assert (baseline["run_id"], baseline["median_gbps"], baseline["source"]) == ("r1", 815.0, "pinned run r1")
    # a pinned run without that rack: the last passing run of the rack
    keep(tmp_path, "r3", 3, rack="rack1", median=700.0)
    pin_run(str(tmp_path), "r3")
    assert baseline_for(str(tmp_path), "nvbandwidth", "rack0")["source"] == "last passing run r2"


def test_options_with_baseline_sets_the_key_only_with_a_history(tmp_path):
    keep(tmp_path, "r1", 1)
    options = {"testcase": "device_to_device_memcpy_read_ce", "min_fraction_of_peak": 0.85}
    assert options_with_baseline(options, "", "nvbandwidth", "rack0") == options
    with_baseline = options_with_baseline(options, str(tmp_path), "nvbandwidth", "rack0", run_id="r2")
    assert with_baseline["baseline"]["source"] == "last passing run r1"
    assert options_with_baseline(options, str(tmp_path), "nvbandwidth", "rack0", run_id="r1")["baseline"] is None
    assert "baseline" not in options


def test_trends_give_median_minimum_and_a_drop_against_the_baseline(tmp_path):
    keep(tmp_path, "r1", 1, median=820.0, low=800.0)
    keep(tmp_path, "r2", 2, median=818.0, low=790.0)
    keep(tmp_path, "r3", 3, median=700.0, low=650.0, verdict="failed")
    pin_run(str(tmp_path), "r1")
    (row,) = trends(str(tmp_path), last_runs=10)
    assert row == {
        "check": "nvbandwidth",
        "rack": "rack0",
        "runs": 3,
        "median_gbps": 818.0,
        "min_gbps": 650.0,
        "latest_run": "r3",
        "latest_verdict": "failed",
        "latest_median_gbps": 700.0,
        "baseline_run": "r1",
        "baseline_source": "pinned run r1",
        "baseline_median_gbps": 820.0,
        "drop_fraction": 0.1463,
        "dropped": True,
        "series": [
            {"run_id": "r1", "verdict": "passed", "median_gbps": 820.0, "min_gbps": 800.0},
            {"run_id": "r2", "verdict": "passed", "median_gbps": 818.0, "min_gbps": 790.0},
            {"run_id": "r3", "verdict": "failed", "median_gbps": 700.0, "min_gbps": 650.0},
        ],
        "trays": [],  # records without gpus_per_node place no GPU on a tray
    }
    # the report of run r2, over its last 2 runs: no drop beyond the tolerance
    (row,) = trends(str(tmp_path), last_runs=2, current="r2")
    assert (row["runs"], row["median_gbps"], row["min_gbps"], row["dropped"]) == (2, 819.0, 790.0, False)
    assert row["drop_fraction"] == 0.0024


def test_run_id_from_a_start_time():
    assert history.run_id_from("2026-12-03T10:15:00Z") == "20261203T101500Z"


# ----------------------------------------------------------------------------------------- the tray trend


def square(values):
    """A 4-GPU peer matrix (2 trays x 2 GPUs) with every pair at 820 but those given as {(src, dst): gbps}."""
    return [[None if r == c else values.get((r, c), 820.0) for c in range(4)] for r in range(4)]


def test_a_trays_figure_is_its_lowest_pair_at_either_end():
    matrix = square({(0, 3): 700.0, (2, 1): 805.0})
    # GPU 0 and 1 on tray0, 2 and 3 on tray1: 0->3 lowers both trays, 2->1 is above it
    assert history.tray_lowest_pairs(matrix, ["tray0", "tray1"], 2) == {"tray0": 700.0, "tray1": 700.0}
    assert history.tray_lowest_pairs(square({(2, 3): 790.0}), ["tray0", "tray1"], 2) == {
        "tray0": 820.0,
        "tray1": 790.0,
    }
    # the diagonal and unmeasured cells are no pair
    assert history.tray_lowest_pairs([[1.0, None], [None, 2.0]], ["t0", "t1"], 1) == {}


def test_a_bisect_matrix_gives_each_row_to_the_trays_of_its_pair():
    matrix = [[810.0], [760.0], [815.0], [812.0]]
    pairs = [[0, 2], [1, 3], [2, 0], [3, 1]]
    assert history.tray_lowest_pairs(matrix, ["tray0", "tray1"], 2, pairs) == {"tray0": 760.0, "tray1": 760.0}


@pytest.mark.parametrize(
    "matrix, nodes, per_node",
    [
        (square({}), ["tray0"], 2),  # 1 tray x 2 GPUs does not fill 4 GPUs
        (square({}), None, 2),
        (square({}), ["tray0", "tray1"], None),
        ([[820.0, 821.0, 819.0, 818.0]], ["tray0", "tray1"], 2),  # a host-to-device row: no GPU pairs
        (None, ["tray0", "tray1"], 2),
    ],
)
def test_a_matrix_the_trays_do_not_fill_gives_no_figure(matrix, nodes, per_node):
    assert history.tray_lowest_pairs(matrix, nodes, per_node) == {}


def test_the_drop_rule_is_one_for_racks_and_trays():
    assert history.drop_against(776.0, 820.0, 0.03) == (0.0537, True)
    assert history.drop_against(800.0, 820.0, 0.03) == (0.0244, False)
    assert history.drop_against(830.0, 820.0, 0.03) == (-0.0122, False)
    assert history.drop_against(700.0, None, 0.03) == (None, False)


def tray_record(run_id, day, values, verdict="passed", nodes=("tray0", "tray1")):
    record = nvb_record(run_id, median=820.0, verdict=verdict, started=f"2026-12-{day:02d}T10:00:00Z")
    record["details"].update(matrix=square(values), rank_nodes=list(nodes), gpus_per_node=2)
    return record


def test_each_tray_is_held_against_its_figure_in_the_racks_baseline_run(tmp_path):
    record_run(str(tmp_path), "r1", [tray_record("r1", 1, {})], now=NOW)
    record_run(str(tmp_path), "r2", [tray_record("r2", 2, {(0, 1): 810.0})], now=NOW)
    # r3: GPU 3 on tray1 lost a link (its pairs at 0.944); tray0 sees it too through 0->3 and 3->0
    lost = {(3, c): 774.0 for c in range(3)} | {(0, 3): 774.0}
    record_run(str(tmp_path), "r3", [tray_record("r3", 3, lost)], now=NOW)
    pin_run(str(tmp_path), "r1")
    (row,) = trends(str(tmp_path), last_runs=10)
    tray0, tray1 = row["trays"]
    assert tray1 == {
        "node": "tray1",
        "runs": 3,
        "series": [{"run_id": "r1", "gbps": 820.0}, {"run_id": "r2", "gbps": 820.0}, {"run_id": "r3", "gbps": 774.0}],
        "latest_gbps": 774.0,
        "baseline_gbps": 820.0,
        "drop_fraction": 0.0561,
        "dropped": True,
    }
    assert [point["gbps"] for point in tray0["series"]] == [820.0, 810.0, 774.0]
    assert tray0["dropped"] is True


def test_a_tray_the_newest_run_did_not_measure_has_no_drop(tmp_path):
    record_run(str(tmp_path), "r1", [tray_record("r1", 1, {}, nodes=("tray0", "tray1"))], now=NOW)
    record_run(str(tmp_path), "r2", [tray_record("r2", 2, {(0, 1): 700.0}, nodes=("tray0", "tray2"))], now=NOW)
    (row,) = trends(str(tmp_path), last_runs=10)
    by_node = {tray["node"]: tray for tray in row["trays"]}
    assert sorted(by_node) == ["tray0", "tray1", "tray2"]
    assert (by_node["tray1"]["runs"], by_node["tray1"]["latest_gbps"], by_node["tray1"]["dropped"]) == (1, None, False)
    # tray2 was not in the baseline run (r1, the last passing): no baseline, no drop
    assert (by_node["tray2"]["baseline_gbps"], by_node["tray2"]["dropped"]) == (None, False)
    assert (by_node["tray0"]["latest_gbps"], by_node["tray0"]["baseline_gbps"], by_node["tray0"]["dropped"]) == (
        700.0,
        820.0,
        True,
    )


# ----------------------------------------------------------------------------------------- order by time


def failed_run(tmp_path, run_id, started, keep_runs=0):
    return record_run(
        str(tmp_path), run_id, [nvb_record(run_id, verdict="failed", started=started)], keep_runs=keep_runs, now=NOW
    )


def test_runs_are_ordered_by_the_instant_they_started_whatever_their_time_zone(tmp_path):
    failed_run(tmp_path, "utc", "2026-12-07T01:00:00Z")
    failed_run(tmp_path, "tokyo", "2026-12-07T09:00:00+09:00")  # 00:00 UTC: an hour before "utc"
    assert run_ids(tmp_path) == ["utc", "tokyo"]
    result = failed_run(tmp_path, "r3", "2026-12-07T02:00:00Z", keep_runs=2)
    assert result["removed_runs"] == ["tokyo"]
    assert result["warnings"] == []
    assert run_ids(tmp_path) == ["r3", "utc"]
    assert sorted(os.listdir(tmp_path)) == [".lock", "index.json", "r3", "utc"]


def test_a_run_whose_start_names_no_time_is_the_oldest_and_named_in_a_warning(tmp_path):
    failed_run(tmp_path, "unknown", "yesterday")
    failed_run(tmp_path, "r1", "2026-11-01T10:00:00Z")
    result = failed_run(tmp_path, "r2", "2026-12-01T10:00:00Z", keep_runs=2)
    assert result["removed_runs"] == ["unknown"]
    assert result["warnings"] == [
        "run unknown of the history has the start time 'yesterday', not an RFC 3339 time (2026-12-07T01:00:00Z); it "
        "counts as the oldest run, which retention removes first; correct its 'started' in the history index, or "
        "remove the run"
    ]
    assert run_ids(tmp_path) == ["r2", "r1"]


def test_a_run_starts_at_its_earliest_record_and_finishes_at_its_latest_by_instant(tmp_path):
    tokyo = nvb_record("r1", started="2026-12-07T09:30:00+09:00")  # 00:30 UTC, finished 00:30:30 UTC
    utc = dict(nvb_record("r1", rack="rack1", started="2026-12-07T01:00:00Z"), finished="2026-12-07T00:45:00Z")
    record_run(str(tmp_path), "r1", [tokyo, utc], now=NOW)
    (entry,) = read_index(str(tmp_path))["runs"]
    assert (entry["started"], entry["finished"]) == ("2026-12-07T09:30:00+09:00", "2026-12-07T00:45:00Z")
    # a second check of the run, written in another zone, merges by instant too
    later = dict(
        nvb_record("r1", started="2026-12-07T10:00:00+09:00"), check="cliques", finished="2026-12-07T09:40:00+09:00"
    )
    record_run(str(tmp_path), "r1", [later], now=NOW)
    (entry,) = read_index(str(tmp_path))["runs"]
    assert (entry["started"], entry["finished"]) == ("2026-12-07T09:30:00+09:00", "2026-12-07T00:45:00Z")


# ----------------------------------------------------------------------------------------- what retention keeps


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
    assert history.last_passing_runs(runs) == {"nvbandwidth/rack0": "old-pass"}


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


# ----------------------------------------------------------------------------------------- a corrupt index


@pytest.mark.parametrize(
    "text, problem",
    [
        ('{"version": 1, "runs": [{"run_id": "r1", "pinn', "cannot be read (Unterminated string starting at"),
        ("[]", "holds a list, not an object"),
        ('{"runs": {"r1": {}}}', "has no list 'runs'"),
        ('{"runs": ["r1"]}', "has run 1 as a str, not an object"),
        ('{"runs": [{"verdicts": {}}]}', "has run 1 with run_id None, not the name of a run directory"),
        ('{"runs": [{"run_id": "../r1"}]}', "has run 1 with run_id '../r1', not the name of a run directory"),
        (
            '{"runs": [{"run_id": "r1", "verdicts": "passed"}]}',
            "has run r1 with verdicts 'passed', not '<check>/<rack>'",
        ),
        ('{"runs": [{"run_id": "r1", "verdicts": {"rack0": 1}}]}', "has run r1 with verdicts \"{'rack0': 1}\", not"),
        ('{"runs": [{"run_id": "r1", "started": NaN}]}', "has run r1 with started nan, not an RFC 3339 time"),
        ('{"runs": [{"run_id": "r1", "pinned": "yes"}]}', "has run r1 with pinned 'yes', not true or false"),
        ('{"runs": [{"run_id": "r1"}, {"run_id": "r1"}]}', "lists run r1 twice"),
    ],
)
def test_a_corrupt_index_is_rebuilt_from_the_run_directories_keeping_the_pin(tmp_path, text, problem):
    keep(tmp_path, "r1", 1)
    keep(tmp_path, "r2", 2, verdict="failed")
    pin_run(str(tmp_path), "r1")
    (tmp_path / "index.json").write_text(text, encoding="utf-8")
    result = keep(tmp_path, "r3", 3)
    (warning,) = result["warnings"]
    assert warning.startswith(f"the history index {tmp_path}/index.json {problem}")
    assert warning.endswith(f"; rebuilt it from the 2 run directories of {tmp_path} (pinned run: r1)")
    assert [(e["run_id"], e["pinned"]) for e in read_index(str(tmp_path))["runs"]] == [
        ("r3", False),
        ("r2", False),
        ("r1", True),
    ]
    assert baseline_for(str(tmp_path), "nvbandwidth", "rack0", exclude_run="r4")["source"] == "pinned run r1"


def test_the_pin_moves_its_mark_with_it(tmp_path):
    keep(tmp_path, "r1", 1)
    keep(tmp_path, "r2", 2)
    pin_run(str(tmp_path), "r1")
    pin_run(str(tmp_path), "r2")
    assert (os.path.exists(tmp_path / "r1" / ".pinned"), os.path.exists(tmp_path / "r2" / ".pinned")) == (False, True)
    pin_run(str(tmp_path), "")
    assert not os.path.exists(tmp_path / "r2" / ".pinned")


def unlistable(monkeypatch, directory):
    listdir = os.listdir

    def refuse(path="."):
        if os.path.realpath(path) == os.path.realpath(directory):
            raise PermissionError(13, "Permission denied", str(directory))
        return listdir(path)

    monkeypatch.setattr(history.os, "listdir", refuse)


def test_a_corrupt_index_of_unreadable_run_directories_is_refused_before_anything_is_written(tmp_path, monkeypatch):
    keep(tmp_path, "r1", 1)
    (tmp_path / "index.json").write_text("{", encoding="utf-8")
    unlistable(monkeypatch, tmp_path)
    with pytest.raises(HistoryError) as refused:
        keep(tmp_path, "r2", 2)
    assert str(refused.value) == (
        f"the history index {tmp_path}/index.json cannot be read (Expecting property name enclosed in double quotes: "
        f"line 1 column 2 (char 1)) and the run directories of {tmp_path} cannot be read to rebuild it ([Errno 13] "
        f"Permission denied: '{tmp_path}'); make {tmp_path} readable by this user, or move it away to start a new "
        "history"
    )
    assert not (tmp_path / "r2").exists()
    assert (tmp_path / "index.json").read_text(encoding="utf-8") == "{"


# ----------------------------------------------------------------------------------------- a bad kept record


@pytest.mark.parametrize(
    "text, problem",
    [
        ('{"check": "nvbandwidth", "details": {"median_gbps": 8', "it cannot be read (Expecting"),
        ("[820.0]", "it holds a list, not an object"),
        ('{"details": {"median_gbps": NaN}}', "details.median_gbps nan is not a finite number"),
        ('{"details": {"matrix": [[null, Infinity]]}}', "details.matrix.0.1 inf is not a finite number"),
        ('{"details": {"median_gbps": "fast"}}', "details.median_gbps 'fast' is not a number"),
        ('{"details": {"median_gbps": "NaN"}}', "details.median_gbps 'NaN' is not a finite number"),
        ('{"details": {"min": true}}', "details.min True is a boolean, not a number"),
        ('{"details": ["median_gbps"]}', "details ['median_gbps'] is not an object"),
    ],
)
def test_a_bad_kept_record_is_left_out_of_the_trend_with_a_warning(tmp_path, text, problem):
    keep(tmp_path, "r1", 1, median=820.0)
    keep(tmp_path, "r2", 2, median=810.0)
    keep(tmp_path, "r3", 3, median=818.0)
    pin_run(str(tmp_path), "r1")  # the baseline: the bad r2 is no candidate
    path = tmp_path / "r2" / "nvbandwidth" / "rack0.json"
    path.write_text(text, encoding="utf-8")
    warnings = []
    (row,) = trends(str(tmp_path), warnings=warnings)
    assert [point["run_id"] for point in row["series"]] == ["r1", "r3"]
    assert (row["runs"], row["median_gbps"], row["baseline_run"]) == (2, 819.0, "r1")
    (warning,) = warnings
    assert warning.startswith(f"the kept record {path}: {problem}")
    assert warning.endswith(
        "; left out of the history's readers (trend, index); correct it or remove the run r2 from the history"
    )


def test_a_rebuilt_index_leaves_out_a_bad_record_with_a_warning(tmp_path):
    keep(tmp_path, "r1", 1)
    (tmp_path / "r1" / "nvbandwidth" / "rack1.json").write_text('{"verdict": "passed", "details": {"min": NaN}}')
    os.unlink(tmp_path / "index.json")
    warnings = []
    (entry,) = read_index(str(tmp_path), warnings)["runs"]
    assert entry["verdicts"] == {"nvbandwidth/rack0": "passed"}
    assert [w.split(";")[0] for w in warnings] == [
        f"the history index {tmp_path}/index.json is missing",
        f"the kept record {tmp_path}/r1/nvbandwidth/rack1.json: details.min nan is not a finite number",
    ]


def test_a_trend_whose_baseline_the_history_cannot_give_has_none_and_a_warning(tmp_path, monkeypatch):
    keep(tmp_path, "r1", 1, median=820.0)
    keep(tmp_path, "r2", 2, median=818.0)

    def refuse(*_args, **_kwargs):
        raise HistoryError("the kept record r1 cannot be the baseline")

    monkeypatch.setattr(history, "baseline_for", refuse)
    warnings = []
    (row,) = trends(str(tmp_path), warnings=warnings)
    assert (row["runs"], row["baseline_run"], row["drop_fraction"], row["dropped"]) == (2, None, None, False)
    assert warnings == ["the trend of nvbandwidth/rack0 has no baseline: the kept record r1 cannot be the baseline"]


def test_the_readers_pass_over_entries_that_are_no_history_entries():
    index = {"runs": [{"run_id": "r1", "verdicts": {"a/b": "passed"}}, {"run_id": 7}, "r3", {"run_id": "r4"}]}
    assert [e["run_id"] for e in history.valid_runs(index)] == ["r1", "r4"]
    assert history.valid_runs({"runs": "r1"}) == []


def test_a_numeric_string_figure_is_read_as_its_number_not_left_out(tmp_path):
    keep(tmp_path, "r1", 1, median=820.0)
    keep(tmp_path, "r2", 2, median=810.0)
    path = tmp_path / "r2" / "nvbandwidth" / "rack0.json"
    record = json.loads(path.read_text())
    record["details"]["median_gbps"] = "810.5"  # as a template renders a number
    path.write_text(json.dumps(record))
    warnings = []
    (row,) = trends(str(tmp_path), warnings=warnings)
    assert ([point["median_gbps"] for point in row["series"]], warnings) == ([820.0, 810.5], [])
