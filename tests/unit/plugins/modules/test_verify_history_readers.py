# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The readers of the kept history, run as Ansible runs them: a corrupt index and a bad kept record are left out
with a warning by the report's trend and the metrics' last pass, never a failure."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest
from ansible.module_utils import basic
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.history_runs import pin_run, record_run
from ansible_collections.gpu_fabric.mnnvl.plugins.modules import verification_metrics, verification_report

from tests.conftest import FIXTURES
from tests.unit.plugins.modules.runner import run_module

RECORDS = FIXTURES / "verification_records" / "records"
RUN = "20261201T101500Z-ab12"


def nvb_record(run_id, day, median):
    return {
        "check": "nvbandwidth",
        "rack": "rack1",  # failed nvbandwidth in RUN: its last pass is in the history
        "run_id": run_id,
        "verdict": "passed",
        "started": f"2026-11-{day:02d}T10:00:00Z",
        "finished": f"2026-11-{day:02d}T10:05:00Z",
        "details": {"testcase": "device_to_device_memcpy_read_ce", "median_gbps": median, "min": median},
    }


@pytest.fixture
def warnings(monkeypatch):
    seen = []
    monkeypatch.setattr(basic.AnsibleModule, "warn", lambda self, msg: seen.append(msg))
    return seen


@pytest.fixture
def damaged_history(tmp_path):
    """r1 (pinned) and r3 good, r2's record with a NaN median (as json writes float('nan')), the index cut in half."""
    history = tmp_path / "runs"
    for day, (run_id, median) in enumerate((("r1", 820.0), ("r2", float("nan")), ("r3", 818.0)), start=20):
        record_run(
            str(history), run_id, [nvb_record(run_id, day, median)], now=datetime(2026, 11, 30, tzinfo=timezone.utc)
        )
    pin_run(str(history), "r1")
    assert "NaN" in (history / "r2" / "nvbandwidth" / "rack1.json").read_text()
    index = (history / "index.json").read_text()
    (history / "index.json").write_text(index[: len(index) // 2])
    return history


def test_the_report_leaves_out_a_bad_kept_record_and_rebuilds_a_cut_index(tmp_path, damaged_history, warnings):
    result = run_module(
        verification_report.main,
        {
            "records_dir": str(RECORDS),
            "dest": str(tmp_path / "report"),
            "formats": ["json", "markdown", "html"],
            "run_id": RUN,
            "history_dir": str(damaged_history),
        },
    )
    assert result["failed"] is False, result.get("msg")
    (row,) = result["trends"]
    assert (row["rack"], row["runs"], row["latest_run"], row["median_gbps"]) == ("rack1", 2, "r3", 819.0)
    assert [point["run_id"] for point in row["series"]] == ["r1", "r3"]
    assert (row["baseline_run"], row["baseline_median_gbps"]) == ("r1", 820.0)
    assert warnings[0].startswith(f"the history index {damaged_history}/index.json cannot be read (")
    record = damaged_history / "r2" / "nvbandwidth" / "rack1.json"
    assert (
        f"the kept record {record}: details.median_gbps nan is not a finite number; left out of the history's "
        "readers (trend, index); correct it or remove the run r2 from the history"
    ) in warnings
    report = json.loads((tmp_path / "report" / "report.json").read_text())
    assert [point["median_gbps"] for point in report["trends"][0]["series"]] == [820.0, 818.0]


def test_the_metrics_read_the_last_pass_from_a_rebuilt_index(damaged_history):
    result = run_module(
        verification_metrics.main,
        {"records_dir": str(RECORDS), "run_id": RUN, "history_dir": str(damaged_history)},
    )
    assert result["failed"] is False, result.get("msg")
    last_pass = [line for line in result["metrics"].splitlines() if line.startswith("gpu_fabric_last_pass_timestamp")]
    finished = datetime(2026, 11, 22, 10, 5, tzinfo=timezone.utc).timestamp()  # r3, the newest pass of rack1
    assert f'gpu_fabric_last_pass_timestamp_seconds{{rack="rack1"}} {finished:.0f}' in last_pass
