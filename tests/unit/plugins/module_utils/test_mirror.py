# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Air-gapped sites: every image and download of the cluster stage at the site's mirror, none left public."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import mirror
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.release_sets import release_set
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.verification_objects import (
    imex_pod_manifest,
    mpijob_manifest,
)
from mpi_settings import MPI

REPO = Path(__file__).resolve().parents[4]
PREFIX = "registry.example.com/mirror"
ROLE_DEFAULTS = {
    role: yaml.safe_load((REPO / "roles" / role / "defaults" / "main.yml").read_text())
    for role in (
        "gpu_operator",
        "dra_driver",
        "mpi_operator",
        "containerd",
        "verify_nvbandwidth",
        "verify_imex_channel",
    )
}


def merged(base, extra):
    """Helm's merge of values: maps recursively, anything else replaced."""
    out = dict(base)
    for key, value in extra.items():
        out[key] = merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


@pytest.mark.parametrize(
    ("image", "expected"),
    [
        ("mpioperator/mpi-operator:0.6.0", ("docker.io", "mpioperator/mpi-operator", ":0.6.0")),
        ("ubuntu:22.04", ("docker.io", "library/ubuntu", ":22.04")),
        (
            "ghcr.io/nvidia/k8s-samples:nvbandwidth-v0.7-8d103163",
            ("ghcr.io", "nvidia/k8s-samples", ":nvbandwidth-v0.7-8d103163"),
        ),
        ("localhost:5000/nccl@sha256:ab12", ("localhost:5000", "nccl", "@sha256:ab12")),
        ("nvcr.io/nvidia/gpu-operator", ("nvcr.io", "nvidia/gpu-operator", "")),
    ],
)
def test_image_references_are_split_with_docker_hub_made_explicit(image, expected):
    assert mirror.split_image(image) == expected


def test_the_prefix_replaces_the_registry_and_keeps_path_and_tag():
    assert mirror.mirror_image("mpioperator/mpi-operator:0.6.0", PREFIX) == f"{PREFIX}/mpioperator/mpi-operator:0.6.0"
    assert mirror.mirror_image("ubuntu:22.04", PREFIX) == f"{PREFIX}/library/ubuntu:22.04"
    assert mirror.mirror_image("ubuntu:22.04", "") == "ubuntu:22.04"


def test_an_override_wins_for_its_image_only_whatever_the_spelling_of_the_public_name():
    overrides = {"docker.io/library/ubuntu": "harbor.site/base/ubuntu-lts"}
    assert mirror.mirror_image("ubuntu:22.04", PREFIX, overrides) == "harbor.site/base/ubuntu-lts:22.04"
    assert mirror.mirror_image("ubuntu:22.04", "", overrides) == "harbor.site/base/ubuntu-lts:22.04"
    assert mirror.mirror_image("busybox:1", PREFIX, overrides) == f"{PREFIX}/library/busybox:1"


def test_gpu_operator_values_move_every_component_and_set_the_pull_secrets_in_the_charts_shapes():
    values = mirror.gpu_operator_values(PREFIX, {"nvcr.io/nvidia/driver": "harbor.site/drivers/gb200-driver"}, ["pull"])
    assert values["operator"]["repository"] == f"{PREFIX}/nvidia"
    assert values["operator"]["initContainer"] == {"repository": f"{PREFIX}/nvidia", "image": "cuda"}
    assert values["toolkit"] == {
        "repository": f"{PREFIX}/nvidia/k8s",
        "image": "container-toolkit",
        "imagePullSecrets": ["pull"],
    }
    assert (values["driver"]["repository"], values["driver"]["image"]) == ("harbor.site/drivers", "gb200-driver")
    assert values["driver"]["manager"]["repository"] == f"{PREFIX}/nvidia/cloud-native"
    assert values["node-feature-discovery"] == {
        "image": {"repository": f"{PREFIX}/nfd/node-feature-discovery"},
        "imagePullSecrets": [{"name": "pull"}],
    }
    assert mirror.public_hosts(json.dumps(values)) == []
    assert mirror.gpu_operator_values("") == {}


