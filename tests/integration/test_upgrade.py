# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The move between release sets on the simulated rack: cluster.yml with the guide's set 25.10 (A), then with
the default set 26.7 (B), in place.

A is GPU Operator v25.10.0, chart nvidia-dra-driver-gpu 25.8.0 and MPI operator v0.6.0; B is v26.7.0, the
renamed chart dra-driver-nvidia-gpu 0.4.1 (nameOverride keeps every object's name, so the same release is
upgraded, as upstream's upgrade guide does it) and v0.8.2. The sim builds A's charts from B's stand-ins (A's
version strings, a ConfigMap that B no longer ships, CRDs stamped with their chart version). Check mode shows
the move first and changes nothing. The test starts from an uninstalled cluster and leaves B installed, as the
other tests expect.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from test_cluster_stage import ansible_playbook, helm_release, results_named
from verify_helpers import run_verify

REPO_ROOT = Path(__file__).resolve().parents[2]
CLUSTER = str(REPO_ROOT / "playbooks" / "cluster.yml")
UNINSTALL = str(REPO_ROOT / "playbooks" / "uninstall.yml")
STAMP = "gpu-fabric.sim/chart-version"
SET_A = {"gpu_fabric_release_set": "25.10"}
SET_B = {"gpu_fabric_release_set": "26.7"}

pytestmark = pytest.mark.sim


def run(sim_rack, playbook: str, extra: dict[str, str], check: bool = False) -> subprocess.CompletedProcess:
    args = [a for key, value in extra.items() for a in ("-e", f"{key}={value}")]
    result = ansible_playbook(sim_rack, playbook, *args, *(["--check", "--diff"] if check else []))
    assert result.returncode == 0, result.stdout[result.stdout.find("fatal:") :][:6000]
    return result


def state(sim_rack) -> dict[str, Any]:
    """What an upgrade changes, as the API shows it."""
    crds = {c["metadata"]["name"]: c for c in sim_rack.get_json("crd")["items"]}

    def images(kind: str, namespace: str) -> dict[str, str]:
        return {
            o["metadata"]["name"]: o["spec"]["template"]["spec"]["containers"][0]["image"]
            for o in sim_rack.get_json(kind, "-n", namespace)["items"]
        }

    return {
        "charts": [
            helm_release(sim_rack, "gpu-operator", "gpu-operator").get("chart"),
            helm_release(sim_rack, "nvidia-dra-driver-gpu", "nvidia-dra-driver-gpu").get("chart"),
        ],
        "crd_versions": {
            name: (crds[name]["metadata"].get("annotations") or {}).get(STAMP)
            for name in ("clusterpolicies.nvidia.com", "computedomains.resource.nvidia.com")
        },
        "previous_only": sorted(
            f"{c['metadata']['namespace']}/{c['metadata']['name']}"
            for c in sim_rack.get_json("configmaps", "-A")["items"]
            if c["metadata"]["name"].endswith("-previous-only")
        ),
        "operator": images("deployments", "gpu-operator").get("gpu-operator", ""),
        "dra": sorted(set(images("daemonsets", "nvidia-dra-driver-gpu").values())),
        "mpi": images("deployments", "mpi-operator").get("mpi-operator", ""),
    }


