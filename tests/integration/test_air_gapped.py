# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Air-gapped sites on the simulated rack: every rendered manifest names the mirror, no public registry.

``helm template`` renders both stand-in charts (they keep the real charts' image keys) with the values the
roles build for a mirror; ``cluster.yml --check`` shows the values and the MPI operator objects the roles
would apply. Nothing is installed.
"""

from __future__ import annotations

import json
import subprocess

import pytest
import yaml
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import mirror
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.release_sets import release_set
from test_cluster_stage import ansible_playbook, results_named

PREFIX = "registry.example.com/mirror"
DRA_IMAGE = release_set("26.7").dra_driver_image
SITE = {"gpu_fabric_registry": PREFIX, "gpu_fabric_image_pull_secrets": ["mirror-pull"]}

pytestmark = pytest.mark.sim


def images(documents) -> list[str]:
    found = []
    for doc in documents:
        for spec in mirror._pod_specs(doc):
            found += [c["image"] for key in ("initContainers", "containers") for c in spec.get(key) or []]
    return found


@pytest.mark.parametrize(
    ("chart", "version", "values"),
    [
        ("gpu-operator", "v26.7.0", mirror.gpu_operator_values(PREFIX, {}, ["mirror-pull"], "v26.7.0")),
        ("gpu-operator", "v25.10.0", mirror.gpu_operator_values(PREFIX, {}, ["mirror-pull"], "v25.10.0")),
        ("dra-driver-nvidia-gpu", "0.4.1", mirror.dra_driver_values(PREFIX, {}, ["mirror-pull"], DRA_IMAGE)),
        ("nvidia-dra-driver-gpu", "25.8.0", mirror.dra_driver_values(PREFIX, {}, ["mirror-pull"])),
    ],
)
def test_the_charts_rendered_with_the_mirror_values_pull_only_from_the_mirror(
    sim_rack, tmp_path, chart, version, values
):
    values_file = tmp_path / "values.yaml"
    # with the values the roles always set (the DRA chart refuses to render without resources.gpus.enabled=false)
    base = {"nvidiaDriverRoot": "/run/nvidia/driver", "resources": {"gpus": {"enabled": False}}}
    values_file.write_text(yaml.safe_dump({**base, **values}))
    rendered = subprocess.run(
        [
            "helm",
            "template",
            "r",
            chart,
            "--repo",
            sim_rack.env["GPU_FABRIC_SIM_HELM_REPO_URL"],
            "--version",
            version,
            "-n",
            "gpu-fabric-test",
            "--kube-version",
            "1.34.0",
            "-f",
            str(values_file),
        ],
        env=sim_rack.env,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    documents = [d for d in yaml.safe_load_all(rendered) if d]
    pulled = images(documents)
    assert pulled and all(image.startswith(f"{PREFIX}/") for image in pulled), pulled
    assert mirror.public_hosts(rendered) == []
    assert mirror.implicit_docker_hub_images(documents) == []


def test_cluster_yml_in_check_mode_would_apply_only_mirrored_images(sim_rack):
    result = ansible_playbook(sim_rack, "playbooks/cluster.yml", "--check", "-e", json.dumps(SITE), json_output=True)
    assert result.returncode == 0, result.stdout[-4000:]
    [operator] = results_named(
        result, "gpu_fabric.mnnvl.gpu_operator : Point the chart and its images at the site's mirror"
    )
    [dra] = results_named(result, "gpu_fabric.mnnvl.dra_driver : Point the chart and its image at the site's mirror")
    assert operator["gpu_operator_values"]["operator"]["repository"] == f"{PREFIX}/nvidia"
    assert operator["gpu_operator_values"]["operator"]["imagePullSecrets"] == ["mirror-pull"]
    assert dra["dra_driver_values"]["image"] == {"repository": f"{PREFIX}/dra-driver-nvidia/dra-driver-nvidia-gpu"}
    [mpi] = results_named(
        result, "gpu_fabric.mnnvl.mpi_operator : Point the operator's image at the site's mirror, with the pull secrets"
    )
    objects = mpi["manifest_objects"]
    assert images(objects) == [f"{PREFIX}/mpioperator/mpi-operator:0.8"]
    assert mirror.public_hosts(json.dumps([operator["gpu_operator_values"], dra["dra_driver_values"], objects])) == []
