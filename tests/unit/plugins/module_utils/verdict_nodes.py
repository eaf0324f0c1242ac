# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""GB200 tray Nodes, the verdicts of their trays and the site's settings, as the Node verdict tests build them.

The Node is read back from the API server as sim/simrack/nodes.py tray_node creates it; the verdicts and annotations
are the shapes ``report_model.tray_verdicts`` and ``node_verdict`` write.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.node_plan import Settings as VerdictSettings
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.tray_verdict import TrayVerdict

TIME = "2026-12-01T10:21:37Z"
LATER = "2026-12-02T08:00:05Z"
LABEL = "gpu-fabric.nvidia.com/verified"
UNTIL = "gpu-fabric.nvidia.com/verified-until"
ANNOTATION = "gpu-fabric.nvidia.com/verification"
TAINT = "gpu-fabric.nvidia.com/unverified"
OUR_TAINT = {"key": TAINT, "value": "true", "effect": "NoSchedule"}
# What the GPU Operator's users commonly put on GPU nodes to keep CPU pods away.
GPU_TAINT = {"key": "nvidia.com/gpu", "effect": "NoSchedule"}
FAILED_SUMMARY = "rack0 nvbandwidth: GPU 12 -> 5 402.11 GB/s, below 765.00 GB/s (gb200-r0-t3 -> gb200-r0-t1)"
# The site of these tests requires nvbandwidth only: one check's pass makes a tray pass.
REQUIRED = ("nvbandwidth",)
ONE_CHECK_PASSED = (("nvbandwidth", "passed", ""),)


def Settings(**options):
    return VerdictSettings(**{"required_checks": REQUIRED, **options})


TAINTING = Settings(taint_failed=True)


def gb200_tray(rack=0, tray=0, labels=None, annotations=None, taints=None, resource_version="4711"):
    """Node gb200-r<rack>-t<tray> as sim/simrack/nodes.py tray_node creates it, read back from the API server."""
    name = f"gb200-r{rack}-t{tray}"
    resources = {"cpu": "144", "memory": "880Gi", "ephemeral-storage": "3Ti", "pods": "110", "nvidia.com/gpu": "4"}
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": "b0c4e0b2-5f7e-4c55-9a36-0f0b0d1c2e3f",
            "resourceVersion": resource_version,
            "creationTimestamp": "2026-12-01T09:58:12Z",
            "labels": {
                "type": "kwok",
                "kubernetes.io/hostname": name,
                "kubernetes.io/arch": "arm64",
                "kubernetes.io/os": "linux",
                "beta.kubernetes.io/arch": "arm64",
                "beta.kubernetes.io/os": "linux",
                "nvidia.com/gpu.clique": "1d6a4f8e-7f0e-5d1c-9b0a-4d1f1e2a3b4c.32766",
                "nvidia.com/gpu.present": "true",
                "nvidia.com/gpu.product": "NVIDIA-GB200",
                "nvidia.com/gpu.count": "4",
                "nvidia.com/gpu.memory": "189471",
                "feature.node.kubernetes.io/pci-10de.present": "true",
                **(labels or {}),
            },
            "annotations": {
                "gpu-fabric.sim/rack": str(rack),
                "kwok.x-k8s.io/node": "fake",
                "node.alpha.kubernetes.io/ttl": "0",
                **(annotations or {}),
            },
        },
        "spec": {},
        "status": {
            "capacity": dict(resources),
            "allocatable": dict(resources),
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
            "nodeInfo": {"architecture": "arm64", "kubeletVersion": "v1.34.4", "osImage": "Ubuntu 24.04.3 LTS"},
        },
    }
    if taints is not None:
        node["spec"]["taints"] = taints
    return node


def failed(node="gb200-r0-t3", summary=FAILED_SUMMARY):
    return TrayVerdict(
        node=node,
        verdict="failed",
        summary=summary,
        rack="rack0",
        checks_failed=("nvbandwidth",),
        outcomes=(("nvbandwidth", "failed", summary),),
    )


def passed(node="gb200-r0-t3", summary="rack0: 4 of 4 checks passed"):
    return TrayVerdict(node=node, verdict="passed", summary=summary, rack="rack0", outcomes=ONE_CHECK_PASSED)


def annotation(verdict, summary, time=TIME, run="", hours=168.0):
    """The per-check annotation of a tray whose nvbandwidth check ``verdict`` at ``time``."""
    moment = datetime.fromisoformat(time.replace("Z", "+00:00"))
    until = (moment + timedelta(hours=hours)).strftime("%Y-%m-%dT%H:%M:%SZ")
    entry = {"outcome": verdict, "time": time, "run": run, "valid_until": until}
    record = {"verdict": verdict, "time": time, "run": run}
    if verdict == "failed":
        entry["summary"] = summary
        record["summary"] = f"nvbandwidth failed: {summary}"
    else:
        record["summary"] = "passed nvbandwidth"
        record["valid_until"] = until
    record["checks"] = {"nvbandwidth": entry}
    return json.dumps(record, separators=(",", ":"))


def until(time=TIME, hours=168.0):
    """The verified-until label of a verdict written at ``time``: Unix seconds."""
    moment = datetime.fromisoformat(time.replace("Z", "+00:00"))
    return str(int((moment + timedelta(hours=hours)).timestamp()))


def labels(verdict, time=TIME):
    """A tray's labels: verified-until only while it passed."""
    return {LABEL: verdict, UNTIL: until(time)} if verdict == "passed" else {LABEL: verdict}


RUN = "20261201T101500Z-ab12"
CONDITIONS = Settings(taint_failed=True, condition=True)
NOW = datetime(2026, 12, 1, 10, 30, tzinfo=timezone.utc)
BUSY = "GPUs in use: 4 of 4 nvidia.com/gpu held by training/llm-pretrain-worker-3 (4)"


def skipped(node="gb200-r0-t3", *reasons):
    summary = f"skipped: {'; '.join(reasons)}" if reasons else "not measured by any check of this run"
    return TrayVerdict(node=node, verdict="skipped", summary=summary, rack="rack0", skip_reasons=tuple(reasons))


def verified_tray(verdict="passed", summary="rack0: 4 of 4 checks passed", time=TIME, **kwargs):
    return gb200_tray(
        0, 3, labels=labels(verdict, time), annotations={ANNOTATION: annotation(verdict, summary, time)}, **kwargs
    )