def test_moving_from_the_guides_set_to_the_current_one_upgrades_in_place_and_check_mode_shows_it(sim_rack, tmp_path):
    previous_manifest = sim_rack.env["GPU_FABRIC_SIM_MPI_MANIFEST_URL"].replace("/v0.8.2/", "/v0.6.0/")
    run(sim_rack, UNINSTALL, {"gpu_fabric_uninstall_force": "true", "gpu_fabric_uninstall_crds": "true"})

    run(sim_rack, CLUSTER, {**SET_A, "mpi_operator_manifest_url": previous_manifest})
    before = state(sim_rack)
    assert before["charts"] == ["gpu-operator-v25.10.0", "nvidia-dra-driver-gpu-25.8.0"]
    assert before["crd_versions"] == {
        "clusterpolicies.nvidia.com": "v25.10.0",
        "computedomains.resource.nvidia.com": "25.8.0",
    }
    assert before["previous_only"] == [
        "gpu-operator/gpu-operator-previous-only",
        "nvidia-dra-driver-gpu/nvidia-dra-driver-gpu-previous-only",
    ]
    assert before["operator"].endswith(":v25.10.0")
    assert before["dra"] and all(image.endswith("/k8s-dra-driver-gpu:v25.8.0") for image in before["dra"])
    assert before["mpi"].endswith(":0.6.0")

    planned = ansible_playbook(sim_rack, CLUSTER, "-e", "gpu_fabric_release_set=26.7", "--check", json_output=True)
    assert planned.returncode == 0, planned.stdout[-6000:]
    shown = {
        r["msg"]["release"]: r["msg"]
        for r in results_named(
            planned, "gpu_fabric.mnnvl.chart_release : Show the release that check mode would install or upgrade"
        )
        if not r.get("skipped")
    }
    dra = shown["nvidia-dra-driver-gpu/nvidia-dra-driver-gpu"]
    assert dra["chart"].startswith("dra-driver-nvidia-gpu 0.4.1 from ")
    assert dra["why"] == [
        "chart nvidia-dra-driver-gpu, not dra-driver-nvidia-gpu",
        "chart version 25.8.0 -> 0.4.1",
        "values differ (nameOverride)",
    ]
    assert dra["values_wanted"]["nameOverride"] == "nvidia-dra-driver-gpu"
    assert "chart version v25.10.0 -> v26.7.0" in shown["gpu-operator/gpu-operator"]["why"]
    # GPU Operator v26.7.0's chart carries the ComputeDomain CRDs: left to the DRA driver's release, and Helm
    # is told not to install its copies
    [operator] = results_named(
        planned, "gpu_fabric.mnnvl.chart_release : Install or upgrade the release gpu-operator/gpu-operator"
    )
    assert operator["crds"]["left_to_their_owner"] == [
        "computedomaincliques.resource.nvidia.com",
        "computedomains.resource.nvidia.com",
    ]
    assert "computedomains.resource.nvidia.com" not in operator["crds"]["applied"]
    assert "--skip-crds" in operator["command"]
    assert state(sim_rack) == before

    run(sim_rack, CLUSTER, SET_B)
    after = state(sim_rack)
    assert after["charts"] == ["gpu-operator-v26.7.0", "dra-driver-nvidia-gpu-0.4.1"]
    # the DRA driver's release owns the ComputeDomain CRDs: GPU Operator v26.7.0's older copies are not applied
    assert after["crd_versions"] == {
        "clusterpolicies.nvidia.com": "v26.7.0",
        "computedomains.resource.nvidia.com": "0.4.1",
    }
    assert after["previous_only"] == []
    assert after["operator"].endswith(":v26.7.0")
    assert after["dra"] and all(
        image.startswith("registry.k8s.io/dra-driver-nvidia/dra-driver-nvidia-gpu:v0.4.1") for image in after["dra"]
    )
    assert after["mpi"].endswith(":0.8")
    assert [helm_release(sim_rack, n, n)["revision"] for n in ("gpu-operator", "nvidia-dra-driver-gpu")] == ["2", "2"]
    # the same objects, upgraded: nameOverride kept their names, so no second controller or kubelet plugin
    deployments = [
        d["metadata"]["name"] for d in sim_rack.get_json("deployments", "-n", "nvidia-dra-driver-gpu")["items"]
    ]
    assert deployments == ["nvidia-dra-driver-gpu-controller"]

    verified = run_verify(sim_rack, tmp_path / "report", "--tags", "cliques,imex_channel")
    assert verified.process.returncode == 0, verified.output[-6000:]
    assert verified.report()["verdict"] == "passed"

    # back to the old chart is refused before anything changes: the DRA driver supports no downgrade
    refused = ansible_playbook(sim_rack, CLUSTER, "-e", "gpu_fabric_release_set=25.10", "--tags", "dra_driver")
    assert refused.returncode != 0
    assert (
        "release nvidia-dra-driver-gpu/nvidia-dra-driver-gpu runs chart dra-driver-nvidia-gpu; moving it to chart "
        "nvidia-dra-driver-gpu is a downgrade the chart does not support" in " ".join(refused.stdout.split())
    )
    assert state(sim_rack)["charts"] == after["charts"]


@pytest.mark.parametrize(
    ("extra", "refusal"),
    [
        (
            # upstream's install guide names the release the new way: beside the collection's, refused
            {"dra_driver_release_name": "dra-driver-nvidia-gpu", "dra_driver_namespace": "dra-driver-nvidia-gpu"},
            "release nvidia-dra-driver-gpu/nvidia-dra-driver-gpu already runs the NVIDIA DRA driver (it owns "
            "DeviceClass compute-domain-",
        ),
        (
            {"gpu_operator_values": {"gpuCluster": {"deployCR": True}}},
            "gpu_operator_values sets gpuCluster.deployCR: the GPU Operator would deploy a DRA driver of its own",
        ),
        (
            {"gpu_operator_upgrade_crds": False},
            "release gpu-operator/gpu-operator: the chart carries computedomaincliques.resource.nvidia.com, "
            "computedomains.resource.nvidia.com, which another release owns",
        ),
    ],
    ids=["second-dra-release", "gpucluster-mode", "crds-of-another-release"],
)
def test_a_combination_that_breaks_the_cluster_is_refused_before_anything_changes(sim_rack, extra, refusal):
    before = state(sim_rack)
    refused = ansible_playbook(sim_rack, CLUSTER, "-e", json.dumps(extra), "--tags", "gpu_operator,dra_driver")
    assert refused.returncode != 0
    assert refusal in " ".join(refused.stdout.split()), refused.stdout[-4000:]
    assert state(sim_rack) == before
    namespaces = [n["metadata"]["name"] for n in sim_rack.get_json("namespaces")["items"]]
    assert "dra-driver-nvidia-gpu" not in namespaces
