# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

import json
import re
import shutil
import xml.etree.ElementTree as ET
from html.parser import HTMLParser

import pytest
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.report import (
    binary_size,
    build_report,
    duration_seconds,
    gpu_placement,
    heat_colour,
    load_records,
    render_html,
    render_json,
    render_junit,
    render_markdown,
    render_report,
)

from tests.conftest import FIXTURES

RECORDS = FIXTURES / "verification_records" / "records"


@pytest.fixture
def report():
    return build_report(load_records(str(RECORDS)), "GB200 rack r0")


def test_records_are_ordered_by_check_and_totalled(report):
    assert [record["check"] for record in report["checks"]] == ["cliques", "imex_channel", "nvbandwidth"]
    assert report["totals"] == {"checks": 3, "passed": 2, "failed": 1}
    assert report["failed_checks"] == ["nvbandwidth"]
    assert report["passed"] is False
    # the latest "finished" of the records, never the clock
    assert report["generated"] == "2026-12-01T10:01:02.500000Z"
    assert [record["duration_seconds"] for record in report["checks"]] == [1.25, 12.0, 47.5]


def test_no_records_is_not_a_pass():
    assert build_report([], "empty")["passed"] is False


def test_unreadable_and_incomplete_records_become_failures(tmp_path):
    shutil.copy(RECORDS / "cliques.json", tmp_path / "cliques.json")
    (tmp_path / "nccl.json").write_text("{not json")
    (tmp_path / "imex_channel.json").write_text(json.dumps({"check": "imex_channel", "passed": True}))
    (tmp_path / "nvbandwidth.json").write_text(json.dumps({"check": "nvbandwidth", "passed": "yes", "summary": "x"}))
    (tmp_path / "notes.txt").write_text("ignored")
    records = {record["check"]: record for record in load_records(str(tmp_path))}
    assert sorted(records) == ["cliques", "imex_channel", "nccl", "nvbandwidth"]
    assert records["cliques"]["passed"] is True
    assert records["nccl"]["passed"] is False
    assert records["nccl"]["summary"].startswith(f"the record {tmp_path / 'nccl.json'} could not be read (")
    assert records["imex_channel"]["summary"] == (
        f"the record {tmp_path / 'imex_channel.json'} lacks the keys summary; run the check again to rewrite it"
    )
    assert records["nvbandwidth"]["summary"] == (
        f"the record {tmp_path / 'nvbandwidth.json'} has passed='yes', not true or false; "
        "run the check again to rewrite it"
    )


def test_duration_needs_both_timestamps():
    assert duration_seconds({"started": "2026-12-01T10:00:00Z"}) is None
    assert duration_seconds({"started": "2026-12-01T10:00:00Z", "finished": "2026-12-01T10:00:03Z"}) == 3.0
    assert duration_seconds({"started": "yesterday", "finished": "2026-12-01T10:00:03Z"}) is None


def test_markdown_summary_table_rows(report):
    lines = render_markdown(report).splitlines()
    assert lines[0] == "# GB200 rack r0"
    assert lines[2:7] == [
        "**FAILED**: 2 of 3 checks passed.",
        "",
        "- cluster: https://10.0.0.10:6443 (Kubernetes v1.34.4)",
        "- checks ran: 2026-12-01T10:00:00Z to 2026-12-01T10:01:02Z",
        "",
    ]
    table = lines[lines.index("| check | result | summary | duration |") :][:5]
    assert table == [
        "| check | result | summary | duration |",
        "| --- | --- | --- | --- |",
        "| cliques | PASS | 4 GPU nodes in 1 clique; every rack shares one clique | 1.2 s |",
        "| imex_channel | PASS | channel0 is a character device (major 501, minor 0) in pod imex-channel-injection "
        "on gb200-r0-t0 | 12.0 s |",
        "| nvbandwidth | FAIL | 1 of 56 GPU pairs below 765.00 GB/s: 0->5 402.11 GB/s | 47.5 s |",
    ]


def test_markdown_nvbandwidth_section_lists_pair_and_bold_cell(report):
    text = render_markdown(report)
    section = text[text.index("## nvbandwidth") :]
    assert "- threshold (GB/s): 765.00\n" in section
    assert "- nodes: gb200-r0-t0, gb200-r0-t1\n" in section
    assert (
        "| source GPU | destination GPU | GB/s | nodes |\n| --- | --- | --- | --- |\n"
        "| 0 | 5 | 402.11 | gb200-r0-t0 -> gb200-r0-t1 |\n"
    ) in section
    assert "GPUs 0-3 on gb200-r0-t0, 4-7 on gb200-r0-t1.\n" in section
    assert "| GB/s | 0 | 1 | 2 | 3 | 4 | 5 | 6 | 7 |" in section
    # row 0 of the real GB200 matrix with the degraded cell in bold
    assert "| 0 | N/A | 822.16 | 821.69 | 821.92 | 821.45 | **402.11** | 821.53 | 821.69 |" in section
    bold_rows = [line for line in section.splitlines() if line.startswith("| ") and "**" in line]
    assert bold_rows == ["| 0 | N/A | 822.16 | 821.69 | 821.92 | 821.45 | **402.11** | 821.53 | 821.69 |"]


