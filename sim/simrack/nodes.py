# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""KWOK nodes that look like GB200 compute trays to the API, and the node faults.

A GB200 NVL72 rack holds 18 compute trays of 4 GPUs each, all in one NVLink domain: GPU Feature
Discovery labels every tray of the rack with the same ``nvidia.com/gpu.clique`` value,
``<clusterUUID>.<cliqueId>`` (the real value seen on a rack: ``69a19a31-....32766``).
"""

from __future__ import annotations

import json
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Optional

from simrack import hardware

CLIQUE_LABEL = "nvidia.com/gpu.clique"
# The rack of a tray: label value rack<N> (what the collection names racks by, through its
# gpu_fabric_rack_label), annotation value <N> (older readers).
RACK_LABEL = "gpu-fabric.sim/rack"
RACK_ANNOTATION = "gpu-fabric.sim/rack"
GPU_RESOURCE = "nvidia.com/gpu"
GPU_COUNT_LABEL = "nvidia.com/gpu.count"
# The tenant pods of the busy-node fault live here (created on demand, removed when empty).
BUSY_NAMESPACE = "gpu-fabric-sim-busy"
FAULT_LABEL = "gpu-fabric.sim/fault"
CONTROL_PLANE_NODE = "sim-control-plane"
CLIQUE_ID = 32766
# The second clique of the split-clique fault: same NVLink domain, a different partition.
SPLIT_CLIQUE_ID = 32765
GPUS_PER_TRAY = hardware.GPUS_PER_TRAY
TRAY_PREFIX = "gb200-r"
_UUID_NAMESPACE = uuid.UUID("6f1c1a57-4e0b-4f0e-9d0a-67b200f0a872")

Progress = Callable[[str], None]


def tray_name(rack: int, tray: int) -> str:
    return f"gb200-r{rack}-t{tray}"


def parse_tray_name(name: str) -> Optional[tuple[int, int]]:
    """(rack, tray) of a tray node name, None for any other node."""
    if not name.startswith(TRAY_PREFIX) or "-t" not in name:
        return None
    rack, tray = name[len(TRAY_PREFIX) :].split("-t", 1)
    if not (rack.isdigit() and tray.isdigit()):
        return None
    return int(rack), int(tray)


def cluster_uuid(rack: int) -> str:
    """One NVLink domain per rack; the same UUID every time the rack comes up."""
    return str(uuid.uuid5(_UUID_NAMESPACE, f"gb200-nvl72-rack-{rack}"))


def clique_value(rack: int, clique_id: int = CLIQUE_ID) -> str:
    return f"{cluster_uuid(rack)}.{clique_id}"


def tray_names(racks: int, trays_per_rack: int) -> list[str]:
    return [tray_name(r, t) for r in range(racks) for t in range(trays_per_rack)]


def rack_label_value(rack: int) -> str:
    return f"rack{rack}"


def _node_info(architecture: str, kubelet_version: str) -> dict[str, str]:
    return {
        "architecture": architecture,
        "operatingSystem": "linux",
        "osImage": "Ubuntu 24.04.3 LTS",
        "kernelVersion": "6.8.0-1031-nvidia-64k",
        "containerRuntimeVersion": "containerd://1.7.29",
        "kubeletVersion": kubelet_version,
        "kubeProxyVersion": kubelet_version,
        "bootID": "",
        "machineID": "",
        "systemUUID": "",
    }


def tray_node(
    rack: int, tray: int, kubelet_version: str, gpus: int = GPUS_PER_TRAY, allocatable: Optional[int] = None
) -> dict[str, Any]:
    """A Node as a GB200 compute tray's kubelet, GFD and NFD leave it (status set on create): ``gpus`` the GPUs
    enumerated (capacity, ``nvidia.com/gpu.count``), ``allocatable`` the healthy ones (default all)."""
    name = tray_name(rack, tray)
    resources = {
        "cpu": "144",
        "memory": "880Gi",
        "ephemeral-storage": "3Ti",
        "pods": "110",
        GPU_RESOURCE: str(gpus),
    }
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "type": "kwok",
                "kubernetes.io/hostname": name,
                "kubernetes.io/arch": "arm64",
                "kubernetes.io/os": "linux",
                "beta.kubernetes.io/arch": "arm64",
                "beta.kubernetes.io/os": "linux",
                CLIQUE_LABEL: clique_value(rack),
                RACK_LABEL: rack_label_value(rack),
                "nvidia.com/gpu.present": "true",
                "nvidia.com/gpu.product": "NVIDIA-GB200",
                GPU_COUNT_LABEL: str(gpus),
                "nvidia.com/gpu.memory": "189471",
                "feature.node.kubernetes.io/pci-10de.present": "true",
            },
            "annotations": {
                RACK_ANNOTATION: str(rack),
                "kwok.x-k8s.io/node": "fake",
                "node.alpha.kubernetes.io/ttl": "0",
            },
        },
        "spec": {},
        "status": {
            "capacity": dict(resources),
            "allocatable": {**resources, GPU_RESOURCE: str(gpus if allocatable is None else allocatable)},
            "nodeInfo": _node_info("arm64", kubelet_version),
            "phase": "Pending",
        },
    }


def control_plane_node(kubelet_version: str) -> dict[str, Any]:
    """The one schedulable control-plane node: no GPUs, room for the operators' pods."""
    resources = {"cpu": "32", "memory": "128Gi", "ephemeral-storage": "500Gi", "pods": "250"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": CONTROL_PLANE_NODE,
            "labels": {
                "type": "kwok",
                "kubernetes.io/hostname": CONTROL_PLANE_NODE,
                "kubernetes.io/arch": "amd64",
                "kubernetes.io/os": "linux",
                "node-role.kubernetes.io/control-plane": "",
            },
            "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
        },
        "spec": {},
        "status": {
            "capacity": dict(resources),
            "allocatable": dict(resources),
            "nodeInfo": _node_info("amd64", kubelet_version),
            "phase": "Pending",
        },
    }


