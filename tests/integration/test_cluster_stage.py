# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The cluster stage against the simulated rack: playbooks/cluster.yml and the compute_domain module.

The rack is shared: these tests use their own namespaces and their own test node, and never switch
faults. The playbook runs go through ansible-playbook exactly as a user runs them.
"""

from __future__ import annotations

import json
import re
import subprocess
import textwrap
import uuid
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
INVENTORY = REPO_ROOT / "inventories" / "sim"
CLUSTER_PLAYBOOK = REPO_ROOT / "playbooks" / "cluster.yml"
RECAP = re.compile(r"^localhost\s*:\s*ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.M)

pytestmark = pytest.mark.sim


def ansible_playbook(
    sim_rack, *args: str, json_output: bool = False, timeout: int = 900
) -> subprocess.CompletedProcess:
    env = dict(sim_rack.env)
    env["ANSIBLE_FORCE_COLOR"] = "0"
    env["ANSIBLE_NOCOLOR"] = "1"
    if json_output:
        env["ANSIBLE_STDOUT_CALLBACK"] = "ansible.posix.json"
    return subprocess.run(
        [str(REPO_ROOT / ".venv" / "bin" / "ansible-playbook"), "-i", str(INVENTORY), *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO_ROOT,
        timeout=timeout,
        check=False,
    )


def recap(result: subprocess.CompletedProcess) -> dict[str, int]:
    match = RECAP.search(result.stdout)
    assert match, f"no PLAY RECAP for localhost:\n{result.stdout[-4000:]}\n{result.stderr[-2000:]}"
    ok, changed, unreachable, failed = (int(g) for g in match.groups())
    return {"ok": ok, "changed": changed, "unreachable": unreachable, "failed": failed}


def helm_release(sim_rack, name: str, namespace: str) -> dict[str, Any]:
    """The release as `helm list` sees it (revision, chart, status), or {} when absent."""
    out = subprocess.run(
        ["helm", "list", "-n", namespace, "-o", "json", "--filter", f"^{name}$"],
        capture_output=True,
        text=True,
        env=sim_rack.env,
        check=True,
    ).stdout
    releases = json.loads(out or "[]")
    return releases[0] if releases else {}


def helm_values(sim_rack, name: str, namespace: str) -> dict[str, Any]:
    out = subprocess.run(
        ["helm", "get", "values", name, "-n", namespace, "-o", "json"],
        capture_output=True,
        text=True,
        env=sim_rack.env,
        check=True,
    ).stdout
    return json.loads(out or "{}")


@pytest.fixture(scope="module")
def converged(sim_rack):
    """The cluster stage applied once; returns the first run (it may find the stage already converged)."""
    first = ansible_playbook(sim_rack, str(CLUSTER_PLAYBOOK))
    assert first.returncode == 0, f"cluster.yml failed:\n{first.stdout[-6000:]}\n{first.stderr[-3000:]}"
    return first


def test_cluster_playbook_installs_the_stack(sim_rack, converged):
    assert recap(converged)["failed"] == 0
    operator = helm_release(sim_rack, "gpu-operator", "gpu-operator")
    dra = helm_release(sim_rack, "nvidia-dra-driver-gpu", "nvidia-dra-driver-gpu")
    assert operator["status"] == "deployed"
    assert operator["chart"] == "gpu-operator-v26.7.0"
    assert dra["status"] == "deployed"
    assert dra["chart"] == "dra-driver-nvidia-gpu-0.4.1"
    # values derived from gpu_fabric_driver_owner=operator, as the seed guide sets them
    operator_values = helm_values(sim_rack, "gpu-operator", "gpu-operator")
    assert operator_values["driver"] == {"enabled": True}
    assert operator_values["dcgm"] == {"enabled": True}
    # no Prometheus Operator on the rack: the ServiceMonitor stays off (auto), else the ClusterPolicy never gets ready
    assert operator_values["dcgmExporter"] == {"serviceMonitor": {"enabled": False}}
    assert sim_rack.get_json("clusterpolicy", "cluster-policy")["status"]["state"] == "ready"
    # NVIDIA's privileged pods need Pod Security "privileged" where the cluster's default is stricter
    for ns in ("gpu-operator", "nvidia-dra-driver-gpu"):
        labels = sim_rack.get_json("namespace", ns)["metadata"]["labels"]
        for mode in ("enforce", "audit", "warn"):
            assert labels[f"pod-security.kubernetes.io/{mode}"] == "privileged", (ns, labels)
    dra_values = helm_values(sim_rack, "nvidia-dra-driver-gpu", "nvidia-dra-driver-gpu")
    assert dra_values["nvidiaDriverRoot"] == "/run/nvidia/driver"
    assert dra_values["resources"] == {"gpus": {"enabled": False}}
    # what the DRA driver publishes and the MPI operator's API
    classes = {c["metadata"]["name"] for c in sim_rack.get_json("deviceclasses")["items"]}
    assert {"compute-domain-daemon.nvidia.com", "compute-domain-default-channel.nvidia.com"} <= classes
    slices = sim_rack.get_json("resourceslices")["items"]
    gpu_nodes = sim_rack.get_json("nodes", "-l", "nvidia.com/gpu.present=true")["items"]
    trays = sorted(n["metadata"]["name"] for n in gpu_nodes)
    assert sorted(s["spec"]["nodeName"] for s in slices if s["spec"]["driver"] == "compute-domain.nvidia.com") == trays
    deployment = sim_rack.get_json("deployment", "mpi-operator", "-n", "mpi-operator")
    assert deployment["status"]["availableReplicas"] >= 1
    crd = sim_rack.get_json("crd", "mpijobs.kubeflow.org")
    assert [v["name"] for v in crd["spec"]["versions"] if v["served"]] == ["v2beta1"]


def test_second_run_changes_nothing(sim_rack, converged):
    # Helm revisions are not compared: other suites upgrade the shared releases concurrently.
    second = ansible_playbook(sim_rack, str(CLUSTER_PLAYBOOK))
    assert second.returncode == 0, second.stdout[-6000:]
    assert recap(second)["changed"] == 0, second.stdout[-6000:]
    assert recap(second)["failed"] == 0


def test_check_diff_on_a_converged_cluster_changes_nothing(sim_rack, converged):
    result = ansible_playbook(sim_rack, str(CLUSTER_PLAYBOOK), "--check", "--diff")
    assert result.returncode == 0, result.stdout[-6000:]
    assert recap(result)["changed"] == 0, result.stdout[-6000:]


def test_check_mode_shows_a_values_change_without_applying_it(sim_rack, converged):
    result = ansible_playbook(
        sim_rack,
        str(CLUSTER_PLAYBOOK),
        "--tags",
        "dra_driver",
        "--check",
        "--diff",
        "-e",
        json.dumps({"dra_driver_values": {"logVerbosity": "6"}}),
    )
    assert result.returncode == 0, result.stdout[-6000:]
    assert recap(result)["changed"] == 1, result.stdout[-6000:]
    assert "Show the release that check mode would install or upgrade" in result.stdout
    assert "logVerbosity: '6'" in result.stdout or "logVerbosity': '6'" in result.stdout
    assert "logVerbosity" not in helm_values(sim_rack, "nvidia-dra-driver-gpu", "nvidia-dra-driver-gpu")


def test_host_driver_owner_derives_both_charts_values_in_check_mode(sim_rack, converged):
    # Check mode only: the shared releases keep the operator-owned driver.
    result = ansible_playbook(
        sim_rack,
        str(CLUSTER_PLAYBOOK),
        "--tags",
        "gpu_operator,dra_driver",
        "--check",
        "-e",
        "gpu_fabric_driver_owner=host",
        json_output=True,
    )
    assert result.returncode == 0, result.stdout[-6000:]
    show = "Show the release that check mode would install or upgrade"
    shown = {
        r["msg"]["release"]: r
        for r in results_named(result, f"gpu_fabric.mnnvl.chart_release : {show}")
        if not r.get("skipped")
    }
    assert sorted(shown) == ["gpu-operator/gpu-operator", "nvidia-dra-driver-gpu/nvidia-dra-driver-gpu"]
    operator, dra = shown["gpu-operator/gpu-operator"], shown["nvidia-dra-driver-gpu/nvidia-dra-driver-gpu"]
    assert operator["msg"]["chart"].startswith("gpu-operator v26.7.0")
    assert operator["msg"]["values_wanted"]["driver"] == {"enabled": False}
    assert operator["msg"]["values_now"]["driver"] == {"enabled": True}
    assert dra["msg"]["values_now"]["nvidiaDriverRoot"] == "/run/nvidia/driver"
    assert dra["msg"]["values_wanted"] == {
        "nameOverride": "nvidia-dra-driver-gpu",
        "nvidiaDriverRoot": "/",
        "resources": {"gpus": {"enabled": False}},
        "kubeletPlugin": {"tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]},
    }
    assert helm_values(sim_rack, "nvidia-dra-driver-gpu", "nvidia-dra-driver-gpu")["nvidiaDriverRoot"] == (
        "/run/nvidia/driver"
    )
    assert helm_values(sim_rack, "gpu-operator", "gpu-operator")["driver"] == {"enabled": True}


def test_contradicting_driver_root_fails_before_install(sim_rack, converged):
    result = ansible_playbook(
        sim_rack,
        str(CLUSTER_PLAYBOOK),
        "--tags",
        "dra_driver",
        "-e",
        json.dumps({"dra_driver_values": {"nvidiaDriverRoot": "/"}}),
    )
    assert result.returncode == 2
    assert recap(result)["failed"] == 1
    text = " ".join(result.stdout.split())
    assert (
        "dra_driver_values sets nvidiaDriverRoot=/ but gpu_fabric_driver_owner=operator requires "
        "nvidiaDriverRoot=/run/nvidia/driver" in text
    )
    assert "Nothing was installed." in text
    assert "Install or upgrade the nvidia-dra-driver-gpu release" not in result.stdout
    assert helm_values(sim_rack, "nvidia-dra-driver-gpu", "nvidia-dra-driver-gpu")["nvidiaDriverRoot"] == (
        "/run/nvidia/driver"
    )


def test_contradicting_driver_enabled_fails_before_install(sim_rack, converged):
    result = ansible_playbook(
        sim_rack,
        str(CLUSTER_PLAYBOOK),
        "--tags",
        "gpu_operator",
        "-e",
        json.dumps({"gpu_operator_values": {"driver": {"enabled": False}}}),
    )
    assert result.returncode == 2
    text = " ".join(result.stdout.split())
    assert "gpu_operator_values sets driver.enabled=false but gpu_fabric_driver_owner=operator requires" in text
    assert "driver.enabled=true" in text
    assert "Install or upgrade the gpu-operator release" not in result.stdout
    assert helm_values(sim_rack, "gpu-operator", "gpu-operator")["driver"] == {"enabled": True}


@pytest.fixture
def refused_kubelet_node(sim_rack):
    """A node of our own whose status says kubelet v1.34.1 (not a tray: no GPU labels, no KWOK)."""
    name = f"gf-preflight-{uuid.uuid4().hex[:6]}"
    sim_rack.apply(
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": {"gpu-fabric.test/owner": "test_cluster_stage"}},
        }
    )
    patch = {"status": {"nodeInfo": {"kubeletVersion": "v1.34.1", "kubeProxyVersion": "v1.34.1"}}}
    sim_rack.kubectl("patch", "node", name, "--subresource=status", "--type=merge", "-p", json.dumps(patch))
    assert sim_rack.get_json("node", name)["status"]["nodeInfo"]["kubeletVersion"] == "v1.34.1"
    yield name
    sim_rack.kubectl("delete", "node", name, "--wait=false", check=False)


def test_preflight_refuses_a_1_34_1_kubelet_naming_the_node(sim_rack, refused_kubelet_node):
    result = ansible_playbook(sim_rack, str(CLUSTER_PLAYBOOK), "--tags", "cluster_preflight")
    assert result.returncode == 2
    assert recap(result)["failed"] == 1
    text = " ".join(result.stdout.split())
    assert "Cluster preflight found 1 problem(s): kubelet 1.34.0/1.34.1 is refused" in text
    assert f"on: {refused_kubelet_node} (v1.34.1); upgrade these kubelets to 1.34.2 or later" in text
    # no tray is named: they run the sim's 1.34.4
    assert "gb200-r0-t0 (" not in text

    allowed = ansible_playbook(
        sim_rack,
        str(CLUSTER_PLAYBOOK),
        "--tags",
        "cluster_preflight",
        "-e",
        "cluster_preflight_allow_refused_kubelet=true",
    )
    assert allowed.returncode == 0, allowed.stdout[-4000:]
    assert f"Proceeding on nodes with refused kubelets ({refused_kubelet_node})" in " ".join(allowed.stdout.split())


COMPUTE_DOMAIN_PLAY = textwrap.dedent(
    """\
    - name: Exercise gpu_fabric.mnnvl.compute_domain
      hosts: localhost
      connection: local
      gather_facts: false
      tasks:
        - name: Create the ComputeDomain in check mode
          gpu_fabric.mnnvl.compute_domain:
            name: "{{ cd_name }}"
            namespace: "{{ cd_namespace }}"
          check_mode: true
          diff: true
          register: check_create

        - name: Create the ComputeDomain and wait for it
          gpu_fabric.mnnvl.compute_domain:
            name: "{{ cd_name }}"
            namespace: "{{ cd_namespace }}"
            wait_timeout: 60
          register: created

        - name: Create it again
          gpu_fabric.mnnvl.compute_domain:
            name: "{{ cd_name }}"
            namespace: "{{ cd_namespace }}"
            wait_timeout: 60
          register: again

        - name: Ask for a different spec
          gpu_fabric.mnnvl.compute_domain:
            name: "{{ cd_name }}"
            namespace: "{{ cd_namespace }}"
            num_nodes: 2
          register: immutable
          ignore_errors: true

        - name: Run a pod claiming the channel on one tray
          kubernetes.core.k8s:
            wait: true
            wait_timeout: 120
            definition:
              apiVersion: v1
              kind: Pod
              metadata: {name: channel-user, namespace: "{{ cd_namespace }}"}
              spec:
                nodeSelector: {kubernetes.io/hostname: "{{ cd_node }}"}
                tolerations: [{operator: Exists}]
                containers:
                  - name: ctr
                    image: ubuntu:22.04
                    command: ["bash", "-c", "ls -la /dev/nvidia-caps-imex-channels; sleep 9999"]
                    resources: {claims: [{name: channel}]}
                resourceClaims:
                  - name: channel
                    resourceClaimTemplateName: "{{ cd_name }}-channel"

        - name: Wait until the node's daemon is Ready
          gpu_fabric.mnnvl.compute_domain:
            name: "{{ cd_name }}"
            namespace: "{{ cd_namespace }}"
            wait_nodes: ["{{ cd_node }}"]
            wait_timeout: 120
          register: joined

        - name: Remove the pod
          kubernetes.core.k8s:
            state: absent
            api_version: v1
            kind: Pod
            name: channel-user
            namespace: "{{ cd_namespace }}"
            wait: true
            delete_options: {gracePeriodSeconds: 0}

        - name: Delete the ComputeDomain and wait until it is gone
          gpu_fabric.mnnvl.compute_domain:
            name: "{{ cd_name }}"
            namespace: "{{ cd_namespace }}"
            state: absent
          register: deleted

        - name: Delete it again
          gpu_fabric.mnnvl.compute_domain:
            name: "{{ cd_name }}"
            namespace: "{{ cd_namespace }}"
            state: absent
          register: deleted_again
    """
)


def task_results(result: subprocess.CompletedProcess) -> dict[str, dict[str, Any]]:
    start = result.stdout.find("{")
    report = json.loads(result.stdout[start:])
    return {task["task"]["name"]: task["hosts"]["localhost"] for play in report["plays"] for task in play["tasks"]}


def results_named(result: subprocess.CompletedProcess, name: str) -> list[dict[str, Any]]:
    start = result.stdout.find("{")
    report = json.loads(result.stdout[start:])
    return [
        task["hosts"]["localhost"] for play in report["plays"] for task in play["tasks"] if task["task"]["name"] == name
    ]


def count_objects(sim_rack, namespace: str, cd_name: str) -> dict[str, int]:
    """ComputeDomains and channel templates in the namespace, daemon DaemonSets of this domain."""
    daemonsets = sim_rack.get_json("daemonsets", "-n", "nvidia-dra-driver-gpu")["items"]
    return {
        "computedomains": len(sim_rack.get_json("computedomains", "-n", namespace)["items"]),
        "resourceclaimtemplates": len(sim_rack.get_json("resourceclaimtemplates", "-n", namespace)["items"]),
        "daemonsets": sum(1 for d in daemonsets if d["metadata"]["name"].startswith(f"{cd_name}-")),
    }


def test_compute_domain_module_creates_waits_and_deletes(sim_rack, converged, namespace, tmp_path):
    cd_name = f"cd-{uuid.uuid4().hex[:6]}"
    node = "gb200-r0-t1"
    playbook = tmp_path / "compute_domain.yml"
    playbook.write_text(COMPUTE_DOMAIN_PLAY)
    before = count_objects(sim_rack, namespace, cd_name)
    assert before == {"computedomains": 0, "resourceclaimtemplates": 0, "daemonsets": 0}

    result = ansible_playbook(
        sim_rack,
        str(playbook),
        "-e",
        json.dumps({"cd_name": cd_name, "cd_namespace": namespace, "cd_node": node}),
        json_output=True,
    )
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    tasks = task_results(result)

    check = tasks["Create the ComputeDomain in check mode"]
    assert check["changed"] is True
    assert check["diff"]["before"] == {}
    assert check["diff"]["after"]["spec"] == {
        "numNodes": 0,
        "channel": {"resourceClaimTemplate": {"name": f"{cd_name}-channel"}, "allocationMode": "Single"},
    }

    created = tasks["Create the ComputeDomain and wait for it"]
    assert created["changed"] is True
    assert created["status"] == "Ready"
    assert created["channel_template_name"] == f"{cd_name}-channel"
    assert created["compute_domain"]["metadata"]["namespace"] == namespace
    assert "resource.nvidia.com/computeDomain" in created["compute_domain"]["metadata"]["finalizers"]

    assert tasks["Create it again"]["changed"] is False

    immutable = tasks["Ask for a different spec"]
    assert immutable["failed"] is True
    assert immutable["msg"] == (
        f"ComputeDomain {namespace}/{cd_name} exists with a different spec (spec.numNodes: 0 -> 2); a ComputeDomain's "
        "spec is immutable. Delete it first (state=absent), or set force=true to delete and recreate it (workloads "
        "using its channel lose it)."
    )

    joined = tasks["Wait until the node's daemon is Ready"]
    assert joined["changed"] is False
    [entry] = joined["nodes"]
    assert entry["name"] == node
    assert entry["status"] == "Ready"
    labels = sim_rack.get_json("node", node)["metadata"]["labels"]
    assert entry["clique_id"] == labels["nvidia.com/gpu.clique"]
    assert entry["ip_address"]

    deleted = tasks["Delete the ComputeDomain and wait until it is gone"]
    assert deleted["changed"] is True
    assert deleted["compute_domain"] == {}
    assert tasks["Delete it again"]["changed"] is False

    assert count_objects(sim_rack, namespace, cd_name) == before
    assert "resource.nvidia.com/computeDomain" not in sim_rack.get_json("node", node)["metadata"]["labels"]


def test_compute_domain_timeout_names_the_missing_node_and_driver_state(sim_rack, converged, namespace, tmp_path):
    cd_name = f"cd-{uuid.uuid4().hex[:6]}"
    playbook = tmp_path / "timeout.yml"
    playbook.write_text(
        textwrap.dedent(
            """\
            - name: Wait for a node that never joins
              hosts: localhost
              connection: local
              gather_facts: false
              tasks:
                - name: Create and wait for a node without workload
                  gpu_fabric.mnnvl.compute_domain:
                    name: "{{ cd_name }}"
                    namespace: "{{ cd_namespace }}"
                    wait_nodes: [gb200-r0-t2]
                    wait_timeout: 6
                  register: waited
                  ignore_errors: true
                - name: Delete it
                  gpu_fabric.mnnvl.compute_domain:
                    name: "{{ cd_name }}"
                    namespace: "{{ cd_namespace }}"
                    state: absent
            """
        )
    )
    result = ansible_playbook(
        sim_rack, str(playbook), "-e", json.dumps({"cd_name": cd_name, "cd_namespace": namespace}), json_output=True
    )
    assert result.returncode == 0, result.stdout[-6000:]
    waited = task_results(result)["Create and wait for a node without workload"]
    assert waited["failed"] is True
    message = waited["msg"]
    assert message.startswith(
        f"ComputeDomain {namespace}/{cd_name} not ready after 6s: nodes not yet in status.nodes: gb200-r0-t2."
    )
    assert "status.nodes: none joined." in message
    assert "Deployment nvidia-dra-driver-gpu/nvidia-dra-driver-gpu-controller 1/1 ready" in message
    # DRA driver 0.4.1 (as from 25.12) names the daemons' DaemonSet after the domain's UID
    assert re.search(r"DaemonSet nvidia-dra-driver-gpu/computedomain-daemon-[0-9a-f-]+ 0/0 ready", message), message
    assert count_objects(sim_rack, namespace, cd_name)["computedomains"] == 0


CONTAINERD_CONFIG = """\
version = 2
# the toolkit's drop-in replaced the site's own imports
imports = ["/etc/containerd/conf.d/99-nvidia.toml"]

