# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The simulated rack's control plane: real kube-apiserver/scheduler/controller-manager, KWOK trays."""

from __future__ import annotations

import json
import re
import sys
from datetime import datetime, timezone
from typing import TYPE_CHECKING

import pytest
from verify_helpers import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "sim"))
from simrack import build_versions

# the release the rack runs: GPU_FABRIC_SIM_K8S_VERSION or sim/build.sh's default
K8S = f"v{build_versions()['K8S_VERSION']}"

if TYPE_CHECKING:
    from conftest import SimRack

pytestmark = pytest.mark.sim

CLIQUE = "nvidia.com/gpu.clique"
UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"


def trays(sim_rack: SimRack) -> list[dict]:
    return [n for n in sim_rack.get_json("nodes")["items"] if n["metadata"]["name"].startswith("gb200-")]


def pod(name: str, **spec) -> dict:
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "main", "image": "registry.invalid/sim:1", "command": ["sleep", "inf"]}],
        },
    }
    containers = spec.pop("containers", None)
    if containers:
        body["spec"]["containers"] = containers
    body["spec"].update(spec)
    return body


def pod_phase(sim_rack: SimRack, namespace: str, name: str) -> str:
    return sim_rack.get_json("pod", name, "-n", namespace).get("status", {}).get("phase", "")


# --- the rack as the API shows it ---------------------------------------------------------------


def test_trays_look_like_gb200_compute_trays(sim_rack: SimRack) -> None:
    status = sim_rack.status()
    nodes = trays(sim_rack)
    assert len(nodes) == status["racks"] * status["trays_per_rack"]
    by_rack: dict[str, set[str]] = {}
    for node in nodes:
        name = node["metadata"]["name"]
        labels = node["metadata"]["labels"]
        assert re.fullmatch(r"gb200-r\d+-t\d+", name)
        assert re.fullmatch(rf"{UUID}\.32766", labels[CLIQUE]), labels[CLIQUE]
        assert labels["nvidia.com/gpu.present"] == "true"
        assert labels["nvidia.com/gpu.product"] == "NVIDIA-GB200"
        assert labels["nvidia.com/gpu.count"] == "4"
        assert labels["feature.node.kubernetes.io/pci-10de.present"] == "true"
        assert labels["kubernetes.io/arch"] == "arm64"
        assert labels["type"] == "kwok"
        assert node["status"]["capacity"]["nvidia.com/gpu"] == "4"
        assert node["status"]["allocatable"]["nvidia.com/gpu"] == "4"
        assert node["status"]["nodeInfo"]["kubeletVersion"] == K8S
        ready = [c for c in node["status"]["conditions"] if c["type"] == "Ready"]
        assert ready and ready[0]["status"] == "True", name
        assert not node["spec"].get("taints"), f"{name} is tainted: {node['spec']['taints']}"
        rack = node["metadata"]["annotations"]["gpu-fabric.sim/rack"]
        assert name.startswith(f"gb200-r{rack}-")
        assert labels["gpu-fabric.sim/rack"] == f"rack{rack}"
        by_rack.setdefault(rack, set()).add(labels[CLIQUE])
    # one clique per rack, a different NVLink domain (cluster UUID) per rack
    assert all(len(values) == 1 for values in by_rack.values()), by_rack
    assert len({next(iter(v)) for v in by_rack.values()}) == len(by_rack)


def test_clique_column_shows_the_rack(sim_rack: SimRack) -> None:
    table = sim_rack.kubectl("get", "nodes", "-L", CLIQUE).stdout.splitlines()
    assert table[0].split() == ["NAME", "STATUS", "ROLES", "AGE", "VERSION", "GPU.CLIQUE"]
    rows = {line.split()[0]: line.split() for line in table[1:]}
    # NAME STATUS ROLES AGE VERSION, and no clique value
    assert rows["sim-control-plane"][1:3] == ["Ready", "control-plane"]
    assert len(rows["sim-control-plane"]) == 5
    tray_rows = {name: row for name, row in rows.items() if name.startswith("gb200-")}
    assert len(tray_rows) == len(trays(sim_rack))
    for name, row in tray_rows.items():
        assert row[1] == "Ready", row
        assert row[4] == K8S, row
        assert re.fullmatch(rf"{UUID}\.32766", row[5]), f"{name}: clique column {row[5]!r}"


