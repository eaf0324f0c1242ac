# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""tray_state: the verdict a Node carries between runs, read back, and why a tray is due (or not) for a new one.

The Nodes are the GB200 tray Node the Kubernetes 1.34 API server returned (``tests/fixtures/k8s/gb200-tray-node.json``)
with the annotation a run writes; the annotations that cannot be read are invented.
"""

from __future__ import annotations

import copy
import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import tray_state
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.times import parse_time
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.tray_state import (
    ANNOTATION_KEY,
    TrayState,
    annotation_fields,
    due_reason,
    epoch_label,
    not_due_reason,
    read_state,
)

TRAY = json.loads((Path(__file__).resolve().parents[3] / "fixtures" / "k8s" / "gb200-tray-node.json").read_text())
NOW = datetime(2026, 12, 6, 17, 40, tzinfo=timezone.utc)
WEEK_AGO = NOW - timedelta(days=7)


def node(annotation=None) -> dict:
    tray = copy.deepcopy(TRAY)
    annotations = tray["metadata"].setdefault("annotations", {})
    annotations.pop(ANNOTATION_KEY, None)
    if annotation is not None:
        annotations[ANNOTATION_KEY] = annotation if isinstance(annotation, str) else json.dumps(annotation)
    return tray


def written(time=WEEK_AGO + timedelta(days=1), verdict="passed", hours=tray_state.DEFAULT_VALID_HOURS, **more) -> dict:
    """The annotation a run that finished at ``time`` writes."""
    return dict(
        annotation_fields(time, verdict, f"{verdict} cliques, nvbandwidth", "20261130T174000Z-ab12", hours), **more
    )


def state_of(annotation=None) -> TrayState:
    return read_state(node(annotation))


def test_a_verdict_written_by_a_run_reads_back_as_it_was_written():
    fields = annotation_fields(WEEK_AGO, "passed", "passed cliques", "20261129T174000Z-ab12", 168)
    assert fields == {
        "time": "2026-11-29T17:40:00Z",
        "verdict": "passed",
        "summary": "passed cliques",
        "run": "20261129T174000Z-ab12",
        "valid_until": "2026-12-06T17:40:00Z",
    }
    state = state_of(fields)
    assert (state.verdict, state.run, state.summary) == ("passed", "20261129T174000Z-ab12", "passed cliques")
    assert (state.time, state.valid_until) == (WEEK_AGO, NOW)
    assert state.verified and not state.skipped and state.problem == ""


def test_the_valid_until_label_is_unix_seconds_for_node_affinity():
    assert epoch_label(NOW) == "1796578800"
    assert datetime.fromtimestamp(int(epoch_label(NOW)), timezone.utc) == NOW


def test_the_fixture_node_was_never_verified():
    assert read_state(TRAY) == TrayState()
    assert due_reason(read_state(TRAY), NOW) == "never verified"


def test_a_node_without_metadata_was_never_verified():
    assert due_reason(read_state({}), NOW) == "never verified"
    assert due_reason(read_state({"metadata": {"annotations": None}}), NOW) == "never verified"


@pytest.mark.parametrize(
    ("annotation", "reason"),
    [
        (written(verdict="failed", time=NOW - timedelta(hours=2)), "failed at 2026-12-06T15:40:00Z"),
        (written(verdict="failed") | {"time": "yesterday"}, "failed"),
        (written(time=WEEK_AGO), "expired at 2026-12-06T17:40:00Z"),  # valid until exactly now: expired
        (written(time=WEEK_AGO - timedelta(days=1)), "expired at 2026-12-05T17:40:00Z"),
        (
            written(time=WEEK_AGO, skipped={"time": "2026-12-05T10:00:00Z", "run": "r2", "reason": "cordoned"}),
            "skipped at 2026-12-05T10:00:00Z: cordoned",
        ),
        (
            written(skipped={"time": "2026-12-05T10:00:00Z", "run": "r2", "reason": "GPUs in use: 4 of 4"}),
            "skipped at 2026-12-05T10:00:00Z: GPUs in use: 4 of 4",
        ),
        (written(skipped={"run": "r2"}), "skipped: no reason given"),  # a skip whose time cannot be read still counts
        (
            written(verdict="failed", skipped={"time": "2026-12-05T10:00:00Z", "reason": "cordoned"}),
            "skipped at 2026-12-05T10:00:00Z: cordoned",
        ),
    ],
)
def test_a_tray_is_due(annotation, reason):
    assert due_reason(state_of(annotation), NOW) == reason


def test_a_verdict_written_before_verdicts_expired_is_due():
    old = {"time": "2026-12-01T10:15:00Z", "verdict": "passed", "summary": "passed cliques"}  # the annotation of 0.4
    state = state_of(old)
    assert state.valid_until is None and state.verified
    assert due_reason(state, NOW) == "verdict without an expiry (written before verdicts expired)"


@pytest.mark.parametrize(
    ("annotation", "problem"),
    [
        ("{not json", "annotation gpu-fabric.nvidia.com/verification is not JSON"),
        ("", "annotation gpu-fabric.nvidia.com/verification is not JSON"),
        ('["passed"]', "annotation gpu-fabric.nvidia.com/verification is not a JSON object"),
        ('{"verdict": "ok"}', "annotation gpu-fabric.nvidia.com/verification has verdict 'ok'"),
        ("{}", "annotation gpu-fabric.nvidia.com/verification has verdict None"),
    ],
)
def test_an_annotation_that_cannot_be_read_makes_the_tray_due(annotation, problem):
    state = state_of(annotation)
    assert state.problem == problem and not state.verified
    assert due_reason(state, NOW) == f"unreadable verdict ({problem})"


def test_a_valid_verdict_is_not_due_and_says_until_when():
    state = state_of(written(time=NOW - timedelta(days=1)))
    assert due_reason(state, NOW) == ""
    assert not_due_reason(state) == "not due (passed until 2026-12-12T17:40:00Z)"


def test_a_verdict_that_expires_within_the_window_is_due():
    state = state_of(written(time=NOW - timedelta(days=6)))  # valid one more day
    assert due_reason(state, NOW, within_hours=23.5) == ""
    assert due_reason(state, NOW, within_hours=24) == "expires at 2026-12-07T17:40:00Z, within 24 h"
    assert due_reason(state, NOW, within_hours=36.5) == "expires at 2026-12-07T17:40:00Z, within 36.5 h"


def test_a_skip_older_than_the_verdict_is_a_leftover_and_the_verdict_counts():
    leftover = {"time": "2026-11-29T10:00:00Z", "run": "r0", "reason": "cordoned"}
    state = state_of(written(time=NOW - timedelta(days=1), skipped=leftover))
    assert state.skipped and state.skipped_reason == "cordoned"
    assert due_reason(state, NOW) == ""


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-12-06T17:40:00Z", NOW),
        ("2026-12-06t17:40:00z", NOW),
        ("2026-12-06T18:40:00+01:00", NOW),
        ("2026-12-06T17:40:00", NOW),  # no offset: UTC
        ("2026-12-06T17:40:00.500000Z", NOW + timedelta(microseconds=500000)),
        ("2026-12-06T17:40:00.5Z", NOW + timedelta(microseconds=500000)),  # a record's fraction, any length
        ("2026-12-06T17:40:00.599972874Z", NOW + timedelta(microseconds=599972)),  # Helm's nanoseconds, cut
        ("2026-12-06T19:40:00.25+02:00", NOW + timedelta(microseconds=250000)),
        ("next week", None),
        ("", None),
        (1796578800, None),
        (None, None),
    ],
)
def test_times_are_read_as_rfc_3339(text, expected):
    assert parse_time(text) == expected


# --- per-check state -------------------------------------------------------------------------------------------

REQUIRED = ("cliques", "imex_channel", "nvbandwidth")


def entry(outcome="passed", time=NOW - timedelta(days=1), hours=168, run="r1", summary=""):
    return tray_state.check_fields(outcome, time, run, time + timedelta(hours=hours), summary)


def per_check(**checks) -> dict:
    """The annotation of a tray with these check entries, as node_verdict writes it at NOW."""
    record = tray_state.tray_record(checks, None, REQUIRED, NOW)[0]
    return record


def test_a_per_check_annotation_reads_back_entry_by_entry():
    record = per_check(cliques=entry(), nvbandwidth=entry("failed", summary="GPU 3 -> 7 402.11 GB/s"))
    assert record == {
        "verdict": "failed",
        "time": "2026-12-05T17:40:00Z",
        "run": "r1",
        "summary": "nvbandwidth failed: GPU 3 -> 7 402.11 GB/s",
        "checks": {
            "cliques": {
                "outcome": "passed",
                "time": "2026-12-05T17:40:00Z",
                "run": "r1",
                "valid_until": "2026-12-12T17:40:00Z",
            },
            "nvbandwidth": {
                "outcome": "failed",
                "time": "2026-12-05T17:40:00Z",
                "run": "r1",
                "valid_until": "2026-12-12T17:40:00Z",
                "summary": "GPU 3 -> 7 402.11 GB/s",
            },
        },
    }
    state = state_of(record)
    assert state.per_check and state.verdict == "failed" and state.unreadable() == []
    assert state.checks["cliques"] == tray_state.CheckState(
        "passed", NOW - timedelta(days=1), "r1", NOW + timedelta(days=6)
    )


def test_a_tray_passes_only_while_every_required_check_passed_within_its_validity():
    cliques_only = state_of(per_check(cliques=entry()))
    stand = tray_state.standing(cliques_only, REQUIRED, NOW)
    assert (stand.verdict, stand.valid_until, stand.expired_at) == ("incomplete", None, None)
    assert stand.summary == "incomplete: imex_channel never verified the tray; nvbandwidth never verified the tray"

    every = state_of(
        per_check(cliques=entry(), imex_channel=entry(hours=48), nvbandwidth=entry(time=NOW - timedelta(hours=2)))
    )
    stand = tray_state.standing(every, REQUIRED, NOW)
    # passed until the earliest expiry among the required checks: imex_channel's
    assert (stand.verdict, stand.valid_until) == ("passed", NOW + timedelta(days=1))
    assert stand.summary == "passed cliques, imex_channel, nvbandwidth"

    # a day later imex_channel's verdict has expired: not passed any more, and says which check and when
    stand = tray_state.standing(every, REQUIRED, NOW + timedelta(days=1))
    assert (stand.verdict, stand.expired_at) == ("incomplete", NOW + timedelta(days=1))
    assert stand.summary == "incomplete: imex_channel expired at 2026-12-07T17:40:00Z"

    # the site that requires nvbandwidth only
    assert tray_state.standing(every, ["nvbandwidth"], NOW + timedelta(days=1)).verdict == "passed"


def test_a_failed_check_fails_the_tray_required_or_not():
    state = state_of(per_check(cliques=entry(), nccl=entry("failed", summary="busbw 301 GB/s")))
    stand = tray_state.standing(state, REQUIRED, NOW)
    assert (stand.verdict, stand.summary) == ("failed", "nccl failed: busbw 301 GB/s")


def test_due_is_per_check():
    state = state_of(per_check(cliques=entry(), nvbandwidth=entry("failed", time=NOW - timedelta(hours=3))))
    assert due_reason(state, NOW, check="cliques") == ""
    assert due_reason(state, NOW, check="imex_channel") == "never verified by imex_channel"
    assert due_reason(state, NOW, check="nvbandwidth") == "failed at 2026-12-06T14:40:00Z"
    assert (
        due_reason(state, NOW, within_hours=6 * 24, check="cliques") == "expires at 2026-12-12T17:40:00Z, within 144 h"
    )
    assert not_due_reason(state, "cliques") == "not due (cliques passed until 2026-12-12T17:40:00Z)"
    expired = state_of(per_check(nvbandwidth=entry(time=NOW - timedelta(days=8))))
    assert due_reason(expired, NOW, check="nvbandwidth") == "expired at 2026-12-05T17:40:00Z"


def test_an_annotation_written_before_verdicts_were_per_check_is_due_for_every_check():
    state = state_of(written(time=NOW - timedelta(days=1)))
    assert not state.per_check and due_reason(state, NOW) == ""  # the tray-wide verdict as it was written
    for check in REQUIRED:
        assert due_reason(state, NOW, check=check) == (
            "no per-check state (a verdict written before verdicts were per check)"
        )
    assert tray_state.standing(state, REQUIRED, NOW).verdict == "passed"  # shown as it was, until it expires


def test_a_skip_counts_for_the_checks_that_skipped_the_tray():
    skip = {"time": "2026-12-06T10:00:00Z", "run": "r2", "reason": "cordoned", "checks": ["nvbandwidth"]}
    state = state_of(dict(per_check(cliques=entry(), nvbandwidth=entry()), skipped=skip))
    assert due_reason(state, NOW, check="nvbandwidth") == "skipped at 2026-12-06T10:00:00Z: cordoned"
    assert due_reason(state, NOW, check="cliques") == ""


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("0001-01-01T00:00:00+01:00", "'0001-01-01T00:00:00+01:00' is out of range"),  # before year 1 in UTC
        ("9999-12-31T23:59:59-01:00", "'9999-12-31T23:59:59-01:00' is out of range"),  # after 9999 in UTC
        ("1969-12-31T23:59:59Z", "'1969-12-31T23:59:59Z' is out of range (1970 to 9998)"),  # no label value
        ("9999-06-01T00:00:00Z", "'9999-06-01T00:00:00Z' is out of range (1970 to 9998)"),
        ("2026-12-06T17:40:00+24:00", "'2026-12-06T17:40:00+24:00' is not an RFC 3339 date-time"),
        (1796578800, "1796578800 is not an RFC 3339 date-time"),
        (["2026-12-06T17:40:00Z"], "['2026-12-06T17:40:00Z'] is not an RFC 3339 date-time"),
    ],
)
def test_a_time_that_cannot_be_formatted_is_unreadable_and_the_check_due(value, problem):
    assert tray_state.read_time(value) == (None, problem)
    state = state_of(per_check(nvbandwidth=entry()) | {"checks": {"nvbandwidth": dict(entry(), time=value)}})
    assert state.unreadable() == [f"checks.nvbandwidth.time {problem}"]
    assert (
        due_reason(state, NOW, check="nvbandwidth")
        == f"unreadable nvbandwidth state (checks.nvbandwidth.time {problem})"
    )
    assert tray_state.standing(state, ["nvbandwidth"], NOW).verdict == "incomplete"


def test_a_window_too_large_to_count_makes_every_verdict_due():
    state = state_of(per_check(nvbandwidth=entry()))
    assert due_reason(state, NOW, within_hours=1e12, check="nvbandwidth").startswith("expires at 2026-12-12T17:40:00Z")
    assert due_reason(state, NOW, within_hours=float("inf"), check="nvbandwidth") != ""


@pytest.mark.parametrize("value", ["0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00"])
def test_a_tray_wide_verdict_with_a_time_out_of_range_reads_as_without_it(value):
    state = state_of(written() | {"valid_until": value})
    assert state.valid_until is None
    assert due_reason(state, NOW) == "verdict without an expiry (written before verdicts expired)"
    assert not_due_reason(state) == "not due (passed until no expiry)"
