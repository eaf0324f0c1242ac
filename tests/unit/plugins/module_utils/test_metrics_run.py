# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The runner of the module verification_metrics on the fleet records: the textfile, check mode, a failed push."""

from __future__ import annotations

import os
import stat
import urllib.error

import pytest
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.files import FileChange, replace_file
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.history import write_json
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.metrics_run import (
    MetricsError,
    MetricsRequest,
    request_from_params,
    write_metrics,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.pushgateway import PushTarget

from tests.conftest import FIXTURES

RECORDS = str(FIXTURES / "verification_records" / "records")
RUN = "20261201T101500Z-ab12"
URL = "http://127.0.0.1:9"


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
    from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.files import write_change

    class Module:
        check_mode = False

    path = tmp_path / "missing" / "gpu_fabric.prom"
    with pytest.raises(MetricsError, match=r"directory .*missing does not exist"):
        write_metrics(
            MetricsRequest(RECORDS, textfile=str(path)),
            lambda change: write_change(Module(), change, backup=False),
            never,
            check_mode=False,
        )


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


def test_an_unreadable_history_index_fails_in_one_line(tmp_path):
    history = tmp_path / "runs"
    write_json(str(history / "index.json"), {"runs": "not a list"})
    with pytest.raises(MetricsError, match="has no list 'runs'"):
        write_metrics(MetricsRequest(RECORDS, RUN, history_dir=str(history)), write, never, check_mode=False)


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
        "url_username": None,
        "url_password": None,
        "validate_certs": True,
        "timeout": 5,
        "push_attempts": 2,
        "push_failure": "warn",
    }
    request = request_from_params(params)
    assert request.target == PushTarget(URL, job="verify", grouping={"fleet": "a"}, timeout=5, attempts=2)
    assert request.push_failure == "warn"
    assert request_from_params(dict(params, pushgateway_url="")).target is None
