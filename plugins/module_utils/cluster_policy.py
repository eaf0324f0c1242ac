# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The GPU Operator's ClusterPolicy: is it ready, and if not, what does it say.

The GPU Operator creates its operands (driver, toolkit, device plugin, DCGM exporter, ...) after the
Helm release is installed, and sets ``status.state`` of the one ClusterPolicy it reconciles to
``ready`` only once every enabled operand is ready. Until then the state is ``notReady`` and the
condition ``Error`` names the operator's states that are not ready; a second ClusterPolicy is
``ignored``. Pods that are Ready do not tell this: an operand DaemonSet that does not exist yet has no
pod, and ``dcgmExporter.serviceMonitor.enabled`` without the Prometheus Operator's CRD keeps the state
``notReady`` with every pod running.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.k8s import api_poll
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.retry import WaitTimeout

READY = "ready"
SERVICE_MONITOR_GROUP_VERSION = "monitoring.coreos.com/v1"


@dataclass
class PolicyReadiness:
    ready: bool
    name: str  # the ClusterPolicy judged ("" when there is none)
    state: str  # its status.state ("" when the operator wrote none yet)
    conditions: List[str] = field(default_factory=list)  # "Type=Status (Reason): message"
    ignored: List[str] = field(default_factory=list)  # other ClusterPolicies
    namespace: str = ""  # the operator's, as it writes it in status.namespace

    def summary(self) -> str:
        if not self.name:
            return "no ClusterPolicy exists"
        state = self.state or "no status yet"
        text = f"ClusterPolicy {self.name} state {state}"
        if self.conditions:
            text += "; conditions: " + "; ".join(self.conditions)
        if self.ignored:
            text += f"; also {', '.join(self.ignored)} (ignored by the operator: only one ClusterPolicy is reconciled)"
        return text

    def to_dict(self) -> Dict[str, Any]:
        return {
            "ready": self.ready,
            "name": self.name,
            "state": self.state,
            "conditions": list(self.conditions),
            "summary": self.summary(),
        }


def condition_text(cond: Mapping[str, Any]) -> str:
    text = f"{cond.get('type', '?')}={cond.get('status', '?')}"
    if cond.get("reason"):
        text += f" ({cond['reason']})"
    if cond.get("message"):
        text += f": {' '.join(str(cond['message']).split())}"
    return text


def _created(policy: Mapping[str, Any]) -> tuple:
    meta = policy.get("metadata") or {}
    return (str(meta.get("creationTimestamp") or ""), str(meta.get("name") or ""))


def evaluate_policies(policies: Sequence[Mapping[str, Any]], name: str = "") -> PolicyReadiness:
    """The readiness of ClusterPolicy ``name``, or of the one the operator reconciles (the oldest)."""
    ordered = sorted(policies, key=_created)
    names = [str((p.get("metadata") or {}).get("name", "")) for p in ordered]
    chosen: Optional[Mapping[str, Any]] = None
    if name:
        chosen = next((p for p, n in zip(ordered, names) if n == name), None)
    elif ordered:
        chosen = ordered[0]
    if chosen is None:
        return PolicyReadiness(ready=False, name="", state="")
    chosen_name = str(chosen["metadata"]["name"])
    status = chosen.get("status") or {}
    state = str(status.get("state") or "")
    conditions = [condition_text(c) for c in status.get("conditions") or [] if isinstance(c, Mapping)]
    others = [n for n in names if n != chosen_name]
    return PolicyReadiness(
        ready=state == READY,
        name=chosen_name,
        state=state,
        conditions=conditions,
        ignored=others,
        namespace=str(status.get("namespace") or ""),
    )


def timeout_message(readiness: PolicyReadiness, timeout: int, history: Sequence[str]) -> str:
    """One line: what was found after the wait, the states passed through, what to do."""
    seen = f" (states seen: {', '.join(history)})" if history else ""
    hint = (
        "Install the GPU Operator chart first (role gpu_fabric.mnnvl.gpu_operator)"
        if not readiness.name
        else f"Read the operator's log (`kubectl -n {readiness.namespace or '<namespace>'} logs deploy/gpu-operator`) "
        "and the operand pods"
    )
    return (
        f"GPU Operator not ready after {timeout}s: {readiness.summary()}{seen}; expected state {READY}. "
        f"{hint}; raise gpu_operator_wait_timeout when driver containers are still building."
    )


class PolicyTimeout(Exception):
    def __init__(self, message: str, readiness: PolicyReadiness) -> None:
        super().__init__(message)
        self.message = message
        self.readiness = readiness


def wait_ready(
    list_policies: Callable[[], Sequence[Mapping[str, Any]]],
    timeout: int,
    name: str = "",
    delay: float = 5.0,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> PolicyReadiness:
    """Poll until the ClusterPolicy is ready (``k8s.api_poll``: a transient read error is read again);
    raise PolicyTimeout naming its state, its conditions and the states seen."""
    history: List[str] = []

    def read() -> PolicyReadiness:
        readiness = evaluate_policies(list_policies(), name)
        label = readiness.state or ("absent" if not readiness.name else "no status")
        if not history or history[-1] != label:
            history.append(label)
        return readiness

    try:
        return api_poll(read, lambda readiness: readiness.ready, timeout, delay, sleep=sleep, clock=clock)
    except WaitTimeout as exc:
        raise PolicyTimeout(timeout_message(exc.last, timeout, history), exc.last) from None


def service_monitor_wanted(setting: Any, served: bool) -> bool:
    """``dcgmExporter.serviceMonitor.enabled`` from the setting: ``auto`` follows whether the API is served."""
    if isinstance(setting, bool):
        return setting
    text = str(setting).strip().lower()
    if text == "auto":
        return served
    if text in ("true", "yes", "on", "1"):
        return True
    if text in ("false", "no", "off", "0"):
        return False
    raise ValueError(f"service monitor setting {setting!r} is not auto, true or false")


def resolve_service_monitor(values: Dict[str, Any], served: bool) -> Dict[str, Any]:
    """``values`` with ``dcgmExporter.serviceMonitor.enabled`` made the boolean to install.

    The role sets it to the user's setting (``auto``, ``true`` or ``false``, as a string) before it knows
    what the cluster serves; a boolean the user's chart values set stays as it is. The input is not changed.
    """
    resolved = copy.deepcopy(values)
    monitor = ((resolved.get("dcgmExporter") or {}).get("serviceMonitor")) or {}
    if "enabled" in monitor and not isinstance(monitor["enabled"], bool):
        monitor["enabled"] = service_monitor_wanted(monitor["enabled"], served)
    return resolved
