# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Stand-in for the compute-domain kubelet plugin of the DRA driver for NVIDIA GPUs (nvidia-dra-driver-gpu
25.8.0, dra-driver-nvidia-gpu 0.4.1), as seen from the API.

The real plugin runs in the DaemonSet pod on each GPU node and publishes one ResourceSlice per
node for driver ``compute-domain.nvidia.com``: pool = node name, devices ``channel-0``
(type=channel, id=0) and ``daemon-0`` (type=daemon, id=0). Here the slices follow the
kubelet-plugin pods: a node gets its slice while a plugin pod is Running on it, and loses it
when the pod goes (chart uninstalled). A plugin pod is one with a ``compute-domain-kubelet-plugin``
container, whatever its name and labels: they follow the chart's name (``nvidia-dra-driver-gpu-component``
or, 0.4 without ``nameOverride``, ``dra-driver-nvidia-gpu-component``); without that container
(``resources.computeDomains.enabled=false``) there is no compute-domain plugin, so no slice.

Fault ``missing-deviceclass``: the ``compute-domain-default-channel.nvidia.com`` DeviceClass is
deleted and kept away; it comes back, exactly as Helm rendered it, when the fault is cleared.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from simrack.controllers.base import SIM_LABEL, Controller, is_running, runs
from simrack.controllers.kube import DEVICECLASSES, NODES, PODS, RESOURCESLICES, owner_reference

log = logging.getLogger("simrack")

DRIVER = "compute-domain.nvidia.com"
PLUGIN_COMMAND = "compute-domain-kubelet-plugin"
CHANNEL_CLASS = "compute-domain-default-channel.nvidia.com"
MANAGER = "dra-kubelet-plugin"


def slice_name(node: str) -> str:
    return f"{node}-{DRIVER}"


def resource_slice(node: dict[str, Any]) -> dict[str, Any]:
    """The slice the compute-domain kubelet plugin publishes for one node."""
    name = node["metadata"]["name"]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {
            "name": slice_name(name),
            "labels": {SIM_LABEL: MANAGER},
            "ownerReferences": [owner_reference(node, controller=True)],
        },
        "spec": {
            "driver": DRIVER,
            "nodeName": name,
            "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
            "devices": [
                {"name": "channel-0", "attributes": {"type": {"string": "channel"}, "id": {"int": 0}}},
                {"name": "daemon-0", "attributes": {"type": {"string": "daemon"}, "id": {"int": 0}}},
            ],
        },
    }


class KubeletPluginController(Controller):
    name = MANAGER
    watched = (PODS, RESOURCESLICES, DEVICECLASSES)

    def reconcile(self) -> None:
        plugin_nodes = {
            pod["spec"]["nodeName"]
            for pod in self.list(PODS)
            if is_running(pod) and pod.get("spec", {}).get("nodeName") and runs(pod, PLUGIN_COMMAND)
        }
        existing = {
            s["spec"]["nodeName"]: s
            for s in self.kube.list(RESOURCESLICES, label_selector=f"{SIM_LABEL}={MANAGER}")
            if s.get("spec", {}).get("nodeName")
        }
        for node_name in sorted(plugin_nodes - set(existing)):
            node = self.kube.get(NODES, node_name)
            if node is None:
                continue
            node.setdefault("apiVersion", "v1")
            node.setdefault("kind", "Node")
            self.kube.create(RESOURCESLICES, resource_slice(node))
            log.info("published ResourceSlice for %s", node_name)
        for node_name in sorted(set(existing) - plugin_nodes):
            self.kube.delete(RESOURCESLICES, existing[node_name]["metadata"]["name"])
            log.info("withdrew ResourceSlice of %s", node_name)
        self._deviceclass_fault(chart_present=bool(plugin_nodes))

    def _deviceclass_fault(self, chart_present: bool) -> None:
        stash = self.state / "stash" / f"deviceclass-{CHANNEL_CLASS}.json"
        if "missing-deviceclass" in self.faults:
            current = self.kube.get(DEVICECLASSES, CHANNEL_CLASS)
            if current is not None:
                stash.parent.mkdir(parents=True, exist_ok=True)
                stash.write_text(json.dumps(current))
                self.kube.delete(DEVICECLASSES, CHANNEL_CLASS)
                log.info("fault missing-deviceclass: deleted DeviceClass %s", CHANNEL_CLASS)
            return
        if stash.exists() and chart_present:
            saved = json.loads(stash.read_text())
            meta = saved.get("metadata") or {}
            saved["metadata"] = {k: v for k, v in meta.items() if k in ("name", "labels", "annotations")}
            self.kube.create(DEVICECLASSES, saved)
            stash.unlink()
            log.info("fault cleared: restored DeviceClass %s", CHANNEL_CLASS)
