# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The runner of the module verification_metrics on the fleet records: the textfile, check mode, a failed push."""

from __future__ import annotations

import json
import os
import shutil
import stat
import urllib.error
from datetime import datetime, timezone

import pytest
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import metrics, metrics_run
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.files import FileChange, replace_file
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.history import write_json
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.history_runs import record_run
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.metrics_run import (
    MetricsError,
    MetricsRequest,
    request_from_params,
    textfile_writer,
    write_metrics,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.pushgateway import PushTarget
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.report_records import load_records

from tests.conftest import FIXTURES

RECORDS = str(FIXTURES / "verification_records" / "records")
RUN = "20261201T101500Z-ab12"
URL = "http://127.0.0.1:9"
FINISHED = datetime(2026, 12, 1, 10, 17, 31, 904466, tzinfo=timezone.utc).timestamp()  # the run's last record


def write(change: FileChange) -> None:
    replace_file(change.path, change.after.encode("utf-8"))


def never(*_args, **_kwargs):
    pytest.fail("nothing may be pushed")


def test_the_textfile_is_written_once_and_then_left_alone(tmp_path):
    path = tmp_path / "gpu_fabric.prom"
    request = MetricsRequest(RECORDS, RUN, textfile=str(path))
    first = write_metrics(request, write, never, check_mode=False)
    assert first["changed"] and first["textfile"] == str(path) and not first["pushed"]
    assert path.read_text() == first["metrics"]
    assert first["diff"][0]["before_header"] == f"{path} (absent)"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o644
    assert first["verdict"] == "failed" and "gpu_fabric_tray_verified" in first["families"]
    second = write_metrics(request, write, never, check_mode=False)
    assert not second["changed"] and second["diff"] == []
    assert sorted(os.listdir(tmp_path)) == ["gpu_fabric.prom"]  # no temporary file left for the collector


def test_check_mode_writes_and_pushes_nothing_and_says_what_would_change(tmp_path):
    path = tmp_path / "gpu_fabric.prom"
    request = MetricsRequest(RECORDS, RUN, textfile=str(path), target=PushTarget(URL))
    result = write_metrics(request, pytest.fail, never, check_mode=True)
    assert result["changed"] and not path.exists() and not result["pushed"]
    assert result["push_url"] == f"{URL}/metrics/job/gpu_fabric_verify"
    assert result["diff"][0]["after"] == result["metrics"]


def test_a_textfile_the_collector_would_not_read_is_refused(tmp_path):
    with pytest.raises(MetricsError, match=r"does not end in \.prom; node-exporter's textfile collector reads only"):
        write_metrics(MetricsRequest(RECORDS, textfile=str(tmp_path / "gpu.txt")), write, never, check_mode=False)


def test_a_textfile_in_a_directory_that_is_not_there_fails_in_one_line(tmp_path):
    path = tmp_path / "missing" / "gpu_fabric.prom"
    with pytest.raises(MetricsError) as raised:
        write_metrics(MetricsRequest(RECORDS, textfile=str(path)), textfile_writer(), never, check_mode=True)
    assert str(raised.value) == (
        f"textfile {path} cannot be written: its directory {tmp_path / 'missing'} does not exist; create it "
        "(node-exporter's --collector.textfile.directory) or set textfile (report_metrics_textfile) to a file in that "
        "directory"
    )


def test_a_symlink_at_the_textfile_is_refused_and_what_it_points_to_is_left_alone(tmp_path):
    target = tmp_path / "elsewhere.conf"
    target.write_text("not the metrics\n")
    path = tmp_path / "gpu_fabric.prom"
    path.symlink_to(target)
    with pytest.raises(MetricsError) as raised:
        write_metrics(MetricsRequest(RECORDS, RUN, textfile=str(path)), textfile_writer(), never, check_mode=False)
    assert str(raised.value) == (
        f"textfile {path} is a symbolic link (to {target}); the metrics are written to a regular file only, never "
        "through a link: remove the link, or set textfile (report_metrics_textfile) to the file itself"
    )
    assert target.read_text() == "not the metrics\n" and path.is_symlink()


def test_a_directory_at_the_textfile_is_refused_in_one_line(tmp_path):
    path = tmp_path / "gpu_fabric.prom"
    path.mkdir()
    with pytest.raises(MetricsError) as raised:
        write_metrics(MetricsRequest(RECORDS, RUN, textfile=str(path)), textfile_writer(), never, check_mode=True)
    assert str(raised.value) == (
        f"textfile {path} is a directory, not a regular file; set textfile (report_metrics_textfile) to a .prom file, "
        f"e.g. {path / 'gpu_fabric.prom'}"
    )


def test_the_textfile_writer_replaces_a_link_planted_after_the_check_instead_of_writing_through_it(tmp_path):
    target = tmp_path / "elsewhere.conf"
    target.write_text("not the metrics\n")
    path = tmp_path / "gpu_fabric.prom"

    def plant_then_write(change: FileChange) -> None:
        path.symlink_to(target)  # between the module's look at the path and its write
        textfile_writer()(change)

    result = write_metrics(MetricsRequest(RECORDS, RUN, textfile=str(path)), plant_then_write, never, False)
    assert target.read_text() == "not the metrics\n"
    assert not path.is_symlink() and path.read_text() == result["metrics"]
    assert sorted(os.listdir(tmp_path)) == ["elsewhere.conf", "gpu_fabric.prom"]


def test_a_failed_push_warns_when_asked_and_the_textfile_is_written_all_the_same(tmp_path):
    def refused(*_args, **_kwargs):
        raise urllib.error.URLError(ConnectionRefusedError(111, "Connection refused"))

    path = tmp_path / "gpu_fabric.prom"
    target = PushTarget(URL, attempts=1)
    request = MetricsRequest(RECORDS, RUN, textfile=str(path), target=target, push_failure="warn")
    result = write_metrics(request, write, refused, check_mode=False)
    assert path.exists() and result["changed"] and not result["pushed"]
    assert result["warnings"] == [
        f"cannot push the metrics to {URL}/metrics/job/gpu_fabric_verify: [Errno 111] Connection refused; "
        "check that the Pushgateway runs and the URL (pushgateway_url) is right"
    ]
    with pytest.raises(MetricsError, match="Connection refused"):
        write_metrics(MetricsRequest(RECORDS, RUN, target=target), write, refused, check_mode=False)


def test_a_grouping_label_that_the_metrics_carry_is_refused_before_anything_is_sent():
    request = MetricsRequest(RECORDS, RUN, target=PushTarget(URL, grouping={"node": "x"}))
    with pytest.raises(MetricsError, match="grouping labels node are also labels of the pushed metrics"):
        write_metrics(request, write, never, check_mode=False)


def test_a_history_index_that_is_no_index_is_rebuilt_from_the_runs_with_a_warning(tmp_path):
    history = tmp_path / "runs"
    record_run(str(history), RUN, [r for r in load_records(RECORDS) if r["run_id"] == RUN])
    write_json(str(history / "index.json"), {"runs": "not a list"})
    result = write_metrics(MetricsRequest(RECORDS, "", history_dir=str(history)), write, never, check_mode=True)
    assert result["warnings"] == [
        f"the history index {history / 'index.json'} has no list 'runs'; rebuilt it from the 1 run directories of "
        f"{history} (no run is pinned now: pin the baseline run again if one was (gpu_fabric_verify_baseline_run))"
    ]
    assert 'gpu_fabric_rack_last_verdict{rack="rack1",verdict="failed"} 1' in result["metrics"]


def test_no_records_fail_in_one_line(tmp_path):
    with pytest.raises(MetricsError, match="does not exist; run the verify roles first"):
        write_metrics(MetricsRequest(str(tmp_path / "none")), write, never, check_mode=False)


def test_the_parameters_make_the_request():
    params = {
        "records_dir": RECORDS,
        "run_id": RUN,
        "history_dir": "",
        "textfile": "",
        "pushgateway_url": URL,
        "job": "verify",
        "grouping": {"fleet": "a"},
        "headers": {},
        "username": None,
        "password": None,
        "bearer_token": None,
        "validate_certs": True,
        "timeout": 5,
        "push_attempts": 2,
        "push_failure": "warn",
    }
    request = request_from_params(params)
    assert request.target == PushTarget(URL, job="verify", grouping={"fleet": "a"}, timeout=5, attempts=2)
    assert request.push_failure == "warn"
    assert request_from_params(dict(params, pushgateway_url="")).target is None
    basic = request_from_params(dict(params, username="robot", password="hunter2")).target
    assert (basic.username, basic.password, basic.bearer_token) == ("robot", "hunter2", None)
    assert request_from_params(dict(params, bearer_token="tok-0f9e8d")).target.bearer_token == "tok-0f9e8d"


def test_credentials_in_the_url_are_refused_before_the_textfile_is_written(tmp_path):
    path = tmp_path / "gpu_fabric.prom"
    target = PushTarget("https://robot:hunter2@push.example.com")
    with pytest.raises(
        MetricsError, match=r"^pushgateway_url https://\*\*\*@push.example.com carries credentials"
    ) as raised:
        write_metrics(MetricsRequest(RECORDS, RUN, textfile=str(path), target=target), write, never, check_mode=False)
    assert "hunter2" not in str(raised.value) and not path.exists()


# ----------------------------------------------------------------------------------------- the state file


def kept_history(tmp_path):
    """A history holding the fixture run RUN (rack0 and rack2 passed, rack1 failed nvbandwidth)."""
    history = tmp_path / "runs"
    records = [r for r in load_records(RECORDS) if r["run_id"] == RUN]
    record_run(str(history), RUN, records)
    return history


def forget_run(history, run_id: str) -> None:
    """What retention does to a run: its entry and its directory gone."""
    index = json.loads((history / "index.json").read_text())
    write_json(str(history / "index.json"), dict(index, runs=[e for e in index["runs"] if e["run_id"] != run_id]))
    shutil.rmtree(history / run_id)


def test_the_last_pass_and_last_verdict_outlive_the_run_they_came_from(tmp_path):
    history = kept_history(tmp_path)
    first = write_metrics(MetricsRequest(RECORDS, RUN, history_dir=str(history)), write, never, check_mode=False)
    state = history / metrics_run.STATE_FILE
    assert first["changed"] and first["state_file"] == str(state)
    kept = json.loads(state.read_text())
    assert kept["last_pass"] == {"rack0": pytest.approx(FINISHED), "rack2": pytest.approx(FINISHED)}
    assert kept["check_last_verdict"]["nvbandwidth/rack1"] == {"verdict": "failed", "time": pytest.approx(FINISHED)}
    assert kept["check_last_verdict"]["cliques/rack1"] == {"verdict": "passed", "time": pytest.approx(FINISHED)}

    forget_run(history, RUN)
    assert metrics.history_last_passes(str(history)) == {} and metrics.history_last_check_verdicts(str(history)) == {}
    again = write_metrics(MetricsRequest(RECORDS, RUN, history_dir=str(history)), write, never, check_mode=False)
    assert not again["changed"] and json.loads(state.read_text()) == kept  # nothing new: the file is left alone
    assert again["metrics"] == first["metrics"]


def test_a_state_file_that_cannot_be_read_is_a_warning_and_is_written_again(tmp_path):
    history = kept_history(tmp_path)
    state = history / metrics_run.STATE_FILE
    state.write_text('{"last_pass": {"rack0": ')
    result = write_metrics(MetricsRequest(RECORDS, RUN, history_dir=str(history)), write, never, check_mode=False)
    assert len(result["warnings"]) == 1
    assert result["warnings"][0].startswith(f"the metrics state {state} cannot be read (")
    assert result["warnings"][0].endswith("come from the kept history and this run only, and the file is written again")
    assert json.loads(state.read_text())["last_pass"]["rack2"] == pytest.approx(FINISHED)


def test_bad_entries_of_the_state_file_are_left_out():
    data = {
        "last_pass": {"rack0": 5.0, "rack1": "soon", "rack2": float("nan"), "rack3": True},
        "check_last_verdict": {"nvbandwidth/rack0": {"verdict": "failed", "time": 4},
                               "nvbandwidth/rack1": {"verdict": "error", "time": 4},
                               "nvbandwidth/rack2": {"verdict": "passed"}, "nvbandwidth/rack3": "failed",
                               "rack4": {"verdict": "passed", "time": 4}},
        "last_verdict": {"rack5": {"verdict": "failed", "time": 4}},  # version 1: a rack's, naming no check
    }  # fmt: skip
    assert metrics_run.state_of(data) == metrics_run.KnownState({"rack0": 5.0}, {"nvbandwidth/rack0": ("failed", 4.0)})
    assert metrics_run.state_of(["not", "a", "state"]) == metrics_run.KnownState()


def test_the_state_only_moves_forward():
    older = metrics_run.KnownState({"rack1": 10.0, "rack2": 50.0}, {"nvbandwidth/rack1": ("failed", 20.0)})
    newer = metrics_run.KnownState(
        {"rack1": 30.0}, {"nvbandwidth/rack1": ("passed", 30.0), "cliques/rack2": ("passed", 50.0)}
    )
    expected = metrics_run.KnownState(
        {"rack1": 30.0, "rack2": 50.0}, {"nvbandwidth/rack1": ("passed", 30.0), "cliques/rack2": ("passed", 50.0)}
    )
    assert older.merged(newer) == expected and newer.merged(older) == expected


def test_check_mode_keeps_no_state_and_says_that_it_would(tmp_path):
    history = kept_history(tmp_path)
    result = write_metrics(MetricsRequest(RECORDS, RUN, history_dir=str(history)), pytest.fail, never, check_mode=True)
    assert result["changed"] and not (history / metrics_run.STATE_FILE).exists()


def test_a_push_that_fails_keeps_the_state_all_the_same(tmp_path):
    def refused(*_args, **_kwargs):
        raise urllib.error.URLError(ConnectionRefusedError(111, "Connection refused"))

    history = kept_history(tmp_path)
    request = MetricsRequest(RECORDS, RUN, history_dir=str(history), target=PushTarget(URL, attempts=1))
    with pytest.raises(MetricsError, match="Connection refused"):
        write_metrics(request, write, refused, check_mode=False)
    assert json.loads((history / metrics_run.STATE_FILE).read_text())["last_pass"]["rack0"] == pytest.approx(FINISHED)


def test_the_declared_racks_are_a_parameter():
    params = {"records_dir": RECORDS, "job": "j", "validate_certs": True, "timeout": 5, "push_attempts": 1}
    assert request_from_params(dict(params, racks=["rack1", "rack2"])).racks == ("rack1", "rack2")
    assert request_from_params(params).racks == ()
