# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The report's trend table, from the kept history."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from html.parser import HTMLParser

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.history_runs import pin_run, record_run
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.history_trends import trends
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.report_model import build_report
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.report_records import normalise_record
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.report_render import render_html, render_markdown


def record(run_id, median, low, verdict, day, matrix=None):
    details = {"testcase": "device_to_device_memcpy_read_ce", "median_gbps": median, "min": low}
    # held against a product reference: a passing run of it is a baseline (history_baseline.baseline_for)
    details["references"] = [{"kind": "product", "gbps": 821.41, "source": "GB200 NVL72, driver 580.95.05"}]
    if matrix is not None:  # 2 trays x 2 GPUs, placed as the check records them
        details.update(matrix=matrix, rank_nodes=["tray0", "tray1"], gpus_per_node=2)
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
        "details": details,
    }


def report_of(tmp_path, runs, pin="", matrices=None):
    history_dir = str(tmp_path / "runs")
    matrices = matrices or [None] * len(runs)
    for day, ((run_id, median, low, verdict), matrix) in enumerate(zip(runs, matrices), start=1):
        record_run(history_dir, run_id, [record(run_id, median, low, verdict, day, matrix)])
    if pin:
        pin_run(history_dir, pin)
    current_id, median, low, verdict = runs[-1]
    current = normalise_record(
        record(current_id, median, low, verdict, len(runs), matrices[-1]), "records/nvbandwidth/rack0.json"
    )
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
    assert (
        "| nvbandwidth | rack0 | 3 | 818.00 | 770.00 | 776.00 | 820.00 (pinned run r1) | 5.4% DROP | "
        "\u2588\u2588\u2581 |" in markdown.splitlines()
    )
    html = render_html(report)
    assert '<td class="fail">5.4% DROP</td>' in html
    # the row's chart: the three medians, the baseline, the drop marked, its numbers in words
    (svg,) = charts(html)
    assert svg.get("aria-label") == (
        "nvbandwidth of rack0, median GB/s of the last 3 runs: 820.00, 818.00, 776.00; baseline 820.00; "
        "5.4% below it, flagged"
    )
    assert svg.get("class") == "spark spark-drop"
    assert "Trays over the kept runs" not in html  # these records place no GPU on a tray


def charts(html):
    """The inline SVG charts of a page, each parsed as XML."""
    return [ET.fromstring(part[: part.index("</svg>") + 6]) for part in ["<svg" + p for p in html.split("<svg")[1:]]]


def square(low_pairs):
    return [[None if r == c else low_pairs.get((r, c), 820.0) for c in range(4)] for r in range(4)]


class Figures(HTMLParser):
    """The tray charts of the page: (figure class, caption, the chart's aria-label)."""

    def __init__(self):
        super().__init__()
        self.figures, self.current, self.in_caption = [], None, False

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        if tag == "figure":
            self.current = [attributes.get("class"), "", ""]
        elif tag == "svg" and self.current is not None:
            self.current[2] = attributes.get("aria-label")
        elif tag == "figcaption":
            self.in_caption = True

    def handle_data(self, data):
        if self.in_caption:
            self.current[1] += data

    def handle_endtag(self, tag):
        if tag == "figcaption":
            self.in_caption = False
        elif tag == "figure":
            self.figures.append(tuple(self.current))
            self.current = None


def test_each_tray_gets_a_chart_and_a_tray_that_dropped_is_flagged(tmp_path):
    # r3: GPU 3 on tray1 lost a link; its pairs, and so the lowest pair of both trays, at 774
    lost = {(3, 0): 774.0, (3, 1): 774.0, (3, 2): 790.0, (2, 3): 812.0}
    report = report_of(
        tmp_path,
        [("r1", 820.0, 820.0, "passed"), ("r2", 820.0, 815.0, "passed"), ("r3", 816.0, 774.0, "failed")],
        matrices=[square({}), square({(1, 2): 815.0}), square(lost)],
    )
    (row,) = report["trends"]
    assert [(t["node"], t["latest_gbps"], t["baseline_gbps"], t["dropped"]) for t in row["trays"]] == [
        ("tray0", 774.0, 815.0, True),  # the baseline: r2, the last passing run
        ("tray1", 774.0, 815.0, True),
    ]
    assert row["dropped"] is False  # the rack's median moved 0.5%: only the trays show the lost link

    page = Figures()
    html = render_html(report)
    page.feed(html)
    assert page.figures == [
        (
            "spark-tray spark-tray-drop",
            "tray0",
            "tray0, lowest pair GB/s of the last 3 runs: 820.00, 815.00, 774.00; baseline 815.00; 5.0% below it, "
            "flagged",
        ),
        (
            "spark-tray spark-tray-drop",
            "tray1",
            "tray1, lowest pair GB/s of the last 3 runs: 820.00, 815.00, 774.00; baseline 815.00; 5.0% below it, "
            "flagged",
        ),
    ]
    assert "<p>nvbandwidth of rack0: 2 trays, 2 below the baseline beyond the tolerance</p>" in html
    assert len(charts(html)) == 3  # the rack's row and one per tray, all well-formed

    markdown = render_markdown(report)
    assert "| nvbandwidth | rack0 | tray0 | 3 | 774.00 | 815.00 | 5.0% DROP | \u2588\u2587\u2581 |" in markdown
    assert "| nvbandwidth | rack0 | tray1 | 3 | 774.00 | 815.00 | 5.0% DROP | \u2588\u2587\u2581 |" in markdown


def test_trays_without_a_drop_are_charted_and_named_as_such(tmp_path):
    report = report_of(
        tmp_path,
        [("r1", 820.0, 820.0, "passed"), ("r2", 820.0, 818.0, "passed")],
        matrices=[square({}), square({(0, 1): 818.0})],
    )
    markdown = render_markdown(report)
    assert "No tray's lowest pair dropped below its figure in the baseline run beyond the tolerance." in markdown
    page = Figures()
    page.feed(render_html(report))
    assert [(css, caption) for css, caption, _label in page.figures] == [
        ("spark-tray", "tray0"),
        ("spark-tray", "tray1"),
    ]


def test_a_tray_with_one_run_has_no_chart(tmp_path):
    report = report_of(tmp_path, [("r1", 820.0, 820.0, "passed")], matrices=[square({})])
    assert [tray["runs"] for tray in report["trends"][0]["trays"]] == [1, 1]
    html = render_html(report)
    assert "Trays over the kept runs" not in html and "<figure" not in html
    assert len(charts(html)) == 1  # the rack's row: one point


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
