# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The release sets and the combinations refused before anything is installed, each in one line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from ansible.errors import AnsibleFilterError
from ansible_collections.gpu_fabric.mnnvl.plugins.filter.mnnvl import FilterModule
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import release_sets as rs
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.chart_release import upgrade_args
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.chart_values import chart_values
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.mirror import dra_driver_values

FILTERS = FilterModule().filters()
ROLES = Path(__file__).resolve().parents[4] / "roles"


def device_class(name="compute-domain-daemon.nvidia.com", release="nvidia-dra-driver-gpu", namespace=None):
    """A DeviceClass as Helm made it: no chart label (the real charts set none), the release's annotations."""
    return {
        "metadata": {
            "name": name,
            "labels": {"app.kubernetes.io/managed-by": "Helm"},
            "annotations": {
                "meta.helm.sh/release-name": release,
                "meta.helm.sh/release-namespace": namespace or release,
            },
        }
    }


def test_the_default_set_is_the_one_nvidia_supports_today_and_the_guide_set_stays_named():
    assert rs.release_set() == rs.release_set("") == rs.release_set("26.7") == rs.SETS[rs.DEFAULT]
    current = FILTERS["release_set"]("")
    assert (current["gpu_operator_chart_version"], current["dra_driver_chart_name"]) == ("v26.7.0", rs.NEW_DRA_CHART)
    assert current["dra_driver_chart_repo_url"] == "oci://registry.k8s.io/dra-driver-nvidia/charts"
    assert current["mpi_operator_manifest_url"].endswith("/mpi-operator/v0.8.2/deploy/v2beta1/mpi-operator.yaml")
    guide = FILTERS["release_set"]("25.10")
    assert (guide["gpu_operator_chart_version"], guide["dra_driver_chart_name"], guide["dra_driver_chart_version"]) == (
        "v25.10.0",
        rs.OLD_DRA_CHART,
        "25.8.0",
    )
    assert guide["mpi_operator_manifest_url"].endswith("/v0.6.0/deploy/v2beta1/mpi-operator.yaml")
    assert current["compute_domain_crds"] == list(rs.COMPUTE_DOMAIN_CRDS)


def test_an_unknown_set_is_refused_naming_the_sets():
    with pytest.raises(
        AnsibleFilterError, match=r"release_set: gpu_fabric_release_set is '26\.3'; use one of 26\.7, 25\.10"
    ):
        FILTERS["release_set"]("26.3")


@pytest.mark.parametrize("role", ["gpu_operator", "dra_driver", "mpi_operator"])
def test_each_role_documents_the_default_sets_versions(role):
    """The argument specs state the default set's values; the defaults read the set, which the gpu_fabric role
    resolves once (one home for versions)."""
    spec = yaml.safe_load((ROLES / role / "meta" / "argument_specs.yml").read_text())["argument_specs"]["main"][
        "options"
    ]
    current = rs.release_set().as_vars()
    documented = {
        "gpu_operator": {"gpu_operator_chart_version": current["gpu_operator_chart_version"]},
        "dra_driver": {
            "dra_driver_chart_name": current["dra_driver_chart_name"],
            "dra_driver_chart_version": current["dra_driver_chart_version"],
            "dra_driver_chart_repo_url": current["dra_driver_chart_repo_url"],
            "dra_driver_image": current["dra_driver_image"],
        },
        "mpi_operator": {"mpi_operator_manifest_url": current["mpi_operator_manifest_url"]},
    }[role]
    assert {key: spec[key]["default"] for key in documented} == documented
    shared = yaml.safe_load((ROLES / "gpu_fabric" / "meta" / "argument_specs.yml").read_text())["argument_specs"]
    assert shared["main"]["options"]["gpu_fabric_release_set"]["choices"] == list(rs.SETS)
    assert shared["main"]["options"]["gpu_fabric_release_set"]["default"] == rs.DEFAULT
    assert "gpu_fabric_release_set" not in spec  # declared once, by the gpu_fabric role
    defaults = yaml.safe_load((ROLES / role / "defaults" / "main.yml").read_text())
    assert all("gpu_fabric_release." in defaults[key] for key in documented)
    shared_defaults = yaml.safe_load((ROLES / "gpu_fabric" / "defaults" / "main.yml").read_text())
    assert "gpu_fabric.mnnvl.release_set" in shared_defaults["gpu_fabric_release"]


def test_gpu_cluster_mode_is_refused_in_one_line():
    assert FILTERS["gpu_operator_problem"]({"gpuCluster": {"deployCR": False}}) == ""
    assert FILTERS["gpu_operator_problem"]({}) == ""
    for on in (True, "true", "True"):
        problem = FILTERS["gpu_operator_problem"]({"gpuCluster": {"deployCR": on}})
        assert problem.startswith("gpu_operator_values sets gpuCluster.deployCR: the GPU Operator would deploy")
        assert problem.endswith("remove gpuCluster from gpu_operator_values") and "\n" not in problem


