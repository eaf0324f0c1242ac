# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Stand-in for the GPU Operator ClusterPolicy controller (v25.10.0 and v26.7.0, told apart by the operator
Deployment's image tag): the operands, the GPU nodes' deploy labels and the ClusterPolicy's ``status``.

The chart (the real one, or the stand-in under sim/charts, which renders what the real one renders: the
ClusterPolicy, the operator Deployment, RBAC) deploys no operand; this controller does what the real one
does with the ClusterPolicy (``controllers/state_manager.go``, ``object_controls.go``, ``assets/state-*``):

* it acts only while the operator Deployment has a ready replica (the controller runs in that pod), in that
  Deployment's namespace (the real one reads ``OPERATOR_NAMESPACE``, filled from its pod's namespace);
* the oldest ClusterPolicy is the singleton; any other gets ``state: ignored``;
* GPU nodes are those with an NFD label ``feature.node.kubernetes.io/pci-10de.present`` (or
  ``pci-0302_10de``, ``pci-0300_10de``) ``true``: each gets ``nvidia.com/gpu.present=true`` and every
  ``nvidia.com/gpu.deploy.<operand>`` label it lacks as ``true`` (a value already there, ``false`` or a
  ``paused-*``, is honoured, never overwritten); ``mig-manager`` only on MIG-capable GPUs
  (``nvidia.com/mig.capable=true``, or without that label an A100, A30 or H100 product);
* per state, its DaemonSet in the operator namespace when the state is enabled (the field's own default
  when unset: driver, toolkit, device plugin, DCGM, DCGM exporter, GFD and MIG manager on, the node status
  exporter off; the validator always), with the asset's name, ``app`` label and selector, extra labels,
  ``nvidia.com/gpu.deploy.<operand>=true`` node selector, main container, and ``spec.daemonsets``'
  tolerations, priority class, labels and annotations; owned by the ClusterPolicy (controller, blocking
  deletion: the garbage collector removes them with it); updated when its ``nvidia.com/last-applied-hash``
  differs; deleted when its state is disabled; without GPU nodes none is created;
* the RuntimeClass ``nvidia`` (``operator.runtimeClass``) that GPU pods name, owned by the ClusterPolicy;
* the DCGM exporter's Service, and its ServiceMonitor when ``dcgmExporter.serviceMonitor.enabled`` and the
  CRD ``servicemonitors.monitoring.coreos.com`` is served;
