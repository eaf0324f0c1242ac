# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.k8s import iter_pages, pod_summary, workload_summary


def test_iter_pages_follows_continue_tokens_and_passes_the_limit():
    pages = {
        None: {"metadata": {"continue": "t1"}, "items": [{"n": 1}, {"n": 2}]},
        "t1": {"metadata": {"continue": "t2"}, "items": [{"n": 3}]},
        "t2": {"metadata": {}, "items": [{"n": 4}]},
    }
    calls = []

    def list_page(**kwargs):
        calls.append(kwargs)
        return pages[kwargs.get("_continue")]

    items = list(iter_pages(list_page, limit=2, label_selector="nvidia.com/gpu.present=true"))
    assert [i["n"] for i in items] == [1, 2, 3, 4]
    assert calls == [
        {"label_selector": "nvidia.com/gpu.present=true", "limit": 2},
        {"label_selector": "nvidia.com/gpu.present=true", "limit": 2, "_continue": "t1"},
        {"label_selector": "nvidia.com/gpu.present=true", "limit": 2, "_continue": "t2"},
    ]


def test_workload_summary_reads_deployments_and_daemonsets():
    deployment = {
        "kind": "Deployment",
        "metadata": {"name": "nvidia-dra-driver-gpu-controller", "namespace": "nvidia-dra-driver-gpu"},
        "spec": {"replicas": 1},
        "status": {},
    }
    daemonset = {
        "kind": "DaemonSet",
        "metadata": {"name": "nvb-x7k2p", "namespace": "nvidia-dra-driver-gpu"},
        "status": {"desiredNumberScheduled": 2, "numberReady": 1},
    }
    assert workload_summary(deployment) == "Deployment nvidia-dra-driver-gpu/nvidia-dra-driver-gpu-controller 0/1 ready"
    assert workload_summary(daemonset) == "DaemonSet nvidia-dra-driver-gpu/nvb-x7k2p 1/2 ready"


def test_pod_summary_names_waiting_reasons_and_scheduling_failures():
    pod = {
        "metadata": {"name": "nvidia-dra-driver-gpu-controller-67cb99d84b-5q7kj"},
        "spec": {},
        "status": {
            "phase": "Pending",
            "conditions": [
                {"type": "PodScheduled", "status": "False", "message": "0/4 nodes are available: node affinity"}
            ],
        },
    }
    assert pod_summary(pod) == (
        "pod nvidia-dra-driver-gpu-controller-67cb99d84b-5q7kj on no node: Pending "
        "(unschedulable: 0/4 nodes are available: node affinity)"
    )
    crashing = {
        "metadata": {"name": "nvb-x7k2p-9jhmj"},
        "spec": {"nodeName": "gb200-r0-t1"},
        "status": {
            "phase": "Running",
            "containerStatuses": [
                {"name": "compute-domain-daemon", "state": {"waiting": {"reason": "CrashLoopBackOff"}}}
            ],
        },
    }
    assert (
        pod_summary(crashing) == "pod nvb-x7k2p-9jhmj on gb200-r0-t1: Running (compute-domain-daemon: CrashLoopBackOff)"
    )