def test_control_plane_node_is_schedulable_and_has_no_gpus(sim_rack: SimRack) -> None:
    node = sim_rack.get_json("node", "sim-control-plane")
    assert "node-role.kubernetes.io/control-plane" in node["metadata"]["labels"]
    assert "nvidia.com/gpu" not in node["status"]["capacity"]
    assert CLIQUE not in node["metadata"]["labels"]
    assert not node["spec"].get("taints")
    assert not node["spec"].get("unschedulable")


def test_server_reports_the_stamped_version(sim_rack: SimRack) -> None:
    version = json.loads(sim_rack.kubectl("version", "-o", "json").stdout)
    assert version["serverVersion"]["gitVersion"] == K8S
    assert (version["serverVersion"]["major"], version["serverVersion"]["minor"]) == ("1", K8S.split(".")[1])
    assert version["clientVersion"]["gitVersion"] == K8S
    groups = sim_rack.kubectl("api-versions").stdout.split()
    # DRA: v1 from 1.34; the sim turns the beta versions on for 1.33 (v1beta2) and 1.32 (v1beta1)
    assert ("resource.k8s.io/v1" if int(K8S.split(".")[1]) >= 34 else "resource.k8s.io/v1beta1") in groups


# --- pods, jobs, logs, DRA ----------------------------------------------------------------------


def test_gpu_pods_fill_the_trays_then_wait(sim_rack: SimRack, namespace: str) -> None:
    """The real scheduler places whole-tray GPU pods one per tray and leaves the extra one Pending."""
    names = sorted(n["metadata"]["name"] for n in trays(sim_rack))
    container = {"name": "main", "image": "registry.invalid/sim:1", "resources": {"limits": {"nvidia.com/gpu": "4"}}}
    sim_rack.apply([pod(f"gpu-{i}", containers=[container]) for i in range(len(names) + 1)], namespace)

    def by_phase(phase: str) -> list[dict]:
        items = sim_rack.get_json("pods", "-n", namespace)["items"]
        return [p for p in items if p.get("status", {}).get("phase") == phase]

    running = sim_rack.wait_until(
        f"{len(names)} GPU pods Running", lambda: len(ps := by_phase("Running")) == len(names) and ps
    )
    assert sorted(p["spec"]["nodeName"] for p in running) == names
    for p in running:
        assert re.fullmatch(r"10\.244\.\d+\.\d+", p["status"]["podIP"]), p["status"].get("podIP")
        assert p["status"]["containerStatuses"][0]["state"]["running"]["startedAt"]
    pending = by_phase("Pending")
    assert len(pending) == 1
    cond = sim_rack.wait_until(
        "FailedScheduling on the extra pod",
        lambda: [
            c
            for c in sim_rack.get_json("pod", pending[0]["metadata"]["name"], "-n", namespace)["status"].get(
                "conditions", []
            )
            if c["type"] == "PodScheduled" and c["status"] == "False"
        ],
    )[0]
    assert cond["reason"] == "Unschedulable"
    assert "Insufficient nvidia.com/gpu" in cond["message"]
    sim_rack.kubectl("delete", "pods", "--all", "-n", namespace, "--timeout=60s")


def test_plain_pod_runs_on_a_tray(sim_rack: SimRack, namespace: str) -> None:
    sim_rack.kubectl(
        "apply",
        "-n",
        namespace,
        "-f",
        "-",
        input=json.dumps(pod("plain", nodeSelector={"nvidia.com/gpu.present": "true"})),
    )
    sim_rack.wait_until("pod plain Running", lambda: pod_phase(sim_rack, namespace, "plain") == "Running")
    body = sim_rack.get_json("pod", "plain", "-n", namespace)
    assert body["spec"]["nodeName"].startswith("gb200-r")
    assert body["status"]["hostIP"] == "127.0.0.1"
    ready = {c["type"]: c["status"] for c in body["status"]["conditions"]}
    assert ready["Ready"] == "True"
    # deleting goes through KWOK's delete stage: the pod is gone, not stuck Terminating
    sim_rack.kubectl("delete", "pod", "plain", "-n", namespace, "--timeout=30s")
    assert sim_rack.kubectl("get", "pod", "plain", "-n", namespace, check=False).returncode != 0


def job(name: str, annotations: dict | None = None) -> dict:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "backoffLimit": 0,
            "template": {
                "metadata": {"annotations": annotations or {}},
                "spec": {
                    "restartPolicy": "Never",
                    "nodeSelector": {"nvidia.com/gpu.present": "true"},
                    "containers": [{"name": "main", "image": "registry.invalid/sim:1"}],
                },
            },
        },
    }