* each state walks its operand: a DaemonSet is ready when it schedules no pod, else when
  ``numberUnavailable`` is 0; a DaemonSet that the state should have and that does not exist yet is not
  ready; ``state-dcgm-exporter`` is ``notReady`` while ``spec.dcgmExporter.serviceMonitor.enabled`` is true
  and the ServiceMonitor CRD is absent up to v26.3 (the real operator logs "Install Prometheus and necessary
  CRDs for gathering GPU metrics!" and never becomes ready); from v26.7.0, whose chart enables the
  ServiceMonitor by default, the state becomes ready without the CRD and no ServiceMonitor is created
  ("ServiceMonitor CRD not found, skipping DCGM Exporter ServiceMonitor creation");
* ``status.state`` is ``ready`` only when every state is; else ``notReady`` with the conditions
  ``Ready=False (reason Error)`` and ``Error=True (reason OperandNotReady, message "ClusterPolicy is
  not ready, states not ready: [state-...]")``; ready sets ``Ready=True (Reconciled)``, ``Error=False``.

Left out: the sandbox and vGPU states (off unless ``sandboxWorkloads.enabled``), precompiled and OpenShift
driver variants, the NVIDIADriver CR, the operator-metrics Service, v26.7.0's CC manager state and its
GPUCluster CR (the DRA stack: nothing reconciles it).
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Optional

from simrack.controllers.base import Controller, labels_of
from simrack.controllers.kube import (
    CLUSTERPOLICIES,
    CRDS,
    DAEMONSETS,
    DEPLOYMENTS,
    NODES,
    RUNTIMECLASSES,
    SERVICES,
    Resource,
    owner_reference,
)

log = logging.getLogger("simrack")

OPERATOR_SELECTOR = "app.kubernetes.io/component=gpu-operator"
SERVICE_MONITOR_CRD = "servicemonitors.monitoring.coreos.com"
DEFAULT_OPERATOR = "v25.10.0"
OPTIONAL_SERVICE_MONITOR_CRD = (26, 7)  # from this release the DCGM exporter state is ready without the CRD


def operator_version(image: str) -> tuple[int, ...]:
    """The operator's release from its image tag (``nvcr.io/nvidia/gpu-operator:v26.7.0``); v25.10.0 if unknown."""
    tag = image.rsplit(":", 1)[-1] if ":" in image.rsplit("/", 1)[-1] else DEFAULT_OPERATOR
    try:
        return tuple(int(x) for x in tag.lstrip("v").split("-", 1)[0].split("."))
    except ValueError:
        return (25, 10, 0)


@dataclass(frozen=True)
class Operand:
    """One state's DaemonSet as the operator's asset declares it (assets/<state>/0*_daemonset.yaml)."""

    state: str
    key: Optional[str]  # the ClusterPolicy spec field whose ``enabled`` switches it; None: always on
    default: bool  # what ``IsEnabled()`` answers when the field is unset
    daemonset: str
    deploy: str  # the node selector nvidia.com/gpu.deploy.<deploy>=true
    container: str
    labels: tuple[tuple[str, str], ...] = ()
    image: str = ""  # repository/image when the ClusterPolicy names none


# In the real operator's order of states.
OPERANDS: tuple[Operand, ...] = (
    Operand(
        "state-driver",
        "driver",
        True,
        "nvidia-driver-daemonset",
        "driver",
        "nvidia-driver-ctr",
        (("nvidia.com/precompiled", "false"), ("app.kubernetes.io/component", "nvidia-driver")),
        "nvcr.io/nvidia/driver",
    ),
    Operand(
        "state-container-toolkit",
        "toolkit",
        True,
        "nvidia-container-toolkit-daemonset",
        "container-toolkit",
        "nvidia-container-toolkit-ctr",
        image="nvcr.io/nvidia/k8s/container-toolkit",
    ),
    Operand(
        "state-operator-validation",
        None,
        True,
        "nvidia-operator-validator",
        "operator-validator",
        "nvidia-operator-validator",
        (("app.kubernetes.io/part-of", "gpu-operator"),),
        "nvcr.io/nvidia/cloud-native/gpu-operator-validator",
    ),
    Operand(
        "state-device-plugin",
        "devicePlugin",
        True,
        "nvidia-device-plugin-daemonset",
        "device-plugin",
        "nvidia-device-plugin",
        image="nvcr.io/nvidia/k8s-device-plugin",
    ),
    Operand(
        "state-dcgm", "dcgm", True, "nvidia-dcgm", "dcgm", "nvidia-dcgm-ctr", image="nvcr.io/nvidia/cloud-native/dcgm"
    ),
    Operand(
        "state-dcgm-exporter",
        "dcgmExporter",
        True,
        "nvidia-dcgm-exporter",
        "dcgm-exporter",
        "nvidia-dcgm-exporter",
        image="nvcr.io/nvidia/k8s/dcgm-exporter",
    ),
    Operand(
        "gpu-feature-discovery",
        "gfd",
        True,
        "gpu-feature-discovery",
        "gpu-feature-discovery",
        "gpu-feature-discovery",
        (("app.kubernetes.io/part-of", "nvidia-gpu"),),
        "nvcr.io/nvidia/k8s-device-plugin",
    ),
    Operand(
        "state-mig-manager",
        "migManager",
        True,
        "nvidia-mig-manager",
        "mig-manager",
        "nvidia-mig-manager",
        image="nvcr.io/nvidia/cloud-native/k8s-mig-manager",
    ),
    Operand(
        "state-node-status-exporter",
        "nodeStatusExporter",
        False,
        "nvidia-node-status-exporter",
        "node-status-exporter",
        "nvidia-node-status-exporter",
        image="nvcr.io/nvidia/cloud-native/gpu-operator-validator",
    ),
)

GPU_PRESENT = "nvidia.com/gpu.present"
NFD_GPU_LABELS = (
    "feature.node.kubernetes.io/pci-10de.present",
    "feature.node.kubernetes.io/pci-0302_10de.present",
    "feature.node.kubernetes.io/pci-0300_10de.present",
)
DEPLOY_PREFIX = "nvidia.com/gpu.deploy."
# gpuStateLabels["container"]: every GPU node of a container workload gets these (mig-manager apart).
CONTAINER_DEPLOY = (
    "driver",
    "gpu-feature-discovery",
    "container-toolkit",
    "device-plugin",
    "dcgm",
    "dcgm-exporter",
    "node-status-exporter",
    "operator-validator",
)
HASH_ANNOTATION = "nvidia.com/last-applied-hash"
DEFAULT_TOLERATIONS = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
SERVICE_MONITORS = Resource("monitoring.coreos.com", "v1", "servicemonitors")


def now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _enabled(spec: dict[str, Any], key: Optional[str], default: bool = False) -> bool:
    """``IsEnabled()``: the field's ``enabled``, or ``default`` when the field or its ``enabled`` is unset."""
    if key is None:
        return True
    value = (spec.get(key) or {}).get("enabled")
    if value is None:
        return default
    return value is True or str(value).lower() == "true"


def operand_enabled(spec: dict[str, Any], operand: Operand) -> bool:
    return _enabled(spec, operand.key, operand.default)


def is_gpu_node(node: dict[str, Any]) -> bool:
    """``gpuNodeLabels``: an NFD label of an NVIDIA PCI device, true."""
    labels = labels_of(node)
    return any(labels.get(key) == "true" for key in NFD_GPU_LABELS)


def mig_capable(labels: dict[str, str]) -> bool:
    """``hasMIGCapableGPU``: the mig.capable label, else an A100, A30 or H100 product; never on a vGPU host."""
    if labels.get("nvidia.com/vgpu.host-driver-version"):
        return False
    if "nvidia.com/mig.capable" in labels:
        return labels["nvidia.com/mig.capable"] == "true"
    product = labels.get("nvidia.com/gpu.product", "").lower()
    return any(name in product for name in ("h100", "a100", "a30"))


def node_label_patch(node: dict[str, Any]) -> dict[str, Optional[str]]:
    """The labels the operator adds to a node (``labelGPUNodes``): empty when nothing is missing.

    A GPU node gets ``gpu.present=true`` and each deploy label it lacks as ``true``; a value already there is
    honoured. A node that was a GPU node and no longer is gets ``gpu.present=false`` and loses its deploy labels.
    """
    labels = labels_of(node)
    patch: dict[str, Optional[str]] = {}
    if not is_gpu_node(node):
        if labels.get(GPU_PRESENT) == "true":
            patch[GPU_PRESENT] = "false"
            patch.update(dict.fromkeys((k for k in labels if k.startswith(DEPLOY_PREFIX)), None))
        return patch
    if labels.get(GPU_PRESENT) != "true":
        patch[GPU_PRESENT] = "true"
    if labels.get(DEPLOY_PREFIX + "operands") == "false":
        return dict(
            patch,
            **dict.fromkeys(
                (k for k in labels if k.startswith(DEPLOY_PREFIX) and k != DEPLOY_PREFIX + "operands"), None
            ),
        )
    wanted = list(CONTAINER_DEPLOY) + (["mig-manager"] if mig_capable(labels) else [])
    patch.update({DEPLOY_PREFIX + name: "true" for name in wanted if DEPLOY_PREFIX + name not in labels})
    return patch


def _image(spec: dict[str, Any], operand: Operand) -> str:
    field = spec.get(operand.key or "validator") or {}
    repository, image, version = field.get("repository"), field.get("image"), field.get("version")
    if repository and image:
        return f"{repository}/{image}" + (f":{version}" if version else "")
    return operand.image + (f":{version}" if version else "")


def operand_daemonset(spec: dict[str, Any], operand: Operand, namespace: str) -> dict[str, Any]:
    """The DaemonSet the operator applies for ``operand`` (without its owner), its hash annotated."""
    common = spec.get("daemonsets") or {}
    app = {"app": operand.daemonset}
    extra = dict(operand.labels)
    site = {k: str(v) for k, v in (common.get("labels") or {}).items()}
    container: dict[str, Any] = {"name": operand.container, "image": _image(spec, operand)}
    if operand.key == "toolkit":
        cdi = spec.get("cdi") or {}
        env = [
            {"name": "CDI_ENABLED", "value": str(_enabled(spec, "cdi", False)).lower()},
            {"name": "NVIDIA_CONTAINER_RUNTIME_MODE", "value": "cdi" if cdi.get("default") is True else "legacy"},
            {"name": "RUNTIME", "value": str((spec.get("operator") or {}).get("defaultRuntime") or "containerd")},
        ]
        container["env"] = env + list((spec.get("toolkit") or {}).get("env") or [])
    body = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {
            "name": operand.daemonset,
            "namespace": namespace,
            "labels": {**site, **app, **extra},
            "annotations": {k: str(v) for k, v in (common.get("annotations") or {}).items()},
        },
        "spec": {
            "selector": {"matchLabels": dict(app)},
            # the driver's asset sets OnDelete, which the operator never switches (applyUpdateStrategyConfig)
            "updateStrategy": {
                "type": "OnDelete" if operand.key == "driver" else str(common.get("updateStrategy") or "RollingUpdate")
            },
            "template": {
                "metadata": {
                    "labels": {
                        **{k: v for k, v in site.items() if k not in ("app", "app.kubernetes.io/part-of")},
                        **app,
                        **extra,
                    }
                },
                "spec": {
                    "nodeSelector": {DEPLOY_PREFIX + operand.deploy: "true"},
                    "tolerations": list(common.get("tolerations") or DEFAULT_TOLERATIONS),
                    "priorityClassName": str(common.get("priorityClassName") or "system-node-critical"),
                    "containers": [container],
                },
            },
        },
    }
    digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:16]
    body["metadata"]["annotations"][HASH_ANNOTATION] = digest
    return body