def desired_clique_labels(
    racks: int, trays_per_rack: int, faults: dict[str, dict[str, Any]]
) -> dict[str, Optional[str]]:
    """The clique label every tray should carry given the active faults (None: no label)."""
    labels: dict[str, Optional[str]] = {
        tray_name(r, t): clique_value(r) for r in range(racks) for t in range(trays_per_rack)
    }
    if "split-clique" in faults:
        rack = int(faults["split-clique"].get("rack", 0))
        if not 0 <= rack < racks:
            raise ValueError(f"split-clique: rack={rack} is not in this sim (racks 0..{racks - 1})")
        if trays_per_rack < 2:
            raise ValueError("split-clique needs at least 2 trays per rack")
        for t in range(trays_per_rack // 2, trays_per_rack):
            labels[tray_name(rack, t)] = clique_value(rack, SPLIT_CLIQUE_ID)
    if "unlabelled-node" in faults:
        node = str(faults["unlabelled-node"].get("node") or default_unlabelled_node(racks, trays_per_rack))
        if node not in labels:
            raise ValueError(f"unlabelled-node: node={node} is not a tray of this sim (e.g. {tray_name(0, 0)})")
        labels[node] = None
    return labels


def default_unlabelled_node(racks: int, trays_per_rack: int) -> str:
    return tray_name(racks - 1, trays_per_rack - 1)


def _check_fault_trays(racks: int, trays_per_rack: int, faults: dict[str, dict[str, Any]]) -> None:
    names = set(tray_names(racks, trays_per_rack))
    for fault in hardware.HARDWARE_FAULTS:
        if fault in faults and "node" in hardware.HARDWARE_PARAMS[fault]:
            node = str(faults[fault].get("node") or "")
            if node not in names:
                raise ValueError(f"{fault}: node={node} is not a tray of this sim (e.g. {tray_name(0, 0)})")


def desired_gpus(racks: int, trays_per_rack: int, faults: dict[str, dict[str, Any]]) -> dict[str, int]:
    """The nvidia.com/gpu capacity (and nvidia.com/gpu.count) every tray should report given the active faults:
    the GPUs its hardware model enumerates (``hardware.Tray.capacity``)."""
    _check_fault_trays(racks, trays_per_rack, faults)
    return {name: hardware.tray(faults, name).capacity for name in tray_names(racks, trays_per_rack)}


def desired_allocatable(racks: int, trays_per_rack: int, faults: dict[str, dict[str, Any]]) -> dict[str, int]:
    """The nvidia.com/gpu allocatable of every tray: the enumerated GPUs the driver still reaches (the device
    plugin marks a GPU that fell off the bus unhealthy; ``hardware.Tray.allocatable``)."""
    _check_fault_trays(racks, trays_per_rack, faults)
    return {name: hardware.tray(faults, name).allocatable for name in tray_names(racks, trays_per_rack)}


def desired_tray_labels(
    racks: int, trays_per_rack: int, faults: dict[str, dict[str, Any]]
) -> dict[str, dict[str, Optional[str]]]:
    """The labels the sim owns on every tray (clique, rack, GPU count); None: label absent."""
    cliques = desired_clique_labels(racks, trays_per_rack, faults)
    gpus = desired_gpus(racks, trays_per_rack, faults)
    return {
        tray_name(r, t): {
            CLIQUE_LABEL: cliques[tray_name(r, t)],
            RACK_LABEL: rack_label_value(r),
            GPU_COUNT_LABEL: str(gpus[tray_name(r, t)]),
        }
        for r in range(racks)
        for t in range(trays_per_rack)
    }


TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def parse_taint(text: str) -> Optional[dict[str, str]]:
    """``KEY=VALUE:EFFECT`` (or ``KEY:EFFECT``) as a Node taint, as ``kubectl taint`` writes one; None for ""."""
    text = text.strip()
    if not text or text.lower() == "none":
        return None
    head, sep, effect = text.rpartition(":")
    if not sep or effect not in TAINT_EFFECTS or not head:
        raise ValueError(f"taint {text!r}: expected KEY=VALUE:EFFECT, EFFECT one of {', '.join(TAINT_EFFECTS)}")
    key, _sep, value = head.partition("=")
    if not key:
        raise ValueError(f"taint {text!r}: the key is empty")
    taint = {"key": key, "effect": effect}
    if value:
        taint["value"] = value
    return taint


def tainted(current: list[dict[str, Any]], wanted: Optional[dict[str, str]], previous: Optional[dict[str, str]]):
    """The tray's taints with ``previous`` (the sim's former GPU taint) replaced by ``wanted``; others kept
    (the collection's own taint on failed trays, a test's). None when nothing changes."""

    def same(a: dict[str, Any], b: Optional[dict[str, str]]) -> bool:
        return b is not None and a.get("key") == b["key"] and a.get("effect") == b["effect"]

    kept = [t for t in current if not same(t, previous) and not same(t, wanted)]
    new = kept + ([dict(wanted)] if wanted else [])
    strip = [{k: v for k, v in t.items() if k != "timeAdded"} for t in current]
    return None if sorted(map(json.dumps, new)) == sorted(map(json.dumps, strip)) else new


def apply_gpu_taint(core: Any, taint: Optional[dict[str, str]], previous: Optional[dict[str, str]]) -> list[str]:
    """Put ``taint`` on every tray (not the control-plane node), replacing the sim's ``previous`` one; the
    trays changed."""
    changes = {}
    for node in list_nodes(core, "type=kwok"):
        if parse_tray_name(node["metadata"]["name"]) is None:
            continue
        new = tainted((node.get("spec") or {}).get("taints") or [], taint, previous)
        if new is not None:
            changes[node["metadata"]["name"]] = new

    def patch(name: str) -> None:
        core.patch_node(name, {"spec": {"taints": changes[name]}})

    _parallel(patch, sorted(changes))
    return sorted(changes)


def list_nodes(core: Any, label_selector: str = "") -> list[dict[str, Any]]:
    """Nodes as plain JSON: building client models for thousands of Nodes costs seconds."""
    response = core.list_node(label_selector=label_selector, _preload_content=False)
    return json.loads(response.data)["items"]


def _parallel(fn: Callable[[Any], Any], items: list[Any], workers: int = 8) -> list[Any]:
    if len(items) <= 1:
        return [fn(i) for i in items]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(fn, items))


