# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

import os

import pytest
from ansible.module_utils import basic
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.history import read_index
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.history_baseline import baseline_for
from ansible_collections.gpu_fabric.mnnvl.plugins.modules import verify_history

from tests.unit.plugins.modules.runner import run_module


def record(run_id, median, verdict="passed", day=1):
    return {
        "check": "nvbandwidth",
        "rack": "rack0",
        "run_id": run_id,
        "verdict": verdict,
        "started": f"2026-12-0{day}T10:00:00Z",
        "finished": f"2026-12-0{day}T10:05:00Z",
        "details": {
            "testcase": "device_to_device_memcpy_read_ce",
            "median_gbps": median,
            "min": median,
            "references": [{"kind": "product", "gbps": 821.41, "source": "GB200 NVL72, driver 580.95.05"}],
        },
    }


def test_two_runs_in_a_row_keep_both_and_a_third_compares_against_the_pinned_first(tmp_path):
    directory = str(tmp_path / "runs")
    for day, (run_id, median) in enumerate((("r1", 815.0), ("r2", 821.0)), start=1):
        result = run_module(
            verify_history.main,
            {"history_dir": directory, "run_id": run_id, "records": [record(run_id, median, day=day)]},
        )
        assert (result["failed"], result["changed"]) == (False, True)
    assert result["files"] == [f"{directory}/r2/nvbandwidth/rack0.json"]
    assert [e["run_id"] for e in read_index(directory)["runs"]] == ["r2", "r1"]
    assert baseline_for(directory, "nvbandwidth", "rack0", exclude_run="r3")["source"] == "last passing run r2"
    pinned = run_module(verify_history.main, {"history_dir": directory, "pin": "r1"})
    assert (pinned["changed"], pinned["pinned"]) == (True, "r1")
    baseline = baseline_for(directory, "nvbandwidth", "rack0", exclude_run="r3")
    assert (baseline["source"], baseline["median_gbps"]) == ("pinned run r1", 815.0)


def test_a_pin_of_an_unknown_run_fails_naming_the_kept_runs(tmp_path):
    directory = str(tmp_path / "runs")
    run_module(verify_history.main, {"history_dir": directory, "run_id": "r1", "records": [record("r1", 815.0)]})
    result = run_module(verify_history.main, {"history_dir": directory, "pin": "r7"})
    assert result["failed"] is True
    assert "the baseline run r7 is not in the history" in result["msg"]
    assert "(newest runs: r1)" in result["msg"]


def test_records_without_a_run_id_are_refused(tmp_path):
    result = run_module(verify_history.main, {"history_dir": str(tmp_path), "records": [record("", 815.0)]})
    assert result["failed"] is True
    assert result["msg"] == "records were given without run_id; set run_id to the run they belong to"


def test_check_mode_writes_nothing(tmp_path):
    directory = tmp_path / "runs"
    result = run_module(
        verify_history.main,
        {"history_dir": str(directory), "run_id": "r1", "records": [record("r1", 815.0)]},
        check_mode=True,
    )
    assert (result["changed"], result["files"]) == (True, [])
    assert not directory.exists()


@pytest.fixture
def warnings(monkeypatch):
    seen = []
    monkeypatch.setattr(basic.AnsibleModule, "warn", lambda self, msg: seen.append(msg))
    return seen


def keep(directory, run_id, started, verdict="failed", **args):
    return run_module(
        verify_history.main,
        dict(
            args, history_dir=directory, run_id=run_id, records=[dict(record(run_id, 800.0, verdict), started=started)]
        ),
    )


def test_retention_removes_the_run_that_started_first_whatever_its_time_zone(tmp_path, warnings):
    directory = str(tmp_path / "runs")
    keep(directory, "utc", "2026-12-07T01:00:00Z", keep_days=0)
    keep(directory, "tokyo", "2026-12-07T09:00:00+09:00", keep_days=0)  # 00:00 UTC
    result = keep(directory, "r3", "2026-12-07T02:00:00Z", keep_runs=2, keep_days=0)
    assert (result["failed"], result["removed_runs"]) == (False, ["tokyo"])
    assert [e["run_id"] for e in read_index(directory)["runs"]] == ["r3", "utc"]
    assert warnings == []


def test_a_start_that_names_no_time_is_a_warning(tmp_path, warnings):
    directory = str(tmp_path / "runs")
    keep(directory, "unknown", "07/12/2026", keep_days=0)
    assert len(warnings) == 1  # the run itself, kept as the run being written
    warnings.clear()
    result = keep(directory, "r2", "2026-12-07T02:00:00Z", keep_runs=1, keep_days=0)
    assert result["removed_runs"] == ["unknown"]
    assert warnings == [
        "run unknown of the history has the start time '07/12/2026', not an RFC 3339 time (2026-12-07T01:00:00Z); "
        "it counts as the oldest run, which retention removes first; correct its 'started' in the history index, "
        "or remove the run"
    ]


