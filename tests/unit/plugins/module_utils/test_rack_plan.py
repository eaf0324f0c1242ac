# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""rack_plan: the plan of one rack, and the skip reasons a run chooses (which say nothing of the tray)."""

from __future__ import annotations

import pytest
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.rack_plan import (
    MIN_TRAYS,
    RackPlan,
    is_not_due,
    is_selection_skip,
)


@pytest.mark.parametrize(
    ("reason", "chosen"),
    [
        ("not due (passed until 2026-12-12T17:40:00Z)", True),
        ("not selected (gpu_fabric_verify_nodes_per_clique is 2)", True),
        ("cordoned", False),
        ("GPUs in use: 4 of 4 nvidia.com/gpu held by team-a/train-0 (4)", False),
        ("rack incomplete: the nvbandwidth check needs 2 usable trays", False),
    ],
)
def test_the_runs_own_skips_say_nothing_of_the_tray(reason, chosen):
    assert is_selection_skip(reason) is chosen


@pytest.mark.parametrize(
    ("reason", "not_due"),
    [
        ("not due (nvbandwidth passed until 2026-12-13T17:40:00Z)", True),
        ("not selected (gpu_fabric_verify_nodes_per_clique is 2)", False),
        ("cordoned", False),
    ],
)
def test_only_the_not_due_reason_is_not_due(reason, not_due):
    assert is_not_due(reason) is not_due


def test_a_rack_with_fewer_usable_trays_than_a_check_spans_is_incomplete():
    plan = RackPlan("rack0", ["c.1"], ["t0", "t1"], ["t0"], [{"node": "t1", "reason": "cordoned"}], 4, "NVIDIA-GB200")
    assert MIN_TRAYS == 2
    assert plan.incomplete and plan.clique == "c.1"
    assert plan.to_dict()["trays"] == {
        "expected": 0,
        "found": ["t0", "t1"],
        "skipped": [{"node": "t1", "reason": "cordoned"}],
    }
