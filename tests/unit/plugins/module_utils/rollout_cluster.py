# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A cluster as the ready modules' waits read it: a lister that answers each read in turn.

The GPU node is the real tray of tests/fixtures/k8s (copied per tray); the pods, DeviceClasses, ResourceSlices and
ClusterPolicies are the shapes the API server lists, invented for each case.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.rollout import CONTROLLER_SELECTOR, PLUGIN_SELECTOR

TRAY = json.loads((Path(__file__).resolve().parents[3] / "fixtures" / "k8s" / "gb200-tray-node.json").read_text())
GPU_NODES = "nvidia.com/gpu.present=true"
DRA = "resource.k8s.io/v1"
DRIVER = "compute-domain.nvidia.com"
CLASSES = ["compute-domain-daemon.nvidia.com", "compute-domain-default-channel.nvidia.com"]
POLICY = "nvidia.com/v1"


def tray(name, gpus=True):
    """The real tray, named ``name``; its 4 GPUs not reported yet unless ``gpus``."""
    node = copy.deepcopy(TRAY)
    node["metadata"]["name"] = name
    if not gpus:
        del node["status"]["capacity"]["nvidia.com/gpu"]  # no device plugin yet
        del node["status"]["allocatable"]["nvidia.com/gpu"]
    return node


def pod(name, node="", ready=True, phase="Running"):
    return {
        "metadata": {"name": name},
        "spec": {"nodeName": node} if node else {},
        "status": {"phase": phase, "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


def named(*names):
    return [{"metadata": {"name": name}} for name in names]


def resource_slice(node, driver=DRIVER):
    return {"metadata": {"name": f"{node}-{driver}"}, "spec": {"driver": driver, "nodeName": node}}


def policy(state):
    return {
        "metadata": {"name": "cluster-policy", "creationTimestamp": "2026-12-01T00:00:00Z"},
        "status": {"state": state},
    }


class Cluster:
    """A lister: each (api_version, kind, namespace, label_selector) answers its reads in turn, the last one for
    every read after it; an exception among them is raised. ``reads`` records the kinds read."""

    def __init__(self, answers):
        self.answers = {key: list(value) for key, value in answers.items()}
        self.reads = []

    def __call__(self, api_version, kind, namespace=None, label_selector=None):
        self.reads.append(kind)
        key = (api_version, kind, namespace, label_selector)
        queue = self.answers.get(key)
        if queue is None:
            raise AssertionError(f"unexpected read {key}")
        answer = queue.pop(0) if len(queue) > 1 else queue[0]
        if isinstance(answer, Exception):
            raise answer
        return copy.deepcopy(answer)


def dra_cluster(changes=None):
    """A DRA driver rolled out on trays t1, t2, t10 (the controller Pending at first); ``changes``: other answers,
    by kind (or by kind and label selector)."""
    ns = "nvidia-dra-driver-gpu"
    answers = {
        ("v1", "Node", None, GPU_NODES): [[tray("gb200-r0-t10"), tray("gb200-r0-t2"), tray("gb200-r0-t1")]],
        ("v1", "Pod", ns, CONTROLLER_SELECTOR): [
            [pod("controller-0", ready=False, phase="Pending")],
            [pod("controller-0")],
        ],
        ("v1", "Pod", ns, PLUGIN_SELECTOR): [[pod(f"plugin-{n}", node=f"gb200-r0-{n}") for n in ("t1", "t2", "t10")]],
        (DRA, "DeviceClass", None, None): [named(*CLASSES)],
        (DRA, "ResourceSlice", None, None): [[resource_slice(f"gb200-r0-{n}") for n in ("t1", "t2", "t10")]],
    }
    for which, answer in (changes or {}).items():
        kind, selector = which if isinstance(which, tuple) else (which, None)
        key = next(key for key in answers if key[1] == kind and (selector is None or key[3] == selector))
        answers[key] = answer
    return Cluster(answers)


def operator_cluster(policies=None, pods=None, nodes=None):
    """A GPU Operator whose ClusterPolicy turns ready on the second read, its pods Ready (a validator's Succeeded),
    and tray t2 reporting its GPUs on the second read; or the answers given."""
    return Cluster(
        {
            (POLICY, "ClusterPolicy", None, None): policies or [[policy("notReady")], [policy("ready")]],
            ("v1", "Pod", "gpu-operator", None): pods
            or [[pod("gpu-operator-7d9"), pod("nvidia-cuda-validator-q8", ready=False, phase="Succeeded")]],
            ("v1", "Node", None, GPU_NODES): nodes
            or [[tray("gb200-r0-t2", gpus=False), tray("gb200-r0-t1")], [tray("gb200-r0-t2"), tray("gb200-r0-t1")]],
        }
    )
