# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The simulated rack's NVIDIA stand-ins: generators and charts (no rack needed), then the live
rack (``-m sim``): charts from the served repository, DeviceClasses and ResourceSlices, a pod
claiming a ComputeDomain channel, an MPIJob running nvbandwidth, and every stand-in fault.

Outputs are checked with the collection's own parsers (``plugins/module_utils``), so the sim
emits what the verification roles will read.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT / "sim"))

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.nccl import parse_nccl_tests  # noqa: E402
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.nvbandwidth_text import parse_text  # noqa: E402
from simrack import logs, nodes  # noqa: E402
from simrack.controllers import computedomain, gpuoperator, mpioperator  # noqa: E402
from simrack.controllers.base import read_faults  # noqa: E402
from verify_helpers import apply_cluster_stage  # noqa: E402

TESTCASE = "multinode_device_to_device_memcpy_read_ce"
FIXTURE_TEXT = logs.NVBANDWIDTH_FIXTURE.read_text()
CHANNEL_CLASS = "compute-domain-default-channel.nvidia.com"
DAEMON_CLASS = "compute-domain-daemon.nvidia.com"
DRA_NS = "nvidia-dra-driver-gpu"


def fixture_cells() -> list[float]:
    """The measured cells of the real GB200 run, row-major, read independently of simrack.logs."""
    block = FIXTURE_TEXT.split("bandwidth (GB/s)\n", 1)[1].split("\n\n", 1)[0].splitlines()[1:]
    return [float(tok) for row in block for tok in row.split()[1:] if tok != "N/A"]


def matrix_of(text: str):
    result = parse_text(text)
    return result, result.testcases[TESTCASE].matrix_named()


# ------------------------------------------------------------------------------------------------
# Generators (no rack needed)
# ------------------------------------------------------------------------------------------------


def test_eight_ranks_reproduce_the_real_gb200_run_byte_for_byte():
    hosts, devices = logs.ranks_for("nvbandwidth-test", workers=2, slots=4)
    assert logs.nvbandwidth_text(logs.NvbandwidthRun(hosts, devices)) == FIXTURE_TEXT


def test_twelve_ranks_cycle_the_measured_cells_and_sum_them():
    hosts, devices = logs.ranks_for("big", workers=3, slots=4)
    text = logs.nvbandwidth_text(logs.NvbandwidthRun(hosts, devices))
    result, matrix = matrix_of(text)
    cells = fixture_cells()
    assert matrix.shape == (12, 12)
    assert all(matrix.rows[i][i] is None for i in range(12))
    measured = [cell[2] for cell in matrix.measured()]
    assert len(measured) == 132
    assert measured == [cells[k % len(cells)] for k in range(132)]
    assert matrix.reported_sum == pytest.approx(round(sum(measured), 2), abs=1e-9)
    assert [d.host for d in result.devices] == [f"big-worker-{w}" for w in range(3) for _slot in range(4)]
    assert "Process  0 (big-worker-0): device 0: NVIDIA GB200 (00000008:01:00)" in text
    assert "Process 11 (big-worker-2): device 3: NVIDIA GB200 (00000019:01:00)" in text


def test_degraded_link_lowers_one_cell_and_the_sum():
    hosts, devices = logs.ranks_for("nvb", workers=2, slots=4)
    text = logs.nvbandwidth_text(logs.NvbandwidthRun(hosts, devices, degraded={(0, 5): 412.5}))
    matrix = matrix_of(text)[1]
    cells = fixture_cells()
    assert matrix.rows[0][5] == 412.5
    assert [v for r, c, v in matrix.measured() if (r, c) != (0, 5)] == cells[:4] + cells[5:]
    assert matrix.reported_sum == pytest.approx(round(sum(cells) - cells[4] + 412.5, 2), abs=1e-9)


def test_failing_launcher_ends_with_the_cuda_and_mpi_errors_and_no_matrix():
    hosts, devices = logs.ranks_for("nvb", workers=2, slots=4)
    text = logs.nvbandwidth_text(logs.NvbandwidthRun(hosts, devices, failure="launcher-fails"))
    result = parse_text(text)
    assert result.testcases[TESTCASE].matrices == []
    assert any("CUDA_ERROR_NOT_PERMITTED" in e for e in result.errors)
    assert "SUM " not in text
    assert text.rstrip().splitlines()[-2] == "exactly when Open MPI kills them."


def test_unknown_testcase_prints_the_real_error_line():
    hosts, devices = logs.ranks_for("nvb", workers=2, slots=4)
    text = logs.nvbandwidth_text(logs.NvbandwidthRun(hosts, devices, testcase="no_such_test"))
    assert "ERROR: Testcase no_such_test not found!" in text
    assert "Running " not in text


def test_imex_listing_with_and_without_the_channel():
    present = logs.imex_listing(True)
    assert re.search(r"^crw-rw-rw- 1 root root 501, 0 .* channel0$", present, re.M)
    absent = logs.imex_listing(False)
    assert "channel0" not in absent
    assert "No such file or directory" in absent


def test_cri_lines_keep_every_line_including_blank_ones():
    text = "a\n\nb c\n"
    cri = logs.cri_lines(text).splitlines()
    assert len(cri) == 3
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z stdout F .*", line) for line in cri)
    assert [line.split(" ", 3)[3] for line in cri] == ["a", "", "b c"]
    assert logs.cri_text(logs.cri_lines(text)) == text
    assert logs.cri_text(logs.cri_lines(FIXTURE_TEXT)) == FIXTURE_TEXT


def test_all_reduce_perf_table_parses_and_saturates_below_the_link():
    hosts = logs.ranks_for("nccl", workers=2, slots=4)[0]
    link = logs.mean_measured_cell()
    text = logs.all_reduce_perf_text(["all_reduce_perf", "-b", "8", "-e", "1G", "-f", "2"], 8, hosts, link)
    result = parse_nccl_tests(text)
    assert [r.size_bytes for r in result.rows] == [8 << k for k in range(28)]
    busbws = [p.busbw_gbps for r in result.rows for p in (r.out_of_place, r.in_place)]
    assert max(busbws) < link
    assert result.rows[-1].out_of_place.busbw_gbps > 0.95 * link
    assert result.avg_busbw_gbps == pytest.approx(sum(busbws) / len(busbws), abs=0.01)
    assert len(result.devices) == 8


# ------------------------------------------------------------------------------------------------
# Controller logic (no rack needed)
# ------------------------------------------------------------------------------------------------


