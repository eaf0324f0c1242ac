# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Stand-in for the GPU Operator v25.10.0 ClusterPolicy controller: the ClusterPolicy's ``status``.

The stand-in chart renders the operand DaemonSets itself; what the real controller adds, and what a
client must wait for, is the ClusterPolicy status. As the real one does (``clusterpolicy_controller.go``,
``state_manager.go``, ``object_controls.go``):

* it acts only while the operator Deployment has a ready replica (the controller runs in that pod);
* the first ClusterPolicy (oldest) is the singleton; any other gets ``state: ignored``;
* each state walks its operand: a DaemonSet is ready when it schedules no pod, else when
  ``numberUnavailable`` is 0 (and, for ``OnDelete``, not checked further here); a DaemonSet that the
  state should have and that does not exist yet is not ready;
* ``state-dcgm-exporter`` is ``notReady`` while ``spec.dcgmExporter.serviceMonitor.enabled`` is true
  and the CRD ``servicemonitors.monitoring.coreos.com`` is absent: the real operator logs "Install
  Prometheus and necessary CRDs for gathering GPU metrics!" and never becomes ready;
* ``status.state`` is ``ready`` only when every state is; else ``notReady`` with the conditions
  ``Ready=False (reason Error)`` and ``Error=True (reason OperandNotReady, message "ClusterPolicy is
  not ready, states not ready: [state-...]")``; ready sets ``Ready=True (Reconciled)``, ``Error=False``.
"""

from __future__ import annotations

import logging
from datetime import datetime, timezone
from typing import Any, Optional

from simrack.controllers.base import Controller
from simrack.controllers.kube import CLUSTERPOLICIES, CRDS, DAEMONSETS, DEPLOYMENTS

log = logging.getLogger("simrack")

OPERATOR_SELECTOR = "app.kubernetes.io/component=gpu-operator"
SERVICE_MONITOR_CRD = "servicemonitors.monitoring.coreos.com"

# (state, spec key that enables it, operand DaemonSet), in the real operator's order of states.
STATES: tuple[tuple[str, Optional[str], str], ...] = (
    ("state-driver", "driver", "nvidia-driver-daemonset"),
    ("state-container-toolkit", "toolkit", "nvidia-container-toolkit-daemonset"),
    ("state-operator-validation", None, "nvidia-operator-validator"),
    ("state-device-plugin", "devicePlugin", "nvidia-device-plugin-daemonset"),
    ("state-dcgm", "dcgm", "nvidia-dcgm"),
    ("state-dcgm-exporter", "dcgmExporter", "nvidia-dcgm-exporter"),
    ("gpu-feature-discovery", "gfd", "gpu-feature-discovery"),
    ("state-mig-manager", "migManager", "nvidia-mig-manager"),
)


def now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _enabled(spec: dict[str, Any], key: Optional[str]) -> bool:
    if key is None:
        return True
    value = (spec.get(key) or {}).get("enabled")
    return value is True or str(value).lower() == "true"


def daemonset_ready(ds: Optional[dict[str, Any]]) -> bool:
    """``isDaemonSetReady``: nothing to schedule is ready; else no unavailable pod."""
    if ds is None:
        return False
    status = ds.get("status") or {}
    if int(status.get("desiredNumberScheduled") or 0) == 0:
        return True
    return int(status.get("numberUnavailable") or 0) == 0 and int(status.get("numberReady") or 0) > 0


def states_not_ready(
    spec: dict[str, Any], daemonsets: dict[str, dict[str, Any]], service_monitor_crd: bool
) -> list[str]:
    """The names of the enabled states whose operand is not ready, in the operator's order."""
    out = []
    for state, key, ds_name in STATES:
        if not _enabled(spec, key):
            continue
        ready = daemonset_ready(daemonsets.get(ds_name))
        monitor = _enabled(spec.get("dcgmExporter") or {}, "serviceMonitor")
        if state == "state-dcgm-exporter" and monitor and not service_monitor_crd:
            ready = False
        if not ready:
            out.append(state)
    return out


def _condition(ctype: str, status: str, reason: str, message: str, old: list[dict[str, Any]]) -> dict[str, Any]:
    """``meta.SetStatusCondition``: the transition time moves only when the status does."""
    previous = next((c for c in old if c.get("type") == ctype), {})
    stamp = previous.get("lastTransitionTime") if previous.get("status") == status else None
    return {
        "type": ctype,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": stamp or now(),
    }


def policy_status(
    not_ready: list[str], old: dict[str, Any], namespace: str, has_gpu_nodes: bool = True
) -> dict[str, Any]:
    conditions = list(old.get("conditions") or [])
    if not_ready:
        message = f"ClusterPolicy is not ready, states not ready: [{' '.join(not_ready)}]"
        new = [
            _condition("Ready", "False", "Error", "", conditions),
            _condition("Error", "True", "OperandNotReady", message, conditions),
        ]
        state = "notReady"
    else:
        if has_gpu_nodes:
            reason, message = "Reconciled", "ClusterPolicy is ready as all resources have been successfully reconciled"
        else:
            reason, message = "NoGPUNodes", "No GPU node found, watching for new nodes to join the cluster."
        new = [
            _condition("Ready", "True", reason, message, conditions),
            _condition("Error", "False", "Ready", "", conditions),
        ]
        state = "ready"
    return {"state": state, "namespace": namespace, "conditions": new}


def _created(obj: dict[str, Any]) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return (meta.get("creationTimestamp") or "", meta.get("name") or "")


class GPUOperatorController(Controller):
    name = "gpu-operator"
    watched = (CLUSTERPOLICIES, DAEMONSETS, DEPLOYMENTS)
    resync = 3.0

    def operator_namespace(self) -> Optional[str]:
        for dep in self.kube.list(DEPLOYMENTS, label_selector=OPERATOR_SELECTOR):
            if (dep.get("status") or {}).get("readyReplicas", 0) >= 1:
                return dep["metadata"]["namespace"]
        return None

    def reconcile(self) -> None:
        policies = sorted(self.kube.list(CLUSTERPOLICIES), key=_created)
        if not policies:
            return
        namespace = self.operator_namespace()
        if namespace is None:
            return
        daemonsets = {d["metadata"]["name"]: d for d in self.kube.list(DAEMONSETS, namespace)}
        crd = self.kube.get(CRDS, SERVICE_MONITOR_CRD) is not None
        singleton, *others = policies
        not_ready = states_not_ready(singleton.get("spec") or {}, daemonsets, crd)
        self.write(singleton, policy_status(not_ready, singleton.get("status") or {}, namespace))
        for policy in others:
            self.write(policy, {"state": "ignored", "namespace": namespace})

    def write(self, policy: dict[str, Any], status: dict[str, Any]) -> None:
        old = policy.get("status") or {}
        if all(old.get(k) == v for k, v in status.items()):
            return
        self.kube.merge_patch(CLUSTERPOLICIES, policy["metadata"]["name"], {"status": status}, sub="status")
        if old.get("state") != status["state"]:
            log.info("ClusterPolicy %s: %s", policy["metadata"]["name"], status["state"])