def reconcile_nodes(
    core: Any,
    racks: int,
    trays_per_rack: int,
    kubelet_version: str,
    progress: Progress,
    faults: Optional[dict[str, dict[str, Any]]] = None,
) -> tuple[int, int]:
    """Create the missing trays (and the control-plane node), delete trays beyond the size asked.

    New trays are created as the active node faults want them (labels, GPU count)."""
    from kubernetes.client.exceptions import ApiException

    existing = {n["metadata"]["name"] for n in list_nodes(core)}
    faults = faults or {}
    gpus = desired_gpus(racks, trays_per_rack, faults)
    allocatable = desired_allocatable(racks, trays_per_rack, faults)
    labels = desired_tray_labels(racks, trays_per_rack, faults)
    trays = []
    for r in range(racks):
        for t in range(trays_per_rack):
            body = tray_node(r, t, kubelet_version, gpus[tray_name(r, t)], allocatable[tray_name(r, t)])
            for key, value in labels[tray_name(r, t)].items():
                if value is None:
                    body["metadata"]["labels"].pop(key, None)
                else:
                    body["metadata"]["labels"][key] = value
            trays.append(body)
    wanted = [control_plane_node(kubelet_version), *trays]
    wanted_names = {n["metadata"]["name"] for n in wanted}
    to_create = [n for n in wanted if n["metadata"]["name"] not in existing]
    to_delete = sorted(n for n in existing if parse_tray_name(n) and n not in wanted_names)

    def create(body: dict[str, Any]) -> None:
        try:
            core.create_node(body)
        except ApiException as exc:
            if exc.status != 409:
                raise

    def delete(name: str) -> None:
        try:
            core.delete_node(name)
        except ApiException as exc:
            if exc.status != 404:
                raise

    if to_create:
        progress(f"creating {len(to_create)} nodes ({racks} rack(s) x {trays_per_rack} GB200 trays + control plane)")
        _parallel(create, to_create)
    if to_delete:
        progress(f"deleting {len(to_delete)} trays beyond {racks} x {trays_per_rack}")
        _parallel(delete, to_delete)
    collect_orphaned_pods(core, progress)
    return len(to_create), len(to_delete)