def test_a_gpu_cluster_on_the_cluster_is_refused_naming_it():
    problem = FILTERS["dra_driver_problem"](
        rs.NEW_DRA_CHART, {}, "nvidia-dra-driver-gpu", "nvidia-dra-driver-gpu", [], [{"metadata": {"name": "cluster"}}]
    )
    assert problem.startswith("GPUCluster cluster exists: the GPU Operator deploys the DRA driver from it")
    assert "kubectl delete gpucluster cluster" in problem and "--skip-tags dra_driver" in problem


def test_a_release_named_the_old_way_next_to_the_new_way_is_refused_with_the_in_place_way_out():
    old = device_class(release="nvidia-dra-driver-gpu")
    assert rs.dra_release_problem([old], "nvidia-dra-driver-gpu", "nvidia-dra-driver-gpu") == ""
    problem = rs.dra_release_problem([old], "dra-driver-nvidia-gpu", "dra-driver-nvidia-gpu")
    assert problem == (
        "release nvidia-dra-driver-gpu/nvidia-dra-driver-gpu already runs the NVIDIA DRA driver (it owns DeviceClass "
        "compute-domain-daemon.nvidia.com); a second release dra-driver-nvidia-gpu/dra-driver-nvidia-gpu would "
        "fight it: set dra_driver_release_name: nvidia-dra-driver-gpu and dra_driver_namespace: "
        "nvidia-dra-driver-gpu to upgrade it in place (docs/upgrade.md), or uninstall it first"
    )
    # upstream's install guide names the release the new way: found the same way, with its namespace
    new = device_class(name="gpu.nvidia.com", release="dra-driver-nvidia-gpu")
    assert "release dra-driver-nvidia-gpu/dra-driver-nvidia-gpu already runs" in rs.dra_release_problem(
        [new], "nvidia-dra-driver-gpu", "nvidia-dra-driver-gpu"
    )
    elsewhere = device_class(release="nvidia-dra-driver-gpu", namespace="kube-system")
    assert "release kube-system/nvidia-dra-driver-gpu" in rs.dra_release_problem(
        [elsewhere], "nvidia-dra-driver-gpu", "nvidia-dra-driver-gpu"
    )


def test_device_classes_of_other_drivers_or_made_without_helm_are_not_a_dra_release():
    other = device_class(name="gpu.example.com", release="other")
    bare = {"metadata": {"name": "compute-domain-daemon.nvidia.com"}}
    assert rs.dra_release_problem([other, bare], "nvidia-dra-driver-gpu", "nvidia-dra-driver-gpu") == ""


def test_going_back_from_the_renamed_chart_is_refused_as_a_downgrade():
    forward_only = FILTERS["release_set"]("25.10")["dra_driver_forward_only_charts"]
    release = "nvidia-dra-driver-gpu/nvidia-dra-driver-gpu"
    assert rs.downgrade_problem(release, rs.NEW_DRA_CHART, rs.OLD_DRA_CHART, forward_only) == (
        "release nvidia-dra-driver-gpu/nvidia-dra-driver-gpu runs chart dra-driver-nvidia-gpu; moving it to chart "
        "nvidia-dra-driver-gpu is a downgrade the chart does not support: keep dra-driver-nvidia-gpu (for the DRA "
        "driver, release set 26.7)"
    )
    # forward is fine, staying is fine, nothing installed is fine
    assert rs.downgrade_problem(release, rs.OLD_DRA_CHART, rs.NEW_DRA_CHART, forward_only) == ""
    assert rs.downgrade_problem(release, rs.NEW_DRA_CHART, rs.NEW_DRA_CHART, forward_only) == ""
    assert rs.downgrade_problem(release, "", rs.OLD_DRA_CHART, forward_only) == ""


def test_the_renamed_chart_keeps_the_old_names_and_refuses_another_name_override():
    assert chart_values("nvidia-dra-driver-gpu", "operator", chart_name=rs.NEW_DRA_CHART)["nameOverride"] == (
        "nvidia-dra-driver-gpu"
    )
    assert "nameOverride" not in chart_values("nvidia-dra-driver-gpu", "operator", chart_name=rs.OLD_DRA_CHART)
    assert rs.name_override_problem(rs.NEW_DRA_CHART, {"nameOverride": "nvidia-dra-driver-gpu"}) == ""
    assert rs.name_override_problem(rs.OLD_DRA_CHART, {"nameOverride": "anything"}) == ""
    problem = FILTERS["dra_driver_problem"](rs.NEW_DRA_CHART, {"nameOverride": "dra"}, "r", "n")
    assert problem.startswith("dra_driver_values sets nameOverride 'dra': the dra-driver-nvidia-gpu chart must keep")


