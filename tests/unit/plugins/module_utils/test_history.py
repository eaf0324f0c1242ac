# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""history: the kept runs' index and directories, read back; a kept record and its bandwidth figures."""

from __future__ import annotations

import os

import pytest
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import history
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.history import HistoryError, read_index
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.history_baseline import (
    baseline_for,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.history_runs import pin_run, record_run
from kept_runs import NOW, keep, nvb_record, run_ids, square


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


def test_run_id_from_a_start_time():
    assert history.run_id_from("2026-12-03T10:15:00Z") == "20261203T101500Z"


# ------------------------------------------------------------------------------------------ the tray figure


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


# -------------------------------------------------------------------------------------------- order by time


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


# ------------------------------------------------------------------------------------------ a corrupt index


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


# ---------------------------------------------------------------------------------------- a bad kept record


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


def test_the_readers_pass_over_entries_that_are_no_history_entries():
    index = {"runs": [{"run_id": "r1", "verdicts": {"a/b": "passed"}}, {"run_id": 7}, "r3", {"run_id": "r4"}]}
    assert [e["run_id"] for e in history.valid_runs(index)] == ["r1", "r4"]
    assert history.valid_runs({"runs": "r1"}) == []