def orphaned_pods(pods: list[dict[str, Any]], node_names: set[str]) -> list[tuple[str, str]]:
    """(namespace, name) of the pods bound to a node that does not exist."""
    return sorted(
        (p["metadata"]["namespace"], p["metadata"]["name"])
        for p in pods
        if (p.get("spec") or {}).get("nodeName") and p["spec"]["nodeName"] not in node_names
    )


def collect_orphaned_pods(core: Any, progress: Progress) -> int:
    """Delete, at once and with no grace period, the pods of trays that are gone.

    A real cluster's pod garbage collector (kube-controller-manager's podgc) does the same after a
    40 s quarantine, at the controller manager's client rate (about 10 pods a second): minutes for a
    rack's DaemonSet pods, during which a stage waiting for "every pod ready" sees them. The sim's
    kube-controller-manager runs that collector too; this only does its work before ``up`` returns,
    so a shrunk rack is settled when ``up`` says so (and a rack left with such pods heals on ``up``)."""
    from kubernetes.client.exceptions import ApiException

    names = {n["metadata"]["name"] for n in list_nodes(core)}
    response = core.list_pod_for_all_namespaces(_preload_content=False)
    orphans = orphaned_pods(json.loads(response.data)["items"], names)
    if not orphans:
        return 0

    def delete(pod: tuple[str, str]) -> None:
        try:
            core.delete_namespaced_pod(pod[1], pod[0], grace_period_seconds=0)
        except ApiException as exc:
            if exc.status != 404:
                raise

    progress(f"deleting {len(orphans)} pods of trays that are gone (what the pod garbage collector does)")
    _parallel(delete, orphans)
    return len(orphans)