def test_dra_driver_values_move_its_image_and_list_secrets_as_objects():
    assert mirror.dra_driver_values(PREFIX, {}, ["pull"]) == {
        "image": {"repository": f"{PREFIX}/nvidia/k8s-dra-driver-gpu"},
        "imagePullSecrets": [{"name": "pull"}],
    }
    assert mirror.dra_driver_values("") == {}


@pytest.mark.parametrize("chart,public", [("gpu-operator", "nvcr.io"), ("dra-driver-nvidia-gpu", "registry.k8s.io")])
def test_the_stand_in_charts_values_with_the_mirror_name_no_public_registry(chart, public):
    # The simulated rack's stand-ins keep the real charts' image keys.
    defaults = yaml.safe_load((REPO / "sim" / "charts" / chart / "values.yaml").read_text())
    assert mirror.public_hosts(json.dumps(defaults)) == [public]
    image = release_set().dra_driver_image
    version = release_set().gpu_operator_chart_version
    ours = (
        mirror.gpu_operator_values(PREFIX, chart_version=version)
        if chart == "gpu-operator"
        else mirror.dra_driver_values(PREFIX, image=image)
    )
    assert mirror.public_hosts(json.dumps(merged(defaults, ours))) == []


def test_the_mpi_operator_manifest_is_mirrored_object_by_object_with_the_pull_secret():
    documents = list(yaml.safe_load_all((REPO / "sim" / "manifests" / "mpi-operator.yaml").read_text()))
    assert mirror.implicit_docker_hub_images(d for d in documents if d) == ["mpioperator/mpi-operator:0.8"]
    objects = mirror.mirror_manifest(documents, PREFIX, {}, ["pull"])
    assert len(objects) == len([d for d in documents if d])
    [deployment] = [o for o in objects if o["kind"] == "Deployment"]
    spec = deployment["spec"]["template"]["spec"]
    assert spec["containers"][0]["image"] == f"{PREFIX}/mpioperator/mpi-operator:0.8"
    assert spec["imagePullSecrets"] == [{"name": "pull"}]
    assert mirror.implicit_docker_hub_images(objects) == []
    assert mirror.public_hosts(yaml.safe_dump_all(objects)) == []
    assert documents[-1]["spec"]["template"]["spec"]["containers"][0]["image"] == "mpioperator/mpi-operator:0.8"


def test_verification_pods_built_with_the_mirrored_images_name_no_public_registry():
    nvbandwidth = mirror.mirror_image(ROLE_DEFAULTS["verify_nvbandwidth"]["verify_nvbandwidth_image"], PREFIX)
    ubuntu = mirror.mirror_image(ROLE_DEFAULTS["verify_imex_channel"]["verify_imex_channel_image"], PREFIX)
    job = mpijob_manifest("j", "ns", "nvbandwidth", "rack0", ["t0", "t1"], 4, "cd", nvbandwidth, [], MPI)
    pod = imex_pod_manifest("t0", "ns", "rack0", "cd", ubuntu, None)
    assert mirror.public_hosts(json.dumps([job, pod])) == []
    assert mirror.implicit_docker_hub_images([{"kind": "Pod", **pod}]) == []


def test_downloads_move_under_the_file_mirror_keeping_host_and_path():
    url = release_set().mpi_operator_manifest_url
    moved = mirror.mirror_url(url, "https://files.example.com/mirror/")
    assert moved == (
        "https://files.example.com/mirror/raw.githubusercontent.com/kubeflow/mpi-operator/v0.8.2/deploy/v2beta1/"
        "mpi-operator.yaml"
    )
    assert mirror.public_hosts(moved) == []
    assert mirror.mirror_url(url, "") == url
    assert mirror.mirror_url("oci://registry.example.com/charts", "https://files.example.com") == (
        "oci://registry.example.com/charts"
    )


