# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""tray_verdict: the run's trays as node_verdict takes them in, and the run's time."""

from __future__ import annotations

import pytest
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.tray_verdict import (
    TrayVerdict,
    parse_trays,
    time_problems,
)
from verdict_nodes import (
    TIME,
)


def test_parse_trays_takes_the_run_record_as_it_is_and_names_every_bad_entry():
    trays, problems = parse_trays(
        {
            "gb200-r0-t1": {"verdict": "passed", "rack": "rack0", "checks_failed": [], "summary": "ok"},
            "gb200-r0-t0": {"verdict": "failed", "rack": "rack0", "checks_failed": ["nccl"], "summary": "low busbw"},
            "gb200-r1-t0": {"verdict": "pass"},
            "gb200-r1-t1": "failed",
        }
    )
    assert trays == [
        TrayVerdict(
            "gb200-r0-t0", "failed", "low busbw", "rack0", ("nccl",), outcomes=(("nccl", "failed", "low busbw"),)
        )
    ]
    assert problems == [
        "trays['gb200-r0-t1'] is passed but names no check that measured it; give its checks "
        "(the report's per-tray checks, or checks_passed / checks_failed)",
        "trays['gb200-r1-t0'].verdict is 'pass'; expected one of passed, failed, skipped",
        "trays['gb200-r1-t1'] is str; expected a dict with verdict and summary",
    ]


def test_parse_trays_keeps_the_skip_reasons():
    trays, problems = parse_trays({"a": {"verdict": "skipped", "summary": "skipped: busy", "skip_reasons": ["busy"]}})
    assert problems == []
    assert trays[0].skip_reasons == ("busy",) and trays[0].own_skip_reason == "busy"


@pytest.mark.parametrize("value", [TIME, "2026-12-01T10:21:37.123456Z", "2026-12-01T11:21:37+01:00"])
def test_rfc3339_times_are_accepted(value):
    assert time_problems(value) == []


@pytest.mark.parametrize("value", ["2026-12-01 10:21", "yesterday", "", None])
def test_other_times_are_refused(value):
    assert time_problems(value) == [
        f"time is {value!r}; expected an RFC 3339 date-time such as 2026-12-01T10:15:00Z (the run's finish)"
    ]