def tray_changes(
    nodes: list[dict[str, Any]], racks: int, trays_per_rack: int, faults: dict[str, dict[str, Any]]
) -> dict[str, dict[str, Any]]:
    """Per tray that differs from what the faults want: ``{"labels": {...}, "gpus": N}`` (either key; ``gpus`` the
    capacity, with ``"allocatable": M`` when the allocatable GPUs are fewer)."""
    labels = desired_tray_labels(racks, trays_per_rack, faults)
    gpus = desired_gpus(racks, trays_per_rack, faults)
    allocatable = desired_allocatable(racks, trays_per_rack, faults)
    changes: dict[str, dict[str, Any]] = {}
    for node in nodes:
        name = node["metadata"]["name"]
        if name not in labels:
            continue
        current = node["metadata"].get("labels") or {}
        label_patch = {k: v for k, v in labels[name].items() if current.get(k) != v}
        status = node.get("status") or {}
        want = {"capacity": str(gpus[name]), "allocatable": str(allocatable[name])}
        gpus_differ = any((status.get(part) or {}).get(GPU_RESOURCE) != want[part] for part in want)
        change: dict[str, Any] = {}
        if label_patch:
            change["labels"] = label_patch
        if gpus_differ:
            change["gpus"] = gpus[name]
            if allocatable[name] != gpus[name]:
                change["allocatable"] = allocatable[name]
        if change:
            changes[name] = change
    return changes


def apply_tray_state(core: Any, racks: int, trays_per_rack: int, faults: dict[str, dict[str, Any]]) -> list[str]:
    """Bring every tray's labels (clique, rack, GPU count) and its nvidia.com/gpu capacity and
    allocatable to what its hardware model says (``simrack.hardware``); returns the nodes changed.

    The GPU count is written to the status subresource, as a device plugin's kubelet would; KWOK
    keeps it (its stages copy capacity and allocatable from the Node and renew only conditions).
    """
    changes = tray_changes(list_nodes(core, "type=kwok"), racks, trays_per_rack, faults)

    def patch(name: str) -> None:
        change = changes[name]
        if "labels" in change:
            core.patch_node(name, {"metadata": {"labels": change["labels"]}})
        if "gpus" in change:
            count, usable = str(change["gpus"]), str(change.get("allocatable", change["gpus"]))
            core.patch_node_status(
                name, {"status": {"capacity": {GPU_RESOURCE: count}, "allocatable": {GPU_RESOURCE: usable}}}
            )

    _parallel(patch, sorted(changes))
    return sorted(changes)


# --- busy-node: another tenant's pod holding a tray's GPUs ---------------------------------------


def busy_pod_name(node: str) -> str:
    return f"busy-{node}"


