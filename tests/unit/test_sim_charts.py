# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The simulated rack's two release sets: the older charts derived from the sources (sim/simrack/addons.py),
the DRA driver chart's names with and without nameOverride, and the driver and operator versions the
stand-in controllers read from image tags."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT / "sim"))

from simrack import addons  # noqa: E402
from simrack.controllers import computedomain, gpuoperator  # noqa: E402
from simrack.controllers.base import runs  # noqa: E402

DRA_NS = "nvidia-dra-driver-gpu"
DRA_ARGS = ("-n", DRA_NS, "--kube-version", "1.34.4", "--api-versions", "resource.k8s.io/v1")


def derivation(name: str) -> addons.Derivation:
    return next(d for d in addons.DERIVED if d.name == name)


def crds_of(chart: Path) -> dict[str, dict[str, Any]]:
    docs = [d for p in sorted((chart / "crds").glob("*.yaml")) for d in yaml.safe_load_all(p.read_text()) if d]
    return {d["metadata"]["name"]: d for d in docs}


def cd_spec_schema(crd: dict[str, Any]) -> dict[str, Any]:
    return crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]


def test_release_sets_name_each_component_version():
    assert addons.RELEASE_SETS == {
        "26.7": {"gpu-operator": "v26.7.0", "dra-driver-nvidia-gpu": "0.4.1", "mpi-operator": "v0.8.2"},
        "25.10": {"gpu-operator": "v25.10.0", "nvidia-dra-driver-gpu": "25.8.0", "mpi-operator": "v0.6.0"},
    }
    sources = {p.name: addons.chart_version(p) for p in addons.CHARTS_DIR.iterdir() if (p / "Chart.yaml").exists()}
    assert sources == {"gpu-operator": "v26.7.0", "dra-driver-nvidia-gpu": "0.4.1"}
    assert [(d.name, d.version) for d in addons.DERIVED] == [
        ("gpu-operator", "v25.10.0"),
        ("nvidia-dra-driver-gpu", "25.8.0"),
    ]


def test_the_25_8_chart_is_renamed_loses_the_clique_crd_and_requires_num_nodes(tmp_path: Path):
    staged = addons.derive_chart(derivation("nvidia-dra-driver-gpu"), tmp_path)

    chart = yaml.safe_load((staged / "Chart.yaml").read_text())
    assert (chart["name"], chart["version"], chart["appVersion"]) == ("nvidia-dra-driver-gpu", "25.8.0", "25.8.0")
    values = yaml.safe_load((staged / "values.yaml").read_text())
    assert values["image"]["repository"] == "nvcr.io/nvidia/k8s-dra-driver-gpu"
    new_name = [
        (p.name, line)
        for p in staged.rglob("*")
        if p.is_file()
        for line in p.read_text().splitlines()
        if "dra-driver-nvidia-gpu" in line and not line.startswith("#")
    ]
    assert new_name == []
    assert "computedomaincliques" not in (staged / "templates" / "rbac.yaml").read_text()
    crds = crds_of(staged)
    assert list(crds) == ["computedomains.resource.nvidia.com"]
    assert crds["computedomains.resource.nvidia.com"]["metadata"]["annotations"] == {
        addons.CHART_VERSION_ANNOTATION: "25.8.0"
    }
    spec = cd_spec_schema(crds["computedomains.resource.nvidia.com"])
    assert spec["required"] == ["numNodes", "channel"]
    assert spec["properties"]["numNodes"] == {
        "description": spec["properties"]["numNodes"]["description"],
        "type": "integer",
        "minimum": 0,
    }
    assert (staged / "templates" / "previous-only.yaml").read_text() == addons.PREVIOUS_ONLY_TEMPLATE
    # the source is left as it was
    assert addons.chart_version(addons.CHARTS_DIR / "dra-driver-nvidia-gpu") == "0.4.1"


