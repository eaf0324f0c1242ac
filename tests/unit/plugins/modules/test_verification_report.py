# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Run the module through ansible itself (ad-hoc, JSON callback) on copies of the fleet records."""

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
RUN = "20261201T101500Z-ab12"
OLD_RUN = "20261124T083000Z-7c01"


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


def test_writes_four_reports_of_the_run_then_changes_nothing(records, tmp_path):
    dest = tmp_path / "out"
    first = run_module({"records_dir": str(records), "dest": str(dest), "run_id": RUN})
    assert first["changed"] is True
    assert first["passed"] is False
    assert first["summary"] == (
        "FAILED: 3 racks, 8 of 9 checks passed; failed: nvbandwidth (rack1); incomplete, allowed: nvbandwidth (rack0); "
        "33 of 54 GPU trays verified; 18 skipped; 3 failed"
    )
    assert first["totals"] == {
        "racks": 3,
        "checks": 9,
        "passed": 8,
        "failed": 1,
        "errors": 0,
        "incomplete": 1,
        "not_current": 1,
    }
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
    markdown = (dest / "report.md").read_text()
    assert "| rack0 | PASS | PASS | INCOMPLETE | 1 of 18, 17 skipped |" in markdown
    assert "| rack1 | PASS | PASS | FAIL | 15 of 18, 3 failed |" in markdown
    assert first["checks"][5] == {
        "check": "nvbandwidth",
        "rack": "rack1",
        "clique": "5e6f7a8b-1111-4000-8000-00000000c11f.1",
        "outcome": "failed",
        "verdict": "failed",
        "passed": False,
        "summary": first["checks"][5]["summary"],
    }
    assert first["racks"]["rack1"]["verdict"] == "failed"
    # nvbandwidth skipped 17 busy trays of rack0: cliques and imex_channel measured them, yet they are not verified
    assert first["racks"]["rack0"]["trays"] == {
        "trays": 18,
        "declared": 18,
        "found": 18,
        "verified": 1,
        "failed": 0,
        "skipped": 17,
        "unverified": 0,
        "unmeasured": 0,
        "missing": 0,
        "expected": 18,
    }
    assert first["racks"]["rack2"]["trays"] == {
        "trays": 18,
        "declared": 18,
        "found": 18,
        "verified": 17,
        "failed": 0,
        "skipped": 1,
        "unverified": 0,
        "unmeasured": 0,
        "missing": 0,
        "expected": 18,
    }
    assert first["coverage"]["counts"] == {
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
    assert len(first["trays"]) == 54
    assert first["trays"]["gb200-r1-t15"] == {
        "verdict": "failed",
        "rack": "rack1",
        "checks_failed": ["nvbandwidth"],
        "checks_passed": ["cliques", "imex_channel"],
        "summary": "nvbandwidth failed: GPU 62: its 142 pairs average 775.68 GB/s, 0.944 of the median 821.37: "
        "a GPU with lost NVLinks",
        "skip_reasons": [],
        "checks": {
            "cliques": {"outcome": "passed"},
            "imex_channel": {"outcome": "passed"},
            "nvbandwidth": {
                "outcome": "failed",
                "summary": "GPU 62: its 142 pairs average 775.68 GB/s, 0.944 of the median 821.37: "
                "a GPU with lost NVLinks",
            },
        },
    }
    assert first["trays"]["gb200-r2-t7"]["verdict"] == "skipped"
    assert first["trays"]["gb200-r0-t0"] == {
        "verdict": "skipped",
        "rack": "rack0",
        "checks_failed": [],
        "checks_passed": ["cliques", "imex_channel"],
        "summary": "skipped: GPUs in use: 4 of 4 nvidia.com/gpu held by training/llm-pretrain-worker-0 (4)",
        "skip_reasons": ["GPUs in use: 4 of 4 nvidia.com/gpu held by training/llm-pretrain-worker-0 (4)"],
        "checks": {
            "cliques": {"outcome": "passed"},
            "imex_channel": {"outcome": "passed"},
            "nvbandwidth": {
                "outcome": "skipped",
                "reason": "GPUs in use: 4 of 4 nvidia.com/gpu held by training/llm-pretrain-worker-0 (4)",
            },
        },
    }
    assert first["trays"]["gb200-r0-t17"]["verdict"] == "passed"
    verdicts = [tray["verdict"] for tray in first["trays"].values()]
    assert (verdicts.count("passed"), verdicts.count("failed"), verdicts.count("skipped")) == (33, 3, 18)

    second = run_module({"records_dir": str(records), "dest": str(dest), "run_id": RUN})
    assert second["changed"] is False


def test_a_run_of_one_check_reports_only_that_check(records, tmp_path):
    result = run_module(
        {"records_dir": str(records), "dest": str(tmp_path / "out"), "run_id": OLD_RUN, "formats": ["markdown"]}
    )
    assert result["passed"] is True
    assert result["totals"] == {
        "racks": 1,
        "checks": 1,
        "passed": 1,
        "failed": 0,
        "errors": 0,
        "incomplete": 0,
        "not_current": 9,
    }
    assert [(check["check"], check["rack"]) for check in result["checks"]] == [("nccl", "rack0")]
    text = (tmp_path / "out" / "report.md").read_text()
    assert "**PASSED**: 1 rack, 1 of 1 checks passed.\n" in text
    assert (
        f"- not run this time: cliques (records of run {RUN}), imex_channel (records of run {RUN}), "
        f"nvbandwidth (records of run {RUN})\n"
    ) in text


def test_check_mode_shows_the_diff_and_writes_nothing(records, tmp_path):
    dest = tmp_path / "out"
    args = {"records_dir": str(records), "dest": str(dest), "formats": ["markdown"], "run_id": RUN}
    run_module(args)
    path = records / "nvbandwidth" / "rack1.json"
    record = json.loads(path.read_text())
    record.update(outcome="passed", passed=True, summary="rack rack1: 5112 of 5112 GPU pairs at or above 765.00 GB/s")
    record.update(failed_nodes=[], node_problems={})
    record["details"].update(failing_pairs=[], low_gpus=[], violations=[])
    path.write_text(json.dumps(record))
    before = (dest / "report.md").read_text()

    result = run_module(args, "--check", "--diff")

    assert result["changed"] is True
    assert result["passed"] is True
    assert (dest / "report.md").read_text() == before
    assert len(result["diff"]) == 1
    diff = result["diff"][0]
    assert diff["before_header"] == str(dest / "report.md")
    assert diff["before"] == before
    assert "**PASSED**: 3 racks, 9 of 9 checks passed; incomplete, allowed: nvbandwidth (rack0).\n" in diff["after"]
    assert "| rack1 | PASS | PASS | PASS | 18 of 18 |" in diff["after"]


def test_missing_records_fail_with_what_to_do(tmp_path):
    (tmp_path / "records").mkdir()
    result = run_module({"records_dir": str(tmp_path / "records"), "dest": str(tmp_path / "out")})
    assert result["failed"] is True
    assert result["msg"] == (
        f"no verification record (<check>/<rack>.json) found in {tmp_path / 'records'}; run the verify roles first "
        "(playbooks/verify.yml) with the same report directory"
    )
    assert not (tmp_path / "out").exists()
