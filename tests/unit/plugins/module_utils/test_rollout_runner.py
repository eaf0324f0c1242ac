# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The waits of dra_driver_ready and gpu_operator_ready against a lister that answers each read in turn
(rollout_cluster)."""

from __future__ import annotations

import pytest
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.rollout import CONTROLLER_SELECTOR, PLUGIN_SELECTOR
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.rollout_runner import (
    DraDriverWait,
    GpuOperatorWait,
    NotReady,
    dra_driver_ready,
    gpu_operator_ready,
)
from fake_clock import Clock
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic.exceptions import ResourceNotFoundError, api_exception

from tests.unit.plugins.module_utils.rollout_cluster import (
    CLASSES,
    DRA,
    DRIVER,
    GPU_NODES,
    dra_cluster,
    named,
    operator_cluster,
    pod,
    resource_slice,
    tray,
)


def api_error(status, reason="Forbidden"):
    return api_exception(ApiException(status=status, reason=reason))


def dra_wait(**changes):
    settings = dict(
        namespace="nvidia-dra-driver-gpu",
        gpu_node_selector=GPU_NODES,
        dra_api_version=DRA,
        device_classes=CLASSES,
        resource_slice_driver=DRIVER,
        chart="nvidia-dra-driver-gpu 25.8.0",
        release_name="nvidia-dra-driver-gpu",
        wait_timeout=60,
        slice_timeout=20,
        wait_sleep=5,
    )
    return DraDriverWait.from_params(dict(settings, **changes))


def run_dra(cluster, **changes):
    clock = Clock()
    return dra_driver_ready(lambda: cluster, dra_wait(**changes), sleep=clock.sleep, clock=clock), clock


def not_ready(run, *args, **kwargs):
    with pytest.raises(NotReady) as caught:
        run(*args, **kwargs)
    return caught.value


def test_the_dra_driver_is_ready_once_each_step_holds_on_every_gpu_node():
    cluster = dra_cluster()
    result, clock = run_dra(cluster)
    assert result == {
        "changed": False,
        "gpu_nodes": ["gb200-r0-t1", "gb200-r0-t2", "gb200-r0-t10"],
        "msg": "DRA driver nvidia-dra-driver-gpu 25.8.0 ready: controller Ready, kubelet plugin Ready on 3 GPU nodes, "
        "DeviceClasses compute-domain-daemon.nvidia.com, compute-domain-default-channel.nvidia.com, ResourceSlices "
        "on every GPU node (resource.k8s.io/v1).",
    }
    assert cluster.reads == ["Node", "Pod", "Pod", "Pod", "DeviceClass", "ResourceSlice"]
    assert clock.now == 5  # one wait, for the controller


def test_a_controller_never_ready_is_named_with_its_phase_and_the_gpu_nodes_are_returned():
    cluster = dra_cluster({("Pod", CONTROLLER_SELECTOR): [[pod("controller-0", ready=False)]]})
    failure = not_ready(run_dra, cluster)
    assert failure.message.startswith(
        "The DRA driver controller is not Ready after 60s in namespace nvidia-dra-driver-gpu: controller-0 Running."
    )
    assert failure.result == {"gpu_nodes": ["gb200-r0-t1", "gb200-r0-t2", "gb200-r0-t10"]}
    assert "DeviceClass" not in cluster.reads


def test_a_gpu_node_without_a_ready_kubelet_plugin_is_named():
    plugins = [pod("plugin-t1", node="gb200-r0-t1"), pod("plugin-t10", node="gb200-r0-t10", ready=False)]
    failure = not_ready(run_dra, dra_cluster({("Pod", PLUGIN_SELECTOR): [plugins]}))
    assert failure.message.startswith(
        "The DRA kubelet plugin is not Ready on 2 GPU node(s) after 60s: gb200-r0-t2, gb200-r0-t10."
    )


def test_a_missing_device_class_is_named_with_the_release_to_read():
    failure = not_ready(run_dra, dra_cluster({"DeviceClass": [named(CLASSES[0])]}))
    assert failure.message == (
        "DeviceClass missing: compute-domain-default-channel.nvidia.com (expected from chart nvidia-dra-driver-gpu "
        "25.8.0 with resources.computeDomains.enabled=true). Check the release's values "
        "(`helm -n nvidia-dra-driver-gpu get values nvidia-dra-driver-gpu`) and re-run this role."
    )
    assert failure.result == {"gpu_nodes": ["gb200-r0-t1", "gb200-r0-t2", "gb200-r0-t10"]}


def test_resource_slices_are_waited_for_with_their_own_timeout_and_another_drivers_do_not_count():
    slices = [resource_slice("gb200-r0-t1"), resource_slice("gb200-r0-t2", driver="gpu.nvidia.com")]
    cluster = dra_cluster({"ResourceSlice": [slices]})
    clock = Clock()
    with pytest.raises(NotReady) as caught:
        dra_driver_ready(lambda: cluster, dra_wait(), sleep=clock.sleep, clock=clock)
    assert caught.value.message.startswith(
        "No ResourceSlice of driver compute-domain.nvidia.com for GPU node(s): gb200-r0-t2, gb200-r0-t10."
    )
    assert clock.now == 5 + 20  # the controller's one wait, then slice_timeout


def test_an_api_refusal_is_one_line_naming_the_dra_driver_with_the_nodes_read_so_far():
    failure = not_ready(run_dra, dra_cluster({"DeviceClass": [api_error(403)]}))
    assert failure.message == "cannot read the DRA driver's rollout: 403 Forbidden"
    assert failure.result == {"gpu_nodes": ["gb200-r0-t1", "gb200-r0-t2", "gb200-r0-t10"]}


def test_no_connection_to_the_api_server_names_no_node():
    def refused():
        raise ConnectionRefusedError(111, "Connection refused")

    with pytest.raises(NotReady) as caught:
        dra_driver_ready(refused, dra_wait())
    assert (
        caught.value.message
        == "cannot read the DRA driver's rollout: cannot reach the Kubernetes API: connection refused"
    )
    assert caught.value.result == {"gpu_nodes": []}


def operator_wait(**changes):
    settings = dict(name="", wait_timeout=60, wait_sleep=5, pods_namespace="gpu-operator", gpu_node_selector=GPU_NODES)
    return GpuOperatorWait.from_params(dict(settings, **changes))


def run_operator(cluster, **changes):
    clock = Clock()
    return gpu_operator_ready(lambda: cluster, operator_wait(**changes), sleep=clock.sleep, clock=clock)


def test_the_gpu_operator_is_ready_with_its_policy_its_pods_and_the_gpus_of_every_node():
    cluster = operator_cluster()
    result = run_operator(cluster)
    assert result == {
        "changed": False,
        "ready": True,
        "name": "cluster-policy",
        "state": "ready",
        "conditions": [],
        "summary": "ClusterPolicy cluster-policy state ready",
        "pods": 2,
        "gpus_per_node": {"gb200-r0-t1": 4, "gb200-r0-t2": 4},
        "msg": "2 GPU nodes: gb200-r0-t1=4, gb200-r0-t2=4",
    }
    assert cluster.reads == ["ClusterPolicy", "ClusterPolicy", "Pod", "Node", "Node"]


def test_without_pods_namespace_and_node_selector_only_the_policy_is_read():
    cluster = operator_cluster()
    result = run_operator(cluster, pods_namespace="", gpu_node_selector="")
    assert (result["msg"], result["pods"], result["gpus_per_node"]) == (
        "ClusterPolicy cluster-policy state ready",
        0,
        {},
    )
    assert cluster.reads == ["ClusterPolicy", "ClusterPolicy"]


def test_a_policy_crd_not_installed_reads_as_no_policy_until_the_timeout():
    failure = not_ready(run_operator, operator_cluster(policies=[ResourceNotFoundError("no ClusterPolicy")]))
    assert failure.message.startswith("GPU Operator not ready after 60s: no ClusterPolicy exists (states seen: absent)")
    assert failure.result == {
        "changed": False,
        "ready": False,
        "name": "",
        "state": "",
        "conditions": [],
        "summary": "no ClusterPolicy exists",
    }


def test_an_operand_pod_never_ready_is_named_and_the_policy_is_returned():
    failure = not_ready(
        run_operator, operator_cluster(pods=[[pod("nvidia-driver-daemonset-x2", ready=False, phase="Pending")]])
    )
    assert failure.message.startswith(
        "GPU Operator pods not ready after 60s in namespace gpu-operator: nvidia-driver-daemonset-x2 (Pending)."
    )
    assert (failure.result["ready"], failure.result["pods"], failure.result["gpus_per_node"]) == (True, 0, {})


def test_a_gpu_node_without_gpu_capacity_is_named():
    failure = not_ready(run_operator, operator_cluster(nodes=[[tray("gb200-r0-t1"), tray("gb200-r0-t2", gpus=False)]]))
    assert failure.message == (
        "GPU nodes without nvidia.com/gpu capacity after 60s: gb200-r0-t2; "
        "check the device plugin and driver pods on them"
    )
    assert failure.result["pods"] == 2


def test_an_api_refusal_is_one_line_naming_the_gpu_operator():
    failure = not_ready(run_operator, operator_cluster(pods=[api_error(403)]))
    assert (failure.message, failure.result) == ("cannot read the GPU Operator's rollout: 403 Forbidden", {})