def _cd(num_nodes: int = 0, nodes: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {
        "metadata": {"name": "cd", "namespace": "ns", "uid": "1234567890abcdef"},
        "spec": {"numNodes": num_nodes, "channel": {"resourceClaimTemplate": {"name": "cd-channel"}}},
        "status": {"status": "NotReady", "nodes": nodes or []},
    }


def _pod(node: str, ready: bool = True, ip: str = "10.0.0.1") -> dict[str, Any]:
    return {
        "metadata": {"name": f"d-{node}"},
        "status": {
            "phase": "Running",
            "podIP": ip,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def test_compute_domain_node_indexes_are_stable_per_clique():
    before = [{"name": "b", "cliqueID": "u.1", "index": 0, "ipAddress": "x", "status": "Ready"}]
    pods = {"a": _pod("a", ip="10.0.0.2"), "b": _pod("b"), "c": _pod("c", ready=False)}
    cliques = {"a": "u.1", "b": "u.1", "c": "u.2"}
    entries = computedomain.node_statuses(_cd(nodes=before), pods, cliques, not_ready=False)
    assert [(e["name"], e["cliqueID"], e["index"], e["status"]) for e in entries] == [
        ("a", "u.1", 1, "Ready"),
        ("b", "u.1", 0, "Ready"),
        ("c", "u.2", 0, "NotReady"),
    ]
    assert entries[0]["ipAddress"] == "10.0.0.2"
    assert computedomain.global_status(_cd(num_nodes=2), entries, not_ready=False) == "Ready"
    assert computedomain.global_status(_cd(num_nodes=3), entries, not_ready=False) == "NotReady"
    assert computedomain.global_status(_cd(num_nodes=0), entries, not_ready=True) == "NotReady"


def test_workload_claim_template_requests_the_default_channel_for_this_domain():
    rct = computedomain.workload_claim_template(_cd())
    assert rct["metadata"]["name"] == "cd-channel"
    assert rct["metadata"]["namespace"] == "ns"
    request = rct["spec"]["spec"]["devices"]["requests"][0]
    assert request == {"name": "channel", "exactly": {"deviceClassName": CHANNEL_CLASS}}
    params = rct["spec"]["spec"]["devices"]["config"][0]["opaque"]["parameters"]
    assert params == {
        "apiVersion": "resource.nvidia.com/v1beta1",
        "kind": "ComputeDomainChannelConfig",
        "domainID": "1234567890abcdef",
        "allocationMode": "Single",
    }


def _mpijob(**spec: Any) -> dict[str, Any]:
    body = {
        "mpiReplicaSpecs": {
            "Launcher": {"template": {"spec": {"containers": [{"name": "l", "image": "i", "command": ["mpirun"]}]}}},
            "Worker": {"replicas": 2, "template": {"spec": {"containers": [{"name": "w", "image": "i"}]}}},
        },
        **spec,
    }
    return {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": "nvb", "namespace": "ns", "uid": "u-1"},
        "spec": body,
    }


def test_mpijob_defaults_follow_the_operator_code_not_the_type_comment():
    spec = mpioperator.defaults(_mpijob()["spec"])
    assert spec["runPolicy"]["cleanPodPolicy"] == "None"
    assert spec["slotsPerWorker"] == 1
    assert spec["launcherCreationPolicy"] == "AtStartup"
    assert spec["mpiReplicaSpecs"]["Launcher"]["restartPolicy"] == "OnFailure"


def test_mpijob_objects_carry_the_operator_names_and_labels():
    job = _mpijob(slotsPerWorker=4, runPolicy={"backoffLimit": 0})
    spec = mpioperator.defaults(job["spec"])
    assert mpioperator.hostfile(job, spec) == "nvb-worker-0.nvb.ns.svc slots=4\nnvb-worker-1.nvb.ns.svc slots=4\n"
    worker = mpioperator.worker_pod(job, spec, 1)
    assert worker["metadata"]["name"] == "nvb-worker-1"
    assert worker["metadata"]["labels"] == {
        "training.kubeflow.org/operator-name": "mpi-operator",
        "training.kubeflow.org/job-name": "nvb",
        "training.kubeflow.org/job-role": "worker",
        "training.kubeflow.org/replica-index": "1",
    }
    assert (worker["spec"]["hostname"], worker["spec"]["subdomain"]) == ("nvb-worker-1", "nvb")
    launcher = mpioperator.launcher_job(job, spec, exit_code=1)
    assert launcher["metadata"]["name"] == "nvb-launcher"
    assert launcher["spec"]["backoffLimit"] == 0
    template = launcher["spec"]["template"]
    assert template["metadata"]["annotations"] == {"gpu-fabric.sim/exit-code": "1"}
    assert template["metadata"]["labels"]["training.kubeflow.org/job-role"] == "launcher"
    env = {e["name"]: e["value"] for e in template["spec"]["containers"][0]["env"]}
    assert env["OMPI_MCA_orte_default_hostfile"] == "/etc/mpi/hostfile"
    assert env["OMPI_MCA_orte_set_default_slots"] == "4"
    assert mpioperator.launcher_job(job, spec, exit_code=None)["spec"]["template"]["metadata"]["annotations"] == {}


def test_faults_file_is_read_as_written_and_tolerates_absence(tmp_path: Path):
    assert read_faults(tmp_path) == {}
    (tmp_path / "faults.json").write_text(json.dumps({"degraded-link": {"src": "0", "dst": "5", "gbps": "400"}}))
    assert read_faults(tmp_path) == {"degraded-link": {"src": "0", "dst": "5", "gbps": "400"}}
    (tmp_path / "faults.json").write_text("{half")
    assert read_faults(tmp_path) == {}


# ------------------------------------------------------------------------------------------------
# Charts (need the sim's Helm binary, built by sim/build.sh)
# ------------------------------------------------------------------------------------------------


def _helm() -> str:
    found = sorted(Path.home().glob(".cache/gpu-fabric-sim/*/bin/helm")) or []
    helm = str(found[-1]) if found else shutil.which("helm")
    if not helm:
        pytest.skip("the sim's helm is not built yet (sim/build.sh)")
    return helm


def _template(chart: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [_helm(), "template", chart, str(REPO_ROOT / "sim" / "charts" / chart), *args],
        capture_output=True,
        text=True,
        check=False,
    )


def test_dra_chart_renders_the_device_classes_with_the_real_selectors():
    out = _template(
        "dra-driver-nvidia-gpu",
        "-n",
        DRA_NS,
        "--kube-version",
        "1.34.4",
        "--api-versions",
        "resource.k8s.io/v1",
        "--set",
        "resources.gpus.enabled=false",
        "--set",
        "nvidiaDriverRoot=/run/nvidia/driver",
    )
    assert out.returncode == 0, out.stderr
    docs = [d for d in yaml.safe_load_all(out.stdout) if d]
    classes = {d["metadata"]["name"]: d for d in docs if d["kind"] == "DeviceClass"}
    assert set(classes) == {CHANNEL_CLASS, DAEMON_CLASS}
    assert classes[CHANNEL_CLASS]["apiVersion"] == "resource.k8s.io/v1"
    assert classes[CHANNEL_CLASS]["spec"]["selectors"][0]["cel"]["expression"] == (
        "device.driver == 'compute-domain.nvidia.com' && "
        "device.attributes['compute-domain.nvidia.com'].type == 'channel' && "
        "device.attributes['compute-domain.nvidia.com'].id == 0"
    )
    plugin = next(d for d in docs if d["kind"] == "DaemonSet")
    env = {e["name"]: e.get("value") for e in plugin["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["NVIDIA_DRIVER_ROOT"] == "/run/nvidia/driver"
    controller = next(d for d in docs if d["kind"] == "Deployment")
    assert controller["spec"]["template"]["metadata"]["labels"]["dra-driver-nvidia-gpu-component"] == "controller"
    assert controller["spec"]["template"]["spec"]["containers"][0]["image"] == (
        "registry.k8s.io/dra-driver-nvidia/dra-driver-nvidia-gpu:v0.4.1"
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--api-versions", "resource.k8s.io/v1"], "explicitly set 'resources.gpus.enabled=false'"),
        (["--set", "resources.gpus.enabled=false", "-n", "default"], "installing into the 'default' namespace"),
        (["--set", "resources.gpus.enabled=false", "--kube-version", "1.31.0"], "incompatible with Kubernetes v1.31.0"),
    ],
)
def test_dra_chart_refuses_what_the_real_chart_refuses(args: list[str], message: str):
    out = _template(
        "dra-driver-nvidia-gpu", "--kube-version", "1.34.4", *(args if "-n" in args else [*args, "-n", DRA_NS])
    )
    assert out.returncode != 0
    assert message in out.stderr


def test_gpu_operator_chart_follows_the_values_the_roles_set():
    out = _template(
        "gpu-operator",
        "-n",
        "gpu-operator",
        "--set",
        "driver.enabled=false",
        "--set",
        "dcgm.enabled=true",
        "--set",
        "dcgmExporter.serviceMonitor.enabled=true",
        "--api-versions",
        "monitoring.coreos.com/v1",
    )
    assert out.returncode == 0, out.stderr
    docs = [d for d in yaml.safe_load_all(out.stdout) if d]
    # like the real chart: the ClusterPolicy and the operator, no operand (the operator deploys them)
    assert not [d for d in docs if d["kind"] in ("DaemonSet", "ServiceMonitor")]
    policy = next(d for d in docs if d["kind"] == "ClusterPolicy")
    assert policy["spec"]["driver"]["enabled"] is False
    assert policy["spec"]["dcgm"]["enabled"] is True
    assert policy["spec"]["dcgmExporter"]["serviceMonitor"]["enabled"] is True
    assert policy["spec"]["toolkit"]["repository"] == "nvcr.io/nvidia/k8s"
    assert policy["spec"]["daemonsets"]["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    ]
    wanted = [gpuoperator.operand_daemonset(policy["spec"], o, "gpu-operator") for o in gpuoperator.OPERANDS]
    enabled = [
        d["metadata"]["name"]
        for d, o in zip(wanted, gpuoperator.OPERANDS)
        if gpuoperator.operand_enabled(policy["spec"], o)
    ]
    assert enabled == [
        "nvidia-container-toolkit-daemonset",
        "nvidia-operator-validator",
        "nvidia-device-plugin-daemonset",
        "nvidia-dcgm",
        "nvidia-dcgm-exporter",
        "gpu-feature-discovery",
        "nvidia-mig-manager",
    ]


def test_the_operator_renders_each_operand_as_its_asset_declares_it():
    spec = {
        "daemonsets": {"labels": {"team": "gpu", "app": "not-mine"}, "priorityClassName": "gpu-critical"},
        "toolkit": {"repository": "nvcr.io/nvidia/k8s", "image": "container-toolkit", "version": "v1.18.0"},
        "cdi": {"enabled": True, "default": False},
    }
    by_name = {o.daemonset: gpuoperator.operand_daemonset(spec, o, "gpu-operator") for o in gpuoperator.OPERANDS}
    driver = by_name["nvidia-driver-daemonset"]
    assert driver["metadata"]["labels"] == {
        "team": "gpu",
        "app": "nvidia-driver-daemonset",
        "nvidia.com/precompiled": "false",
        "app.kubernetes.io/component": "nvidia-driver",
    }
    assert driver["spec"]["selector"] == {"matchLabels": {"app": "nvidia-driver-daemonset"}}
    assert driver["spec"]["updateStrategy"] == {"type": "OnDelete"}
    template = driver["spec"]["template"]
    assert template["metadata"]["labels"]["app"] == "nvidia-driver-daemonset"  # the site's app label is skipped
    assert template["spec"]["nodeSelector"] == {"nvidia.com/gpu.deploy.driver": "true"}
    assert template["spec"]["priorityClassName"] == "gpu-critical"
    assert template["spec"]["tolerations"] == gpuoperator.DEFAULT_TOLERATIONS
    assert template["spec"]["containers"][0]["name"] == "nvidia-driver-ctr"
    gfd = by_name["gpu-feature-discovery"]
    assert gfd["metadata"]["labels"]["app.kubernetes.io/part-of"] == "nvidia-gpu"
    toolkit = by_name["nvidia-container-toolkit-daemonset"]["spec"]["template"]["spec"]["containers"][0]
    assert toolkit["image"] == "nvcr.io/nvidia/k8s/container-toolkit:v1.18.0"
    assert {e["name"]: e["value"] for e in toolkit["env"]} == {
        "CDI_ENABLED": "true",
        "NVIDIA_CONTAINER_RUNTIME_MODE": "legacy",
        "RUNTIME": "containerd",
    }
    # unset fields take the API's default: the node status exporter off, the rest on
    assert [o.daemonset for o in gpuoperator.OPERANDS if not gpuoperator.operand_enabled({}, o)] == [
        "nvidia-node-status-exporter"
    ]
    # the hash follows the spec, so a changed ClusterPolicy updates the DaemonSet
    other = gpuoperator.operand_daemonset(
        dict(spec, daemonsets={"priorityClassName": "x"}), gpuoperator.OPERANDS[0], "g"
    )
    assert (
        other["metadata"]["annotations"][gpuoperator.HASH_ANNOTATION]
        != driver["metadata"]["annotations"][gpuoperator.HASH_ANNOTATION]
    )


def test_the_operator_labels_gpu_nodes_and_honours_the_values_there():
    def node(**labels: str) -> dict[str, Any]:
        return {"metadata": {"name": "n", "labels": labels}}

    tray = node(**{"feature.node.kubernetes.io/pci-10de.present": "true", "nvidia.com/gpu.product": "NVIDIA-GB200"})
    patch = gpuoperator.node_label_patch(tray)
    assert patch["nvidia.com/gpu.present"] == "true"
    assert sorted(
        k.removeprefix("nvidia.com/gpu.deploy.") for k in patch if k.startswith("nvidia.com/gpu.deploy.")
    ) == sorted(
        gpuoperator.CONTAINER_DEPLOY
    )  # no mig-manager: GB200 has no mig.capable label here and is no A100, A30 or H100
    paused = node(
        **{
            "feature.node.kubernetes.io/pci-10de.present": "true",
            "nvidia.com/gpu.present": "true",
            "nvidia.com/mig.capable": "true",
            **{f"nvidia.com/gpu.deploy.{d}": "true" for d in gpuoperator.CONTAINER_DEPLOY},
            "nvidia.com/gpu.deploy.driver": "paused-for-driver-upgrade",
        }
    )
    assert gpuoperator.node_label_patch(paused) == {"nvidia.com/gpu.deploy.mig-manager": "true"}
    gone = node(**{"nvidia.com/gpu.present": "true", "nvidia.com/gpu.deploy.driver": "true"})
    assert gpuoperator.node_label_patch(gone) == {
        "nvidia.com/gpu.present": "false",
        "nvidia.com/gpu.deploy.driver": None,
    }
    assert gpuoperator.node_label_patch(node(**{"kubernetes.io/os": "linux"})) == {}


def _ds(ready: int, desired: int) -> dict[str, Any]:
    return {"status": {"desiredNumberScheduled": desired, "numberReady": ready, "numberUnavailable": desired - ready}}


POLICY_SPEC = {
    "driver": {"enabled": True},
    "toolkit": {"enabled": True},
    "devicePlugin": {"enabled": True},
    "dcgm": {"enabled": False},
    "dcgmExporter": {"enabled": True, "serviceMonitor": {"enabled": False}},
    "gfd": {"enabled": True},
    "migManager": {"enabled": True},
}
OPERANDS = {
    name: _ds(4, 4)
    for name in (
        "nvidia-driver-daemonset",
        "nvidia-container-toolkit-daemonset",
        "nvidia-operator-validator",
        "nvidia-device-plugin-daemonset",
        "nvidia-dcgm-exporter",
        "gpu-feature-discovery",
        "nvidia-mig-manager",
    )
}


def test_cluster_policy_is_ready_only_when_every_enabled_operand_is():
    assert gpuoperator.states_not_ready(POLICY_SPEC, OPERANDS, service_monitor_crd=False) == []
    unready = dict(OPERANDS, **{"nvidia-driver-daemonset": _ds(3, 4)})
    missing = {k: v for k, v in OPERANDS.items() if k != "gpu-feature-discovery"}
    assert gpuoperator.states_not_ready(POLICY_SPEC, unready, False) == ["state-driver"]
    assert gpuoperator.states_not_ready(POLICY_SPEC, missing, False) == ["gpu-feature-discovery"]
    # no GPU node: nothing to schedule is ready, as isDaemonSetReady says
    assert gpuoperator.states_not_ready(POLICY_SPEC, {k: _ds(0, 0) for k in OPERANDS}, False) == []


def test_cluster_policy_service_monitor_without_its_crd_is_never_ready():
    spec = dict(POLICY_SPEC, dcgmExporter={"enabled": True, "serviceMonitor": {"enabled": True}})
    assert gpuoperator.states_not_ready(spec, OPERANDS, service_monitor_crd=False) == ["state-dcgm-exporter"]
    assert gpuoperator.states_not_ready(spec, OPERANDS, service_monitor_crd=True) == []
    # v26.3 still waits for the CRD; v26.7.0 skips the ServiceMonitor and calls the state ready
    v26_3 = gpuoperator.operator_version("nvcr.io/nvidia/gpu-operator:v26.3.3")
    v26_7 = gpuoperator.operator_version("nvcr.io/nvidia/gpu-operator:v26.7.0")
    assert gpuoperator.states_not_ready(spec, OPERANDS, False, v26_3) == ["state-dcgm-exporter"]
    assert gpuoperator.states_not_ready(spec, OPERANDS, False, v26_7) == []
    status = gpuoperator.policy_status(["state-dcgm-exporter"], {}, "gpu-operator")
    assert status["state"] == "notReady"
    assert [(c["type"], c["status"], c["reason"]) for c in status["conditions"]] == [
        ("Ready", "False", "Error"),
        ("Error", "True", "OperandNotReady"),
    ]
    assert status["conditions"][1]["message"] == "ClusterPolicy is not ready, states not ready: [state-dcgm-exporter]"
    ready = gpuoperator.policy_status([], status, "gpu-operator")
    assert ready["state"] == "ready"
    assert [(c["type"], c["status"], c["reason"]) for c in ready["conditions"]] == [
        ("Ready", "True", "Reconciled"),
        ("Error", "False", "Ready"),
    ]


@pytest.mark.parametrize(
    ("text", "taint"),
    [
        ("nvidia.com/gpu=present:NoSchedule", {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}),
        ("nvidia.com/gpu:NoExecute", {"key": "nvidia.com/gpu", "effect": "NoExecute"}),
        ("", None),
    ],
)
def test_gpu_taint_is_read_as_kubectl_taint_writes_it(text, taint):
    assert nodes.parse_taint(text) == taint


@pytest.mark.parametrize("text", ["nvidia.com/gpu=present", "nvidia.com/gpu=present:NoWay", "=x:NoSchedule"])
def test_gpu_taint_refuses_what_kubectl_refuses(text):
    with pytest.raises(ValueError, match="taint"):
        nodes.parse_taint(text)


def test_gpu_taint_replaces_its_former_self_and_keeps_other_taints():
    other = {"key": "gpu-fabric.nvidia.com/unverified", "value": "failed", "effect": "NoSchedule"}
    old = nodes.parse_taint("nvidia.com/gpu=old:NoSchedule")
    new = nodes.parse_taint("nvidia.com/gpu=present:NoSchedule")
    assert nodes.tainted([other, dict(old)], new, old) == [other, new]
    assert nodes.tainted([other, dict(new)], new, old) is None
    assert nodes.tainted([other, dict(new)], None, new) == [other]


# ------------------------------------------------------------------------------------------------
# On the live rack
# ------------------------------------------------------------------------------------------------


def _helm_install(rack, release: str, chart: str, namespace: str, version: str, *sets: str) -> None:
    args = [
        str(rack.bin_dir / "helm"),
        "upgrade",
        "--install",
        release,
        chart,
        "--repo",
        rack.endpoints["helm_repo_url"],
        "--version",
        version,
        "--namespace",
        namespace,
        "--create-namespace",
        "--wait",
        "--timeout",
        "180s",
    ]
    for value in sets:
        args += ["--set", value]
    out = subprocess.run(args, capture_output=True, text=True, env=rack.env, timeout=240, check=False)
    assert out.returncode == 0, f"helm {release}: {out.stdout}\n{out.stderr}"


GPU_OPERATOR_SETS = ("driver.enabled=true", "dcgm.enabled=true", "dcgmExporter.serviceMonitor.enabled=true")


@pytest.fixture(scope="module")
def addons(sim_rack):
    """GPU Operator, DRA driver and MPI operator installed from the rack's served locations.

    Installed by hand, so the GPU Operator release carries values the collection did not set; the tests after
    these find the collection's release again: cluster.yml adopts it (gpu_operator_on_existing=adopt).
    """
    _helm_install(sim_rack, "gpu-operator", "gpu-operator", "gpu-operator", "v25.10.0", *GPU_OPERATOR_SETS)
    _helm_install(
        sim_rack,
        "nvidia-dra-driver-gpu",
        "nvidia-dra-driver-gpu",
        DRA_NS,
        "25.8.0",
        "resources.gpus.enabled=false",
        "nvidiaDriverRoot=/run/nvidia/driver",
    )
    sim_rack.kubectl("apply", "--server-side", "-f", sim_rack.endpoints["mpi_operator_manifest_url"])
    sim_rack.kubectl("wait", "--for=condition=Established", "crd/mpijobs.kubeflow.org", "--timeout=60s")
    sim_rack.kubectl("rollout", "status", "deployment/mpi-operator", "-n", "mpi-operator", "--timeout=120s")
    yield sim_rack
    adopted = apply_cluster_stage(sim_rack, "-e", "gpu_operator_on_existing=adopt")
    assert adopted.returncode == 0, f"cluster.yml adopting the hand-installed release:\n{adopted.stdout[-6000:]}"


def gpu_nodes(rack) -> list[dict[str, Any]]:
    return rack.get_json("nodes", "-l", "nvidia.com/gpu.present=true")["items"]


def compute_domain(name: str, num_nodes: int) -> dict[str, Any]:
    return {
        "apiVersion": "resource.nvidia.com/v1beta1",
        "kind": "ComputeDomain",
        "metadata": {"name": name},
        "spec": {"numNodes": num_nodes, "channel": {"resourceClaimTemplate": {"name": f"{name}-channel"}}},
    }


def channel_pod(name: str, template: str, node: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": "ctr",
                "image": "ubuntu:22.04",
                "command": ["bash", "-c"],
                "args": ["ls -la /dev/nvidia-caps-imex-channels; trap 'exit 0' TERM; sleep 9999 & wait"],
                "resources": {"claims": [{"name": "imex-channel-0"}]},
            }
        ],
        "resourceClaims": [{"name": "imex-channel-0", "resourceClaimTemplateName": template}],
    }
    if node:
        spec["nodeSelector"] = {"kubernetes.io/hostname": node}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def nvbandwidth_mpijob(
    name: str, template: str, workers: int = 2, slots: int = 4, trays: list[str] | None = None, **extra: Any
) -> dict[str, Any]:
    """An MPIJob like the verify role's; ``trays``: pin the workers to those nodes, as the role does."""
    ranks = workers * slots
    policy = extra.get("launcher_restart_policy")
    launcher_policy = {"restartPolicy": policy} if policy else {}
    container = {
        "image": "ghcr.io/nvidia/k8s-samples:nvbandwidth-v0.7-8d103163",
        "securityContext": {"runAsUser": 1000},
    }
    return {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": name},
        "spec": {
            "slotsPerWorker": slots,
            "launcherCreationPolicy": "WaitForWorkersReady",
            "runPolicy": {"cleanPodPolicy": "Running", **extra.get("run_policy", {})},
            "sshAuthMountPath": "/home/mpiuser/.ssh",
            "mpiReplicaSpecs": {
                "Launcher": {
                    "replicas": 1,
                    **launcher_policy,
                    "template": {
                        "spec": {
                            "containers": [
                                {
                                    **container,
                                    "name": "mpi-launcher",
                                    "command": ["mpirun"],
                                    "args": [
                                        "--bind-to",
                                        "core",
                                        "--map-by",
                                        f"ppr:{slots}:node",
                                        "-np",
                                        str(ranks),
                                        "--report-bindings",
                                        "-q",
                                        "nvbandwidth",
                                        "-t",
                                        TESTCASE,
                                    ],
                                }
                            ]
                        }
                    },
                },
                "Worker": {
                    "replicas": workers,
                    "template": {
                        "spec": {
                            "containers": [
                                {
                                    **container,
                                    "name": "mpi-worker",
                                    "command": ["/usr/sbin/sshd"],
                                    "args": ["-De", "-f", "/home/mpiuser/.sshd_config"],
                                    "resources": {
                                        "limits": {"nvidia.com/gpu": slots},
                                        "claims": [{"name": "compute-domain-channel"}],
                                    },
                                }
                            ],
                            "resourceClaims": [
                                {"name": "compute-domain-channel", "resourceClaimTemplateName": template}
                            ],
                            **(pinned_to(trays) if trays else {}),
                        }
                    },
                },
            },
        },
    }


def pinned_to(trays: list[str]) -> dict[str, Any]:
    expr = {"key": "kubernetes.io/hostname", "operator": "In", "values": trays}
    return {
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [expr]}]}
            }
        }
    }