def test_the_0_4_1_source_makes_num_nodes_optional_and_ships_the_clique_crd(tmp_path: Path):
    staged = addons.stage_chart(addons.CHARTS_DIR / "dra-driver-nvidia-gpu", tmp_path)

    crds = crds_of(staged)
    assert sorted(crds) == ["computedomaincliques.resource.nvidia.com", "computedomains.resource.nvidia.com"]
    assert {c["metadata"]["annotations"][addons.CHART_VERSION_ANNOTATION] for c in crds.values()} == {"0.4.1"}
    spec = cd_spec_schema(crds["computedomains.resource.nvidia.com"])
    assert spec["required"] == ["channel"]
    assert spec["properties"]["numNodes"]["default"] == 0
    assert not (staged / "templates" / "previous-only.yaml").exists()


def test_the_v25_10_operator_chart_has_no_dra_crds_nor_gpu_cluster_values(tmp_path: Path):
    staged = addons.derive_chart(derivation("gpu-operator"), tmp_path)

    chart = yaml.safe_load((staged / "Chart.yaml").read_text())
    assert (chart["version"], chart["appVersion"]) == ("v25.10.0", "v25.10.0")
    crds = crds_of(staged)
    assert list(crds) == ["clusterpolicies.nvidia.com"]
    assert crds["clusterpolicies.nvidia.com"]["metadata"]["annotations"][addons.CHART_VERSION_ANNOTATION] == "v25.10.0"
    values = yaml.safe_load((staged / "values.yaml").read_text())
    assert not {"clusterPolicy", "gpuCluster", "draDriver"} & set(values)
    assert values["operator"]["version"] == values["validator"]["version"] == "v25.10.0"
    assert values["dcgmExporter"]["serviceMonitor"] == {
        "enabled": False,
        "interval": "15s",
        "honorLabels": False,
        "additionalLabels": {},
    }
    assert (values["driver"]["version"], values["toolkit"]["version"]) == ("580.95.05", "v1.18.0")
    assert not (staged / "templates" / "gpucluster.yaml").exists()
    assert "deployCR" not in (staged / "templates" / "clusterpolicy.yaml").read_text()


def test_the_operator_and_the_dra_driver_ship_the_same_compute_domain_crd_but_num_nodes():
    operator = crds_of(addons.CHARTS_DIR / "gpu-operator")
    dra = crds_of(addons.CHARTS_DIR / "dra-driver-nvidia-gpu")
    name = "computedomains.resource.nvidia.com"
    assert operator["computedomaincliques.resource.nvidia.com"] == dra["computedomaincliques.resource.nvidia.com"]
    # v26.7.0's copy is older than the DRA driver 0.4's: numNodes still required, without default
    assert cd_spec_schema(operator[name])["required"] == ["numNodes", "channel"]
    assert cd_spec_schema(operator[name])["properties"]["numNodes"].keys() == {"description", "type"}
    for crd in (operator[name], dra[name]):
        cd_spec_schema(crd)["properties"].pop("numNodes")
        cd_spec_schema(crd).pop("required")
    assert operator[name] == dra[name]


def test_a_source_that_drifted_from_its_derivation_fails_the_packaging(tmp_path: Path):
    shutil.copytree(addons.CHARTS_DIR / "gpu-operator", tmp_path / "src" / "gpu-operator")
    rbac = tmp_path / "src" / "gpu-operator" / "templates" / "rbac.yaml"
    rbac.write_text(rbac.read_text().replace(', "gpuclusters", "gpuclusters/status"', ""))
    with pytest.raises(SystemExit, match="gpuclusters"):
        addons.derive_chart(derivation("gpu-operator"), tmp_path / "staging", tmp_path / "src")


