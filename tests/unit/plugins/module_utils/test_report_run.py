# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The runner of the module verification_report, on copies of the fleet records, with an injected writer."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.files import FileChange
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.history_runs import record_run
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.report_render import ReportError
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.report_run import (
    ReportRequest,
    request_from_params,
    write_reports,
)

from tests.conftest import FIXTURES

RECORDS = FIXTURES / "verification_records" / "records"
RUN = "20261201T101500Z-ab12"
SUMMARY = (
    "FAILED: 3 racks, 8 of 9 checks passed; failed: nvbandwidth (rack1); incomplete, allowed: nvbandwidth (rack0); "
    "33 of 54 GPU trays verified; 18 skipped; 3 failed"
)


@pytest.fixture
def records(tmp_path):
    directory = tmp_path / "records"
    shutil.copytree(RECORDS, directory)
    return directory


def request(records_dir, dest, *formats: str, **options) -> ReportRequest:
    return ReportRequest(str(records_dir), str(dest), formats or ("json", "markdown", "junit", "html"), "t", **options)


def write_file(change: FileChange) -> None:
    path = Path(change.path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(change.after)


def test_the_params_become_a_request_with_each_format_once():
    params = {
        "records_dir": "/srv/records",
        "dest": "/srv/report",
        "formats": ["junit", "markdown", "junit"],
        "title": "GB200 NVL72 fleet a",
        "run_id": RUN,
        "history_dir": None,
        "trend_runs": 5,
        "trend_tolerance": 0.05,
        "valid_hours": 24.0,
    }
    assert request_from_params(params) == ReportRequest(
        "/srv/records", "/srv/report", ("junit", "markdown"), "GB200 NVL72 fleet a", RUN, "", 5, 0.05, 24.0
    )


def test_writes_every_format_of_the_run_then_changes_nothing(records, tmp_path):
    dest = tmp_path / "out"
    result = write_reports(request(records, dest, run_id=RUN), write_file)

    assert result["changed"] is True
    assert result["files"] == {
        "json": str(dest / "report.json"),
        "markdown": str(dest / "report.md"),
        "junit": str(dest / "report.junit.xml"),
        "html": str(dest / "report.html"),
    }
    assert sorted(path.name for path in dest.iterdir()) == [
        "report.html",
        "report.json",
        "report.junit.xml",
        "report.md",
    ]
    assert [diff["before_header"] for diff in result["diff"]] == [
        f"{path} (absent)" for path in result["files"].values()
    ]
    assert (result["passed"], result["verdict"], result["summary"]) == (False, "failed", SUMMARY)
    assert result["totals"]["not_current"] == 1
    assert result["checks"][5] == {
        "check": "nvbandwidth",
        "rack": "rack1",
        "clique": "5e6f7a8b-1111-4000-8000-00000000c11f.1",
        "outcome": "failed",
        "verdict": "failed",
        "passed": False,
        "summary": result["checks"][5]["summary"],
    }
    assert result["racks"]["rack1"]["verdict"] == "failed"
    assert result["coverage"]["counts"] == {
        "trays": 54,
        "declared": 54,
        "found": 54,
        "verified": 33,
        "failed": 3,
        "skipped": 18,
        "unverified": 0,
        "unmeasured": 0,
        "missing": 0,
    }
    assert result["trays"]["gb200-r1-t15"]["checks_failed"] == ["nvbandwidth"]
    assert result["trends"] == []
    # the trays due next: skipped, then failed, then the passed ones a week after the run's finish
    assert [entry["verdict"] for entry in result["due"]] == ["skipped"] * 18 + ["failed"] * 3 + ["passed"] * 33
    assert result["due"][-1]["due"] == "2026-12-08T10:17:31Z"

    written = []
    again = write_reports(request(records, dest, run_id=RUN), written.append)
    assert (again["changed"], again["diff"], written) == (False, [], [])


def test_a_writer_that_writes_nothing_leaves_the_files_as_they_were(records, tmp_path):
    dest = tmp_path / "out"
    write_reports(request(records, dest, "markdown", run_id=RUN), write_file)
    before = (dest / "report.md").read_text()
    written = []

    result = write_reports(request(records, dest, "markdown", "junit"), written.append)

    assert result["changed"] is True
    assert [change.path for change in written] == [str(dest / "report.md"), str(dest / "report.junit.xml")]
    assert (dest / "report.md").read_text() == before
    assert not (dest / "report.junit.xml").exists()
    assert result["diff"][0]["before"] == before
    assert result["diff"][0]["before_header"] == str(dest / "report.md")
    assert result["diff"][0]["after"].startswith("# t\n\n**FAILED**: 3 racks, 9 of 10 checks passed;")


def test_a_missing_records_directory_says_what_to_do(tmp_path):
    with pytest.raises(ReportError) as raised:
        write_reports(request(tmp_path / "records", tmp_path / "out"), write_file)
    assert str(raised.value) == (
        f"the records directory {tmp_path / 'records'} does not exist; run the verify roles first "
        "(playbooks/verify.yml), or point records_dir at the directory they wrote to"
    )
    assert raised.value.result == {}


def test_no_record_says_what_to_do_and_writes_nothing(tmp_path):
    (tmp_path / "records").mkdir()
    with pytest.raises(ReportError, match=r"^no verification record \(<check>/<rack>.json\) found in "):
        write_reports(request(tmp_path / "records", tmp_path / "out"), write_file)
    assert not (tmp_path / "out").exists()


def test_an_unreadable_history_index_is_read_rebuilt_with_a_warning(records, tmp_path):
    history = tmp_path / "runs"
    record_run(str(history), RUN, [{"check": "nccl", "rack": "rack0", "run_id": RUN, "passed": True}])
    (history / "index.json").write_text("{")
    result = write_reports(request(records, tmp_path / "out", history_dir=str(history)), write_file)
    assert result["warnings"] == [
        f"the history index {history / 'index.json'} cannot be read (Expecting property name enclosed in double "
        f"quotes: line 1 column 2 (char 1)); rebuilt it from the 1 run directories of {history} (no run is pinned "
        "now: pin the baseline run again if one was (gpu_fabric_verify_baseline_run))"
    ]


def test_a_report_file_that_cannot_be_read_fails_naming_the_files_so_far(records, tmp_path):
    dest = tmp_path / "out"
    (dest / "report.md").mkdir(parents=True)
    with pytest.raises(ReportError) as raised:
        write_reports(request(records, dest, run_id=RUN), write_file)
    assert str(raised.value).startswith(f"{dest / 'report.md'} is a directory, not a regular file")
    assert raised.value.result == {
        "files": {"json": str(dest / "report.json"), "markdown": str(dest / "report.md")},
    }
    assert [path.name for path in dest.iterdir() if path.is_file()] == ["report.json"]
