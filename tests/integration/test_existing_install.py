# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""A GPU Operator that the site installed itself (another release name and namespace, its own values).

cluster.yml must say so before anything changes (no Helm ownership error), and adopt it when told to. The
test removes the cluster stage first and leaves the collection's own install behind, as the other tests
expect it.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from test_cluster_stage import ansible_playbook, helm_release, helm_values
from test_uninstall import failed_messages
from verify_helpers import apply_cluster_stage, cluster_stage_installed

REPO_ROOT = Path(__file__).resolve().parents[2]
CLUSTER = str(REPO_ROOT / "playbooks" / "cluster.yml")
UNINSTALL = str(REPO_ROOT / "playbooks" / "uninstall.yml")
SITE = {"gpu_operator_release_name": "gpu-op", "gpu_operator_namespace": "nvidia"}

pytestmark = pytest.mark.sim


def extra(**variables: str) -> list[str]:
    return ["-e", json.dumps(variables)]


def test_a_gpu_operator_of_the_site_is_named_before_anything_changes_and_adopted_when_asked(sim_rack):
    removed = ansible_playbook(sim_rack, UNINSTALL, *extra(gpu_fabric_uninstall_force="true"))
    assert removed.returncode == 0, removed.stdout[-4000:]
    subprocess.run(
        [
            "helm",
            "install",
            "gpu-op",
            "gpu-operator",
            "--repo",
            sim_rack.env["GPU_FABRIC_SIM_HELM_REPO_URL"],
            "--version",
            "v25.10.0",
            "-n",
            "nvidia",
            "--create-namespace",
            "--set",
            "toolkit.version=v1.18.1",
            "--wait",
            "--timeout",
            "180s",
        ],
        env=sim_rack.env,
        check=True,
        capture_output=True,
        text=True,
        timeout=240,
    )

    refused = ansible_playbook(sim_rack, CLUSTER, json_output=True)
    assert refused.returncode != 0
    assert failed_messages(refused) == [
        "the GPU Operator is already installed by Helm release nvidia/gpu-op (ClusterPolicy cluster-policy), not by "
        "this collection's gpu-operator/gpu-operator; set gpu_operator_on_existing to adopt (manage it, its values "
        "kept under the collection's), skip (leave it, skip the role) or fail. Nothing was changed."
    ]
    assert helm_release(sim_rack, "gpu-operator", "gpu-operator") == {}
    assert helm_release(sim_rack, "gpu-op", "nvidia")["revision"] == "1"

    adopted = ansible_playbook(sim_rack, CLUSTER, *extra(gpu_operator_on_existing="adopt"))
    assert adopted.returncode == 0, adopted.stdout[adopted.stdout.find("fatal:") :][:6000]
    assert helm_release(sim_rack, "gpu-operator", "gpu-operator") == {}
    assert helm_release(sim_rack, "gpu-op", "nvidia")["revision"] == "2"
    values = helm_values(sim_rack, "gpu-op", "nvidia")
    assert values["toolkit"] == {"version": "v1.18.1"}  # the site's value kept
    assert values["driver"] == {"enabled": True}  # the collection's set
    assert values["gpuFabric"] == {"managedBy": "gpu_fabric.mnnvl"}
    values_kept = {"toolkit": {"version": "v1.18.1"}}

    # Adopted, the release is the collection's: with the site's value in the inventory, a run changes nothing.
    again = ansible_playbook(sim_rack, CLUSTER, "-e", json.dumps({**SITE, "gpu_operator_values": values_kept}))
    assert again.returncode == 0, again.stdout[again.stdout.find("fatal:") :][:6000]
    assert helm_release(sim_rack, "gpu-op", "nvidia")["revision"] == "2"

    cleaned = ansible_playbook(sim_rack, UNINSTALL, *extra(**SITE))
    assert cleaned.returncode == 0, cleaned.stdout[-4000:]
    assert helm_release(sim_rack, "gpu-op", "nvidia") == {}
    assert apply_cluster_stage(sim_rack).returncode == 0
    assert cluster_stage_installed(sim_rack)
