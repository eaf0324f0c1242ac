# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The report's trend table, from the kept history."""

from __future__ import annotations

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.history import pin_run, record_run, trends
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.report_model import build_report
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.report_records import normalise_record
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.report_render import render_html, render_markdown


def record(run_id, median, low, verdict, day):
    return {
        "check": "nvbandwidth",
        "rack": "rack0",
        "run_id": run_id,
        "outcome": verdict,
        "verdict": verdict,
        "passed": verdict == "passed",
        "summary": f"rack rack0: median {median} GB/s",
        "nodes": ["tray0", "tray1"],
        "started": f"2026-12-0{day}T10:00:00Z",
        "finished": f"2026-12-0{day}T10:05:00Z",
        "details": {"testcase": "device_to_device_memcpy_read_ce", "median_gbps": median, "min": low},
    }


def report_of(tmp_path, runs, pin=""):
    history_dir = str(tmp_path / "runs")
    for day, (run_id, median, low, verdict) in enumerate(runs, start=1):
        record_run(history_dir, run_id, [record(run_id, median, low, verdict, day)])
    if pin:
        pin_run(history_dir, pin)
    current_id, median, low, verdict = runs[-1]
    current = normalise_record(record(current_id, median, low, verdict, len(runs)), "records/nvbandwidth/rack0.json")
    return build_report([current], "GPU fabric verification", current_id, trends=trends(history_dir, 10, 0.03))


def test_the_trend_flags_a_drop_against_the_pinned_baseline(tmp_path):
    report = report_of(
        tmp_path, [("r1", 820.0, 810.0, "passed"), ("r2", 818.0, 805.0, "passed"), ("r3", 776.0, 770.0, "passed")], "r1"
    )
    (row,) = report["trends"]
    assert (row["runs"], row["median_gbps"], row["min_gbps"], row["baseline_run"]) == (3, 818.0, 770.0, "r1")
    assert (row["drop_fraction"], row["dropped"]) == (0.0537, True)
    assert report["verdict"] == "passed"  # flagged, not judged again
    assert report["summary"].endswith("; nvbandwidth of rack0 dropped 5.4% below its baseline (pinned run r1)")
    markdown = render_markdown(report)
    assert "## Trend of the kept runs" in markdown
    assert "| nvbandwidth | rack0 | 3 | 818.00 | 770.00 | 776.00 | 820.00 (pinned run r1) | 5.4% DROP |" in markdown
    html = render_html(report)
    assert '<td class="fail">5.4% DROP</td>' in html


def test_a_first_run_has_no_baseline_and_no_drop(tmp_path):
    report = report_of(tmp_path, [("r1", 820.0, 810.0, "passed")])
    (row,) = report["trends"]
    assert (row["baseline_source"], row["drop_fraction"], row["dropped"]) == (None, None, False)
    assert "| nvbandwidth | rack0 | 1 | 820.00 | 810.00 | 820.00 | none yet | - |" in render_markdown(report)
    assert "dropped" not in report["summary"]


def test_without_a_history_the_report_has_no_trend_section(tmp_path):
    current = normalise_record(record("r1", 820.0, 810.0, "passed", 1), "records/nvbandwidth/rack0.json")
    report = build_report([current], "GPU fabric verification", "r1")
    assert report["trends"] == []
    assert "Trend" not in render_markdown(report)
    assert "Trend" not in render_html(report)
