# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""node_condition: the condition a GB200 tray's verdict gives its Node, as a node's plan carries it."""

from __future__ import annotations

from datetime import timedelta

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.node_plan import desired_patch, plan_expired
from verdict_nodes import (
    CONDITIONS,
    FAILED_SUMMARY,
    LATER,
    NOW,
    RUN,
    TIME,
    failed,
    gb200_tray,
    passed,
    verified_tray,
)


def test_the_condition_of_a_pass_a_failure_and_its_transition_time():
    plan = desired_patch(gb200_tray(0, 3), passed(), TIME, CONDITIONS, RUN)
    assert plan.status_patch == {
        "status": {
            "conditions": [
                {
                    "type": "GPUFabricVerified",
                    "status": "True",
                    "reason": "Passed",
                    "message": "passed nvbandwidth",
                    "lastHeartbeatTime": TIME,
                    "lastTransitionTime": TIME,
                }
            ]
        }
    }
    assert plan.condition == "True"
    assert plan.before["condition"] is None
    assert plan.after["condition"]["status"] == "True"
    node = verified_tray()
    node["status"]["conditions"].append(plan.status_patch["status"]["conditions"][0])
    # the same verdict passed again later: a new heartbeat, the transition kept
    again = desired_patch(node, passed(), LATER, CONDITIONS, RUN)
    condition = again.status_patch["status"]["conditions"][0]
    assert (condition["lastHeartbeatTime"], condition["lastTransitionTime"]) == (LATER, TIME)
    # it fails: False, the failing check and pair in the message, a new transition
    failure = desired_patch(node, failed(), LATER, CONDITIONS, RUN)
    condition = failure.status_patch["status"]["conditions"][0]
    assert (condition["status"], condition["reason"]) == ("False", "CheckFailed")
    assert condition["message"] == f"nvbandwidth failed: {FAILED_SUMMARY}"
    assert (condition["lastHeartbeatTime"], condition["lastTransitionTime"]) == (LATER, LATER)
    assert failure.condition == "False"


def test_an_expired_verdict_turns_the_condition_unknown_once():
    expired = NOW + timedelta(hours=200)
    node = verified_tray()
    plan = plan_expired(node, expired, CONDITIONS)
    condition = plan.status_patch["status"]["conditions"][0]
    assert condition == {
        "type": "GPUFabricVerified",
        "status": "Unknown",
        "reason": "VerdictExpired",
        "message": "incomplete: nvbandwidth expired at 2026-12-08T10:21:37Z; verify the tray again",
        "lastHeartbeatTime": "2026-12-08T10:21:37Z",
        "lastTransitionTime": "2026-12-08T10:21:37Z",
    }
    assert (plan.metadata_patch, plan.taints_patch, plan.condition) == (None, None, "Unknown")
    node["status"]["conditions"].append(condition)
    assert plan_expired(node, expired + timedelta(hours=1), CONDITIONS) is None
    assert plan_expired(verified_tray(), NOW, CONDITIONS) is None  # still valid
    assert plan_expired(gb200_tray(0, 3), expired, CONDITIONS) is None  # never verified
