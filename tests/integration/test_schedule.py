# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The scheduled verification (role verify_schedule, playbooks/schedule.yml) on the simulated rack.

The role applies its objects as admin (a second run changes nothing); then the exact command of the CronJob's
container, read back from the API server, runs here as the CronJob's ServiceAccount: a kubeconfig holding only a
token of it (TokenRequest) stands for the pod's in-cluster account, the inventory is the ConfigMap's (it carries
the verify variables of inventories/sim: the rack label names the rack rack0, as a run by hand does), and a
temporary directory stands for the report volume (the role mounts both at the paths given, so the command runs
unchanged). KWOK runs no CronJob pod, so nothing pulls the image. The checks' pods carried the collection's
PriorityClass as the API admitted them (the IMEX channel record's pods). With the node-verdict rights, the job
writes the verdict on rack0's trays (label and condition); the refresh CronJob runs refresh_state on its own
schedule, and its command, run the same way once a tray's verdict has expired, turns that tray's condition Unknown
(VerdictExpired) with no check run. Then state=absent removes everything (both CronJobs) and the trays are cleared.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from ansible.parsing.utils.yaml import from_yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT / "sim"))
from simrack import accounts  # noqa: E402

pytestmark = pytest.mark.sim

NAMESPACE = "gpu-fabric-schedule"
ACCOUNT = "verify-schedule"
NAME = "fabric-verify"
IMAGE = "registry.example.invalid/gpu-fabric-ee:test"
RECAP = re.compile(r"^localhost\s*:\s*ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.M)
MANAGED = "app.kubernetes.io/managed-by=gpu_fabric.mnnvl.verify_schedule"
REFRESH_SCHEDULE = "*/20 * * * *"
RACK_TRAYS = "gpu-fabric.sim/rack=rack0"
LABEL = "gpu-fabric.nvidia.com/verified"
UNTIL = "gpu-fabric.nvidia.com/verified-until"
ANNOTATION = "gpu-fabric.nvidia.com/verification"
CONDITION = "GPUFabricVerified"


def schedule_playbook(sim_rack, extra: dict[str, Any]) -> subprocess.CompletedProcess:
    env = dict(sim_rack.env, ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0")
    return subprocess.run(
        [
            str(REPO_ROOT / ".venv" / "bin" / "ansible-playbook"),
            "-i",
            str(REPO_ROOT / "inventories" / "sim"),
            str(REPO_ROOT / "playbooks" / "schedule.yml"),
            "-e",
            json.dumps(extra),
        ],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def changed(result: subprocess.CompletedProcess) -> int:
    match = RECAP.search(result.stdout)
    assert match, result.stdout[-4000:] + result.stderr[-2000:]
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    return int(match.group(2))


def fabric_verify_plans(result: subprocess.CompletedProcess) -> dict[str, dict[str, Any]]:
    """Per check, what a --check run of verify.yml planned (its json callback's output): the module's arguments but
    the run's own id, and the racks it would verify (names, trays, skipped trays with their reasons, the objects it
    would create but the run's namespace)."""
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    plans = {}
    for play in json.loads(result.stdout)["plays"]:
        for task in play["tasks"]:
            for outcome in task["hosts"].values():
                args = (outcome.get("invocation") or {}).get("module_args") or {}
                if "check" in args and "racks" in outcome and not outcome.get("skipped"):
                    # the objects it would create are named after the run, as its namespace is
                    racks = [
                        {**rack, "would_create": {**rack["would_create"], "namespace": "<run>"}}
                        if isinstance(rack.get("would_create"), dict) and "namespace" in rack["would_create"]
                        else rack
                        for rack in outcome["racks"]
                    ]
                    plans[args["check"]] = {
                        "args": {key: value for key, value in args.items() if key != "run_id"},
                        "racks": racks,
                    }
    return plans


def managed(sim_rack) -> list[str]:
    kinds = "cronjobs,configmaps,serviceaccounts,roles,rolebindings"
    names = sim_rack.kubectl("get", kinds, "-A", "-l", MANAGED, "-o", "name").stdout.split()
    cluster = (
        "clusterroles,clusterrolebindings,validatingadmissionpolicies,validatingadmissionpolicybindings,priorityclasses"
    )
    return sorted(names + sim_rack.kubectl("get", cluster, "-l", MANAGED, "-o", "name").stdout.split())


def condition(sim_rack, node: str) -> dict[str, Any] | None:
    conditions = sim_rack.get_json("node", node)["status"].get("conditions") or []
    return next((c for c in conditions if c["type"] == CONDITION), None)


def clear_verdicts(sim_rack) -> None:
    """rack0's trays without the verdict the scheduled run wrote (labels, annotation, condition)."""
    for node in sim_rack.kubectl("get", "nodes", "-l", RACK_TRAYS, "-o", "name").stdout.split():
        name = node.split("/", 1)[1]
        sim_rack.kubectl("label", "node", name, f"{LABEL}-", f"{UNTIL}-", check=False)
        sim_rack.kubectl("annotate", "node", name, f"{ANNOTATION}-", check=False)
        if condition(sim_rack, name) is not None:
            patch = {"status": {"conditions": [{"type": CONDITION, "$patch": "delete"}]}}
            sim_rack.kubectl("patch", "node", name, "--subresource=status", "--type=strategic", "-p", json.dumps(patch))


def test_the_schedule_applies_and_its_command_passes_as_its_service_account(cluster_stage, tmp_path):
    sim_rack = cluster_stage
    # the schedule's namespace stays after state=absent (it may hold the report's volume): an earlier run's goes
    sim_rack.kubectl("delete", "namespace", NAMESPACE, "--ignore-not-found", "--wait=true")
    clear_verdicts(sim_rack)
    inventory_dir, report_dir = tmp_path / "etc", tmp_path / "report"
    inventory_dir.mkdir()
    report_dir.mkdir()
    extra = {
        "verify_schedule_image": IMAGE,
        "verify_schedule_namespace": NAMESPACE,
        "verify_schedule_service_account": ACCOUNT,
        "verify_schedule_name": NAME,
        "verify_schedule_only_due": True,
        "verify_schedule_extra_args": ["--tags", "cliques,imex_channel"],
        # the mount paths are this machine's directories, so that the command read back runs unchanged here
        "verify_schedule_inventory_mount_path": str(inventory_dir),
        "verify_schedule_report_mount_path": str(report_dir),
        # the verdict on the Nodes, and the refresh CronJob that keeps it current between runs
        "verify_schedule_node_verdict_rbac": True,
        "verify_schedule_refresh_schedule": REFRESH_SCHEDULE,
        # the rack label and GPUs per tray come from the inventory (inventories/sim), as a run by hand takes them
        "verify_schedule_verify_vars": {
            "gpu_fabric_verify_cliques": ["rack0"],
            "gpu_fabric_verify_namespace_prefix": "sched",
            "verify_imex_channel_poll_delay": 1,
            "verify_imex_channel_timeout": 120,
            # the checks this run makes are the site's required ones, so that a tray it verifies passes
            "gpu_fabric_verify_required_checks": ["cliques", "imex_channel"],
            "gpu_fabric_verify_label_nodes": True,
            "gpu_fabric_verify_node_condition": True,
        },
    }
    first = schedule_playbook(sim_rack, extra)
    assert changed(first) > 0
    second = schedule_playbook(sim_rack, extra)
    assert changed(second) == 0, f"a second run of the schedule changed something:\n{second.stdout[-6000:]}"

    cronjob = sim_rack.get_json("cronjob", "-n", NAMESPACE, NAME)
    spec = cronjob["spec"]
    assert (spec["concurrencyPolicy"], spec["startingDeadlineSeconds"]) == ("Forbid", 600)
    pod = spec["jobTemplate"]["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == ACCOUNT
    assert pod["volumes"][1] == {"name": "report", "persistentVolumeClaim": {"claimName": "gpu-fabric-verify-report"}}
    container = pod["containers"][0]
    command = container["command"]
    assert command == [
        "ansible-playbook",
        "-i",
        f"{inventory_dir}/inventory.yml",
        "gpu_fabric.mnnvl.verify",
        "-e",
        "gpu_fabric_verify_only_due=true",
        "--tags",
        "cliques,imex_channel",
    ]
    assert container["image"] == IMAGE
    binding = sim_rack.get_json("clusterrolebinding", "gpu-fabric-verify")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": ACCOUNT, "namespace": NAMESPACE}]
    policy = sim_rack.get_json("validatingadmissionpolicy", "gpu-fabric-verify-own-namespaces")
    assert f"system:serviceaccount:{NAMESPACE}:{ACCOUNT}" in policy["spec"]["matchConditions"][0]["expression"]
    priority = sim_rack.get_json("priorityclass", "gpu-fabric-verify")
    assert (priority["value"], priority["preemptionPolicy"], priority.get("globalDefault", False)) == (
        -1000000,
        "Never",
        False,
    )

    # the pod's view: the ConfigMap's inventory at its mount path, the ServiceAccount's token, the command as it is
    config = sim_rack.get_json("configmap", "-n", NAMESPACE, NAME)
    (inventory_dir / "inventory.yml").write_text(config["data"]["inventory.yml"])
    # as Ansible reads it: the site's values are tagged !unsafe (data, never templated again)
    job_vars = from_yaml(config["data"]["inventory.yml"])["all"]["vars"]
    assert job_vars["gpu_fabric_report_dir"] == str(report_dir)
    # the inventory's verify variables, carried; the other stages' (chart sources, driver owner) are not
    assert (job_vars["gpu_fabric_rack_label"], job_vars["gpu_fabric_gpus_per_tray"]) == ("gpu-fabric.sim/rack", 4)
    assert job_vars["verify_nvbandwidth_poll_delay"] == 1
    assert "gpu_operator_chart_repo_url" not in job_vars and "gpu_fabric_driver_owner" not in job_vars
    # a token of the ServiceAccount the role made (TokenRequest), as the pod's projected token would be
    token = sim_rack.kubectl("-n", NAMESPACE, "create", "token", ACCOUNT, "--duration=1h").stdout.strip()
    kubeconfig = accounts.kubeconfig(sim_rack.kubeconfig, tmp_path / "kc", {"token": token}, ACCOUNT)
    env = {k: v for k, v in sim_rack.env.items() if not k.startswith(("K8S_AUTH_", "KUBECONFIG"))}
    env.update({e["name"]: e["value"] for e in container.get("env", []) if e["name"] != "HOME"})
    env["K8S_AUTH_KUBECONFIG"] = str(kubeconfig)
    env["PATH"] = f"{REPO_ROOT / '.venv' / 'bin'}{os.pathsep}{env.get('PATH', '')}"

    # the scheduled run plans what a run by hand from the same inventory and variables plans: the same racks under
    # the same names, trays, checks and settings (both in check mode, before any verdict is written)
    json_output = {"ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json", "ANSIBLE_NOCOLOR": "1"}
    scheduled = subprocess.run(
        [*command, "--check"],
        cwd=REPO_ROOT,
        env=dict(env, **json_output),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    by_hand = subprocess.run(
        [
            str(REPO_ROOT / ".venv" / "bin" / "ansible-playbook"),
            "-i",
            str(REPO_ROOT / "inventories" / "sim"),
            str(REPO_ROOT / "playbooks" / "verify.yml"),
            "--check",
            "-e",
            json.dumps({**extra["verify_schedule_verify_vars"], "gpu_fabric_report_dir": str(report_dir)}),
            *command[command.index("gpu_fabric.mnnvl.verify") + 1 :],
        ],
        cwd=REPO_ROOT,
        env=dict(sim_rack.env, **json_output),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    # the IMEX channel role plans nothing in check mode (it would create a ComputeDomain per rack); the clique
    # check's plan holds what both resolve: the racks by name, their trays and due trays, the module's settings
    planned = fabric_verify_plans(scheduled)
    assert sorted(planned) == ["cliques"], planned
    racks = planned["cliques"]["racks"]
    assert [(rack["rack"], len(rack["nodes"]), len(rack["due"])) for rack in racks] == [("rack0", 18, 18)], racks
    assert planned == fabric_verify_plans(by_hand)

    run = subprocess.run(command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=900, check=False)
    assert run.returncode == 0, run.stdout[-8000:] + run.stderr[-2000:]
    report = json.loads((report_dir / "report.json").read_text())
    assert report, "the report is empty"
    # the rack under the site's name (the carried rack label), not clique-<uuid>-<id>
    record = json.loads((report_dir / "records" / "imex_channel" / "rack0.json").read_text())
    assert record["outcome"] == "passed", record["summary"]
    pods = record["details"]["pods"]
    assert pods and {(p["priority_class"], p["priority"]) for p in pods} == {("gpu-fabric-verify", -1000000)}

    # the refresh CronJob: its schedule, refresh_state's command run as the job runs it, after a verdict expired
    try:
        refresh = sim_rack.get_json("cronjob", "-n", NAMESPACE, f"{NAME}-refresh")
        assert refresh["spec"]["schedule"] == REFRESH_SCHEDULE
        refresh_pod = refresh["spec"]["jobTemplate"]["spec"]["template"]["spec"]
        assert (refresh_pod["serviceAccountName"], refresh_pod["containers"][0]["image"]) == (ACCOUNT, IMAGE)
        refresh_command = refresh_pod["containers"][0]["command"]
        assert refresh_command == [
            "ansible-playbook",
            "-i",
            f"{inventory_dir}/inventory.yml",
            "gpu_fabric.mnnvl.refresh_state",
        ]
        trays = sorted(
            n.split("/", 1)[1] for n in sim_rack.kubectl("get", "nodes", "-l", RACK_TRAYS, "-o", "name").stdout.split()
        )
        expired, kept = trays[0], trays[1]
        assert (condition(sim_rack, expired)["status"], condition(sim_rack, kept)["status"]) == ("True", "True")
        node = sim_rack.get_json("node", expired)
        state = json.loads(node["metadata"]["annotations"][ANNOTATION])
        # the imex_channel verdict held zero hours: expired by now, as after its validity
        state["checks"]["imex_channel"]["valid_until"] = state["checks"]["imex_channel"]["time"]
        sim_rack.kubectl("annotate", "node", expired, "--overwrite", f"{ANNOTATION}={json.dumps(state)}")
        refreshed = subprocess.run(
            refresh_command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=600, check=False
        )
        assert refreshed.returncode == 0, refreshed.stdout[-8000:] + refreshed.stderr[-2000:]
        turned = condition(sim_rack, expired)
        assert (turned["status"], turned["reason"]) == ("Unknown", "VerdictExpired"), turned
        assert sim_rack.get_json("node", expired)["metadata"]["labels"][LABEL] == "incomplete"
        assert (condition(sim_rack, kept)["status"], condition(sim_rack, kept)["reason"]) == ("True", "Passed")
    finally:
        clear_verdicts(sim_rack)

    # state=absent removes every object of it
    assert managed(sim_rack)
    absent = dict(extra, verify_schedule_state="absent")
    assert changed(schedule_playbook(sim_rack, absent)) > 0
    assert managed(sim_rack) == []
    assert sim_rack.kubectl("get", "cronjob", "-n", NAMESPACE, f"{NAME}-refresh", check=False).returncode != 0
    assert sim_rack.kubectl("get", "priorityclass", "gpu-fabric-verify", check=False).returncode != 0
    sim_rack.kubectl("delete", "namespace", NAMESPACE, "--wait=false")