def busy_pod(node: str) -> dict[str, Any]:
    """A Running pod of another tenant, bound to ``node``, holding all of its GPUs."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": busy_pod_name(node),
            "namespace": BUSY_NAMESPACE,
            "labels": {FAULT_LABEL: "busy-node", "app.kubernetes.io/name": "tenant-training"},
            "annotations": {FAULT_LABEL: f"busy-node: another tenant's job holds every GPU of {node}"},
        },
        "spec": {
            "nodeName": node,
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 0,
            "automountServiceAccountToken": False,
            "tolerations": [{"operator": "Exists"}],
            "containers": [
                {
                    "name": "train",
                    "image": "registry.invalid/tenant/training:1",
                    "command": ["python3", "train.py"],
                    "resources": {"limits": {GPU_RESOURCE: str(GPUS_PER_TRAY)}},
                }
            ],
        },
    }


def busy_nodes(faults: dict[str, dict[str, Any]]) -> list[str]:
    fault = faults.get("busy-node")
    return [str(fault["node"])] if fault and fault.get("node") else []


def _busy_pods(core: Any) -> list[dict[str, Any]]:
    from kubernetes.client.exceptions import ApiException

    try:
        response = core.list_namespaced_pod(BUSY_NAMESPACE, _preload_content=False)
    except ApiException as exc:
        if exc.status == 404:
            return []
        raise
    return json.loads(response.data)["items"]


def _namespace_phase(core: Any) -> Optional[str]:
    from kubernetes.client.exceptions import ApiException

    try:
        return core.read_namespace(BUSY_NAMESPACE).status.phase or "Active"
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


def _create_busy_pod(core: Any, node: str, deadline: float) -> None:
    """Create the pod once the namespace is Active and its default ServiceAccount exists."""
    from kubernetes.client.exceptions import ApiException

    while True:
        phase = _namespace_phase(core)
        try:
            if phase is None:
                core.create_namespace({"metadata": {"name": BUSY_NAMESPACE, "labels": {FAULT_LABEL: "busy-node"}}})
            elif phase == "Active":
                core.create_namespaced_pod(BUSY_NAMESPACE, busy_pod(node))
                return
        except ApiException as exc:
            if exc.status == 409 and phase == "Active":
                return
            # 403: the namespace is terminating or its ServiceAccount is not made yet; 409: a racing
            # create of the namespace; 5xx: the API server is busy. All pass.
            if exc.status not in (403, 409) and exc.status < 500:
                raise
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"busy-node: could not create pod {BUSY_NAMESPACE}/{busy_pod_name(node)} "
                f"(namespace {phase or 'missing'}); see `sim/rack logs kube-controller-manager`"
            )
        time.sleep(0.5)


def apply_busy_pods(core: Any, faults: dict[str, dict[str, Any]], timeout: float = 60.0) -> list[str]:
    """Make the busy-node pods what the faults say: the faulted tray's pod Running, others gone,
    the namespace removed once it holds no pod. Returns what changed, as short phrases."""
    wanted = set(busy_nodes(faults))
    deadline = time.monotonic() + timeout
    changed: list[str] = []
    pods = _busy_pods(core)
    ours = {p["metadata"]["name"]: p for p in pods if (p["metadata"].get("labels") or {}).get(FAULT_LABEL)}
    for name, pod in sorted(ours.items()):
        node = (pod.get("spec") or {}).get("nodeName")
        finished = (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")
        unwanted = node not in wanted or name != busy_pod_name(node) or finished
        if unwanted and not pod["metadata"].get("deletionTimestamp"):
            core.delete_namespaced_pod(name, BUSY_NAMESPACE, grace_period_seconds=0)
            changed.append(f"deleted pod {BUSY_NAMESPACE}/{name}")
    for node in sorted(wanted):
        pod = ours.get(busy_pod_name(node))
        if (
            pod is None
            or pod["metadata"].get("deletionTimestamp")
            or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")
        ):
            _wait_busy_pod_gone(core, busy_pod_name(node), deadline)
            _create_busy_pod(core, node, deadline)
            changed.append(f"created pod {BUSY_NAMESPACE}/{busy_pod_name(node)} on {node}")
    # wait until the wanted pods run and the others are gone, so the caller sees the fault in place
    while True:
        current = {p["metadata"]["name"]: p for p in _busy_pods(core)}
        running = all((current.get(busy_pod_name(n)) or {}).get("status", {}).get("phase") == "Running" for n in wanted)
        stale = [
            n
            for n, p in current.items()
            if (p["metadata"].get("labels") or {}).get(FAULT_LABEL) and n not in {busy_pod_name(w) for w in wanted}
        ]
        if running and not stale:
            break
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"busy-node: pods in {BUSY_NAMESPACE} not settled after {timeout:.0f}s "
                f"(waiting for {sorted(wanted)} Running, {stale} gone); see `sim/rack logs kwok`"
            )
        time.sleep(0.5)
    if not wanted and not current and _namespace_phase(core) == "Active":
        core.delete_namespace(BUSY_NAMESPACE)
        changed.append(f"deleted namespace {BUSY_NAMESPACE}")
    return changed


def _wait_busy_pod_gone(core: Any, name: str, deadline: float) -> None:
    while any(p["metadata"]["name"] == name for p in _busy_pods(core)):
        if time.monotonic() > deadline:
            raise RuntimeError(f"busy-node: pod {BUSY_NAMESPACE}/{name} is not going away")
        time.sleep(0.5)


def wait_nodes_ready(core: Any, expected: int, timeout: float, progress: Progress) -> float:
    """Wait until `expected` kwok nodes report Ready (KWOK's node-initialize stage ran)."""
    start = time.monotonic()
    last_note = start
    while True:
        items = list_nodes(core, "type=kwok")
        ready = sum(
            1
            for n in items
            for c in n.get("status", {}).get("conditions") or []
            if c["type"] == "Ready" and c["status"] == "True"
        )
        if ready >= expected:
            return time.monotonic() - start
        now = time.monotonic()
        if now - start > timeout:
            raise RuntimeError(
                f"only {ready} of {expected} nodes are Ready after {timeout:.0f}s; "
                "see `sim/rack logs kwok` (the KWOK controller makes nodes Ready)"
            )
        if now - last_note > 10:
            progress(f"  {ready}/{expected} nodes Ready")
            last_note = now
        time.sleep(0.5)
