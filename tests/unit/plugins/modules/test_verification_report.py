# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Run the module through ansible itself (ad-hoc, JSON callback) on copies of real-shaped records."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import FIXTURES, REPO_ROOT

RECORDS = FIXTURES / "verification_records" / "records"
ANSIBLE = Path(sys.executable).parent / "ansible"


def run_module(args: dict, *flags: str) -> dict:
    env = dict(
        os.environ,
        ANSIBLE_CONFIG=str(REPO_ROOT / "ansible.cfg"),
        ANSIBLE_LOAD_CALLBACK_PLUGINS="1",
        ANSIBLE_STDOUT_CALLBACK="json",
        ANSIBLE_LOCALHOST_WARNING="0",
        ANSIBLE_INVENTORY_UNPARSED_WARNING="0",
    )
    completed = subprocess.run(
        [
            str(ANSIBLE),
            "localhost",
            "-c",
            "local",
            "-m",
            "gpu_fabric.mnnvl.verification_report",
            "-a",
            json.dumps(args),
            *flags,
        ],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    output = json.loads(completed.stdout)
    return output["plays"][0]["tasks"][0]["hosts"]["localhost"]


@pytest.fixture
def records(tmp_path):
    directory = tmp_path / "records"
    shutil.copytree(RECORDS, directory)
    return directory


def test_writes_four_reports_then_changes_nothing(records, tmp_path):
    dest = tmp_path / "out"
    first = run_module({"records_dir": str(records), "dest": str(dest)})
    assert first["changed"] is True
    assert first["passed"] is False
    assert first["totals"] == {"checks": 3, "passed": 2, "failed": 1}
    assert first["files"] == {
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
    assert (
        "| nvbandwidth | FAIL | 1 of 56 GPU pairs below 765.00 GB/s: 0->5 402.11 GB/s | 47.5 s |"
        in (dest / "report.md").read_text()
    )
    assert first["checks"][2] == {
        "check": "nvbandwidth",
        "passed": False,
        "summary": "1 of 56 GPU pairs below 765.00 GB/s: 0->5 402.11 GB/s",
    }

    second = run_module({"records_dir": str(records), "dest": str(dest)})
    assert second["changed"] is False


def test_check_mode_shows_the_diff_and_writes_nothing(records, tmp_path):
    dest = tmp_path / "out"
    run_module({"records_dir": str(records), "dest": str(dest), "formats": ["markdown"]})
    record = json.loads((records / "nvbandwidth.json").read_text())
    record["passed"] = True
    record["summary"] = "56 of 56 GPU pairs at or above 765.00 GB/s"
    record["details"]["failing_pairs"] = []
    (records / "nvbandwidth.json").write_text(json.dumps(record))
    before = (dest / "report.md").read_text()

    result = run_module({"records_dir": str(records), "dest": str(dest), "formats": ["markdown"]}, "--check", "--diff")

    assert result["changed"] is True
    assert result["passed"] is True
    assert (dest / "report.md").read_text() == before
    assert len(result["diff"]) == 1
    diff = result["diff"][0]
    assert diff["before_header"] == str(dest / "report.md")
    assert diff["before"] == before
    assert "**PASSED**: 3 of 3 checks passed" in diff["after"]
    assert "| nvbandwidth | PASS | 56 of 56 GPU pairs at or above 765.00 GB/s | 47.5 s |" in diff["after"]


def test_missing_records_fail_with_what_to_do(tmp_path):
    (tmp_path / "records").mkdir()
    result = run_module({"records_dir": str(tmp_path / "records"), "dest": str(tmp_path / "out")})
    assert result["failed"] is True
    assert result["msg"] == (
        f"no verification record (*.json) found in {tmp_path / 'records'}; run the verify roles first "
        "(playbooks/verify.yml) with the same report directory"
    )
    assert not (tmp_path / "out").exists()