def rack_trays(rack, index: int, count: int) -> list[str]:
    """The first ``count`` trays of rack ``index`` (by the rack label the sim sets)."""
    items = rack.get_json("nodes", "-l", f"gpu-fabric.sim/rack=rack{index}")["items"]
    names = sorted((n["metadata"]["name"] for n in items), key=lambda n: int(n.rsplit("-t", 1)[1]))
    if len(names) < count:
        pytest.skip(f"needs {count} trays in rack {index}; the rack has {len(names)}")
    return names[:count]


@pytest.fixture
def own_faults(sim_rack):
    """``own_faults(name, **params)`` switches a fault on; it is cleared by name afterwards (other
    faults on a shared rack are left alone)."""
    names: list[str] = []

    def set_fault(name: str, **params: Any):
        names.append(name)
        return sim_rack.fault(name, **params)

    yield set_fault
    for name in dict.fromkeys(names):
        sim_rack.rack("fault", "--clear", name, check=False)


def wait_condition(rack, namespace: str, mpijob: str, ctype: str, timeout: float = 90) -> dict[str, Any]:
    def check():
        job = rack.get_json("mpijob", mpijob, "-n", namespace)
        conds = {c["type"]: c for c in (job.get("status") or {}).get("conditions") or []}
        return job if conds.get(ctype, {}).get("status") == "True" else None

    return rack.wait_until(f"MPIJob {mpijob} {ctype}", check, timeout=timeout)


