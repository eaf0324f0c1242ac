# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Whether a deployed component has rolled out: the judges and messages of the gpu_operator, dra_driver and
mpi_operator roles' waits.

Each judge is a function of the objects as the API server lists them (plain dicts); the waits read until a
judge is satisfied through ``k8s.api_poll`` (the collection's one rule for waiting, ``retry.poll``, with the
API's transient errors read again), so that an API server restart during a wait is waited out, not reported.
The messages name what is missing and where to look.

>>> not_ready_pods([{"metadata": {"name": "gpu-operator-1"}, "status": {"phase": "Pending"}}])
['gpu-operator-1 (Pending)']
>>> missing(["t2", "t10", "t1"], {"t1"})
['t2', 't10']
"""

from __future__ import annotations

import json
from typing import (
    Any,
    Dict,
    Iterable,
    List,
    Mapping,
    Sequence,
    Set,
    TypeVar,
)

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.cliques import GPU_RESOURCE, gpu_count
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.text import natural_key

T = TypeVar("T")

CONTROLLER_SELECTOR = "nvidia-dra-driver-gpu-component=controller"
PLUGIN_SELECTOR = "nvidia-dra-driver-gpu-component=kubelet-plugin"


def _name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def is_ready(pod: Mapping[str, Any]) -> bool:
    """The pod's Ready condition is True."""
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions if isinstance(c, Mapping))


def not_ready_pods(pods: Iterable[Mapping[str, Any]]) -> List[str]:
    """``name (Phase)`` of every pod that is neither Ready nor Succeeded (a finished Job's pod)."""
    found = []
    for pod in pods:
        phase = str((pod.get("status") or {}).get("phase") or "Unknown")
        if phase != "Succeeded" and not is_ready(pod):
            found.append(f"{_name(pod)} ({phase})")
    return sorted(found, key=natural_key)


def ready_pod_nodes(pods: Iterable[Mapping[str, Any]]) -> Set[str]:
    """The nodes that run a Ready pod of ``pods``."""
    return {str((pod.get("spec") or {}).get("nodeName") or "") for pod in pods if is_ready(pod)} - {""}


def gpu_capacity(nodes: Iterable[Mapping[str, Any]]) -> Dict[str, int]:
    """``nvidia.com/gpu`` per node (:func:`cliques.gpu_count`: 0 until the device plugin reports it), in name order."""
    counts = {_name(node): gpu_count(node) for node in nodes}
    return dict(sorted(counts.items(), key=lambda item: natural_key(item[0])))


def slice_nodes(slices: Iterable[Mapping[str, Any]], driver: str) -> Set[str]:
    """The nodes with a ResourceSlice of ``driver``."""
    found = set()
    for item in slices:
        spec = item.get("spec") or {}
        if spec.get("driver") == driver and spec.get("nodeName"):
            found.add(str(spec["nodeName"]))
    return found