def test_markdown_lists_what_each_check_ran_on_and_measured(report):
    text = render_markdown(report)
    imex = text[text.index("## imex_channel") : text.index("## nvbandwidth")]
    assert imex.splitlines()[4:11] == [
        "- namespace: gpu-fabric-verify-imex",
        "- ComputeDomain: imex-channel-injection",
        "- pod: imex-channel-injection",
        "- node: gb200-r0-t0",
        # the ls line as it came, spacing included
        "- channel0: `crw-rw-rw- 1 root root 501, 0 Jan  5 08:31 channel0`",
        "- objects left behind: 0",
        "",
    ]
    nvbandwidth = text[text.index("## nvbandwidth") :]
    facts = [line for line in nvbandwidth.splitlines() if line.startswith("- ")][:15]
    assert facts == [
        "- test: multinode_device_to_device_memcpy_read_ce",
        "- clique: 1a2b3c4d-0000-4000-8000-00000000c11e.1",
        "- nodes: gb200-r0-t0, gb200-r0-t1",
        "- GPU product: NVIDIA-GB200",
        "- GPUs per node: 4",
        "- NVLink peak per direction (GB/s): 900.00",
        "- fraction of the peak required: 0.85",
        "- threshold (GB/s): 765.00",
        "- min (GB/s): 402.11",
        "- mean (GB/s): 813.91",
        "- max (GB/s): 822.16",
        "- sum (GB/s): 45578.72",
        "- namespace: gpu-fabric-verify-nvbandwidth",
        "- MPIJob: nvbandwidth-test",
        "- objects left behind: 0",
    ]


def test_gpu_placement_needs_nodes_times_gpus_to_fill_the_matrix():
    matrix = [[None] * 8 for _row in range(8)]
    assert gpu_placement({"nodes": ["a", "b"], "gpus_per_node": 4, "matrix": matrix}) == [("0-3", "a"), ("4-7", "b")]
    assert gpu_placement({"nodes": ["a", "b"], "gpus_per_node": 2, "matrix": matrix}) == []
    assert gpu_placement({"nodes": ["a", "b"], "matrix": matrix}) == []


def test_markdown_clique_table(report):
    text = render_markdown(report)
    assert (
        "| clique | nodes |\n| --- | --- |\n"
        "| 1a2b3c4d-0000-4000-8000-00000000c11e.1 | gb200-r0-t0, gb200-r0-t1, gb200-r0-t2, gb200-r0-t3 |\n"
    ) in text


def test_markdown_escapes_pipes_and_newlines():
    record = {"check": "nccl", "passed": False, "summary": "a | b\nc", "details": {"violations": ["x|y"]}}
    text = render_markdown(build_report([record], "t"))
    assert "| nccl | FAIL | a \\| b c |  |" in text
    assert "- x\\|y" in text


def test_junit_has_one_testcase_per_check_and_a_failure_for_nvbandwidth(report):
    root = ET.fromstring(render_junit(report))
    assert root.tag == "testsuites"
    assert (root.get("tests"), root.get("failures"), root.get("time")) == ("3", "1", "60.750")
    suite = root.find("testsuite")
    assert suite.get("name") == "gpu_fabric.mnnvl.verify"
    assert suite.get("timestamp") == "2026-12-01T10:01:02.500000Z"
    cases = suite.findall("testcase")
    assert [(case.get("name"), case.get("time")) for case in cases] == [
        ("cliques", "1.250"),
        ("imex_channel", "12.000"),
        ("nvbandwidth", "47.500"),
    ]
    assert cases[0].find("failure") is None
    failure = cases[2].find("failure")
    assert failure.get("message") == "1 of 56 GPU pairs below 765.00 GB/s: 0->5 402.11 GB/s"
    assert failure.text.splitlines() == [
        "1 of 56 GPU pairs below 765.00 GB/s: 0->5 402.11 GB/s",
        "GPU 0 -> GPU 5: 402.11 GB/s is below 765.00 GB/s",
        "pair 0 -> 5: 402.11 GB/s",
    ]
    details = json.loads(cases[1].find("system-out").text)
    assert details["node"] == "gb200-r0-t0"