def pod_log(rack, namespace: str, pod: str) -> str:
    return rack.wait_until(
        f"log of {pod}",
        lambda: rack.kubectl("logs", pod, "-n", namespace, check=False).stdout,
        timeout=60,
    )


def launcher_log(rack, namespace: str, mpijob: str) -> str:
    def check():
        out = rack.kubectl("logs", "--tail=-1", "-n", namespace, "-l", f"job-name={mpijob}-launcher", check=False)
        return out.stdout if out.returncode == 0 and out.stdout.strip() else None

    return rack.wait_until(f"launcher log of {mpijob}", check, timeout=60)


def free_gpu_node(rack) -> str:
    """A tray no ComputeDomain holds (the driver allows one domain per node at a time)."""

    def check():
        free = [
            n["metadata"]["name"]
            for n in gpu_nodes(rack)
            if "resource.nvidia.com/computeDomain" not in n["metadata"]["labels"]
            and "nvidia.com/gpu.clique" in n["metadata"]["labels"]
        ]
        return sorted(free)[0] if free else None

    return rack.wait_until("a tray without a ComputeDomain", check, timeout=60)


def run_channel_pod(rack, namespace: str, name: str = "imex-channel-injection", node: str | None = None):
    node = node or free_gpu_node(rack)
    rack.apply([compute_domain(name, 1)], namespace)
    rack.wait_until(
        "channel ResourceClaimTemplate",
        lambda: (
            rack.kubectl("get", "resourceclaimtemplate", f"{name}-channel", "-n", namespace, check=False).returncode
            == 0
        ),
    )
    rack.apply([channel_pod(name, f"{name}-channel", node)], namespace)
    return rack.wait_until(
        f"pod {name} Running",
        lambda: (p := rack.get_json("pod", name, "-n", namespace))["status"].get("phase") == "Running" and p,
        timeout=90,
    )