def deployment_available(deployment: Any) -> bool:
    """Whether a Deployment (a dict, or None when absent) has the condition Available=True."""
    conditions = ((deployment or {}).get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Available" and str(c.get("status")) == "True" for c in conditions)


def served_versions(crd: Any) -> List[str]:
    """The versions a CustomResourceDefinition (a dict, or None) serves, in its order."""
    versions = ((crd or {}).get("spec") or {}).get("versions") or []
    return [str(v.get("name")) for v in versions if isinstance(v, Mapping) and v.get("served")]


def deployment_images(deployment: Any) -> List[str]:
    """The images of a Deployment's containers (a dict, or None)."""
    spec = ((((deployment or {}).get("spec") or {}).get("template") or {}).get("spec")) or {}
    return [str(c.get("image")) for c in spec.get("containers") or [] if isinstance(c, Mapping) and c.get("image")]


def missing(expected: Iterable[str], present: Iterable[str]) -> List[str]:
    """What of ``expected`` is not in ``present``, in name order."""
    have = set(present)
    return sorted({name for name in expected if name not in have}, key=natural_key)


# ---------------------------------------------------------------------------------------------
# Messages
# ---------------------------------------------------------------------------------------------


def operator_pods_message(namespace: str, timeout: int, not_ready: Sequence[str]) -> str:
    return (
        f"GPU Operator pods not ready after {timeout}s in namespace {namespace}: "
        f"{', '.join(not_ready) if not_ready else 'no pod at all'}. Read them with "
        f"`kubectl -n {namespace} describe pod` (driver container builds take minutes)."
    )


def gpu_nodes_message(selector: str, timeout: int, capacity: Mapping[str, int]) -> str:
    if not capacity:
        return f"No node matches {selector}; set gpu_fabric_gpu_node_selector to a label your GPU nodes carry"
    without = [name for name, count in capacity.items() if count == 0]
    return (
        f"GPU nodes without {GPU_RESOURCE} capacity after {timeout}s: {', '.join(without)}; "
        "check the device plugin and driver pods on them"
    )


def gpu_nodes_summary(capacity: Mapping[str, int]) -> str:
    return f"{len(capacity)} GPU nodes: " + ", ".join(f"{name}={count}" for name, count in capacity.items())


def controller_message(namespace: str, timeout: int, pods: Sequence[Mapping[str, Any]]) -> str:
    states = [f"{_name(p)} {(p.get('status') or {}).get('phase') or 'Unknown'}" for p in pods]
    return (
        f"The DRA driver controller is not Ready after {timeout}s in namespace {namespace}: "
        f"{', '.join(states) or 'no controller pod'}. A Pending controller usually means no schedulable "
        "node-role.kubernetes.io/control-plane node: set dra_driver_controller_fallback_affinity."
    )


def plugin_message(namespace: str, timeout: int, nodes: Sequence[str]) -> str:
    return (
        f"The DRA kubelet plugin is not Ready on {len(nodes)} GPU node(s) after {timeout}s: {', '.join(nodes)}. "
        f"Check `kubectl -n {namespace} get pods -l {PLUGIN_SELECTOR} -o wide`: a looping init container means a "
        "wrong nvidiaDriverRoot; no pod means the nodes lack NFD/GPU labels or carry taints the plugin does not "
        "tolerate (gpu_fabric_gpu_tolerations)."
    )


def device_class_message(absent: Sequence[str], chart: str, namespace: str, release: str) -> str:
    return (
        f"DeviceClass missing: {', '.join(absent)} (expected from chart {chart} with "
        f"resources.computeDomains.enabled=true). Check the release's values "
        f"(`helm -n {namespace} get values {release}`) and re-run this role."
    )


def slice_message(driver: str, nodes: Sequence[str], namespace: str) -> str:
    return (
        f"No ResourceSlice of driver {driver} for GPU node(s): {', '.join(nodes)}. The kubelet plugin on those "
        f"nodes publishes channel-0 and daemon-0; read its logs "
        f"(`kubectl -n {namespace} logs -l {PLUGIN_SELECTOR} -c compute-domains`)."
    )


def dra_summary(chart: str, nodes: Sequence[str], device_classes: Sequence[str], api_version: str) -> str:
    return (
        f"DRA driver {chart} ready: controller Ready, kubelet plugin Ready on {len(nodes)} GPU nodes, "
        f"DeviceClasses {', '.join(device_classes)}, ResourceSlices on every GPU node ({api_version})."
    )


def deployment_message(namespace: str, name: str, timeout: int, deployment: Any) -> str:
    """A Deployment not Available in time: its status (or that it does not exist) and where to look."""
    if not deployment:
        state = "not found"
    else:
        found = deployment.get("status") or {}
        state = json.dumps(
            {k: found[k] for k in ("replicas", "readyReplicas", "availableReplicas", "conditions") if k in found},
            sort_keys=True,
        )
    images = ", ".join(deployment_images(deployment)) or "its image"
    return (
        f"Deployment {namespace}/{name} is not Available after {timeout}s ({state}). Check its pods: "
        f"`kubectl -n {namespace} get pods` (image pull of {images}?)."
    )


def crd_message(crd_name: str, version: str, crd: Any) -> str:
    if not crd:
        return f"The {crd_name} CustomResourceDefinition is missing; the manifest applied did not create it."
    served = ", ".join(served_versions(crd)) or "none"
    return (
        f"The {crd_name} CustomResourceDefinition does not serve {version} (served: {served}); "
        "apply the manifest of an MPI operator release that serves it (mpi_operator_manifest_url)."
    )


def mpi_operator_summary(namespace: str, name: str, deployment: Mapping[str, Any], crd_name: str, version: str) -> str:
    found = deployment.get("status") or {}
    return (
        f"MPI operator {namespace}/{name} Available ({found.get('availableReplicas', 0)}/{found.get('replicas', 0)} "
        f"replicas, {', '.join(deployment_images(deployment)) or 'no image'}); {crd_name} serves {version}."
    )