@pytest.mark.parametrize(
    ("image", "uid_named"),
    [
        ("nvcr.io/nvidia/k8s-dra-driver-gpu:v25.8.0", False),
        ("nvcr.io/nvidia/k8s-dra-driver-gpu:v25.8.1", False),
        ("nvcr.io/nvidia/k8s-dra-driver-gpu:v25.12.0", True),
        ("registry.k8s.io/dra-driver-nvidia/dra-driver-nvidia-gpu:v0.4.1", True),
        ("registry.k8s.io/dra-driver-nvidia/dra-driver-nvidia-gpu:v0.5.0-dev", True),
        ("", False),
    ],
)
def test_the_kubernetes_sigs_releases_come_after_the_calendar_ones(image: str, uid_named: bool):
    cd = {"metadata": {"name": "cd", "uid": "0f1e2d3c-aaaa"}}
    expected = (
        ("computedomain-daemon-0f1e2d3c-aaaa",) * 2 if uid_named else ("cd-0f1e2", "cd-daemon-claim-template-0f1e2")
    )
    assert computedomain.daemon_names(cd, image) == expected


def test_driver_versions_order_by_release_date():
    order = ["v25.3.2", "v25.8.0", "v25.12.0", "v0.4.0", "v0.4.1", "v0.5.0"]
    versions = [computedomain.driver_version(f"x:{tag}") for tag in order]
    assert versions == sorted(versions)
    assert computedomain.driver_version("x:v0.4.1") == (1, 0, 4, 1)
    assert computedomain.driver_version("x:v25.12.0") == (0, 25, 12, 0)


def test_operator_versions_are_read_from_the_image_tag():
    assert gpuoperator.operator_version("nvcr.io/nvidia/gpu-operator:v26.7.0") == (26, 7, 0)
    assert gpuoperator.operator_version("nvcr.io/nvidia/gpu-operator") == (25, 10, 0)
    assert (
        gpuoperator.operator_version("nvcr.io/nvidia/gpu-operator:v26.3.3") < gpuoperator.OPTIONAL_SERVICE_MONITOR_CRD
    )


def test_driver_pods_are_found_by_the_binary_they_run_not_their_labels():
    plugin = {"spec": {"containers": [{"name": "compute-domains", "command": ["compute-domain-kubelet-plugin", "-v"]}]}}
    gpus_only = {"spec": {"containers": [{"name": "gpus", "command": ["gpu-kubelet-plugin"]}]}}
    assert runs(plugin, "compute-domain-kubelet-plugin")["name"] == "compute-domains"
    assert runs(gpus_only, "compute-domain-kubelet-plugin") is None
    assert runs({"spec": {}}, "compute-domain-controller") is None
    # the real 0.4 chart starts the plugin from a shell script
    script = "if [ x ]; then\n  mount --bind a b\nfi\ncompute-domain-kubelet-plugin -v $(LOG_VERBOSITY)"
    real = {"spec": {"containers": [{"name": "compute-domains", "command": ["bash", "-c"], "args": [script]}]}}
    assert runs(real, "compute-domain-kubelet-plugin")["name"] == "compute-domains"
    assert runs(real, "compute-domain") is None


def _helm() -> str:
    found = sorted(Path.home().glob(".cache/gpu-fabric-sim/*/bin/helm"))
    helm = str(found[-1]) if found else shutil.which("helm")
    if not helm:
        pytest.skip("the sim's helm is not built yet (sim/build.sh)")
    return helm