@pytest.mark.sim
def test_served_repository_holds_both_charts_with_the_real_versions(sim_rack):
    with urllib.request.urlopen(sim_rack.endpoints["helm_repo_url"] + "/index.yaml", timeout=10) as resp:
        index = yaml.safe_load(resp.read())
    # release set 26.7 (the default) and 25.10 (the guide's, and what test_upgrade.py upgrades from)
    assert sorted(e["version"] for e in index["entries"]["gpu-operator"]) == ["v25.10.0", "v26.7.0"]
    assert [e["version"] for e in index["entries"]["dra-driver-nvidia-gpu"]] == ["0.4.1"]
    assert [e["version"] for e in index["entries"]["nvidia-dra-driver-gpu"]] == ["25.8.0"]
    for name in ("dra-driver-nvidia-gpu", "nvidia-dra-driver-gpu"):
        assert index["entries"][name][0]["kubeVersion"] == ">=1.32.0-0"
    for key, tag in (("mpi_operator_manifest_url", "0.8"), ("mpi_operator_previous_manifest_url", "0.6.0")):
        with urllib.request.urlopen(sim_rack.endpoints[key], timeout=10) as resp:
            docs = [d for d in yaml.safe_load_all(resp.read()) if d]
        assert [d["kind"] for d in docs][:2] == ["Namespace", "CustomResourceDefinition"]
        assert docs[-1]["kind"] == "Deployment"
        assert docs[-1]["spec"]["template"]["spec"]["containers"][0]["image"] == f"mpioperator/mpi-operator:{tag}"


