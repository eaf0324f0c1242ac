# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""node_taint: the taint list of a GB200 tray's Node after its verdict."""

from __future__ import annotations

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.node_taint import desired_taints
from verdict_nodes import (
    GPU_TAINT,
    OUR_TAINT,
    TAINT,
)


def test_our_taint_with_another_value_is_replaced_in_place():
    current = [
        dict(GPU_TAINT),
        {"key": TAINT, "value": "false", "effect": "NoSchedule"},
        {"key": "a", "effect": "NoExecute"},
    ]
    assert desired_taints(current, "failed", TAINT) == (
        [GPU_TAINT, OUR_TAINT, {"key": "a", "effect": "NoExecute"}],
        "added",
    )


def test_a_failure_keeps_a_taint_of_our_key_with_another_effect_and_a_pass_removes_both():
    no_execute = {"key": TAINT, "value": "true", "effect": "NoExecute"}
    assert desired_taints([no_execute], "failed", TAINT) == ([no_execute, OUR_TAINT], "added")
    assert desired_taints([no_execute, OUR_TAINT], "passed", TAINT) == ([], "removed")
    assert desired_taints([GPU_TAINT], "passed", TAINT) == ([GPU_TAINT], "unchanged")