def daemonset_ready(ds: Optional[dict[str, Any]]) -> bool:
    """``isDaemonSetReady``: nothing to schedule is ready; else no unavailable pod."""
    if ds is None:
        return False
    status = ds.get("status") or {}
    if int(status.get("desiredNumberScheduled") or 0) == 0:
        return True
    return int(status.get("numberUnavailable") or 0) == 0 and int(status.get("numberReady") or 0) > 0


def states_not_ready(
    spec: dict[str, Any],
    daemonsets: dict[str, dict[str, Any]],
    service_monitor_crd: bool,
    version: tuple[int, ...] = (25, 10, 0),
) -> list[str]:
    """The names of the enabled states whose operand is not ready, in the operator's order (``version``'s rules)."""
    out = []
    for operand in OPERANDS:
        state, ds_name = operand.state, operand.daemonset
        if not operand_enabled(spec, operand):
            continue
        ready = daemonset_ready(daemonsets.get(ds_name))
        monitor = _enabled(spec.get("dcgmExporter") or {}, "serviceMonitor")
        missing_crd = monitor and not service_monitor_crd and version < OPTIONAL_SERVICE_MONITOR_CRD
        if state == "state-dcgm-exporter" and missing_crd:
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


def runtime_class(spec: dict[str, Any]) -> dict[str, Any]:
    """The RuntimeClass the operator makes for its operands and for GPU pods (transformRuntimeClass): named, and
    with a handler named, after ``operator.runtimeClass`` (default ``nvidia``)."""
    name = str((spec.get("operator") or {}).get("runtimeClass") or "nvidia")
    return {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": name}, "handler": name}


def exporter_service(namespace: str) -> dict[str, Any]:
    """The DCGM exporter's metrics Service (assets/state-dcgm-exporter/0700_service.yaml)."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "nvidia-dcgm-exporter", "namespace": namespace, "labels": {"app": "nvidia-dcgm-exporter"}},
        "spec": {
            "type": "ClusterIP",
            "selector": {"app": "nvidia-dcgm-exporter"},
            "ports": [{"name": "gpu-metrics", "port": 9400, "targetPort": 9400, "protocol": "TCP"}],
        },
    }


def exporter_service_monitor(namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "ServiceMonitor",
        "metadata": {"name": "nvidia-dcgm-exporter", "namespace": namespace, "labels": {"app": "nvidia-dcgm-exporter"}},
        "spec": {
            "selector": {"matchLabels": {"app": "nvidia-dcgm-exporter"}},
            "namespaceSelector": {"matchNames": [namespace]},
            "endpoints": [{"port": "gpu-metrics", "path": "/metrics"}],
        },
    }


class GPUOperatorController(Controller):
    name = "gpu-operator"
    watched = (CLUSTERPOLICIES, DAEMONSETS, DEPLOYMENTS)
    resync = 3.0

    version: tuple[int, ...] = (25, 10, 0)  # the running operator's release: its rules are followed

    def operator_namespace(self) -> Optional[str]:
        for dep in self.kube.list(DEPLOYMENTS, label_selector=OPERATOR_SELECTOR):
            if (dep.get("status") or {}).get("readyReplicas", 0) >= 1:
                containers = ((dep.get("spec") or {}).get("template") or {}).get("spec", {}).get("containers") or [{}]
                self.version = operator_version(str(containers[0].get("image") or ""))
                return dep["metadata"]["namespace"]
        return None

    def reconcile(self) -> None:
        policies = sorted(self.kube.list(CLUSTERPOLICIES), key=_created)
        if not policies:
            return
        namespace = self.operator_namespace()
        if namespace is None:
            return
        gpu_nodes = self.label_nodes()
        singleton, *others = policies
        spec = singleton.get("spec") or {}
        crd = self.kube.get(CRDS, SERVICE_MONITOR_CRD) is not None
        not_ready: list[str] = []
        if gpu_nodes:  # without a GPU node the operator creates no operand and calls every state ready
            self.apply_operands(singleton, spec, namespace, crd)
            daemonsets = {d["metadata"]["name"]: d for d in self.kube.list(DAEMONSETS, namespace)}
            not_ready = states_not_ready(spec, daemonsets, crd, self.version)
        status = policy_status(not_ready, singleton.get("status") or {}, namespace, has_gpu_nodes=gpu_nodes > 0)
        self.write(singleton, status)
        for policy in others:
            self.write(policy, {"state": "ignored", "namespace": namespace})

    def label_nodes(self) -> int:
        """Give each GPU node the labels it lacks (``labelGPUNodes``); the number of GPU nodes."""
        count = 0
        for node in self.kube.list(NODES):
            patch = node_label_patch(node)
            if patch:
                self.kube.merge_patch(NODES, node["metadata"]["name"], {"metadata": {"labels": patch}})
            count += is_gpu_node(node)
        return count

    def apply_operands(self, policy: dict[str, Any], spec: dict[str, Any], namespace: str, crd: bool) -> None:
        """Each enabled state's DaemonSet created or brought to its hash; each disabled state's deleted."""
        owner = owner_reference(policy)
        existing = {d["metadata"]["name"]: d for d in self.kube.list(DAEMONSETS, namespace)}
        for operand in OPERANDS:
            current = existing.get(operand.daemonset)
            if not operand_enabled(spec, operand):
                if current is not None:
                    self.kube.delete(DAEMONSETS, operand.daemonset, namespace)
                    log.info("%s disabled: DaemonSet %s/%s deleted", operand.state, namespace, operand.daemonset)
                continue
            wanted = operand_daemonset(spec, operand, namespace)
            wanted["metadata"]["ownerReferences"] = [owner]
            if current is None:
                self.kube.create(DAEMONSETS, wanted, namespace)
                log.info("%s: DaemonSet %s/%s created", operand.state, namespace, operand.daemonset)
            elif (current["metadata"].get("annotations") or {}).get(HASH_ANNOTATION) != wanted["metadata"][
                "annotations"
            ][HASH_ANNOTATION]:
                self.kube.merge_patch(
                    DAEMONSETS,
                    operand.daemonset,
                    {"metadata": {k: wanted["metadata"][k] for k in ("labels", "annotations")}, "spec": wanted["spec"]},
                    namespace,
                )
                log.info("%s: DaemonSet %s/%s updated", operand.state, namespace, operand.daemonset)
        runtime = runtime_class(spec)
        if self.kube.get(RUNTIMECLASSES, runtime["metadata"]["name"]) is None:
            runtime["metadata"]["ownerReferences"] = [owner]
            self.kube.create(RUNTIMECLASSES, runtime)
            log.info("RuntimeClass %s created", runtime["metadata"]["name"])
        exporter = _enabled(spec, "dcgmExporter", True)
        self.ensure(SERVICES, exporter_service(namespace), exporter, owner)
        monitor = exporter and _enabled(spec.get("dcgmExporter") or {}, "serviceMonitor", False)
        if crd:
            self.ensure(SERVICE_MONITORS, exporter_service_monitor(namespace), monitor, owner)

    def ensure(self, res: Resource, body: dict[str, Any], present: bool, owner: dict[str, Any]) -> None:
        meta = body["metadata"]
        current = self.kube.get(res, meta["name"], meta["namespace"])
        if present and current is None:
            meta["ownerReferences"] = [owner]
            self.kube.create(res, body, meta["namespace"])
        elif not present and current is not None:
            self.kube.delete(res, meta["name"], meta["namespace"])

    def write(self, policy: dict[str, Any], status: dict[str, Any]) -> None:
        old = policy.get("status") or {}
        if all(old.get(k) == v for k, v in status.items()):
            return
        self.kube.merge_patch(CLUSTERPOLICIES, policy["metadata"]["name"], {"status": status}, sub="status")
        if old.get("state") != status["state"]:
            log.info("ClusterPolicy %s: %s", policy["metadata"]["name"], status["state"])