@pytest.mark.sim
def test_charts_give_device_classes_per_node_slices_and_running_node_pods(addons):
    nodes = sorted(n["metadata"]["name"] for n in gpu_nodes(addons))
    assert nodes, "the rack has no GPU trays"
    classes = {d["metadata"]["name"] for d in addons.get_json("deviceclasses")["items"]}
    assert {CHANNEL_CLASS, DAEMON_CLASS} <= classes
    slices = addons.wait_until(
        "one compute-domain ResourceSlice per tray",
        lambda: (
            (
                s := [
                    x
                    for x in addons.get_json("resourceslices")["items"]
                    if x["spec"]["driver"] == "compute-domain.nvidia.com"
                ]
            )
            and sorted(x["spec"]["nodeName"] for x in s) == nodes
            and s
        ),
    )
    for s in slices:
        assert s["spec"]["pool"]["name"] == s["spec"]["nodeName"]
        devices = {d["name"]: d["attributes"] for d in s["spec"]["devices"]}
        assert devices == {
            "channel-0": {"type": {"string": "channel"}, "id": {"int": 0}},
            "daemon-0": {"type": {"string": "daemon"}, "id": {"int": 0}},
        }
    ds = addons.get_json("daemonset", "nvidia-driver-daemonset", "-n", "gpu-operator")
    assert ds["status"]["numberReady"] == ds["status"]["desiredNumberScheduled"] == len(nodes)
    plugin = addons.get_json("daemonset", "nvidia-dra-driver-gpu-kubelet-plugin", "-n", DRA_NS)
    assert plugin["status"]["numberReady"] == len(nodes)


@pytest.mark.sim
def test_cluster_policy_status_follows_the_operands_and_the_service_monitor_crd(addons):
    # The fixture installs the chart with dcgmExporter.serviceMonitor.enabled=true on a rack without the
    # Prometheus Operator: every operand pod runs, yet the operator keeps the ClusterPolicy notReady.
    def state(wanted: str):
        policy = addons.get_json("clusterpolicy", "cluster-policy")
        return policy if (policy.get("status") or {}).get("state") == wanted else None

    def settled():
        # the operands of the version just installed roll first (other states are listed meanwhile); then the
        # DCGM exporter alone stays not ready
        policy = state("notReady")
        errors = [c for c in (policy or {}).get("status", {}).get("conditions") or [] if c["type"] == "Error"]
        return policy if errors and errors[0]["message"].endswith("[state-dcgm-exporter]") else None

    policy = addons.wait_until("ClusterPolicy notReady for the DCGM exporter alone", settled, timeout=120)
    error = next(c for c in policy["status"]["conditions"] if c["type"] == "Error")
    assert (error["status"], error["reason"]) == ("True", "OperandNotReady")
    assert error["message"] == "ClusterPolicy is not ready, states not ready: [state-dcgm-exporter]"
    assert policy["status"]["namespace"] == "gpu-operator"
    try:
        _helm_install(addons, "gpu-operator", "gpu-operator", "gpu-operator", "v25.10.0", *GPU_OPERATOR_SETS[:2])
        policy = addons.wait_until("ClusterPolicy ready", lambda: state("ready"), timeout=60)
        ready = next(c for c in policy["status"]["conditions"] if c["type"] == "Ready")
        assert (ready["status"], ready["reason"]) == ("True", "Reconciled")
    finally:
        _helm_install(addons, "gpu-operator", "gpu-operator", "gpu-operator", "v25.10.0", *GPU_OPERATOR_SETS)


