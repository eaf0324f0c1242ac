# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""history_trends: a rack's figures over its kept runs, and each tray's, held against the baseline."""

from __future__ import annotations

import json

import pytest
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import history_trends
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.history import HistoryError
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.history_runs import pin_run, record_run
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.history_trends import drop_against, trends
from kept_runs import NOW, keep, nvb_record, square


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


def test_the_drop_rule_is_one_for_racks_and_trays():
    assert drop_against(776.0, 820.0, 0.03) == (0.0537, True)
    assert drop_against(800.0, 820.0, 0.03) == (0.0244, False)
    assert drop_against(830.0, 820.0, 0.03) == (-0.0122, False)
    assert drop_against(700.0, None, 0.03) == (None, False)


# ------------------------------------------------------------------------------------------- the tray trend


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


# ---------------------------------------------------------------------------------------- a bad kept record


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


def test_a_trend_whose_baseline_the_history_cannot_give_has_none_and_a_warning(tmp_path, monkeypatch):
    keep(tmp_path, "r1", 1, median=820.0)
    keep(tmp_path, "r2", 2, median=818.0)

    def refuse(*_args, **_kwargs):
        raise HistoryError("the kept record r1 cannot be the baseline")

    monkeypatch.setattr(history_trends, "baseline_for", refuse)
    warnings = []
    (row,) = trends(str(tmp_path), warnings=warnings)
    assert (row["runs"], row["baseline_run"], row["drop_fraction"], row["dropped"]) == (2, None, None, False)
    assert warnings == ["the trend of nvbandwidth/rack0 has no baseline: the kept record r1 cannot be the baseline"]


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
