# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rollout judges and messages of the gpu_operator, dra_driver and mpi_operator roles' waits."""

from __future__ import annotations

import json
from pathlib import Path

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import rollout

TRAY = Path(__file__).resolve().parents[3] / "fixtures" / "k8s" / "gb200-tray-node.json"


def pod(name, phase="Running", ready=True, node=""):
    return {
        "metadata": {"name": name},
        "spec": {"nodeName": node} if node else {},
        "status": {
            "phase": phase,
            "conditions": [
                {"type": "Initialized", "status": "True"},
                {"type": "Ready", "status": "True" if ready else "False"},
            ],
        },
    }


def node(name, gpus):
    status = {"capacity": {"cpu": "144", "nvidia.com/gpu": gpus}} if gpus is not None else {}
    return {"metadata": {"name": name}, "status": status}


def test_not_ready_pods_name_the_phase_and_leave_finished_jobs_out():
    pods = [
        pod("gpu-operator-7d9"),
        pod("nvidia-driver-daemonset-x2", "Pending", ready=False),
        pod("nvidia-cuda-validator-q8", "Succeeded", ready=False),
        {"metadata": {"name": "nvidia-dcgm-exporter-10"}, "status": {}},
        pod("nvidia-dcgm-exporter-2", ready=False),
    ]
    assert rollout.not_ready_pods(pods) == [
        "nvidia-dcgm-exporter-2 (Running)",
        "nvidia-dcgm-exporter-10 (Unknown)",
        "nvidia-driver-daemonset-x2 (Pending)",
    ]


def test_gpu_capacity_of_a_real_tray_and_of_nodes_without_the_device_plugin():
    tray = json.loads(TRAY.read_text())
    capacity = rollout.gpu_capacity([node("gb200-r0-t10", "4"), tray, node("gb200-r0-t2", None), node("x", "n/a")])
    assert capacity[tray["metadata"]["name"]] == int(tray["status"]["capacity"]["nvidia.com/gpu"])
    assert capacity["gb200-r0-t2"] == 0 and capacity["x"] == 0
    assert list(capacity) == ["gb200-r0-t1", "gb200-r0-t2", "gb200-r0-t10", "x"]  # name order, t2 before t10


def test_plugin_and_slice_coverage_name_the_nodes_left_out():
    nodes = ["t1", "t2", "t10"]
    plugins = [pod("p1", node="t1"), pod("p2", ready=False, node="t2"), pod("p3", "Pending", ready=False)]
    assert rollout.missing(nodes, rollout.ready_pod_nodes(plugins)) == ["t2", "t10"]
    slices = [
        {"spec": {"driver": "compute-domain.nvidia.com", "nodeName": "t10"}},
        {"spec": {"driver": "gpu.nvidia.com", "nodeName": "t1"}},
        {"spec": {"driver": "compute-domain.nvidia.com"}},
    ]
    assert rollout.missing(nodes, rollout.slice_nodes(slices, "compute-domain.nvidia.com")) == ["t1", "t2"]


def test_messages_name_what_is_missing_and_where_to_look():
    assert rollout.operator_pods_message("gpu-operator", 900, []) == (
        "GPU Operator pods not ready after 900s in namespace gpu-operator: no pod at all. Read them with "
        "`kubectl -n gpu-operator describe pod` (driver container builds take minutes)."
    )
    assert "No node matches sel" in rollout.gpu_nodes_message("sel", 900, {})
    assert "capacity after 900s: t2; check" in rollout.gpu_nodes_message("sel", 900, {"t1": 4, "t2": 0})
    assert rollout.gpu_nodes_summary({"t1": 4, "t2": 4}) == "2 GPU nodes: t1=4, t2=4"
    text = rollout.controller_message("ns", 600, [pod("nvidia-dra-driver-gpu-controller-0", "Pending", False)])
    assert "ns: nvidia-dra-driver-gpu-controller-0 Pending. A Pending controller" in text
    assert "in namespace ns: no controller pod." in rollout.controller_message("ns", 600, [])
    assert "not Ready on 2 GPU node(s) after 600s: t2, t10." in rollout.plugin_message("ns", 600, ["t2", "t10"])
    assert rollout.device_class_message(["a.nvidia.com"], "nvidia-dra-driver-gpu 25.8.0", "ns", "rel").startswith(
        "DeviceClass missing: a.nvidia.com (expected from chart nvidia-dra-driver-gpu 25.8.0 with"
    )
    assert "for GPU node(s): t1, t2." in rollout.slice_message("compute-domain.nvidia.com", ["t1", "t2"], "ns")


def test_deployment_and_crd_judges_read_what_the_api_server_writes():
    available = {
        "status": {"conditions": [{"type": "Progressing", "status": "True"}, {"type": "Available", "status": "True"}]}
    }
    assert rollout.deployment_available(available) is True
    assert rollout.deployment_available({"status": {"conditions": [{"type": "Available", "status": "False"}]}}) is False
    assert rollout.deployment_available({"metadata": {"name": "new"}}) is False
    assert rollout.deployment_available(None) is False
    crd = {"spec": {"versions": [{"name": "v2beta1", "served": True}, {"name": "v1", "served": False}, {"name": "v3"}]}}
    assert rollout.served_versions(crd) == ["v2beta1"]
    assert rollout.served_versions(None) == []
    assert rollout.deployment_images(None) == []