@pytest.mark.sim
def test_channel_pod_runs_on_a_tray_and_the_domain_becomes_ready(addons, namespace):
    pod = run_channel_pod(addons, namespace)
    node = pod["spec"]["nodeName"]
    node_obj = addons.get_json("node", node)
    assert node_obj["metadata"]["labels"]["nvidia.com/gpu.present"] == "true"
    claim_name = pod["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
    claim = addons.get_json("resourceclaim", claim_name, "-n", namespace)
    result = claim["status"]["allocation"]["devices"]["results"][0]
    assert (result["driver"], result["pool"], result["device"]) == ("compute-domain.nvidia.com", node, "channel-0")

    def ready():
        cd = addons.get_json("computedomain", "imex-channel-injection", "-n", namespace)
        status = cd.get("status") or {}
        return cd if status.get("status") == "Ready" and status.get("nodes") else None

    cd = addons.wait_until("ComputeDomain Ready", ready, timeout=60)
    [entry] = cd["status"]["nodes"]
    assert entry["name"] == node
    assert entry["status"] == "Ready"
    assert entry["cliqueID"] == node_obj["metadata"]["labels"]["nvidia.com/gpu.clique"]
    assert re.fullmatch(r"\d+\.\d+\.\d+\.\d+", entry["ipAddress"])
    assert "resource.nvidia.com/computeDomain" in cd["metadata"]["finalizers"]
    assert (
        addons.get_json("node", node)["metadata"]["labels"]["resource.nvidia.com/computeDomain"]
        == cd["metadata"]["uid"]
    )

    log = pod_log(addons, namespace, "imex-channel-injection")
    assert log == logs.IMEX_LISTING_FIXTURE.read_text()

    addons.kubectl("delete", "pod", "imex-channel-injection", "-n", namespace, "--wait=true", "--timeout=60s")
    addons.kubectl("delete", "computedomain", "imex-channel-injection", "-n", namespace, "--timeout=60s")
    addons.wait_until(
        "node label removed",
        lambda: "resource.nvidia.com/computeDomain" not in addons.get_json("node", node)["metadata"]["labels"],
    )
    assert addons.kubectl("get", "resourceclaimtemplate", "-n", namespace, "-o", "name").stdout.strip() == ""
    addons.wait_until(
        "per-domain DaemonSet removed",
        lambda: (
            not addons.get_json(
                "daemonsets", "-n", DRA_NS, "-l", f"resource.nvidia.com/computeDomain={cd['metadata']['uid']}"
            )["items"]
        ),
    )


@pytest.mark.sim
def test_mpijob_succeeds_and_the_launcher_log_is_the_measured_matrix(addons, namespace):
    addons.apply([compute_domain("nvb", 2), nvbandwidth_mpijob("nvb", "nvb-channel")], namespace)
    job = wait_condition(addons, namespace, "nvb", "Succeeded", timeout=120)
    conds = {c["type"]: c["status"] for c in job["status"]["conditions"]}
    assert conds["Created"] == "True"
    assert conds["Running"] == "False"
    assert job["status"]["replicaStatuses"]["Launcher"]["succeeded"] == 1
    assert job["status"]["completionTime"] >= job["status"]["startTime"]

    text = launcher_log(addons, namespace, "nvb")
    result, matrix = matrix_of(text)
    assert matrix.shape == (8, 8)
    assert [cell[2] for cell in matrix.measured()] == fixture_cells()
    assert matrix.reported_sum == 45997.93
    assert {d.host for d in result.devices} == {"nvb-worker-0", "nvb-worker-1"}

    launcher = addons.get_json("job", "nvb-launcher", "-n", namespace)
    assert launcher["metadata"]["ownerReferences"][0]["kind"] == "MPIJob"
    hostfile = addons.get_json("configmap", "nvb-config", "-n", namespace)["data"]["hostfile"]
    assert hostfile == f"nvb-worker-0.nvb.{namespace}.svc slots=4\nnvb-worker-1.nvb.{namespace}.svc slots=4\n"
    assert addons.get_json("service", "nvb", "-n", namespace)["spec"]["clusterIP"] == "None"
    assert addons.get_json("secret", "nvb-ssh", "-n", namespace)["type"] == "kubernetes.io/ssh-auth"
    # cleanPodPolicy Running: the workers are removed once the job is done
    addons.wait_until(
        "workers cleaned up",
        lambda: not addons.get_json("pods", "-n", namespace, "-l", "training.kubeflow.org/job-role=worker")["items"],
    )
    addons.kubectl("delete", "mpijob", "nvb", "-n", namespace, "--wait=true", "--timeout=60s")
    addons.wait_until(
        "launcher Job garbage-collected",
        lambda: addons.kubectl("get", "job", "nvb-launcher", "-n", namespace, check=False).returncode != 0,
    )


@pytest.mark.sim
def test_fault_degraded_link_lowers_that_cell(addons, namespace, own_faults):
    own_faults("degraded-link", src=1, dst=6, gbps=401.25)  # no rack=: rack 0
    trays = rack_trays(addons, 0, 2)
    addons.apply([compute_domain("nvb", 2), nvbandwidth_mpijob("nvb", "nvb-channel", trays=trays)], namespace)
    wait_condition(addons, namespace, "nvb", "Succeeded", timeout=120)
    matrix = matrix_of(launcher_log(addons, namespace, "nvb"))[1]
    cells = fixture_cells()
    assert matrix.rows[1][6] == 401.25
    assert sorted(v for r, c, v in matrix.measured() if (r, c) != (1, 6)) == sorted(cells[:12] + cells[13:])
    assert matrix.reported_sum == pytest.approx(round(sum(cells) - cells[12] + 401.25, 2), abs=1e-9)


@pytest.mark.sim
def test_matrix_faults_hit_the_jobs_on_their_rack_only(addons, namespace, own_faults):
    """One MPIJob per rack, each over that rack's trays: the rack-1 faults show in rack 1's matrix only."""
    if addons.status()["racks"] < 2:
        pytest.skip("needs 2 racks (sim/rack up --racks 2 --trays-per-rack 4)")
    own_faults("degraded-link", rack=1, src=0, dst=5, gbps=400)
    own_faults("degraded-gpu", rack=1, gpu=6, factor=0.944)
    jobs = {0: "nvb-rack0", 1: "nvb-rack1"}
    for rack, name in jobs.items():
        trays = rack_trays(addons, rack, 2)
        addons.apply([compute_domain(name, 2), nvbandwidth_mpijob(name, f"{name}-channel", trays=trays)], namespace)
    for name in jobs.values():
        wait_condition(addons, namespace, name, "Succeeded", timeout=180)
    spared = matrix_of(launcher_log(addons, namespace, jobs[0]))[1]
    hit = matrix_of(launcher_log(addons, namespace, jobs[1]))[1]
    cells = fixture_cells()
    assert spared.shape == hit.shape == (8, 8)
    assert spared.values() == cells
    assert spared.reported_sum == 45997.93
    assert hit.rows[0][5] == 400.0
    # gpu=6 is tray 1's GPU 2 (the rack's trays in order): its rank is 6 when tray 1's worker is rank 1, 2 when the
    # scheduler made it rank 0; the tray's hardware decides, not the place in the matrix
    low = next(
        g
        for g in (6, 2)
        if all(hit.rows[g][c] == round(spared.rows[g][c] * 0.944, 2) for c in range(8) if c != g and (g, c) != (0, 5))
    )
    for r in range(8):
        for c in range(8):
            if r == c or (r, c) == (0, 5):
                continue
            expected = round(spared.rows[r][c] * 0.944, 2) if low in (r, c) else spared.rows[r][c]
            assert hit.rows[r][c] == expected, (r, c)
    assert hit.reported_sum == round(sum(hit.values()), 2)


@pytest.mark.sim
def test_fault_launcher_fails_fails_the_mpijob_with_an_error_tail(addons, namespace, clean_faults):
    # restartPolicy Never: the failed pod stays, with its exit code and its log.
    addons.fault("launcher-fails")
    addons.apply(
        [
            compute_domain("nvb", 2),
            nvbandwidth_mpijob("nvb", "nvb-channel", run_policy={"backoffLimit": 0}, launcher_restart_policy="Never"),
        ],
        namespace,
    )
    job = wait_condition(addons, namespace, "nvb", "Failed", timeout=120)
    assert not any(c["type"] == "Succeeded" for c in job["status"]["conditions"])
    pods = addons.get_json("pods", "-n", namespace, "-l", "job-name=nvb-launcher")["items"]
    assert pods and pods[0]["status"]["phase"] == "Failed"
    assert pods[0]["spec"]["restartPolicy"] == "Never"
    assert pods[0]["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 1
    text = launcher_log(addons, namespace, "nvb")
    assert "MPI_ABORT was invoked on rank 0 in communicator MPI_COMM_WORLD" in text
    assert "SUM " not in text


@pytest.mark.sim
def test_fault_launcher_fails_with_on_failure_loses_the_pod_and_its_log(addons, namespace, clean_faults):
    # The operator's default launcher restartPolicy OnFailure: the kubelet restarts the container in the pod,
    # and with backoffLimit 0 the Job controller fails the Job at the first restart and deletes the pod.
    addons.fault("launcher-fails")
    addons.apply(
        [compute_domain("nvb", 2), nvbandwidth_mpijob("nvb", "nvb-channel", run_policy={"backoffLimit": 0})],
        namespace,
    )
    job = wait_condition(addons, namespace, "nvb", "Failed", timeout=120)
    [failed] = [c for c in job["status"]["conditions"] if c["type"] == "Failed"]
    assert failed["reason"] == "BackoffLimitExceeded"
    launcher = addons.get_json("job", "nvb-launcher", "-n", namespace)
    [cond] = [c for c in launcher["status"]["conditions"] if c["type"] == "Failed"]
    assert cond["reason"] == "BackoffLimitExceeded"
    addons.wait_until(
        "launcher pod deleted by the Job controller",
        lambda: not addons.get_json("pods", "-n", namespace, "-l", "job-name=nvb-launcher")["items"],
        timeout=60,
    )
    out = addons.kubectl("logs", "--tail=-1", "-n", namespace, "-l", "job-name=nvb-launcher", check=False)
    assert "MPI_ABORT" not in out.stdout


@pytest.mark.sim
def test_fault_compute_domain_not_ready_keeps_nodes_not_ready_until_cleared(addons, namespace, clean_faults):
    addons.fault("compute-domain-not-ready")
    pod = run_channel_pod(addons, namespace, "cdnr")

    def nodes_listed():
        status = addons.get_json("computedomain", "cdnr", "-n", namespace).get("status") or {}
        return status if status.get("nodes") else None

    status = addons.wait_until("CD lists the node", nodes_listed, timeout=60)
    assert status["status"] == "NotReady"
    assert [(n["name"], n["status"]) for n in status["nodes"]] == [(pod["spec"]["nodeName"], "NotReady")]
    time.sleep(3)
    assert addons.get_json("computedomain", "cdnr", "-n", namespace)["status"]["status"] == "NotReady"
    addons.rack("fault", "--clear", "compute-domain-not-ready")
    addons.wait_until(
        "CD Ready after the fault is cleared",
        lambda: addons.get_json("computedomain", "cdnr", "-n", namespace)["status"]["status"] == "Ready",
        timeout=30,
    )


@pytest.mark.sim
def test_fault_missing_deviceclass_removes_it_until_cleared(addons, clean_faults):
    before = addons.get_json("deviceclass", CHANNEL_CLASS)
    addons.fault("missing-deviceclass")
    addons.wait_until(
        "DeviceClass deleted",
        lambda: addons.kubectl("get", "deviceclass", CHANNEL_CLASS, check=False).returncode != 0,
        timeout=30,
    )
    time.sleep(3)
    assert addons.kubectl("get", "deviceclass", CHANNEL_CLASS, check=False).returncode != 0
    addons.rack("fault", "--clear", "missing-deviceclass")
    after = addons.wait_until(
        "DeviceClass restored",
        lambda: (
            (out := addons.kubectl("get", "deviceclass", CHANNEL_CLASS, "-o", "json", check=False)).returncode == 0
            and json.loads(out.stdout)
        ),
        timeout=30,
    )
    assert after["spec"] == before["spec"]
    assert after["metadata"]["labels"] == before["metadata"]["labels"]
    assert after["metadata"]["annotations"]["meta.helm.sh/release-name"] == "nvidia-dra-driver-gpu"


@pytest.mark.sim
def test_fault_channel_missing_lists_no_channel(addons, namespace, clean_faults):
    addons.fault("channel-missing")
    run_channel_pod(addons, namespace, "chm")
    log = pod_log(addons, namespace, "chm")
    assert "channel0" not in log
    assert log == logs.imex_listing(False)


@pytest.mark.sim
def test_fault_unlabelled_node_gets_no_channel_and_an_empty_clique(addons, namespace, clean_faults):
    node = sorted(n["metadata"]["name"] for n in gpu_nodes(addons))[-1]
    addons.fault("unlabelled-node", node=node)
    addons.wait_until(
        "clique label removed",
        lambda: "nvidia.com/gpu.clique" not in addons.get_json("node", node)["metadata"]["labels"],
        timeout=30,
    )
    run_channel_pod(addons, namespace, "unl", node=node)
    assert "channel0" not in pod_log(addons, namespace, "unl")

    def listed():
        status = addons.get_json("computedomain", "unl", "-n", namespace).get("status") or {}
        return status.get("nodes")

    [entry] = addons.wait_until("CD lists the node", listed, timeout=60)
    assert (entry["name"], entry["cliqueID"]) == (node, "")


@pytest.mark.sim
def test_standins_reconcile_again_after_the_apiserver_restarts(addons, namespace, clean_faults):
    addons.fault("apiserver-restart")
    addons.wait_until(
        "API server ready again",
        lambda: addons.kubectl("get", "--raw", "/readyz", check=False).returncode == 0,
        timeout=60,
    )
    pod = run_channel_pod(addons, namespace, "after-restart")

    def ready():
        status = addons.get_json("computedomain", "after-restart", "-n", namespace).get("status") or {}
        return status if status.get("status") == "Ready" and status.get("nodes") else None

    status = addons.wait_until("ComputeDomain Ready after the restart", ready, timeout=60)
    assert [(n["name"], n["status"]) for n in status["nodes"]] == [(pod["spec"]["nodeName"], "Ready")]
    assert pod_log(addons, namespace, "after-restart") == logs.IMEX_LISTING_FIXTURE.read_text()


@pytest.mark.sim
def test_all_reduce_perf_job_serves_an_nccl_tests_table(addons, namespace):
    job = nvbandwidth_mpijob("nccl", "nccl-channel")
    launcher = job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
    launcher["args"] = [
        *launcher["args"][:8],
        "/opt/nccl_tests/build/all_reduce_perf",
        "-b",
        "8",
        "-e",
        "8G",
        "-f",
        "2",
    ]
    addons.apply([compute_domain("nccl", 2), job], namespace)
    wait_condition(addons, namespace, "nccl", "Succeeded", timeout=120)
    result = parse_nccl_tests(launcher_log(addons, namespace, "nccl"))
    assert [r.size_bytes for r in result.rows] == [8 << k for k in range(31)]
    assert {d.host for d in result.devices} == {"nccl-worker-0", "nccl-worker-1"}
    assert len(result.devices) == 8
    assert result.out_of_bounds == 0
    busbws = [p.busbw_gbps for r in result.rows for p in (r.out_of_place, r.in_place)]
    assert result.avg_busbw_gbps == pytest.approx(sum(busbws) / len(busbws), abs=0.01)
    assert max(busbws) < max(fixture_cells())
