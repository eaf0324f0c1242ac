# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

import json
import re
import shutil
import xml.etree.ElementTree as ET
from html.parser import HTMLParser

import pytest
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import checks, report_render
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.checks.views import binary_size
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.rank_placement import gpu_placement
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.report_model import (
    build_report,
    coverage_of,
    duration_seconds,
    tray_verdicts,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.report_page import not_current_words
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.report_records import (
    is_current,
    load_records,
    normalise_record,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.report_render import (
    ReportError,
    markdown_text,
    render_html,
    render_json,
    render_junit,
    render_markdown,
    render_report,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.report_sections import heat_colour, trays_measured

from tests.conftest import FIXTURES

RECORDS = FIXTURES / "verification_records" / "records"
RUN = "20261201T101500Z-ab12"
OLD_RUN = "20261124T083000Z-7c01"
TITLE = "GB200 NVL72 fleet a"


@pytest.fixture
def records():
    return load_records(str(RECORDS))


@pytest.fixture
def report(records):
    return build_report(records, TITLE, RUN)


def copy_records(tmp_path):
    directory = tmp_path / "records"
    shutil.copytree(RECORDS, directory)
    return directory


def rewrite(path, **changes):
    record = json.loads(path.read_text())
    record.update(changes)
    path.write_text(json.dumps(record))


# ----------------------------------------------------------------------------------------- loading


def tray_counts(**counts: int) -> dict:
    """The counts of report_model.coverage_of: every state, 0 unless given."""
    states = ("trays", "declared", "found", "verified", "failed", "skipped", "unverified", "unmeasured", "missing")
    return {state: counts.get(state, 0) for state in states}


def rack_tray_counts(**counts: int) -> dict:
    """A rack's tray counts (report_model.racks_of): the coverage's and the trays it expects."""
    return dict(tray_counts(**counts), expected=counts.get("expected", 0))


def test_records_are_read_per_check_and_rack(records):
    assert [(record["check"], record["rack"], record["run_id"]) for record in records] == [
        ("cliques", "rack0", RUN),
        ("cliques", "rack1", RUN),
        ("cliques", "rack2", RUN),
        ("imex_channel", "rack0", RUN),
        ("imex_channel", "rack1", RUN),
        ("imex_channel", "rack2", RUN),
        ("nccl", "rack0", OLD_RUN),
        ("nvbandwidth", "rack0", RUN),
        ("nvbandwidth", "rack1", RUN),
        ("nvbandwidth", "rack2", RUN),
    ]
    assert records[8]["source"] == str(RECORDS / "nvbandwidth" / "rack1.json")


def test_a_record_of_an_older_run_is_not_current(records):
    nccl = records[6]
    assert is_current(nccl, RUN) is False
    assert is_current(nccl, OLD_RUN) is True
    assert is_current(nccl, "") is True  # no run named: every record counts
    assert all(is_current(record, RUN) for record in records if record["check"] != "nccl")


def test_a_record_of_0_1_0_is_rack_dash_with_its_nodes_from_the_details(tmp_path):
    (tmp_path / "nvbandwidth.json").write_text(
        json.dumps(
            {
                "check": "nvbandwidth",
                "passed": False,
                "summary": "1 of 56 GPU pairs below 765.00 GB/s: 0->5 402.11 GB/s",
                "details": {"clique": "1a2b3c4d.1", "nodes": ["gb200-r0-t0", "gb200-r0-t1"]},
            }
        )
    )
    (record,) = load_records(str(tmp_path))
    assert (record["check"], record["rack"], record["run_id"], record["outcome"]) == ("nvbandwidth", "-", "", "failed")
    assert record["nodes"] == ["gb200-r0-t0", "gb200-r0-t1"]
    assert record["clique"] == "1a2b3c4d.1"
    assert record["trays"] == {"expected": 0, "found": [], "skipped": []}
    assert is_current(record, RUN) is False
    report = build_report([record], "t", RUN)
    assert report["totals"]["checks"] == 0
    assert report["summary"] == (f"ERROR: no check of run {RUN} wrote a record; 0 of 0 GPU trays verified; 0 skipped")
    assert render_markdown(report).splitlines()[6] == "- not run this time: nvbandwidth (record without a run id)"


def test_unreadable_and_malformed_records_are_errors_naming_the_file(tmp_path):
    directory = copy_records(tmp_path)
    bad = directory / "nccl"
    (bad / "rack1.json").write_text("{not json")
    (bad / "rack2.json").write_text(json.dumps({"check": "nccl", "rack": "rack2", "passed": True}))
    (bad / "rack3.json").write_text(json.dumps({"check": "nccl", "passed": "yes", "summary": "x", "run_id": RUN}))
    (bad / "rack4.json").write_text(json.dumps({"check": "nccl", "passed": True, "summary": "x", "outcome": "done"}))
    (bad / "rack5.json").write_text(json.dumps({"check": "nccl", "passed": True, "summary": "x", "outcome": "failed"}))
    (bad / "notes.txt").write_text("ignored")
    (bad / "rack6.json.tmp").write_text("a record being written")
    records = {record["rack"]: record for record in load_records(str(directory)) if record["check"] == "nccl"}
    assert sorted(records) == ["rack0", "rack1", "rack2", "rack3", "rack4", "rack5"]
    assert records["rack1"]["summary"].startswith(f"the record {bad / 'rack1.json'} could not be read (")
    assert [records[rack]["summary"] for rack in ("rack2", "rack3", "rack4", "rack5")] == [
        f"the record {bad / 'rack2.json'} lacks the keys summary; run the check again to rewrite it",
        f"the record {bad / 'rack3.json'} has passed='yes', not true or false; run the check again to rewrite it",
        f"the record {bad / 'rack4.json'} has outcome='done', not passed, failed, incomplete, error; "
        "run the check again to rewrite it",
        f"the record {bad / 'rack5.json'} has outcome=failed but passed=true; run the check again to rewrite it",
    ]
    assert all(records[rack]["passed"] is False for rack in ("rack1", "rack2", "rack3", "rack4", "rack5"))
    assert all(records[rack]["verdict"] == "error" for rack in ("rack1", "rack2", "rack3", "rack4", "rack5"))
    # a file that says nothing of its run is an error of every run until it is rewritten; the fabric
    # failure of the run still decides the verdict
    report = build_report(load_records(str(directory)), "t", RUN)
    assert [(entry["check"], entry["rack"]) for entry in report["failed_checks"]] == [("nvbandwidth", "rack1")]
    assert [(entry["check"], entry["rack"]) for entry in report["error_checks"]] == [
        ("nccl", "rack1"),
        ("nccl", "rack2"),
        ("nccl", "rack3"),
        ("nccl", "rack4"),
        ("nccl", "rack5"),
    ]
    assert report["verdict"] == "failed" and report["summary"].startswith("FAILED: ")
    assert "could not run (not a verdict on the fabric): nccl (rack1, rack2, rack3, rack4, rack5)" in report["summary"]


def test_duration_needs_both_timestamps():
    assert duration_seconds({"started": "2026-12-01T10:00:00Z"}) is None
    assert duration_seconds({"started": "2026-12-01T10:00:00Z", "finished": "2026-12-01T10:00:03Z"}) == 3.0
    assert duration_seconds({"started": "yesterday", "finished": "2026-12-01T10:00:03Z"}) is None


# ----------------------------------------------------------------------------------------- the report as data


def test_only_the_records_of_the_run_count(report):
    assert report["totals"] == {
        "racks": 3,
        "checks": 9,
        "passed": 8,
        "failed": 1,
        "errors": 0,
        "incomplete": 1,
        "not_current": 1,
    }
    assert report["passed"] is False
    assert [(record["rack"], record["check"]) for record in report["checks"]] == [
        ("rack0", "cliques"),
        ("rack0", "imex_channel"),
        ("rack0", "nvbandwidth"),
        ("rack1", "cliques"),
        ("rack1", "imex_channel"),
        ("rack1", "nvbandwidth"),
        ("rack2", "cliques"),
        ("rack2", "imex_channel"),
        ("rack2", "nvbandwidth"),
    ]
    assert [(entry["check"], entry["rack"]) for entry in report["failed_checks"]] == [("nvbandwidth", "rack1")]
    assert [(entry["check"], entry["rack"]) for entry in report["incomplete_checks"]] == [("nvbandwidth", "rack0")]
    assert report["not_current"] == [
        {
            "check": "nccl",
            "rack": "rack0",
            "run_id": OLD_RUN,
            "outcome": "passed",
            "passed": True,
            "summary": report["not_current"][0]["summary"],
            "finished": "2026-11-24T08:44:52.019877Z",
            "source": str(RECORDS / "nccl" / "rack0.json"),
        }
    ]
    assert report["summary"] == (
        "FAILED: 3 racks, 8 of 9 checks passed; failed: nvbandwidth (rack1); incomplete, allowed: nvbandwidth (rack0); "
        "33 of 54 GPU trays verified; 18 skipped; 3 failed"
    )
    # the time window of this run, not of the older NCCL record
    assert (report["started"], report["generated"]) == ("2026-12-01T10:15:01.104512Z", "2026-12-01T10:17:31.904466Z")
    assert [record["duration_seconds"] for record in report["checks"]][5] == 105.786


def test_the_run_starts_and_ends_at_the_instants_its_records_name_whatever_their_time_zone(records):
    # 19:20+09:00 is 10:20Z, after every other record of the run; 19:10+09:00 (10:10Z) before every other start.
    # As text both sort before the others' "2026-12-01T10:...Z", which picked the wrong run times.
    records[0] = dict(records[0], started="2026-12-01T19:10:00+09:00", finished="2026-12-01T19:20:00+09:00")
    report = build_report(records, TITLE, RUN)
    assert (report["started"], report["generated"]) == ("2026-12-01T19:10:00+09:00", "2026-12-01T19:20:00+09:00")
    records[0] = dict(records[0], started="2026-12-01T10:15:00-01:00", finished="2026-12-01T10:15:00-01:00")
    report = build_report(records, TITLE, RUN)  # 11:15Z: the latest finish, and no start before 10:15:01Z
    assert (report["started"], report["generated"]) == ("2026-12-01T10:15:01.104512Z", "2026-12-01T10:15:00-01:00")
    assert build_report(records[1:1], TITLE, RUN)["generated"] is None


def test_without_a_run_id_every_record_counts(records):
    report = build_report(records, TITLE)
    assert report["totals"]["checks"] == 10
    assert report["totals"]["not_current"] == 0
    assert report["racks"]["rack0"]["checks"] == {
        "cliques": "passed",
        "imex_channel": "passed",
        "nvbandwidth": "incomplete",
        "nccl": "passed",
    }
    # the older NCCL run skipped gb200-r0-t2..t17 and this run's nvbandwidth t0..t16: every tray of rack0
    assert report["racks"]["rack0"]["trays"] == rack_tray_counts(
        trays=18, declared=18, found=18, skipped=18, expected=18
    )
    assert report["coverage"]["counts"] == tray_counts(
        trays=54, declared=54, found=54, verified=32, failed=3, skipped=19
    )
    assert report["trays"]["gb200-r0-t17"]["verdict"] == "skipped"
    assert (
        report["trays"]["gb200-r0-t17"]["summary"] == "skipped: not selected (gpu_fabric_verify_nodes_per_clique is 2)"
    )
    (t2,) = [entry for entry in report["coverage"]["skipped"] if entry["node"] == "gb200-r0-t2"]
    assert t2 == {
        "node": "gb200-r0-t2",
        "rack": "rack0",
        "reason": "GPUs in use: 4 of 4 nvidia.com/gpu held by training/llm-pretrain-worker-2 (4); "
        "not selected (gpu_fabric_verify_nodes_per_clique is 2)",
        "checks": ["nvbandwidth", "nccl"],
    }


def test_the_run_of_an_older_record_reports_that_run_alone(records):
    report = build_report(records, TITLE, OLD_RUN)
    assert report["passed"] is True
    assert report["summary"] == "PASSED: 1 rack, 1 of 1 checks passed; 2 of 18 GPU trays verified; 16 skipped"
    assert report["coverage"]["unmeasured"] == []
    assert report["racks"]["rack0"]["trays"] == rack_tray_counts(
        trays=18, declared=18, found=18, verified=2, skipped=16, expected=18
    )
    assert not_current_words(report) == (
        f"cliques (records of run {RUN}), imex_channel (records of run {RUN}), nvbandwidth (records of run {RUN})"
    )


def test_an_older_record_of_a_check_of_this_run_is_named_with_its_rack(tmp_path):
    directory = copy_records(tmp_path)
    rewrite(directory / "nccl" / "rack0.json", rack="rack3")
    (directory / "nccl" / "rack0.json").rename(directory / "nvbandwidth" / "rack3.json")
    rewrite(directory / "nvbandwidth" / "rack3.json", check="nvbandwidth", passed=False, outcome="failed")
    report = build_report(load_records(str(directory)), "t", RUN)
    assert not_current_words(report) == f"nvbandwidth on rack3 (record of run {OLD_RUN})"
    assert "rack3" not in report["racks"]
    assert report["totals"]["failed"] == 1


def test_coverage_counts_the_trays_found_verified_failed_and_skipped(report):
    coverage = report["coverage"]
    assert coverage["counts"] == tray_counts(trays=54, declared=54, found=54, verified=33, failed=3, skipped=18)
    assert coverage["trays"][:3] == ["gb200-r0-t0", "gb200-r0-t1", "gb200-r0-t2"]
    assert coverage["trays"][17] == "gb200-r0-t17"  # natural order: t2 before t10
    # of rack0 only the one tray nvbandwidth did not skip; rack1 less the 3 it blamed; rack2 less t7: the trays'
    # own verdicts, as report["trays"] gives them
    failed = ["gb200-r1-t3", "gb200-r1-t11", "gb200-r1-t15"]
    assert coverage["verified"] == [
        "gb200-r0-t17",
        *[f"gb200-r1-t{tray}" for tray in range(18) if f"gb200-r1-t{tray}" not in failed],
        *[f"gb200-r2-t{tray}" for tray in range(18) if tray != 7],
    ]
    assert coverage["failed"] == failed
    assert coverage["verified"] == [node for node, tray in report["trays"].items() if tray["verdict"] == "passed"]
    # rack0's 17 busy trays were measured by cliques and imex_channel, but nvbandwidth skipped them: not verified
    assert coverage["skipped"] == [
        {
            "node": f"gb200-r0-t{tray}",
            "rack": "rack0",
            "reason": f"GPUs in use: 4 of 4 nvidia.com/gpu held by training/llm-pretrain-worker-{tray} (4)",
            "checks": ["nvbandwidth"],
        }
        for tray in range(17)
    ] + [
        {
            "node": "gb200-r2-t7",
            "rack": "rack2",
            "reason": "NotReady (NodeStatusUnknown)",
            "checks": ["cliques", "imex_channel", "nvbandwidth"],
        }
    ]
    assert report["racks"]["rack0"]["trays"] == rack_tray_counts(
        trays=18, declared=18, found=18, verified=1, skipped=17, expected=18
    )


def test_racks_carry_their_clique_verdicts_and_tray_counts(report):
    assert report["racks"]["rack1"] == {
        "clique": "5e6f7a8b-1111-4000-8000-00000000c11f.1",
        "verdict": "failed",
        "checks": {"cliques": "passed", "imex_channel": "passed", "nvbandwidth": "failed"},
        "trays": rack_tray_counts(trays=18, declared=18, found=18, verified=15, failed=3, expected=18),
        "skipped_trays": [],
        "missing_trays": [],
        "failed_trays": ["gb200-r1-t3", "gb200-r1-t11", "gb200-r1-t15"],
    }
    assert report["racks"]["rack2"]["trays"] == rack_tray_counts(
        trays=18, declared=18, found=18, verified=17, skipped=1, expected=18
    )
    assert report["racks"]["rack2"]["skipped_trays"] == [
        {"node": "gb200-r2-t7", "reason": "NotReady (NodeStatusUnknown)"}
    ]
    assert report["racks"]["rack0"]["skipped_trays"] == [
        {
            "node": f"gb200-r0-t{tray}",
            "reason": f"GPUs in use: 4 of 4 nvidia.com/gpu held by training/llm-pretrain-worker-{tray} (4)",
        }
        for tray in range(17)
    ]
    assert report["racks"]["rack0"]["failed_trays"] == []
    assert [report["racks"][rack]["verdict"] for rack in ("rack0", "rack1", "rack2")] == [
        "incomplete",
        "failed",
        "passed",
    ]


def test_each_tray_gets_its_worst_verdict(report):
    trays = report["trays"]
    assert len(trays) == 54
    verdicts = {}
    for node, tray in trays.items():
        verdicts.setdefault(tray["verdict"], []).append(node)
    assert verdicts["failed"] == ["gb200-r1-t3", "gb200-r1-t11", "gb200-r1-t15"]
    assert verdicts["skipped"] == [f"gb200-r0-t{tray}" for tray in range(17)] + ["gb200-r2-t7"]
    assert len(verdicts["passed"]) == 33
    assert verdicts["passed"][0] == "gb200-r0-t17"
    assert trays["gb200-r1-t3"] == {
        "verdict": "failed",
        "rack": "rack1",
        "checks_failed": ["nvbandwidth"],
        "checks_passed": ["cliques", "imex_channel"],
        "summary": "nvbandwidth failed: GPU 13 (gb200-r1-t3) -> GPU 45 (gb200-r1-t11): 402.11 GB/s < 765.00 GB/s "
        "(floor rule)",
        "skip_reasons": [],
        # per check, what node_verdict merges into the tray's state
        "checks": {
            "cliques": {"outcome": "passed"},
            "imex_channel": {"outcome": "passed"},
            "nvbandwidth": {
                "outcome": "failed",
                "summary": "GPU 13 (gb200-r1-t3) -> GPU 45 (gb200-r1-t11): 402.11 GB/s < 765.00 GB/s (floor rule)",
            },
        },
    }
    assert trays["gb200-r2-t7"] == {
        "verdict": "skipped",
        "rack": "rack2",
        "checks_failed": [],
        "checks_passed": [],
        "summary": "skipped: NotReady (NodeStatusUnknown)",
        "skip_reasons": ["NotReady (NodeStatusUnknown)"],
        "checks": {
            check: {"outcome": "skipped", "reason": "NotReady (NodeStatusUnknown)"}
            for check in ("cliques", "imex_channel", "nvbandwidth")
        },
    }
    # the other 15 trays of the failed rack1 nvbandwidth run were measured and not blamed
    assert trays["gb200-r1-t0"]["summary"] == "passed cliques, imex_channel, nvbandwidth"
    # a busy tray of rack0: cliques and imex_channel passed on it, but nvbandwidth skipped it, so it is not verified
    assert trays["gb200-r0-t4"] == {
        "verdict": "skipped",
        "rack": "rack0",
        "checks_failed": [],
        "checks_passed": ["cliques", "imex_channel"],
        "summary": "skipped: GPUs in use: 4 of 4 nvidia.com/gpu held by training/llm-pretrain-worker-4 (4)",
        "skip_reasons": ["GPUs in use: 4 of 4 nvidia.com/gpu held by training/llm-pretrain-worker-4 (4)"],
        # the checks that measured it keep their word; nvbandwidth skipped it
        "checks": {
            "cliques": {"outcome": "passed"},
            "imex_channel": {"outcome": "passed"},
            "nvbandwidth": {
                "outcome": "skipped",
                "reason": "GPUs in use: 4 of 4 nvidia.com/gpu held by training/llm-pretrain-worker-4 (4)",
            },
        },
    }
    # rack0's one free tray: no check skipped it (the incomplete nvbandwidth record measured no tray at all)
    assert trays["gb200-r0-t17"] == {
        "verdict": "passed",
        "rack": "rack0",
        "checks_failed": [],
        "checks_passed": ["cliques", "imex_channel"],
        "summary": "passed cliques, imex_channel; not measured by nvbandwidth (incomplete)",
        "skip_reasons": [],
        "checks": {"cliques": {"outcome": "passed"}, "imex_channel": {"outcome": "passed"}},  # no nvbandwidth word
    }


def test_a_failure_that_names_no_tray_vouches_for_none():
    def record(check, passed, failed_nodes=()):
        return normalise_record(
            {
                "check": check,
                "rack": "rack9",
                "passed": passed,
                "summary": f"{check} summary",
                "nodes": ["a", "b"],
                "failed_nodes": list(failed_nodes),
            },
            f"{check}.json",
        )

    trays = tray_verdicts([record("cliques", True), record("nvbandwidth", False)])
    assert trays["a"]["verdict"] == "skipped"
    assert trays["a"]["checks"] == {"cliques": {"outcome": "passed"}}  # nvbandwidth said nothing of the tray
    assert trays["a"]["summary"] == "not verified: nvbandwidth failed without naming a tray"
    trays = tray_verdicts([record("cliques", True), record("nvbandwidth", False, ["b"])])
    assert (trays["a"]["verdict"], trays["b"]["verdict"]) == ("passed", "failed")
    assert trays["b"]["summary"] == "nvbandwidth failed: nvbandwidth summary"


def test_a_tray_one_check_skipped_is_not_verified_though_another_measured_it():
    def record(check, nodes, skipped=()):
        return normalise_record(
            {
                "check": check,
                "rack": "rack9",
                "passed": True,
                "summary": f"{check} summary",
                "nodes": nodes,
                "trays": {
                    "expected": 2,
                    "found": ["a", "b"],
                    "skipped": [{"node": n, "reason": "busy"} for n in skipped],
                },
            },
            f"{check}.json",
        )

    records = [record("cliques", ["a", "b"]), record("nvbandwidth", ["b"], skipped=["a"])]
    trays = tray_verdicts(records)
    assert trays["a"] == {
        "verdict": "skipped",
        "rack": "rack9",
        "checks_failed": [],
        "checks_passed": ["cliques"],
        "summary": "skipped: busy",
        "skip_reasons": ["busy"],
        "checks": {"cliques": {"outcome": "passed"}, "nvbandwidth": {"outcome": "skipped", "reason": "busy"}},
    }
    assert trays["b"]["verdict"] == "passed"
    coverage = coverage_of(records)
    assert coverage["verified"] == ["b"]
    assert coverage["skipped"] == [{"node": "a", "rack": "rack9", "reason": "busy", "checks": ["nvbandwidth"]}]
    assert coverage["counts"] == tray_counts(trays=2, declared=2, found=2, verified=1, skipped=1)


def test_json_is_stable_and_round_trips(report, records):
    text = render_json(report)
    assert text == render_json(build_report(records, TITLE, RUN))
    data = json.loads(text)
    nvbandwidth = data["checks"][5]
    assert (nvbandwidth["check"], nvbandwidth["rack"], nvbandwidth["outcome"]) == ("nvbandwidth", "rack1", "failed")
    assert len(nvbandwidth["details"]["matrix"]) == 72
    assert nvbandwidth["details"]["matrix"][13][45] == 402.11
    assert len(nvbandwidth["details"]["failing_pairs"]) == 143
    assert data["coverage"]["counts"]["verified"] == 33
    assert data["coverage"]["counts"]["failed"] == 3
    assert data["coverage"]["counts"]["skipped"] == 18
    assert data["trays"]["gb200-r1-t15"]["verdict"] == "failed"


# ----------------------------------------------------------------------------------------- Markdown


def test_markdown_starts_with_the_verdict_cluster_coverage_and_the_fleet_table(report):
    lines = render_markdown(report).splitlines()
    assert lines[:18] == [
        "# GB200 NVL72 fleet a",
        "",
        "**FAILED**: 3 racks, 8 of 9 checks passed; failed: nvbandwidth (rack1); incomplete, allowed: "
        "nvbandwidth (rack0).",
        "",
        "- cluster: https://10.0.0.10:6443 (Kubernetes v1.34.4)",
        "- coverage: 33 of 54 GPU trays verified; 18 skipped; 3 failed",
        f"- run: {RUN}",
        "- checks ran: 2026-12-01T10:15:01Z to 2026-12-01T10:17:31Z",
        f"- not run this time: nccl (record of run {OLD_RUN})",
        "",
        "| rack | cliques | imex_channel | nvbandwidth | trays verified |",
        "| --- | --- | --- | --- | --- |",
        "| rack0 | PASS | PASS | INCOMPLETE | 1 of 18, 17 skipped |",
        "| rack1 | PASS | PASS | FAIL | 15 of 18, 3 failed |",
        "| rack2 | PASS | PASS | PASS | 17 of 18, 1 skipped |",
        "",
        "## rack0",
        "",
    ]


def test_markdown_marks_a_check_a_rack_did_not_run_with_a_dash(records):
    text = render_markdown(build_report(records, TITLE))
    assert "| rack | cliques | imex_channel | nvbandwidth | nccl | trays verified |" in text
    assert "| rack1 | PASS | PASS | FAIL | \u2014 | 15 of 18, 3 failed |" in text
    assert "| rack0 | PASS | PASS | INCOMPLETE | PASS | 0 of 18, 18 skipped |" in text


def test_markdown_nvbandwidth_section_has_the_facts_and_only_the_failing_pairs_and_low_gpus(report):
    text = render_markdown(report)
    section = text[text.index("### nvbandwidth: FAIL") : text.index("## rack2")]
    lines = section.splitlines()
    assert lines[2] == (
        "rack rack1: 143 of 5112 GPU pairs below the threshold: GPU 62 on gb200-r1-t15: its 142 pairs average "
        "775.68 GB/s, 0.944 of the median 821.37: a GPU with lost NVLinks; 13->45 402.11 GB/s "
        "(gb200-r1-t3 -> gb200-r1-t11), below the floor 765.00"
    )
    facts = [line for line in lines if line.startswith("- ") and "(GB/s)" in line]
    assert facts == [
        "- NVLink peak per direction (GB/s): 900.00",
        "- threshold (GB/s): 765.00 (0.85 x 900.00 GB/s NVLink peak of NVIDIA-GB200)",
        "- median (GB/s): 821.37",
        "- reference rule (GB/s): 796.73",
        "- min / mean / max (GB/s): 402.11 / 820.05 / 822.16",
        "- SUM (GB/s): 4192105.20",
    ]
    assert "- trays measured: all 18 of the rack" in lines
    assert "- fraction of the strictest reference required: 0.97" in lines
    assert (
        "| GPU | tray | pairs | mean GB/s | median GB/s | fraction of the median |\n"
        "| --- | --- | --- | --- | --- | --- |\n"
        "| 62 | gb200-r1-t15 | 142 | 775.68 | 775.67 | 0.944 |\n"
    ) in section
    assert (
        "| source GPU | destination GPU | GB/s | fraction of the median | rule | trays |\n"
        "| --- | --- | --- | --- | --- | --- |\n"
        "| 13 | 45 | 402.11 | 0.490 | floor | gb200-r1-t3 -> gb200-r1-t11 |\n"
        "\n"
        "142 more failing pairs involve the low GPUs above; report.json lists every pair.\n"
    ) in section
    assert (
        "| tray | problem |\n| --- | --- |\n"
        "| gb200-r1-t3 | GPU 13 (gb200-r1-t3) -> GPU 45 (gb200-r1-t11): 402.11 GB/s < 765.00 GB/s (floor rule) |\n"
    ) in section
    # never a matrix in Markdown: no table is wider than the fleet table
    assert max(line.count("|") for line in text.splitlines()) == 7


def test_markdown_lists_the_skipped_trays_with_their_reasons(report):
    text = render_markdown(report).split("\n## Due next")[0]
    assert text.endswith(
        "## Skipped trays\n\n"
        "| tray | rack | reason | skipped by |\n"
        "| --- | --- | --- | --- |\n"
        + "".join(
            f"| gb200-r0-t{tray} | rack0 | GPUs in use: 4 of 4 nvidia.com/gpu held by "
            f"training/llm-pretrain-worker-{tray} (4) | nvbandwidth |\n"
            for tray in range(17)
        )
        + "| gb200-r2-t7 | rack2 | NotReady (NodeStatusUnknown) | cliques, imex_channel, nvbandwidth |\n"
    )
    section = text[text.index("## rack0") : text.index("## rack1")]
    assert "clique 1a2b3c4d-0000-4000-8000-00000000c11e.1; 1 of 18 GPU trays verified, 17 skipped\n" in section
    section = text[text.index("## rack2") :]
    assert "clique 9c0d1e2f-2222-4000-8000-00000000c120.1; 17 of 18 GPU trays verified, 1 skipped\n" in section
    assert "- trays measured: 17 of 18, not gb200-r2-t7\n" in section


def test_markdown_caps_long_lists(tmp_path):
    directory = copy_records(tmp_path)
    path = directory / "nvbandwidth" / "rack2.json"
    record = json.loads(path.read_text())
    record["details"]["failing_pairs"] = [
        {"src": 0, "dst": dst, "gbps": 770.0, "fraction_of_median": 0.937, "rule": "median", "low_gpu": None}
        for dst in range(1, 31)
    ]
    record["details"]["violations"] = [f"problem {n}" for n in range(25)]
    record["view"] = checks.get("nvbandwidth").view(record)  # as the check writes it
    path.write_text(json.dumps(record))
    text = render_markdown(build_report(load_records(str(directory)), "t", RUN))
    section = text[text.index("## rack2") :]
    assert section.count("| median | gb200-r2-t0 -> gb200-r2-t") == 20
    assert "10 more failing pairs not listed here; report.json lists every pair.\n" in section
    assert "- problem 19\n- and 5 more problems (report.json lists them all)\n" in section


def test_markdown_escapes_pipes_tags_and_line_breaks():
    assert markdown_text("a | b\nc") == "a \\| b c"
    assert markdown_text("<script>x</script> 3 < 4") == "\\<script>x\\</script> 3 < 4"
    assert markdown_text(None) == ""
    record = {"check": "nccl", "passed": False, "summary": "a | b\nc", "details": {"violations": ["x|y"]}}
    text = render_markdown(build_report([normalise_record(record, "nccl.json")], "t"))
    assert "| - | \u2014 | FAIL |" not in text
    assert "| - | FAIL | 0 of 0 |" in text
    assert "FAIL\n\na \\| b c\n" in text
    assert "- x\\|y" in text


def test_nccl_rows_show_the_size_in_binary_units(records):
    text = render_markdown(build_report(records, TITLE, OLD_RUN))
    assert (
        "| size | bytes | bus bandwidth (GB/s) | wrong |\n| --- | --- | --- | --- |\n"
        "| 1 GiB | 1073741824 | 761.33 | 0 |\n| 2 GiB | 2147483648 | 786.38 | 0 |\n"
    ) in text
    assert [binary_size(size) for size in (8, 1536, 3 << 20, 1 << 33)] == ["8 B", "1536 B", "3 MiB", "8 GiB"]


def test_templates_need_jinja2(monkeypatch, report):
    monkeypatch.setattr(report_render, "HAS_JINJA2", False)
    with pytest.raises(ReportError, match="need jinja2"):
        render_markdown(report)


# ----------------------------------------------------------------------------------------- JUnit XML


def test_junit_has_one_testcase_per_check_and_rack(report):
    root = ET.fromstring(render_junit(report))
    assert root.tag == "testsuites"
    assert (root.get("tests"), root.get("failures"), root.get("skipped"), root.get("errors")) == ("9", "1", "1", "0")
    suite = root.find("testsuite")
    assert suite.get("name") == "gpu_fabric.mnnvl.verify"
    assert suite.get("timestamp") == "2026-12-01T10:17:31.904466Z"
    cases = suite.findall("testcase")
    assert len(cases) == 9
    assert [(case.get("classname"), case.get("name")) for case in cases][:4] == [
        ("gpu_fabric.cliques", "rack0"),
        ("gpu_fabric.imex_channel", "rack0"),
        ("gpu_fabric.nvbandwidth", "rack0"),
        ("gpu_fabric.cliques", "rack1"),
    ]
    by_name = {(case.get("classname"), case.get("name")): case for case in cases}
    failure = by_name[("gpu_fabric.nvbandwidth", "rack1")].find("failure")
    assert failure.get("type") == "VerificationFailed"
    assert failure.get("message") == report["checks"][5]["summary"]
    assert failure.text.splitlines()[1] == (
        "gb200-r1-t3: GPU 13 (gb200-r1-t3) -> GPU 45 (gb200-r1-t11): 402.11 GB/s < 765.00 GB/s (floor rule)"
    )
    skipped = by_name[("gpu_fabric.nvbandwidth", "rack0")].find("skipped")
    assert skipped.get("message").startswith("rack rack0: 1 usable tray of 18, a nvbandwidth check needs at least 2")
    assert by_name[("gpu_fabric.nvbandwidth", "rack0")].find("failure") is None
    assert [case for case in cases if case.find("failure") is not None or case.find("skipped") is not None] == [
        by_name[("gpu_fabric.nvbandwidth", "rack0")],
        by_name[("gpu_fabric.nvbandwidth", "rack1")],
    ]
    out = json.loads(by_name[("gpu_fabric.nvbandwidth", "rack2")].find("system-out").text)
    assert "matrix" not in out["details"]
    assert out["trays"]["skipped"] == [{"node": "gb200-r2-t7", "reason": "NotReady (NodeStatusUnknown)"}]


def test_junit_fails_an_incomplete_check_that_was_not_allowed(tmp_path):
    directory = copy_records(tmp_path)
    rewrite(directory / "nvbandwidth" / "rack0.json", passed=False)
    report = build_report(load_records(str(directory)), "t", RUN)
    case = [c for c in ET.fromstring(render_junit(report)).iter("testcase") if c.get("name") == "rack0"][2]
    assert case.find("failure").get("type") == "VerificationIncomplete"
    assert case.find("skipped") is None
    assert report["summary"].startswith("FAILED: 3 racks, 7 of 9 checks passed; failed: nvbandwidth (rack0, rack1);")
    assert "| rack0 | PASS | PASS | INCOMPLETE | 1 of 18, 17 skipped |" in render_markdown(report)


# ----------------------------------------------------------------------------------------- HTML


class PageCollector(HTMLParser):
    """The fleet map's trays (class, title, label) and each heatmap's cells (row, column, class, title)."""

    def __init__(self):
        super().__init__()
        self.in_map = False
        self.map_depth = 0
        self.trays = []
        self.tray = None
        self.heatmaps = []
        self.row = -1
        self.column = -1
        self.in_heatmap = False
        self.elements = []

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        self.elements.append((tag, attributes))
        if tag == "div" and attributes.get("class") == "fleet-map":
            self.in_map, self.map_depth = True, 0
        elif self.in_map and tag == "div":
            self.map_depth += 1
        elif self.in_map and tag == "span":
            self.tray = [attributes.get("class"), attributes.get("title"), ""]
        if tag == "table" and (attributes.get("class") or "").startswith("heatmap"):
            self.in_heatmap, self.row = True, -1
            self.heatmaps.append({})
        elif self.in_heatmap and tag == "tr":
            self.row += 1
            self.column = -1
        elif self.in_heatmap and tag == "td":
            self.column += 1
            self.heatmaps[-1][(self.row - 1, self.column)] = (attributes.get("class"), attributes.get("title"))

    def handle_data(self, data):
        if self.tray is not None:
            self.tray[2] += data

    def handle_endtag(self, tag):
        if tag == "span" and self.tray is not None:
            self.trays.append(tuple(self.tray))
            self.tray = None
        elif tag == "div" and self.in_map:
            if self.map_depth == 0:
                self.in_map = False
            else:
                self.map_depth -= 1
        elif tag == "table":
            self.in_heatmap = False


@pytest.fixture
def page(report):
    collector = PageCollector()
    text = render_html(report)
    collector.feed(text)
    collector.text = text
    return collector


def test_html_fleet_map_has_one_cell_per_tray_coloured_by_its_verdict(page):
    assert len(page.trays) == 54
    classes = [css for css, _title, _label in page.trays]
    assert classes.count("tray tray-failed") == 3
    assert classes.count("tray tray-skipped") == 18
    assert classes.count("tray tray-passed") == 33
    by_label = {title.split(":")[0]: (css, title, label) for css, title, label in page.trays}
    assert by_label["gb200-r1-t3"] == (
        "tray tray-failed",
        "gb200-r1-t3: nvbandwidth failed: GPU 13 (gb200-r1-t3) -> GPU 45 (gb200-r1-t11): 402.11 GB/s < 765.00 GB/s "
        "(floor rule)",
        "t3",
    )
    assert by_label["gb200-r2-t7"] == ("tray tray-skipped", "gb200-r2-t7: skipped: NotReady (NodeStatusUnknown)", "t7")
    assert by_label["gb200-r0-t4"] == (
        "tray tray-skipped",
        "gb200-r0-t4: skipped: GPUs in use: 4 of 4 nvidia.com/gpu held by training/llm-pretrain-worker-4 (4)",
        "t4",
    )
    assert by_label["gb200-r0-t17"] == (
        "tray tray-passed",
        "gb200-r0-t17: passed cliques, imex_channel; not measured by nvbandwidth (incomplete)",
        "t17",
    )
    # the tooltip's "<" is escaped in the page
    assert "402.11 GB/s &lt; 765.00 GB/s (floor rule)" in page.text


def test_html_fleet_table_and_heatmaps(page):
    text = page.text
    assert '<td class="fail" title="rack rack1: 143 of 5112 GPU pairs below the threshold: ' in text
    assert '<a href="#rack1-nvbandwidth">FAIL</a></td>' in text
    assert '<td class="incomplete" title="rack rack0: 1 usable tray of 18' in text
    rack1, rack2 = page.heatmaps
    assert len(rack1) == 72 * 72 and len(rack2) == 68 * 68
    failing = sorted(key for key, (css, _title) in rack1.items() if css == "cell-fail")
    assert len(failing) == 143
    assert (13, 45) in failing and (62, 0) in failing and (0, 62) in failing
    assert rack1[(13, 45)] == (
        "cell-fail",
        "GPU 13 -> GPU 45 (gb200-r1-t3 -> gb200-r1-t11): 402.11 GB/s (fails the floor rule)",
    )
    assert rack1[(3, 7)] == ("cell-ok", "GPU 3 -> GPU 7: 821.92 GB/s")
    assert sorted(key for key, (css, _title) in rack1.items() if css == "na") == [(i, i) for i in range(72)]
    assert not any(css == "cell-fail" for css, _title in rack2.values())
    assert '<th title="GPU 45 on gb200-r1-t11">45</th>' in text
    assert (
        "outlined cells are below the floor of 765.00 GB/s or the reference rule (796.73 GB/s); "
        "hover a cell for its value; GPUs 0-3 on gb200-r1-t0;" in text
    )
    assert '<table class="heatmap compact">' in text


def test_html_is_self_contained(page):
    links = [attributes for tag, attributes in page.elements if tag in ("link", "script", "img", "iframe")]
    assert links == []
    hrefs = {attributes["href"] for tag, attributes in page.elements if tag == "a"}
    assert all(href.startswith("#") for href in hrefs)
    anchors = {attributes["id"] for _tag, attributes in page.elements if "id" in attributes}
    assert {href[1:] for href in hrefs} <= anchors


def test_html_escapes_record_text(tmp_path):
    directory = copy_records(tmp_path)
    rewrite(directory / "imex_channel" / "rack1.json", summary="<script>alert(1)</script> & 3 < 4")
    page = render_html(build_report(load_records(str(directory)), "t & u", RUN))
    assert "<script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &amp; 3 &lt; 4" in page
    assert "<title>t &amp; u</title>" in page


def test_heat_colour_runs_from_red_at_the_low_end_to_green_at_the_top():
    assert heat_colour(402.11, 402.11, 822.16) == "hsl(0, 70%, 80%)"
    assert heat_colour(822.16, 402.11, 822.16) == "hsl(120, 70%, 80%)"
    assert heat_colour(612.135, 402.11, 822.16) == "hsl(60, 70%, 80%)"
    assert heat_colour(5.0, 5.0, 5.0) == "hsl(120, 70%, 80%)"


def test_gpu_placement_needs_trays_times_gpus_to_fill_the_matrix():
    matrix = [[None] * 8 for _row in range(8)]
    assert gpu_placement({"gpus_per_node": 4, "matrix": matrix}, ["a", "b"]) == [("0-3", "a"), ("4-7", "b")]
    assert gpu_placement({"gpus_per_node": 2, "matrix": matrix}, ["a", "b"]) == []
    assert gpu_placement({"nodes": ["a", "b"], "matrix": matrix}) == []


def test_render_report_names_the_files(report):
    files = render_report(report, ["junit", "markdown"])
    assert [(item.format, item.name) for item in files] == [("junit", "report.junit.xml"), ("markdown", "report.md")]
    assert re.match(r'<\?xml version="1.0" encoding="utf-8"\?>\n<testsuites ', files[0].content)


# ----------------------------------------------------------------------------------------- passed, failed, error


def verdict_record(check: str, rack: str, outcome: str, summary: str) -> dict:
    raw = {
        "check": check,
        "rack": rack,
        "run_id": RUN,
        "outcome": outcome,
        "passed": outcome == "passed",
        "summary": summary,
        "nodes": [f"{rack}-t0", f"{rack}-t1"],
        "trays": {"expected": 2, "found": [f"{rack}-t0", f"{rack}-t1"], "skipped": []},
    }
    return normalise_record(raw, f"records/{check}/{rack}.json")


def test_a_run_that_could_not_run_is_an_error_not_a_fabric_failure():
    errored = [
        verdict_record("nvbandwidth", "rack0", "error", "rack rack0: could not list Pod: 503 Service Unavailable"),
        verdict_record("nvbandwidth", "rack1", "error", "rack rack1: could not list Pod: 503 Service Unavailable"),
        verdict_record("cliques", "rack0", "passed", "rack rack0: 2 trays in one clique"),
    ]
    report = build_report(errored, "t", RUN)
    assert (report["verdict"], report["passed"]) == ("error", False)
    assert report["totals"]["errors"] == 2 and report["totals"]["failed"] == 0
    assert report["failed_checks"] == []
    assert report["summary"].startswith(
        "ERROR: 2 racks, 1 of 3 checks passed; could not run (not a verdict on the fabric): nvbandwidth (rack0, rack1)"
    )
    assert report["racks"]["rack1"]["verdict"] == "error"
    # the trays of a check that could not run were not measured: none of rack1's counts as verified, and rack0's,
    # read by cliques, are not verified either while nvbandwidth could not run there (as their own verdicts say)
    assert report["coverage"]["counts"] == tray_counts(trays=4, declared=4, found=4, unverified=2, unmeasured=2)
    assert report["summary"].endswith(
        "0 of 4 GPU trays verified; 0 skipped; 2 measured, not verified (a check failed naming no tray, or could not "
        "run); 2 not measured by any check"
    )
    assert report["trays"]["rack0-t0"]["verdict"] == "skipped"
    assert report["trays"]["rack1-t0"]["summary"] == "not verified: nvbandwidth could not run"
    root = ET.fromstring(render_junit(report))
    assert root.get("errors") == "2" and root.get("failures") == "0"
    cases = {(c.get("classname"), c.get("name")): c for c in root.iter("testcase")}
    error = cases[("gpu_fabric.nvbandwidth", "rack0")].find("error")
    assert error is not None and error.get("type") == "VerificationError"
    assert cases[("gpu_fabric.nvbandwidth", "rack0")].find("failure") is None


def test_a_fabric_failure_wins_over_an_error():
    records = [
        verdict_record("nvbandwidth", "rack0", "failed", "rack rack0: 1 GPU pair below 765.00 GB/s"),
        verdict_record("nvbandwidth", "rack1", "error", "rack rack1: could not read the log"),
    ]
    report = build_report(records, "t", RUN)
    assert report["verdict"] == "failed" and report["summary"].startswith("FAILED: ")
    root = ET.fromstring(render_junit(report))
    assert (root.get("failures"), root.get("errors")) == ("1", "1")


def test_an_error_record_that_says_it_passed_is_refused():
    record = verdict_record("nvbandwidth", "rack0", "error", "x")
    assert record["verdict"] == "error"
    bad = normalise_record(
        {"check": "nccl", "passed": True, "summary": "x", "outcome": "error"}, "records/nccl/rack0.json", "nccl"
    )
    assert bad["verdict"] == "error" and "has outcome=error but passed=true" in bad["summary"]


# ----------------------------------------------------------------------------------------- the fleet as declared

NO_NODE = "declared in gpu_fabric_racks, no Node of that name in the cluster"


def declared_record(rack: str, outcome: str, found: list, declared: list, expected: int = 0) -> dict:
    """A record as fabric_verify writes it for a rack of gpu_fabric_racks (nvbandwidth measured every tray found)."""
    missing = [{"node": node, "reason": NO_NODE} for node in declared if node not in found]
    raw = {
        "check": "nvbandwidth",
        "rack": rack,
        "run_id": RUN,
        "outcome": outcome,
        "passed": outcome == "passed",
        "summary": f"rack {rack}: {outcome}",
        "nodes": list(found),
        "trays": {"expected": expected, "found": found, "skipped": [], "declared": declared, "missing": missing},
    }
    return normalise_record(json.loads(json.dumps(raw)), f"records/nvbandwidth/{rack}.json")


def test_the_declared_racks_and_trays_the_cluster_lacks_are_counted_named_and_fail_the_run():
    records = [
        declared_record(
            "rack1", "passed", ["gb200-r1-t0", "gb200-r1-t1"], ["gb200-r1-t0", "gb200-r1-t1", "gb200-r1-t2"]
        ),
        declared_record("rack9", "error", [], ["gb200-r9-t0", "gb200-r9-t1"]),
    ]
    report = build_report(records, "t", RUN)
    assert (report["verdict"], report["passed"]) == ("error", False)
    assert report["summary"] == (
        "ERROR: 2 racks, 1 of 2 checks passed; could not run (not a verdict on the fabric): nvbandwidth (rack9); "
        "2 of 5 GPU trays verified (5 declared, 2 found); 0 skipped; 3 missing (gb200-r1-t2, gb200-r9-t0, gb200-r9-t1)"
    )
    coverage = report["coverage"]
    assert coverage["counts"] == tray_counts(trays=5, declared=5, found=2, verified=2, missing=3)
    assert coverage["missing"][0] == {"node": "gb200-r1-t2", "rack": "rack1", "reason": NO_NODE}
    assert coverage["verified"] == [node for node, tray in report["trays"].items() if tray["verdict"] == "passed"]
    assert report["racks"]["rack9"]["trays"] == rack_tray_counts(trays=2, declared=2, missing=2)
    assert report["racks"]["rack9"]["missing_trays"] == [
        {"node": "gb200-r9-t0", "reason": NO_NODE},
        {"node": "gb200-r9-t1", "reason": NO_NODE},
    ]
    (rack1,) = [record for record in report["checks"] if record["rack"] == "rack1"]
    assert trays_measured(rack1) == "2 of 3, not gb200-r1-t2 (missing)"
    markdown = render_markdown(report)
    assert "| rack1 | PASS | 2 of 3, 1 missing |" in markdown
    assert "| rack9 | ERROR | 0 of 2, 2 missing |" in markdown
    assert f"| gb200-r1-t2 | rack1 | missing: {NO_NODE} |  |" in markdown
    suite = ET.fromstring(render_junit(report)).find("testsuite")
    properties = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert {k: properties[f"gpu_trays_{k}"] for k in ("declared", "found", "verified", "skipped", "missing")} == {
        "declared": "5",
        "found": "2",
        "verified": "2",
        "skipped": "0",
        "missing": "3",
    }


def test_the_html_fleet_map_draws_each_declared_tray_the_cluster_lacks_as_missing_with_its_reason():
    records = [
        declared_record(
            "rack1", "passed", ["gb200-r1-t0", "gb200-r1-t10"], ["gb200-r1-t0", "gb200-r1-t2", "gb200-r1-t10"]
        ),
        declared_record("rack9", "error", [], ["gb200-r9-t0", "gb200-r9-t1"]),
    ]
    collector = PageCollector()
    collector.feed(render_html(build_report(records, "t", RUN)))
    assert [(css, label) for css, _title, label in collector.trays] == [
        ("tray tray-passed", "t0"),
        ("tray tray-missing", "t2"),  # in its place among the trays found
        ("tray tray-passed", "t10"),
        ("tray tray-missing", "t0"),
        ("tray tray-missing", "t1"),
    ]
    titles = [title for _css, title, _label in collector.trays]
    assert titles[1] == f"gb200-r1-t2: missing: {NO_NODE}"
    assert titles[4] == f"gb200-r9-t1: missing: {NO_NODE}"


def test_a_rack_short_of_its_trays_is_counted_against_the_trays_it_declares():
    """17 of 18 trays found, the clique check failed naming no tray: not '17 of 17 verified' beside 17 trays the
    report marks not verified, but 0 of 18, one missing, 17 measured and not verified, as the trays' verdicts say."""
    found = [f"gb200-r1-t{tray}" for tray in range(17)]
    record = declared_record("rack1", "failed", found, [], expected=18)
    record["trays"].pop("declared")
    report = build_report([record], "t", RUN)
    assert report["coverage"]["counts"] == tray_counts(trays=18, declared=18, found=17, unverified=17, missing=1)
    assert report["summary"].endswith(
        "0 of 18 GPU trays verified (18 declared, 17 found); 0 skipped; 1 missing (1 unnamed: fewer GPU trays than "
        "gpu_fabric_trays_per_clique); 17 measured, not verified (a check failed naming no tray, or could not run)"
    )
    assert {tray["verdict"] for tray in report["trays"].values()} == {"skipped"}


def test_a_failure_that_names_only_a_missing_tray_vouches_for_the_trays_found():
    """The clique check failed rack1 for a declared tray the cluster lacks, naming it (node_problems, not
    failed_nodes): the 2 trays found stay verified; the same failure naming no tray vouches for none."""
    found = ["gb200-r1-t0", "gb200-r1-t1"]
    record = declared_record("rack1", "failed", found, [*found, "gb200-r1-t2"])
    record["node_problems"] = {"gb200-r1-t2": f"gb200-r1-t2 of rack rack1 is {NO_NODE}"}
    report = build_report([record], "t", RUN)
    assert [report["trays"][node]["verdict"] for node in found] == ["passed", "passed"]
    assert report["coverage"]["counts"] == tray_counts(trays=3, declared=3, found=2, verified=2, missing=1)
    assert report["summary"].endswith(
        "2 of 3 GPU trays verified (3 declared, 2 found); 0 skipped; 1 missing (gb200-r1-t2)"
    )
    record["node_problems"] = {}
    assert build_report([record], "t", RUN)["coverage"]["counts"]["verified"] == 0