def job_pod(sim_rack: SimRack, namespace: str, name: str) -> dict:
    pods = sim_rack.get_json("pods", "-n", namespace, "-l", f"job-name={name}")["items"]
    return pods[0] if pods else {}


def test_job_runs_then_completes(sim_rack: SimRack, namespace: str) -> None:
    sim_rack.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(job("completes")))
    sim_rack.wait_until(
        "the Job's pod Running",
        lambda: job_pod(sim_rack, namespace, "completes").get("status", {}).get("phase") == "Running",
    )
    sim_rack.kubectl("wait", "-n", namespace, "--for=condition=Complete", "job/completes", "--timeout=60s")
    body = sim_rack.get_json("job", "completes", "-n", namespace)
    assert body["status"]["succeeded"] == 1
    assert not body["status"].get("failed")
    terminated = job_pod(sim_rack, namespace, "completes")["status"]["containerStatuses"][0]["state"]["terminated"]
    assert (terminated["exitCode"], terminated["reason"]) == (0, "Completed")


def test_job_pod_fails_with_the_annotated_exit_code(sim_rack: SimRack, namespace: str) -> None:
    sim_rack.kubectl(
        "apply", "-n", namespace, "-f", "-", input=json.dumps(job("fails", {"gpu-fabric.sim/exit-code": "3"}))
    )
    sim_rack.kubectl("wait", "-n", namespace, "--for=condition=Failed", "job/fails", "--timeout=60s")
    body = sim_rack.get_json("job", "fails", "-n", namespace)
    assert body["status"]["failed"] == 1
    assert not body["status"].get("succeeded")
    reasons = {c["type"]: c.get("reason") for c in body["status"]["conditions"]}
    assert reasons["Failed"] == "BackoffLimitExceeded"
    failed_pod = job_pod(sim_rack, namespace, "fails")
    assert failed_pod["status"]["phase"] == "Failed"
    terminated = failed_pod["status"]["containerStatuses"][0]["state"]["terminated"]
    assert (terminated["exitCode"], terminated["reason"]) == (3, "Error")


def test_kubectl_logs_reads_a_served_log(sim_rack: SimRack, namespace: str, tmp_path) -> None:
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    lines = ["total 0", "crw-rw-rw- 1 root root 234, 0 Nov 30 00:00 channel0"]
    log_file = tmp_path / "served.log"
    log_file.write_text("".join(f"{stamp} stdout F {line}\n" for line in lines))
    sim_rack.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(pod("talker")))
    sim_rack.kubectl(
        "apply",
        "-n",
        namespace,
        "-f",
        "-",
        input=json.dumps(
            {
                "apiVersion": "kwok.x-k8s.io/v1alpha1",
                "kind": "Logs",
                "metadata": {"name": "talker"},
                "spec": {"logs": [{"containers": ["main"], "logsFile": str(log_file), "follow": False}]},
            }
        ),
    )
    sim_rack.wait_until("pod talker Running", lambda: pod_phase(sim_rack, namespace, "talker") == "Running")
    output = sim_rack.wait_until(
        "kubectl logs to serve the file",
        lambda: (r := sim_rack.kubectl("logs", "talker", "-n", namespace, check=False)).returncode == 0 and r.stdout,
        timeout=30,
    )
    assert output.splitlines() == lines


