# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The taint a failed tray carries on its Node (``node_verdict``'s option ``taint_failed``).

A failed tray gets ``<taint_key>=true:NoSchedule``, a tray that passed loses every taint of that key; every other
taint keeps its place. Pure: the list a node's taints become, and whether ours was added, removed or left.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Sequence, Tuple

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.outcomes import FAILED, PASSED

DEFAULT_TAINT_KEY = "gpu-fabric.nvidia.com/unverified"
TAINT_VALUE = "true"
TAINT_EFFECT = "NoSchedule"
# The checks' pods tolerate the taint on failed trays (``gpu_fabric_verify_taint_failed``), so a failed tray is
# measured again (and untainted when it passes).
UNVERIFIED_TOLERATION: Dict[str, str] = {"key": DEFAULT_TAINT_KEY, "operator": "Exists", "effect": TAINT_EFFECT}

TAINT_ADDED = "added"
TAINT_REMOVED = "removed"
TAINT_UNCHANGED = "unchanged"


def verdict_taint(key: str) -> Dict[str, str]:
    return {"key": key, "value": TAINT_VALUE, "effect": TAINT_EFFECT}


def desired_taints(taints: Sequence[Mapping[str, Any]], verdict: str, key: str) -> Tuple[List[Dict[str, Any]], str]:
    """The node's taint list after the verdict, and whether our taint was added, removed or left.

    A taint is identified by key and effect (as the API server does): a failed tray carrying
    ``<key>:NoSchedule`` with another value gets it replaced in place; taints of the key with other
    effects are kept on a failure and removed on a pass (a pass clears every taint of the key).
    """
    current = [dict(taint) for taint in taints]
    wanted = verdict_taint(key)
    if verdict == FAILED:
        ours = [t for t in current if t.get("key") == key and t.get("effect") == TAINT_EFFECT]
        if len(ours) == 1 and (ours[0].get("value") or "") == TAINT_VALUE:
            return current, TAINT_UNCHANGED
        result: List[Dict[str, Any]] = []
        placed = False
        for taint in current:
            if taint.get("key") == key and taint.get("effect") == TAINT_EFFECT:
                if not placed:
                    result.append(wanted)
                    placed = True
                continue
            result.append(taint)
        if not placed:
            result.append(wanted)
        return result, TAINT_ADDED
    if verdict == PASSED:
        result = [t for t in current if t.get("key") != key]
        return result, (TAINT_REMOVED if len(result) != len(current) else TAINT_UNCHANGED)
    return current, TAINT_UNCHANGED