def test_retention_keeps_the_racks_last_passing_run_and_names_it(tmp_path, warnings):
    directory = str(tmp_path / "runs")
    keep(directory, "r1", "2026-12-01T10:00:00Z", verdict="passed", keep_days=0)
    keep(directory, "r2", "2026-12-02T10:00:00Z", keep_days=0)
    result = keep(directory, "r3", "2026-12-03T10:00:00Z", keep_runs=1, keep_days=0)
    assert (result["failed"], result["changed"]) == (False, True)
    assert result["removed_runs"] == ["r2"]
    assert result["kept_last_passing"] == {"r1": ["nvbandwidth/rack0"]}
    assert [e["run_id"] for e in read_index(directory)["runs"]] == ["r3", "r1"]
    assert baseline_for(directory, "nvbandwidth", "rack0", exclude_run="r4")["source"] == "last passing run r1"


def test_retention_keeps_the_run_that_is_the_baseline_when_the_last_pass_had_no_product_reference(tmp_path, warnings):
    directory = str(tmp_path / "runs")
    keep(directory, "r1", "2026-12-01T10:00:00Z", verdict="passed", keep_days=0)
    # r2 passed against its own median alone: the newest pass, but no baseline (history_baseline.baseline_for)
    own = dict(record("r2", 810.0, day=2))
    own["details"] = dict(own["details"], references=[{"kind": "median", "gbps": 810.0}])
    run_module(verify_history.main, {"history_dir": directory, "run_id": "r2", "records": [own], "keep_days": 0})
    result = keep(directory, "r3", "2026-12-03T10:00:00Z", keep_runs=1, keep_days=0)
    assert (result["failed"], result["removed_runs"]) == (False, [])
    assert result["kept_last_passing"] == {"r2": ["nvbandwidth/rack0"]}
    assert result["kept_baseline"] == {"r1": ["nvbandwidth/rack0/device_to_device_memcpy_read_ce"]}
    assert [e["run_id"] for e in read_index(directory)["runs"]] == ["r3", "r2", "r1"]
    baseline = baseline_for(directory, "nvbandwidth", "rack0", exclude_run="r4")
    assert (baseline["source"], baseline["median_gbps"]) == ("last passing run r1", 800.0)


def test_a_truncated_index_is_rebuilt_before_the_run_is_kept_and_the_pin_stays(tmp_path, warnings):
    directory = tmp_path / "runs"
    keep(str(directory), "r1", "2026-12-01T10:00:00Z", verdict="passed", keep_days=0)
    run_module(verify_history.main, {"history_dir": str(directory), "pin": "r1"})
    index = (directory / "index.json").read_text()
    (directory / "index.json").write_text(index[: len(index) // 2])
    result = keep(str(directory), "r2", "2026-12-02T10:00:00Z", keep_runs=1, keep_days=0)
    assert (result["failed"], result["removed_runs"], result["pinned"]) == (False, [], "r1")
    assert len(warnings) == 1
    assert warnings[0].startswith(f"the history index {directory}/index.json cannot be read (")
    assert warnings[0].endswith(f"; rebuilt it from the 1 run directories of {directory} (pinned run: r1)")
    assert [(e["run_id"], e["pinned"]) for e in read_index(str(directory))["runs"]] == [("r2", False), ("r1", True)]


def test_a_corrupt_index_that_cannot_be_rebuilt_fails_in_one_line_and_writes_nothing(tmp_path, monkeypatch):
    directory = tmp_path / "runs"
    keep(str(directory), "r1", "2026-12-01T10:00:00Z", keep_days=0)
    (directory / "index.json").write_text('{"runs": 7}')
    listdir = os.listdir

    def refuse(path="."):
        if str(path) == str(directory):
            raise PermissionError(13, "Permission denied", str(path))
        return listdir(path)

    monkeypatch.setattr(os, "listdir", refuse)
    result = keep(str(directory), "r2", "2026-12-02T10:00:00Z", keep_days=0)
    assert result["failed"] is True
    assert result["msg"] == (
        f"could not keep the run in the history {directory}: the history index {directory}/index.json has no list "
        f"'runs' and the run directories of {directory} cannot be read to rebuild it ([Errno 13] Permission denied: "
        f"'{directory}'); make {directory} readable by this user, or move it away to start a new history"
    )
    assert "\n" not in result["msg"]
    assert not (directory / "r2").exists()
