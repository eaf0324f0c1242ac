# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""playbooks/uninstall.yml on the simulated rack: refusal, check mode, removal, idempotence, reinstall.

The test removes the whole cluster stage from the rack and installs it again at its end, so it leaves the
rack as the other tests expect it.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from test_cluster_stage import ansible_playbook, helm_release
from verify_helpers import apply_cluster_stage, cluster_stage_installed

REPO_ROOT = Path(__file__).resolve().parents[2]
UNINSTALL = str(REPO_ROOT / "playbooks" / "uninstall.yml")
NAMESPACES = ("gpu-operator", "nvidia-dra-driver-gpu", "mpi-operator")
RELEASES = (("gpu-operator", "gpu-operator"), ("nvidia-dra-driver-gpu", "nvidia-dra-driver-gpu"))
CRDS = ("clusterpolicies.nvidia.com", "computedomains.resource.nvidia.com", "mpijobs.kubeflow.org")

pytestmark = pytest.mark.sim


def report(result: subprocess.CompletedProcess) -> dict[str, Any]:
    return json.loads(result.stdout[result.stdout.find("{") :])


def failed_messages(result: subprocess.CompletedProcess) -> list[str]:
    return [
        task["hosts"]["localhost"].get("msg", "")
        for play in report(result)["plays"]
        for task in play["tasks"]
        if task["hosts"].get("localhost", {}).get("failed")
    ]


def changed(result: subprocess.CompletedProcess) -> int:
    return report(result)["stats"]["localhost"]["changed"]


def namespaces(sim_rack) -> set[str]:
    return {n["metadata"]["name"] for n in sim_rack.get_json("namespaces")["items"]}


def crds(sim_rack) -> set[str]:
    return {c["metadata"]["name"] for c in sim_rack.get_json("crd")["items"]}


def releases(sim_rack) -> list[dict[str, Any]]:
    return [r for name, ns in RELEASES if (r := helm_release(sim_rack, name, ns))]


def test_uninstall_refuses_for_users_then_removes_everything_once_and_cluster_yml_installs_again(sim_rack, namespace):
    if not cluster_stage_installed(sim_rack):
        assert apply_cluster_stage(sim_rack).returncode == 0
    sim_rack.apply(
        {
            "apiVersion": "resource.nvidia.com/v1beta1",
            "kind": "ComputeDomain",
            "metadata": {"name": "train", "namespace": namespace},
            "spec": {"numNodes": 0, "channel": {"resourceClaimTemplate": {"name": "train-channel"}}},
        }
    )

    refused = ansible_playbook(sim_rack, UNINSTALL, json_output=True)
    assert refused.returncode != 0
    assert failed_messages(refused) == [
        f"1 workload(s) of users still use the GPU stack: ComputeDomain {namespace}/train. Delete them (or wait "
        "for the jobs to end) and run the uninstall again, or set gpu_fabric_uninstall_force: true to delete them "
        "first. Nothing was removed."
    ]
    assert len(releases(sim_rack)) == 2

    args = ("-e", "gpu_fabric_uninstall_force=true", "-e", "gpu_fabric_uninstall_crds=true")
    checked = ansible_playbook(sim_rack, UNINSTALL, *args, "--check", json_output=True)
    assert checked.returncode == 0, checked.stdout[-6000:]
    assert changed(checked) > 0
    assert len(releases(sim_rack)) == 2
    assert set(NAMESPACES) <= namespaces(sim_rack)
    assert set(CRDS) <= crds(sim_rack)
    assert len(sim_rack.get_json("computedomains", "-n", namespace)["items"]) == 1

    removed = ansible_playbook(sim_rack, UNINSTALL, *args, json_output=True)
    assert removed.returncode == 0, removed.stdout[-6000:]
    assert releases(sim_rack) == []
    assert not set(NAMESPACES) & namespaces(sim_rack)
    assert not set(CRDS) & crds(sim_rack)
    classes = sim_rack.kubectl("get", "deviceclasses", "-o", "name").stdout.split()
    assert not [c for c in classes if c.endswith(".nvidia.com")]
    assert namespace in namespaces(sim_rack)  # the user's namespace stays; only the workload went

    again = ansible_playbook(sim_rack, UNINSTALL, *args, json_output=True)
    assert again.returncode == 0, again.stdout[-6000:]
    assert changed(again) == 0

    reinstalled = apply_cluster_stage(sim_rack)
    fatal = reinstalled.stdout[reinstalled.stdout.find("fatal:") :][:6000]
    assert reinstalled.returncode == 0, fatal
    assert cluster_stage_installed(sim_rack)
    assert [r["status"] for r in releases(sim_rack)] == ["deployed", "deployed"]
