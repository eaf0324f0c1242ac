# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The report's trays due next: skipped, failed, then the verified ones by the end of their verdict."""

from __future__ import annotations

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.report_model import build_report
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.report_records import load_records, normalise_record
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.report_render import render_html, render_markdown

from tests.conftest import FIXTURES

RUN = "r1"


def record(rack, nodes, skipped=(), failed=(), check="nvbandwidth", finished="2026-12-06T10:05:00.250000Z"):
    measured = [node for node in nodes if node not in dict(skipped)]
    raw = {
        "check": check,
        "rack": rack,
        "run_id": RUN,
        "outcome": "failed" if failed else "passed",
        "verdict": "failed" if failed else "passed",
        "passed": not failed,
        "summary": f"rack {rack}: " + ("GPU 5 lost a link" if failed else "every pair above the threshold"),
        "nodes": measured,
        "failed_nodes": list(failed),
        "node_problems": {node: f"{node} lost a link" for node in failed},
        "started": "2026-12-06T10:00:00Z",
        "finished": finished,
        "trays": {
            "expected": len(nodes),
            "found": list(nodes),
            "skipped": [{"node": node, "reason": reason} for node, reason in skipped],
        },
        "details": {},
    }
    return normalise_record(raw, f"records/{check}/{rack}.json")


def due_of(*records, valid_hours=168.0):
    return build_report(list(records), "t", RUN, valid_hours=valid_hours)["due"]


def test_skipped_then_failed_then_verified_by_the_end_of_their_validity():
    due = due_of(
        record(
            "rack1",
            ["r1-t0", "r1-t1", "r1-t2", "r1-t10"],
            skipped=[("r1-t2", "NotReady (NodeStatusUnknown)")],
            failed=["r1-t10"],
        ),
        record("rack0", ["r0-t0", "r0-t1"], skipped=[("r0-t1", "cordoned")]),
        valid_hours=24,
    )
    assert due == [
        {
            "node": "r0-t1",
            "rack": "rack0",
            "due": "2026-12-06T10:05:00Z",
            "reason": "skipped: cordoned",
            "verdict": "skipped",
        },
        {
            "node": "r1-t2",
            "rack": "rack1",
            "due": "2026-12-06T10:05:00Z",
            "reason": "skipped: NotReady (NodeStatusUnknown)",
            "verdict": "skipped",
        },
        {
            "node": "r1-t10",
            "rack": "rack1",
            "due": "2026-12-06T10:05:00Z",
            "reason": "nvbandwidth failed: r1-t10 lost a link",
            "verdict": "failed",
        },
        # the verified ones a day after the run's finish, tray by tray in natural order
        {
            "node": "r0-t0",
            "rack": "rack0",
            "due": "2026-12-07T10:05:00Z",
            "reason": "passed nvbandwidth",
            "verdict": "passed",
        },
        {
            "node": "r1-t0",
            "rack": "rack1",
            "due": "2026-12-07T10:05:00Z",
            "reason": "passed nvbandwidth",
            "verdict": "passed",
        },
        {
            "node": "r1-t1",
            "rack": "rack1",
            "due": "2026-12-07T10:05:00Z",
            "reason": "passed nvbandwidth",
            "verdict": "passed",
        },
    ]


def test_a_tray_the_run_chose_to_leave_comes_last_with_no_due_time():
    due = due_of(
        record(
            "rack0",
            ["t0", "t1", "t2", "t3"],
            skipped=[("t1", "not due (passed until 2026-12-10T08:00:00Z)"), ("t2", "not selected"), ("t3", "busy")],
        )
    )
    assert [(entry["node"], entry["due"], entry["reason"]) for entry in due] == [
        ("t3", "2026-12-06T10:05:00Z", "skipped: busy"),
        ("t0", "2026-12-13T10:05:00Z", "passed nvbandwidth"),
        ("t1", None, "not verified by this run: not due (passed until 2026-12-10T08:00:00Z)"),
        ("t2", None, "not verified by this run: not selected"),
    ]


def test_a_tray_skipped_for_its_state_by_one_check_and_by_choice_by_another_is_due_for_its_state():
    due = due_of(
        record("rack0", ["t0", "t1"], skipped=[("t1", "not selected")], check="nccl"),
        record("rack0", ["t0", "t1"], skipped=[("t1", "GPUs in use")]),
    )
    assert due[0] == {
        "node": "t1",
        "rack": "rack0",
        "due": "2026-12-06T10:05:00Z",
        "reason": "skipped: GPUs in use",
        "verdict": "skipped",
    }


def test_without_a_finish_time_nothing_has_a_due_time():
    due = due_of(record("rack0", ["t0", "t1"], skipped=[("t1", "busy")], finished=None))
    assert [(entry["node"], entry["due"]) for entry in due] == [("t1", None), ("t0", None)]


def test_the_pages_list_the_first_20_then_say_how_many_more():
    report = build_report(
        load_records(str(FIXTURES / "verification_records" / "records")), "t", "20261201T101500Z-ab12"
    )
    assert len(report["due"]) == 54
    markdown = render_markdown(report)
    section = markdown[markdown.index("## Due next") :]
    lines = section.splitlines()
    assert lines[2] == (
        "The trays by when each is due for its next verification: the trays this run skipped or failed are due at "
        "its finish, a passed one 168 h after it."
    )
    assert lines[4:7] == [
        "| tray | rack | due | reason |",
        "| --- | --- | --- | --- |",
        "| gb200-r0-t0 | rack0 | 2026-12-01T10:17:31Z | skipped: GPUs in use: 4 of 4 nvidia.com/gpu held by "
        "training/llm-pretrain-worker-0 (4) |",
    ]
    assert lines[24] == (
        "| gb200-r1-t3 | rack1 | 2026-12-01T10:17:31Z | nvbandwidth failed: GPU 13 (gb200-r1-t3) -> "
        "GPU 45 (gb200-r1-t11): 402.11 GB/s < 765.00 GB/s (floor rule) |"
    )
    assert len([line for line in lines if line.startswith("| gb200-")]) == 20
    assert section.endswith("\nand 34 more trays (report.json lists them all)\n")
    html = render_html(report)
    assert '<h2 id="due-next">Due next</h2>' in html
    assert html.count('<tr><td class="incomplete">gb200-') == 18
    assert '<tr><td class="fail">gb200-r1-t3</td><td>rack1</td><td>2026-12-01T10:17:31Z</td>' in html
    assert "<p>and 34 more trays (report.json lists them all)</p>" in html
