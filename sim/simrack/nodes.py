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

CLIQUE_LABEL = "nvidia.com/gpu.clique"
RACK_ANNOTATION = "gpu-fabric.sim/rack"
CONTROL_PLANE_NODE = "sim-control-plane"
CLIQUE_ID = 32766
# The second clique of the split-clique fault: same NVLink domain, a different partition.
SPLIT_CLIQUE_ID = 32765
GPUS_PER_TRAY = 4
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


def tray_node(rack: int, tray: int, kubelet_version: str) -> dict[str, Any]:
    """A Node as a GB200 compute tray's kubelet, GFD and NFD leave it (status set on create)."""
    name = tray_name(rack, tray)
    resources = {
        "cpu": "144",
        "memory": "880Gi",
        "ephemeral-storage": "3Ti",
        "pods": "110",
        "nvidia.com/gpu": str(GPUS_PER_TRAY),
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
                "nvidia.com/gpu.present": "true",
                "nvidia.com/gpu.product": "NVIDIA-GB200",
                "nvidia.com/gpu.count": str(GPUS_PER_TRAY),
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
            "allocatable": dict(resources),
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
    core: Any, racks: int, trays_per_rack: int, kubelet_version: str, progress: Progress
) -> tuple[int, int]:
    """Create the missing trays (and the control-plane node), delete trays beyond the size asked."""
    from kubernetes.client.exceptions import ApiException

    existing = {n["metadata"]["name"] for n in list_nodes(core)}
    wanted = [control_plane_node(kubelet_version)] + [
        tray_node(r, t, kubelet_version) for r in range(racks) for t in range(trays_per_rack)
    ]
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
    return len(to_create), len(to_delete)


def apply_clique_labels(core: Any, racks: int, trays_per_rack: int, faults: dict[str, dict[str, Any]]) -> list[str]:
    """Bring every tray's clique label to what the faults say; returns the nodes changed."""
    desired = desired_clique_labels(racks, trays_per_rack, faults)
    current = {
        n["metadata"]["name"]: (n["metadata"].get("labels") or {}).get(CLIQUE_LABEL)
        for n in list_nodes(core, "type=kwok")
    }
    changed = [name for name, value in desired.items() if name in current and current[name] != value]

    def patch(name: str) -> None:
        core.patch_node(name, {"metadata": {"labels": {CLIQUE_LABEL: desired[name]}}})

    _parallel(patch, changed)
    return sorted(changed)


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
