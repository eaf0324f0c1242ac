# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""dra_driver_ready and gpu_operator_ready run in-process: their options reach the wait, its result or its failure
comes back as the module's. The waits themselves are test_rollout_runner's."""

from __future__ import annotations

from ansible_collections.gpu_fabric.mnnvl.plugins.modules import dra_driver_ready, gpu_operator_ready

from tests.unit.plugins.module_utils.rollout_cluster import (
    CLASSES,
    DRA,
    GPU_NODES,
    dra_cluster,
    operator_cluster,
    pod,
    policy,
)
from tests.unit.plugins.modules.runner import run_module


def connected(monkeypatch, module, cluster):
    monkeypatch.setattr(module, "get_api_client", lambda module: "client")
    monkeypatch.setattr(module, "cluster_lister", lambda client: cluster if client == "client" else None)
    monkeypatch.setattr("time.sleep", lambda seconds: None)


def test_dra_driver_ready_returns_the_gpu_nodes(monkeypatch):
    connected(monkeypatch, dra_driver_ready, dra_cluster())
    args = dict(namespace="nvidia-dra-driver-gpu", gpu_node_selector=GPU_NODES, dra_api_version=DRA)
    result = run_module(dra_driver_ready.main, dict(args, device_classes=CLASSES, wait_sleep=0))
    assert (result["failed"], result["changed"]) == (False, False)
    assert result["gpu_nodes"] == ["gb200-r0-t1", "gb200-r0-t2", "gb200-r0-t10"]
    assert result["msg"].startswith("DRA driver nvidia-dra-driver-gpu ready: controller Ready")


def test_gpu_operator_ready_fails_with_the_pods_not_ready_and_the_policy(monkeypatch):
    connected(
        monkeypatch,
        gpu_operator_ready,
        operator_cluster([[policy("ready")]], pods=[[pod("nvidia-driver-x2", ready=False)]]),
    )
    args = dict(pods_namespace="gpu-operator", gpu_node_selector=GPU_NODES, wait_timeout=0, wait_sleep=0)
    result = run_module(gpu_operator_ready.main, args)
    assert result["failed"] is True
    assert result["msg"].startswith(
        "GPU Operator pods not ready after 0s in namespace gpu-operator: nvidia-driver-x2 (Running)."
    )
    assert (result["ready"], result["name"], result["pods"], result["changed"]) == (True, "cluster-policy", 0, False)