def _render_dra(*sets: str) -> dict[tuple[str, str], dict[str, Any]]:
    args = [_helm(), "template", "nvidia-dra-driver-gpu", str(addons.CHARTS_DIR / "dra-driver-nvidia-gpu"), *DRA_ARGS]
    for value in ("resources.gpus.enabled=false", *sets):
        args += ["--set", value]
    out = subprocess.run(args, capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    return {(d["kind"], d["metadata"]["name"]): d for d in yaml.safe_load_all(out.stdout) if d}


def test_name_override_keeps_the_old_chart_names_and_label_key():
    docs = _render_dra("nameOverride=nvidia-dra-driver-gpu")

    controller = docs[("Deployment", "nvidia-dra-driver-gpu-controller")]
    plugin = docs[("DaemonSet", "nvidia-dra-driver-gpu-kubelet-plugin")]
    # the component label alone, as both real charts select: the immutable selector survives the upgrade
    assert controller["spec"]["selector"]["matchLabels"] == {"nvidia-dra-driver-gpu-component": "controller"}
    assert plugin["spec"]["selector"]["matchLabels"] == {"nvidia-dra-driver-gpu-component": "kubelet-plugin"}
    assert controller["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/name"] == "nvidia-dra-driver-gpu"
    assert plugin["spec"]["template"]["metadata"]["labels"]["nvidia-dra-driver-gpu-component"] == "kubelet-plugin"
    assert [c["name"] for c in plugin["spec"]["template"]["spec"]["containers"]] == ["compute-domains"]
    assert plugin["spec"]["template"]["spec"]["serviceAccountName"] == "nvidia-dra-driver-gpu"
    assert ("ClusterRole", "nvidia-dra-driver-gpu-role") in docs


def test_without_name_override_the_0_4_chart_names_everything_anew():
    docs = _render_dra()

    controller = docs[("Deployment", "dra-driver-nvidia-gpu-controller")]
    plugin = docs[("DaemonSet", "dra-driver-nvidia-gpu-kubelet-plugin")]
    assert controller["spec"]["selector"]["matchLabels"]["dra-driver-nvidia-gpu-component"] == "controller"
    assert "nvidia-dra-driver-gpu-component" not in plugin["spec"]["template"]["metadata"]["labels"]
    # the release name does not contain the new name: the full name is release-name
    assert plugin["spec"]["template"]["spec"]["serviceAccountName"] == "nvidia-dra-driver-gpu-dra-driver-nvidia-gpu"
    assert ("ClusterRole", "nvidia-dra-driver-gpu-dra-driver-nvidia-gpu-role") in docs


def test_the_derived_25_8_chart_renders_the_old_names(tmp_path: Path):
    staged = addons.derive_chart(derivation("nvidia-dra-driver-gpu"), tmp_path)
    args = [
        _helm(),
        "template",
        "nvidia-dra-driver-gpu",
        str(staged),
        *DRA_ARGS,
        "--set",
        "resources.gpus.enabled=false",
    ]
    out = subprocess.run(args, capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    docs = {(d["kind"], d["metadata"]["name"]): d for d in yaml.safe_load_all(out.stdout) if d}
    plugin = docs[("DaemonSet", "nvidia-dra-driver-gpu-kubelet-plugin")]
    assert plugin["spec"]["selector"]["matchLabels"]["nvidia-dra-driver-gpu-component"] == "kubelet-plugin"
    assert plugin["spec"]["template"]["spec"]["containers"][0]["image"] == "nvcr.io/nvidia/k8s-dra-driver-gpu:v25.8.0"
    assert ("ConfigMap", "nvidia-dra-driver-gpu-previous-only") in docs


def test_the_v26_7_chart_renders_a_gpu_cluster_only_instead_of_the_cluster_policy():
    chart = str(addons.CHARTS_DIR / "gpu-operator")
    base = [_helm(), "template", "gpu-operator", chart, "-n", "gpu-operator"]
    plain = subprocess.run(base, capture_output=True, text=True, check=False)
    kinds = [d["kind"] for d in yaml.safe_load_all(plain.stdout) if d]
    assert "ClusterPolicy" in kinds and "GPUCluster" not in kinds
    both = subprocess.run([*base, "--set", "gpuCluster.deployCR=true"], capture_output=True, text=True, check=False)
    assert "clusterPolicy.deployCR and gpuCluster.deployCR cannot both be true" in both.stderr
    dra = [*base, "--set", "gpuCluster.deployCR=true,clusterPolicy.deployCR=false,driver.enabled=false"]
    out = subprocess.run(
        [*dra, "--api-versions", "resource.k8s.io/v1/DeviceClass"], capture_output=True, text=True, check=True
    )
    docs = [d for d in yaml.safe_load_all(out.stdout) if d]
    cluster = next(d for d in docs if d["kind"] == "GPUCluster")
    assert "ClusterPolicy" not in [d["kind"] for d in docs]
    assert cluster["metadata"]["name"] == "gpu-cluster"
    assert cluster["spec"]["draDriver"]["computeDomains"] == {"enabled": True}