class CellCollector(HTMLParser):
    """Collects the heatmap's cells as (row, column, class, text)."""

    def __init__(self):
        super().__init__()
        self.in_heatmap = False
        self.row = -1
        self.column = -1
        self.cell = None
        self.cells = []

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        if tag == "table" and attributes.get("class") == "heatmap":
            self.in_heatmap = True
        elif self.in_heatmap and tag == "tr":
            self.row += 1
            self.column = -1
        elif self.in_heatmap and tag == "td":
            self.column += 1
            self.cell = [self.row - 1, self.column, attributes.get("class"), "", attributes.get("title")]

    def handle_data(self, data):
        if self.cell is not None:
            self.cell[3] += data

    def handle_endtag(self, tag):
        if tag == "td" and self.cell is not None:
            self.cells.append(tuple(self.cell))
            self.cell = None
        elif tag == "table":
            self.in_heatmap = False


def test_html_heatmap_marks_the_failing_cell_and_the_diagonal(report):
    page = render_html(report)
    collector = CellCollector()
    collector.feed(page)
    cells = {(row, column): (css, text, title) for row, column, css, text, title in collector.cells}
    assert len(cells) == 64
    assert [key for key, value in cells.items() if value[0] == "cell-fail"] == [(0, 5)]
    assert cells[(0, 5)] == ("cell-fail", "402.11", "GPU 0 -> GPU 5: 402.11 GB/s (below the threshold)")
    assert sorted(key for key, value in cells.items() if value[0] == "na") == [(i, i) for i in range(8)]
    assert cells[(3, 7)][:2] == ("cell-ok", "821.92")
    assert sum(1 for value in cells.values() if value[0] == "cell-ok") == 55
    assert (
        "outlined cells are below the threshold of 765.00 GB/s; GPUs 0-3 on gb200-r0-t0; GPUs 4-7 on gb200-r0-t1"
        in page
    )
    assert '<th title="GPU 5 on gb200-r0-t1">5</th>' in page
    assert "<tr><th>cluster</th><td>https://10.0.0.10:6443 (Kubernetes v1.34.4)</td></tr>" in page
    assert "<tr><th>threshold (GB/s)</th><td>765.00</td></tr>" in page
    assert "<tr><th>channel0</th><td><code>crw-rw-rw- 1 root root 501, 0 Jan  5 08:31 channel0</code></td></tr>" in page
    assert '<p class="fail">FAILED: 2 of 3 checks passed.' in page


def test_heat_colour_runs_from_red_at_the_low_end_to_green_at_the_top():
    assert heat_colour(402.11, 402.11, 822.16) == "hsl(0, 70%, 80%)"
    assert heat_colour(822.16, 402.11, 822.16) == "hsl(120, 70%, 80%)"
    assert heat_colour(612.135, 402.11, 822.16) == "hsl(60, 70%, 80%)"
    assert heat_colour(5.0, 5.0, 5.0) == "hsl(120, 70%, 80%)"


def test_html_escapes_record_text():
    record = {"check": "nccl", "passed": False, "summary": "<script>alert(1)</script>", "details": {}}
    page = render_html(build_report([record], "t & u"))
    assert "<script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<title>t &amp; u</title>" in page


def test_json_is_stable_and_round_trips(report):
    text = render_json(report)
    assert text == render_json(build_report(load_records(str(RECORDS)), "GB200 rack r0"))
    data = json.loads(text)
    assert data["checks"][2]["details"]["failing_pairs"] == [{"src": 0, "dst": 5, "gbps": 402.11}]
    assert data["totals"]["failed"] == 1


def test_render_report_names_the_files():
    files = render_report(load_records(str(RECORDS)), "t", ["junit", "markdown"])
    assert [(item.format, item.name) for item in files] == [("junit", "report.junit.xml"), ("markdown", "report.md")]
    assert re.match(r'<\?xml version="1.0" encoding="utf-8"\?>\n<testsuites ', files[0].content)


def test_nccl_rows_show_the_size_in_binary_units():
    record = {
        "check": "nccl",
        "passed": True,
        "summary": "ok",
        "details": {"rows": [{"size_bytes": 1 << 30, "busbw_gbps": 816.93, "wrong": 0}, {"size_bytes": 1536}]},
    }
    text = render_markdown(build_report([record], "t"))
    assert (
        "| size | bytes | bus bandwidth (GB/s) | wrong |\n| --- | --- | --- | --- |\n"
        "| 1 GiB | 1073741824 | 816.93 | 0 |\n| 1536 B | 1536 | N/A | 0 |\n"
    ) in text
    assert [binary_size(size) for size in (8, 3 << 20, 1 << 33)] == ["8 B", "3 MiB", "8 GiB"]