def test_resource_claim_is_allocated_by_the_real_scheduler(sim_rack: SimRack, namespace: str) -> None:
    """A hand-made DeviceClass and ResourceSlice on one tray: the scheduler allocates and reserves it."""
    driver = f"test-{namespace}.gpu-fabric.sim"
    target = "gb200-r0-t1"
    objects = [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": driver},
            "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{driver}'"}}]},
        },
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": f"{target}-{namespace}"},
            "spec": {
                "driver": driver,
                "nodeName": target,
                "pool": {"name": target, "generation": 1, "resourceSliceCount": 1},
                "devices": [{"name": "widget-0", "attributes": {"index": {"int": 0}}}],
            },
        },
    ]
    template = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "widget"},
        "spec": {"spec": {"devices": {"requests": [{"name": "w", "exactly": {"deviceClassName": driver}}]}}},
    }
    claimant = {
        "resourceClaims": [{"name": "w", "resourceClaimTemplateName": "widget"}],
        "containers": [{"name": "main", "image": "registry.invalid/sim:1", "resources": {"claims": [{"name": "w"}]}}],
    }
    try:
        sim_rack.apply(objects)
        sim_rack.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(template))
        sim_rack.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(pod("claimant-a", **claimant)))
        sim_rack.wait_until("claimant-a Running", lambda: pod_phase(sim_rack, namespace, "claimant-a") == "Running")
        placed = sim_rack.get_json("pod", "claimant-a", "-n", namespace)
        assert placed["spec"]["nodeName"] == target
        claim_name = placed["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
        claim = sim_rack.get_json("resourceclaim", claim_name, "-n", namespace)
        results = claim["status"]["allocation"]["devices"]["results"]
        assert [(r["driver"], r["pool"], r["device"], r["request"]) for r in results] == [
            (driver, target, "widget-0", "w")
        ]
        assert [r["name"] for r in claim["status"]["reservedFor"]] == ["claimant-a"]
        node_selector = claim["status"]["allocation"]["nodeSelector"]["nodeSelectorTerms"][0]
        assert target in json.dumps(node_selector)

        # The only device is taken: a second claimant cannot be scheduled anywhere.
        sim_rack.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(pod("claimant-b", **claimant)))
        cond = sim_rack.wait_until(
            "claimant-b unschedulable",
            lambda: [
                c
                for c in sim_rack.get_json("pod", "claimant-b", "-n", namespace)["status"].get("conditions", [])
                if c["type"] == "PodScheduled" and c["status"] == "False"
            ],
        )[0]
        assert cond["reason"] == "Unschedulable"
        assert pod_phase(sim_rack, namespace, "claimant-b") == "Pending"
    finally:
        sim_rack.kubectl("delete", "pods", "--all", "-n", namespace, "--wait=true", "--timeout=60s", check=False)
        sim_rack.kubectl("delete", "resourceslice", f"{target}-{namespace}", check=False)
        sim_rack.kubectl("delete", "deviceclass", driver, check=False)


# --- the CLI ------------------------------------------------------------------------------------


def test_status_reports_processes_and_memory(sim_rack: SimRack) -> None:
    status = sim_rack.status()
    assert status["up"] is True
    assert status["apiserver_ready"] is True
    for name in ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"):
        proc = status["processes"][name]
        assert proc["running"] is True, name
        assert proc["rss_mib"] > 5, f"{name}: RSS {proc['rss_mib']} MiB"
    assert status["rss_mib_total"] == pytest.approx(sum(p["rss_mib"] for p in status["processes"].values()), abs=0.5)
    assert status["nodes"] == status["nodes_ready"] == status["racks"] * status["trays_per_rack"] + 1


def test_env_prints_the_kubeconfig(sim_rack: SimRack) -> None:
    exports = dict(line.removeprefix("export ").split("=", 1) for line in sim_rack.rack("env").stdout.splitlines())
    assert exports["KUBECONFIG"] == str(sim_rack.kubeconfig)
    assert exports["K8S_AUTH_KUBECONFIG"] == str(sim_rack.kubeconfig)
    assert exports["PATH"] == f"{sim_rack.bin_dir}:$PATH"
    kubeconfig = json.loads(sim_rack.kubeconfig.read_text())
    assert kubeconfig["clusters"][0]["cluster"]["server"].startswith("https://127.0.0.1:")


def test_up_again_changes_nothing(sim_rack: SimRack) -> None:
    before_pids = {k: v["pid"] for k, v in sim_rack.status()["processes"].items()}
    before_uids = {n["metadata"]["name"]: n["metadata"]["uid"] for n in sim_rack.get_json("nodes")["items"]}
    output = sim_rack.rack("up").stdout
    assert "already up, nothing to start" in output
    assert {k: v["pid"] for k, v in sim_rack.status()["processes"].items()} == before_pids
    assert {n["metadata"]["name"]: n["metadata"]["uid"] for n in sim_rack.get_json("nodes")["items"]} == before_uids


def test_logs_tails_a_component(sim_rack: SimRack) -> None:
    output = sim_rack.rack("logs", "kube-apiserver", "-n", "5").stdout
    assert 0 < len(output.splitlines()) <= 5
    missing = sim_rack.rack("logs", "no-such-component", check=False)
    assert missing.returncode == 2
    assert "available:" in missing.stderr and "kube-apiserver" in missing.stderr


# --- faults -------------------------------------------------------------------------------------


def clique_labels(sim_rack: SimRack) -> dict[str, str | None]:
    return {n["metadata"]["name"]: n["metadata"]["labels"].get(CLIQUE) for n in trays(sim_rack)}