[plugins."io.containerd.grpc.v1.cri"]
  enable_cdi = true
"""


@pytest.mark.parametrize(
    ("imports", "lost"),
    [
        ('["/etc/containerd/conf.d/99-nvidia.toml"]', True),
        ('[\n  "/etc/containerd/conf.d/*.toml",\n  "/etc/containerd/conf.d/99-nvidia.toml",\n]', False),
    ],
)
def test_gpu_operator_rechecks_the_hosts_containerd_imports(sim_rack, converged, tmp_path, imports, lost):
    # The "GPU host" is this machine, reached with connection=local: slurp reads a real file.
    config = tmp_path / "config.toml"
    config.write_text(CONTAINERD_CONFIG.replace('["/etc/containerd/conf.d/99-nvidia.toml"]', imports))
    hosts = tmp_path / "hosts.yml"
    hosts.write_text(
        "gpu_nodes:\n  hosts:\n    tray-local:\n      ansible_connection: local\n"
        "      ansible_python_interpreter: '{{ ansible_playbook_python }}'\n"
    )
    result = ansible_playbook(
        sim_rack,
        "-i",
        str(hosts),
        str(CLUSTER_PLAYBOOK),
        "--tags",
        "gpu_operator",
        "-e",
        f"gpu_operator_containerd_config_path={config}",
    )
    text = " ".join(result.stdout.split())
    assert "no host of group 'gpu_nodes'" not in text
    if lost:
        assert result.returncode == 2, result.stdout[-4000:]
        assert (
            "containerd imports lost after the GPU Operator v26.7.0 rollout (its container toolkit rewrote them, as "
            "1.18.0 of v25.10.0 does): "
            'tray-local: imports = ["/etc/containerd/conf.d/99-nvidia.toml"] lacks /etc/containerd/conf.d/*.toml.'
        ) in text
    else:
        assert result.returncode == 0, result.stdout[-4000:]
        assert recap(result)["changed"] == 0
        assert "containerd imports lost" not in text


# The Prometheus Operator's ServiceMonitor API, as far as the GPU Operator chart and operator look at it
# (served or not): a minimal CRD of our own, not the Prometheus Operator's.
SERVICE_MONITOR_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "servicemonitors.monitoring.coreos.com"},
    "spec": {
        "group": "monitoring.coreos.com",
        "names": {"kind": "ServiceMonitor", "listKind": "ServiceMonitorList", "plural": "servicemonitors"},
        "scope": "Namespaced",
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
            }
        ],
    },
}


@pytest.fixture
def restore_gpu_operator(sim_rack, converged):
    """The shared release and its ClusterPolicy back as the default run leaves them."""
    yield
    # The ServiceMonitor leaves the release before its CRD goes (Helm cannot upgrade a release whose
    # manifest names a kind that is no longer served).
    off = ("-e", "gpu_operator_service_monitor=false")
    result = ansible_playbook(sim_rack, str(CLUSTER_PLAYBOOK), "--tags", "gpu_operator", *off)
    assert result.returncode == 0, result.stdout[-4000:]
    sim_rack.kubectl("delete", "crd", SERVICE_MONITOR_CRD["metadata"]["name"], "--ignore-not-found", "--wait=true")


WAIT_ROLLOUT = (
    "gpu_fabric.mnnvl.gpu_operator : Wait for the ClusterPolicy, the operator's pods and the GPU nodes' "
    "nvidia.com/gpu capacity"
)


def test_gpu_operator_waits_for_the_cluster_policy_and_names_its_states(sim_rack, restore_gpu_operator):
    # The former default (ServiceMonitor always on) on a cluster without the Prometheus Operator, with GPU
    # Operator v25.10 (the guide's set; v26.7 reports ready without the ServiceMonitor CRD): every pod runs and
    # every GPU is there, but the operator keeps the ClusterPolicy notReady. v25.10 rolls out first, ready.
    guide = ansible_playbook(
        sim_rack, str(CLUSTER_PLAYBOOK), "--tags", "gpu_operator", "-e", "gpu_fabric_release_set=25.10"
    )
    assert guide.returncode == 0, guide.stdout[-4000:]
    result = ansible_playbook(
        sim_rack,
        str(CLUSTER_PLAYBOOK),
        "--tags",
        "gpu_operator",
        "-e",
        "gpu_fabric_release_set=25.10",
        "-e",
        json.dumps({"gpu_operator_values": {"dcgmExporter": {"serviceMonitor": {"enabled": True}}}}),
        "-e",
        "gpu_operator_wait_timeout=30",
        json_output=True,
    )
    assert result.returncode == 2, result.stdout[-4000:]
    [wait] = results_named(result, WAIT_ROLLOUT)
    assert wait["failed"] is True
    assert (wait["name"], wait["state"]) == ("cluster-policy", "notReady")
    assert (
        "Error=True (OperandNotReady): ClusterPolicy is not ready, states not ready: [state-dcgm-exporter]"
        in (wait["conditions"])
    )
    assert wait["msg"].startswith("GPU Operator not ready after 30s: ClusterPolicy cluster-policy state notReady;")
    assert "kubectl -n gpu-operator logs deploy/gpu-operator" in wait["msg"]
    assert helm_values(sim_rack, "gpu-operator", "gpu-operator")["dcgmExporter"] == {
        "serviceMonitor": {"enabled": True}
    }


def test_service_monitor_auto_turns_on_where_the_api_is_served(sim_rack, restore_gpu_operator):
    sim_rack.apply(SERVICE_MONITOR_CRD)
    sim_rack.kubectl("wait", "--for=condition=Established", "crd/servicemonitors.monitoring.coreos.com")
    result = ansible_playbook(sim_rack, str(CLUSTER_PLAYBOOK), "--tags", "gpu_operator", json_output=True)
    assert result.returncode == 0, result.stdout[-4000:]
    assert helm_values(sim_rack, "gpu-operator", "gpu-operator")["dcgmExporter"] == {
        "serviceMonitor": {"enabled": True}
    }
    [wait] = results_named(result, WAIT_ROLLOUT)
    assert wait["state"] == "ready"
    monitors = sim_rack.get_json("servicemonitors", "-n", "gpu-operator")["items"]
    assert [m["metadata"]["name"] for m in monitors] == ["nvidia-dcgm-exporter"]


@pytest.mark.parametrize("named_in", ["module_defaults", "gpu_fabric_kubeconfig"])
def test_a_kubeconfig_named_only_in_the_plays_module_defaults_reaches_every_task(
    sim_rack, converged, tmp_path, named_in
):
    # The user's play sets the connection once for the collection's group (kubernetes.core's k8s and helm
    # modules included); no environment variable and no role variable names the kubeconfig. Or the shared
    # variable names it and the play has no module_defaults.
    kubeconfig = str(sim_rack.kubeconfig)
    group = {"group/gpu_fabric.mnnvl.k8s": {"kubeconfig": kubeconfig}}
    defaults = json.dumps(group if named_in == "module_defaults" else {})
    extra = [] if named_in == "module_defaults" else ["-e", f"gpu_fabric_kubeconfig={kubeconfig}"]
    playbook = tmp_path / "cluster.yml"
    playbook.write_text(
        textwrap.dedent(
            f"""\
            - name: Deploy the GPU stack with the site's module_defaults
              hosts: k8s_controller
              gather_facts: false
              module_defaults: {defaults}
              roles:
                - gpu_fabric.mnnvl.cluster_preflight
                - gpu_fabric.mnnvl.gpu_operator
                - gpu_fabric.mnnvl.dra_driver
                - gpu_fabric.mnnvl.mpi_operator
            """
        )
    )
    env = {k: v for k, v in sim_rack.env.items() if k not in ("K8S_AUTH_KUBECONFIG", "KUBECONFIG")}
    env["KUBECONFIG"] = str(tmp_path / "no-such-kubeconfig")  # what a task without the default would read
    result = subprocess.run(
        [str(REPO_ROOT / ".venv" / "bin" / "ansible-playbook"), "-i", str(INVENTORY), str(playbook), *extra],
        capture_output=True,
        text=True,
        env={**env, "ANSIBLE_NOCOLOR": "1"},
        cwd=REPO_ROOT,
        timeout=900,
        check=False,
    )
    assert result.returncode == 0, f"{result.stdout[-6000:]}\n{result.stderr[-2000:]}"
    assert recap(result)["failed"] == 0
    assert recap(result)["changed"] == 0, result.stdout[-6000:]


def test_the_helm_tasks_run_the_helm_binary_that_preflight_checked(sim_rack, converged, tmp_path):
    # A site's Helm outside PATH (or a wrapper): every Helm call of the cluster roles goes through it.
    calls = tmp_path / "calls.log"
    wrapper = tmp_path / "site-helm"
    real = sim_rack.bin_dir / "helm"
    wrapper.write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >> {calls}\nexec {real} "$@"\n')
    wrapper.chmod(0o755)
    result = ansible_playbook(
        sim_rack, str(CLUSTER_PLAYBOOK), "-e", f"cluster_preflight_helm_binary={wrapper}", "--skip-tags", "mpi_operator"
    )
    assert result.returncode == 0, result.stdout[-6000:]
    lines = calls.read_text().splitlines()
    assert lines[0] == "version --short"  # cluster_preflight's check
    for release, namespace in (("gpu-operator", "gpu-operator"), ("nvidia-dra-driver-gpu", "nvidia-dra-driver-gpu")):
        # chart_release's pending-release check (history), then its status read of the release
        assert any(line.startswith(f"history {release} ") and namespace in line for line in lines), lines
        assert any(release in line and not line.startswith("history") for line in lines), lines