def test_oci_and_authenticated_repositories_become_the_references_helm_takes():
    assert mirror.chart_source("gpu-operator", "oci://registry.example.com/mirror/charts", "", True) == {
        "chart_ref": "oci://registry.example.com/mirror/charts/gpu-operator",
        "chart_repo_url": "",
        "registry_host": "registry.example.com",
        "repo_name": "",
    }
    assert mirror.chart_source("gpu-operator", "https://charts.site/nvidia", "site-nvidia", True) == {
        "chart_ref": "site-nvidia/gpu-operator",
        "chart_repo_url": "",
        "registry_host": "",
        "repo_name": "site-nvidia",
    }
    assert mirror.chart_source("gpu-operator", "https://helm.ngc.nvidia.com/nvidia")["chart_repo_url"] == (
        "https://helm.ngc.nvidia.com/nvidia"
    )


def test_public_hosts_are_found_as_hosts_not_inside_other_names():
    assert mirror.public_hosts("image: nvcr.io/nvidia/driver") == ["nvcr.io"]
    assert mirror.public_hosts("image: mirror.nvcr.io.site/x registry.example.com/ghcr.io-cache/y") == []
    assert mirror.public_hosts("url: https://github.com/containerd/x https://files.site/github.com/y") == ["github.com"]
    assert mirror.public_hosts("url: https://files.site/github.com/containerd/x") == []


def test_an_mpijob_gets_the_pull_secrets_on_the_launcher_and_the_workers():
    job = mpijob_manifest("j", "ns", "nccl", "rack0", ["t0", "t1"], 4, "cd", f"{PREFIX}/site/nccl:1", [], MPI)
    [moved] = mirror.mirror_manifest([job], "", {}, ["pull"])
    for role in ("Launcher", "Worker"):
        assert moved["spec"]["mpiReplicaSpecs"][role]["template"]["spec"]["imagePullSecrets"] == [{"name": "pull"}]
    assert "imagePullSecrets" not in job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]


DOWNLOADS = json.loads(
    (Path(__file__).resolve().parents[3] / "fixtures" / "downloads" / "ansible-core-2.19-results.json").read_text()
)
VARIABLES = ["mpi_operator_manifest_url", "mpi_operator_manifest_src"]


@pytest.mark.parametrize(
    ("case", "line"),
    [
        ("refused", "http://127.0.0.1:9/mpi-operator.yaml: Connection refused; set mpi_operator_manifest_url or "),
        ("dns", "http://no-such-host.invalid/m.yaml: Name or service not known; set "),
        ("missing", "http://127.0.0.1:18555/missing.yaml: the server answered 404 (File not found); set "),
        ("get_url_refused", "http://127.0.0.1:9/runc.amd64: Connection refused; set "),
        ("missing_get_url", "http://127.0.0.1:18555/missing.tar.gz: the server answered 404; set "),
    ],
)
def test_a_failed_download_is_one_line_naming_the_url_why_and_the_variables(case, line):
    said = mirror.download_failure(DOWNLOADS[case], "the manifest", VARIABLES)
    assert said.startswith("cannot download the manifest from " + line)
    assert said.endswith("mpi_operator_manifest_src to a copy the host can read") and "\n" not in said


@pytest.mark.parametrize("case", ["ok_uri", "ok_get_url"])
def test_a_download_that_worked_or_did_not_run_says_nothing(case):
    assert mirror.download_failure(DOWNLOADS[case], "the manifest", VARIABLES) == ""
    assert mirror.download_failure({"skipped": True, "changed": False}, "the manifest", VARIABLES) == ""
    # get_url with the file already in place asks the server nothing
    in_place = {"changed": False, "msg": "file already exists", "url": "http://x/runc", "dest": "/usr/local/sbin/runc"}
    assert mirror.download_failure(in_place, "runc", ["containerd_runc_url"]) == ""


def test_an_answer_the_caller_does_not_expect_is_a_failure():
    assert mirror.download_failure(DOWNLOADS["ok_uri"], "the manifest", VARIABLES, expected=(204,)).startswith(
        "cannot download the manifest from http://127.0.0.1:18555/present.yaml: the server answered 200; "
    )