def test_fault_unlabelled_node(clean_faults: SimRack) -> None:
    sim_rack = clean_faults
    before = clique_labels(sim_rack)
    sim_rack.fault("unlabelled-node", node="gb200-r0-t2")
    after = clique_labels(sim_rack)
    assert after["gb200-r0-t2"] is None
    assert {k: v for k, v in after.items() if k != "gb200-r0-t2"} == {
        k: v for k, v in before.items() if k != "gb200-r0-t2"
    }
    assert sim_rack.faults() == {"unlabelled-node": {"node": "gb200-r0-t2"}}
    listing = sim_rack.rack("fault", "--list").stdout
    assert re.search(r"^ON\s+unlabelled-node", listing, re.MULTILINE)

    sim_rack.rack("fault", "--clear", "unlabelled-node")
    assert clique_labels(sim_rack) == before
    assert sim_rack.faults() == {}


def test_fault_unlabelled_node_refuses_an_unknown_node(clean_faults: SimRack) -> None:
    result = clean_faults.rack("fault", "unlabelled-node", "node=gb200-r9-t99", check=False)
    assert result.returncode == 2
    assert "gb200-r9-t99 is not a tray of this sim" in result.stderr
    assert clean_faults.faults() == {}


def test_fault_split_clique(clean_faults: SimRack) -> None:
    sim_rack = clean_faults
    before = clique_labels(sim_rack)
    sim_rack.fault("split-clique", rack=0)
    after = clique_labels(sim_rack)
    rack0 = {k: v for k, v in after.items() if k.startswith("gb200-r0-")}
    values = sorted(set(rack0.values()))
    assert len(values) == 2
    # same NVLink domain (cluster UUID), two clique ids, half of the trays each
    assert {v.rsplit(".", 1)[0] for v in values} == {before["gb200-r0-t0"].rsplit(".", 1)[0]}
    assert {v.rsplit(".", 1)[1] for v in values} == {"32765", "32766"}
    half = len(rack0) // 2
    assert sorted(list(rack0.values()).count(v) for v in values) == sorted([half, len(rack0) - half])
    assert after["gb200-r0-t0"] == before["gb200-r0-t0"]

    sim_rack.rack("fault", "--clear", "split-clique")
    assert clique_labels(sim_rack) == before


def test_fault_apiserver_restart_keeps_objects(clean_faults: SimRack, namespace: str) -> None:
    sim_rack = clean_faults
    sim_rack.kubectl("create", "configmap", "survivor", "-n", namespace, "--from-literal=k=v")
    uid = sim_rack.get_json("configmap", "survivor", "-n", namespace)["metadata"]["uid"]
    old_pid = sim_rack.status()["processes"]["kube-apiserver"]["pid"]

    output = sim_rack.fault("apiserver-restart").stdout
    assert "kube-apiserver restarted" in output
    status = sim_rack.status()
    assert status["processes"]["kube-apiserver"]["pid"] != old_pid
    assert status["up"] is True
    survivor = sim_rack.get_json("configmap", "survivor", "-n", namespace)
    assert (survivor["metadata"]["uid"], survivor["data"]) == (uid, {"k": "v"})
    assert len(trays(sim_rack)) == status["racks"] * status["trays_per_rack"]
    # the controllers reconnect: a new Job still completes
    sim_rack.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(job("after-restart")))
    sim_rack.kubectl("wait", "-n", namespace, "--for=condition=Complete", "job/after-restart", "--timeout=90s")


def test_fault_apiserver_restart_after_delay(clean_faults: SimRack) -> None:
    sim_rack = clean_faults
    old_pid = sim_rack.status()["processes"]["kube-apiserver"]["pid"]
    done = sim_rack.apiserver_restarts_done()
    output = sim_rack.fault("apiserver-restart", after=3).stdout
    assert "will restart in 3s" in output
    # the command returned at once: the old server still answers
    assert sim_rack.status()["processes"]["kube-apiserver"]["pid"] == old_pid
    new_pid = sim_rack.wait_until(
        "a new kube-apiserver",
        lambda: (
            (p := sim_rack.status()["processes"]["kube-apiserver"]).get("running") and p["pid"] != old_pid and p["pid"]
        ),
        timeout=90,
    )
    sim_rack.wait_until("the API back", lambda: sim_rack.status()["up"], timeout=90)
    assert (
        sim_rack.kubectl("get", "nodes", "sim-control-plane", "-o", "name").stdout.strip() == "node/sim-control-plane"
    )
    assert new_pid != old_pid
    sim_rack.wait_apiserver_restarts_done(done + 1)
