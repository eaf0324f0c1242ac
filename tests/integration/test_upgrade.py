# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""An in-place upgrade on the simulated rack: cluster.yml at the previous minor (A), then at the current (B).

The sim serves each stand-in chart at both versions (A: the same chart with A's version strings, a ConfigMap
that B no longer ships, its CRDs stamped with A) and the MPI operator manifest at v0.5.0 and v0.6.0. The
test starts from an uninstalled cluster and leaves version B installed, as the other tests expect.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
from test_cluster_stage import ansible_playbook, helm_release
from verify_helpers import run_verify

REPO_ROOT = Path(__file__).resolve().parents[2]
CLUSTER = str(REPO_ROOT / "playbooks" / "cluster.yml")
UNINSTALL = str(REPO_ROOT / "playbooks" / "uninstall.yml")
STAMP = "gpu-fabric.sim/chart-version"
VERSION_A = {"gpu_operator_chart_version": "v25.3.4", "dra_driver_chart_version": "25.3.2"}
VERSION_B = {"gpu_operator_chart_version": "v25.10.0", "dra_driver_chart_version": "25.8.0"}

pytestmark = pytest.mark.sim


def run(sim_rack, playbook: str, extra: dict[str, str]) -> subprocess.CompletedProcess:
    args = [a for key, value in extra.items() for a in ("-e", f"{key}={value}")]
    result = ansible_playbook(sim_rack, playbook, *args)
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


def test_changing_the_versions_and_rerunning_cluster_yml_upgrades_in_place(sim_rack, tmp_path):
    previous_manifest = sim_rack.env["GPU_FABRIC_SIM_MPI_MANIFEST_URL"].replace("/v0.6.0/", "/v0.5.0/")
    run(sim_rack, UNINSTALL, {"gpu_fabric_uninstall_force": "true", "gpu_fabric_uninstall_crds": "true"})

    run(sim_rack, CLUSTER, {**VERSION_A, "mpi_operator_manifest_url": previous_manifest})
    before = state(sim_rack)
    assert before["charts"] == ["gpu-operator-v25.3.4", "nvidia-dra-driver-gpu-25.3.2"]
    assert before["crd_versions"] == {
        "clusterpolicies.nvidia.com": "v25.3.4",
        "computedomains.resource.nvidia.com": "25.3.2",
    }
    assert before["previous_only"] == [
        "gpu-operator/gpu-operator-previous-only",
        "nvidia-dra-driver-gpu/nvidia-dra-driver-gpu-previous-only",
    ]
    assert before["operator"].endswith(":v25.3.4")
    assert before["dra"] and all(image.endswith(":v25.3.2") for image in before["dra"])
    assert before["mpi"].endswith(":0.5.0")

    run(sim_rack, CLUSTER, VERSION_B)
    after = state(sim_rack)
    assert after["charts"] == ["gpu-operator-v25.10.0", "nvidia-dra-driver-gpu-25.8.0"]
    assert after["crd_versions"] == {
        "clusterpolicies.nvidia.com": "v25.10.0",
        "computedomains.resource.nvidia.com": "25.8.0",
    }
    assert after["previous_only"] == []
    assert after["operator"].endswith(":v25.10.0")
    assert after["dra"] and all(image.endswith(":v25.8.0") for image in after["dra"])
    assert after["mpi"].endswith(":0.6.0")
    assert [helm_release(sim_rack, n, n)["revision"] for n in ("gpu-operator", "nvidia-dra-driver-gpu")] == ["2", "2"]

    verified = run_verify(sim_rack, tmp_path / "report", "--tags", "cliques,imex_channel")
    assert verified.process.returncode == 0, verified.output[-6000:]
    assert verified.report()["verdict"] == "passed"
