# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The Node condition of a tray's verdict (``node_verdict``'s option ``condition``).

Each tray's ``status.conditions`` carries one condition of the collection's own type (``GPUFabricVerified``):
``True``/``Passed``, ``False``/``CheckFailed`` (the message names the failing checks and what they blamed),
``Unknown``/``ChecksMissing`` while a required check never verified the tray, or ``Unknown``/``VerdictExpired``
(also for every node whose verdict expired and that the run did not verify). ``lastHeartbeatTime`` is the newest
entry's time (the expiry for ``VerdictExpired``), ``lastTransitionTime`` changes only when the status does: the same
verdict written again changes nothing. It is sent as a strategic merge patch of the ``status`` subresource naming
only our condition (``conditions`` merge by ``type``, so the kubelet's conditions and a node problem detector's are
kept), and removed with ``$patch: delete`` on that type. Pure: no Kubernetes client.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Dict, Mapping, Optional, Sequence

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.outcomes import FAILED, PASSED
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.text import one_line
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.times import rfc3339
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.tray_state import (
    DEFAULT_REQUIRED_CHECKS,
    Standing,
    TrayState,
    standing,
)

# The Node condition's type: positive like Ready (True when the tray passed), so that Unknown can say "the
# verdict expired" as Ready's Unknown says "no news from the kubelet"; CamelCase like the kubelet's and node
# problem detector's types; kube-state-metrics exports it as kube_node_status_condition{condition="GPUFabricVerified"}.
DEFAULT_CONDITION_TYPE = "GPUFabricVerified"
CONDITION_PASSED = "Passed"
CONDITION_FAILED = "CheckFailed"
CONDITION_EXPIRED = "VerdictExpired"
CONDITION_MISSING = "ChecksMissing"
CONDITION_MESSAGE_LIMIT = 1000


def find_condition(conditions: Sequence[Mapping[str, Any]], condition_type: str) -> Optional[Dict[str, Any]]:
    for condition in conditions:
        if isinstance(condition, Mapping) and condition.get("type") == condition_type:
            return dict(condition)
    return None


def state_condition(
    state: TrayState, now: datetime, condition_type: str, required: Sequence[str] = DEFAULT_REQUIRED_CHECKS
) -> Optional[Dict[str, Any]]:
    """The condition a tray's state asks for at ``now``, without ``lastTransitionTime``; None for a tray that
    carries no verdict (nothing is said of it)."""
    if not state.verified:
        return None
    return standing_condition(standing(state, required, now), condition_type)


def standing_condition(stand: Standing, condition_type: str) -> Dict[str, Any]:
    """``True``/``Passed`` and ``False``/``CheckFailed`` carry the tray's summary (which names the failing checks and
    the pairs or trays they blamed) and its newest entry's time as ``lastHeartbeatTime``; a required check whose
    verdict expired gives ``Unknown``/``VerdictExpired`` with the expiry as ``lastHeartbeatTime``, a required check
    that never verified the tray ``Unknown``/``ChecksMissing``."""
    time = rfc3339(stand.time) if stand.time else ""
    if stand.verdict == PASSED:
        return _condition(condition_type, "True", CONDITION_PASSED, stand.summary or "every check passed", time)
    if stand.verdict == FAILED:
        return _condition(
            condition_type, "False", CONDITION_FAILED, stand.summary or "a check failed on the tray", time
        )
    if stand.expired_at is not None:
        message = f"{stand.summary}; verify the tray again"
        return _condition(condition_type, "Unknown", CONDITION_EXPIRED, message, rfc3339(stand.expired_at))
    message = f"{stand.summary}; run the missing checks on the tray"
    return _condition(condition_type, "Unknown", CONDITION_MISSING, message, time)


def _condition(condition_type: str, status: str, reason: str, message: str, heartbeat: str) -> Dict[str, Any]:
    condition = {
        "type": condition_type,
        "status": status,
        "reason": reason,
        "message": one_line(message, CONDITION_MESSAGE_LIMIT, "..."),
    }
    if heartbeat:
        condition["lastHeartbeatTime"] = heartbeat
    return condition


def with_transition(current: Optional[Mapping[str, Any]], wanted: Dict[str, Any]) -> Dict[str, Any]:
    """``wanted`` with its ``lastTransitionTime``: the current one while the status stays, else the heartbeat (the
    verdict's time, or the expiry)."""
    kept = current is not None and current.get("status") == wanted["status"] and current.get("lastTransitionTime")
    since = current.get("lastTransitionTime") if kept and current else wanted.get("lastHeartbeatTime")
    return {**wanted, **({"lastTransitionTime": since} if since else {})}


def condition_differs(current: Optional[Mapping[str, Any]], wanted: Mapping[str, Any]) -> bool:
    return current is None or any(current.get(key) != value for key, value in wanted.items())


def condition_patch(condition: Dict[str, Any]) -> Dict[str, Any]:
    """The strategic merge patch of ``status``: ``conditions`` merge by ``type``, every other condition is kept."""
    return {"status": {"conditions": [condition]}}


def condition_removal_patch(condition_type: str) -> Dict[str, Any]:
    return {"status": {"conditions": [{"type": condition_type, "$patch": "delete"}]}}