def test_a_version_pinned_before_the_rename_is_refused_naming_the_set_to_keep():
    problem = FILTERS["dra_driver_problem"](rs.NEW_DRA_CHART, {}, "r", "n", chart_version="25.8.0")
    assert problem == (
        "dra_driver_chart_version 25.8.0 is a version of chart nvidia-dra-driver-gpu, not of dra-driver-nvidia-gpu "
        '(the releases restarted at 0.4.0 when the chart was renamed): set gpu_fabric_release_set: "25.10" to stay '
        "on it, or drop the pin (0.4.1 in set 26.7)"
    )
    assert "is a version of chart dra-driver-nvidia-gpu" in rs.chart_version_problem(rs.OLD_DRA_CHART, "0.4.1")
    for chart, version in ((rs.NEW_DRA_CHART, "0.4.1"), (rs.OLD_DRA_CHART, "25.8.0"), (rs.NEW_DRA_CHART, "~0.4")):
        assert rs.chart_version_problem(chart, version) == ""
    # every set is consistent
    for name in rs.SETS:
        wanted = rs.release_set(name)
        assert rs.chart_version_problem(wanted.dra_driver_chart_name, wanted.dra_driver_chart_version) == ""


def test_every_dra_refusal_is_named_in_the_one_line():
    problem = rs.dra_driver_problem(
        rs.NEW_DRA_CHART,
        {"nameOverride": "x"},
        "mine",
        "mine",
        [device_class()],
        [{"metadata": {"name": "cluster"}}],
    )
    assert problem.count("; ") >= 2 and problem.startswith("GPUCluster cluster exists")
    assert "release nvidia-dra-driver-gpu/nvidia-dra-driver-gpu" in problem and "nameOverride 'x'" in problem


def test_crds_another_release_owns_are_refused_only_when_helm_would_install_them():
    carried = ["clusterpolicies.nvidia.com", "computedomains.resource.nvidia.com"]
    assert rs.foreign_crds_problem("gpu-operator/gpu-operator", carried, rs.COMPUTE_DOMAIN_CRDS, True) == ""
    assert rs.foreign_crds_problem("gpu-operator/gpu-operator", carried[:1], rs.COMPUTE_DOMAIN_CRDS, False) == ""
    assert rs.foreign_crds_problem("gpu-operator/gpu-operator", carried, rs.COMPUTE_DOMAIN_CRDS, False) == (
        "release gpu-operator/gpu-operator: the chart carries computedomains.resource.nvidia.com, which another "
        "release owns; with upgrade_crds off Helm would install them from this chart too: turn upgrade_crds on (the "
        "collection then applies this chart's other CRDs and leaves those to their owner)"
    )
    args = upgrade_args("gpu-operator", "gpu-operator", "v26.7.0", "/tmp/v.json", 600, skip_crds=True)
    assert args[-1] == "--skip-crds" and "--skip-crds" not in upgrade_args("r", "c", "1", "/v", 1)


def test_the_dra_image_follows_the_chart_to_the_mirror():
    image = rs.release_set("26.7").dra_driver_image
    assert dra_driver_values("mirror.example.com/m", image=image) == {
        "image": {"repository": "mirror.example.com/m/dra-driver-nvidia/dra-driver-nvidia-gpu"}
    }
    assert dra_driver_values("", image=image) == {}
    assert (
        dra_driver_values("mirror.example.com/m")["image"]["repository"]
        == "mirror.example.com/m/nvidia/k8s-dra-driver-gpu"
    )


def test_no_role_description_names_a_component_version():
    """The release sets are the versions' one home: a role's description that names a chart or manifest version
    goes stale with the next set (the descriptions named 25.10's charts while 26.7 was the default)."""
    roles = Path(__file__).resolve().parents[4] / "roles"
    version = re.compile(r"\bv?[0-9]+\.[0-9]+\.[0-9]+\b")
    problems = []
    for path in sorted(roles.glob("*/meta/argument_specs.yml")):
        for entry, spec in yaml.safe_load(path.read_text())["argument_specs"].items():
            found = version.findall(str(spec.get("short_description", "")))
            problems += [f"{path.parent.parent.name} {entry}: short_description names {v}" for v in found]
    for path in sorted(roles.glob("*/meta/main.yml")):
        found = version.findall(str(yaml.safe_load(path.read_text())["galaxy_info"].get("description", "")))
        problems += [f"{path.parent.parent.name}: description names {v}" for v in found]
    assert problems == []


@pytest.mark.parametrize("given", [25.10, "25.1"])
def test_a_set_that_yaml_read_as_a_number_is_refused_with_the_quoting_hint(given):
    with pytest.raises(AnsibleFilterError) as refused:
        FILTERS["release_set"](given)
    assert str(refused.value).endswith(
        "gpu_fabric_release_set is '25.1'; use one of 26.7, 25.10 ("
        + rs.COMPATIBILITY_URL
        + "); YAML reads an unquoted "
        "25.10 as the number 25.1: quote it ('25.10')"
    )
