# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The scheduled verification (role verify_schedule, playbooks/schedule.yml) on the simulated rack.

The role applies its objects as admin (a second run changes nothing); then the exact command of the CronJob's
container, read back from the API server, runs here as the CronJob's ServiceAccount: a kubeconfig holding only a
token of it (TokenRequest) stands for the pod's in-cluster account, the inventory is the ConfigMap's (it carries
the verify variables of inventories/sim: the rack label names the rack rack0, as a run by hand does), and a
temporary directory stands for the report volume (the role mounts both at the paths given, so the command runs
unchanged). KWOK runs no CronJob pod, so nothing pulls the image. The checks' pods carried the collection's
PriorityClass as the API admitted them (the IMEX channel record's pods). Then state=absent removes everything.
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


def managed(sim_rack) -> list[str]:
    kinds = "cronjobs,configmaps,serviceaccounts,roles,rolebindings"
    names = sim_rack.kubectl("get", kinds, "-A", "-l", MANAGED, "-o", "name").stdout.split()
    cluster = (
        "clusterroles,clusterrolebindings,validatingadmissionpolicies,validatingadmissionpolicybindings,priorityclasses"
    )
    return sorted(names + sim_rack.kubectl("get", cluster, "-l", MANAGED, "-o", "name").stdout.split())


def test_the_schedule_applies_and_its_command_passes_as_its_service_account(cluster_stage, tmp_path):
    sim_rack = cluster_stage
    # the schedule's namespace stays after state=absent (it may hold the report's volume): an earlier run's goes
    sim_rack.kubectl("delete", "namespace", NAMESPACE, "--ignore-not-found", "--wait=true")
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
        # the rack label and GPUs per tray come from the inventory (inventories/sim), as a run by hand takes them
        "verify_schedule_verify_vars": {
            "gpu_fabric_verify_cliques": ["rack0"],
            "gpu_fabric_verify_namespace_prefix": "sched",
            "verify_imex_channel_poll_delay": 1,
            "verify_imex_channel_timeout": 120,
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
    run = subprocess.run(command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=900, check=False)
    assert run.returncode == 0, run.stdout[-8000:] + run.stderr[-2000:]
    report = json.loads((report_dir / "report.json").read_text())
    assert report, "the report is empty"
    # the rack under the site's name (the carried rack label), not clique-<uuid>-<id>
    record = json.loads((report_dir / "records" / "imex_channel" / "rack0.json").read_text())
    assert record["outcome"] == "passed", record["summary"]
    pods = record["details"]["pods"]
    assert pods and {(p["priority_class"], p["priority"]) for p in pods} == {("gpu-fabric-verify", -1000000)}

    # state=absent removes every object of it
    assert managed(sim_rack)
    absent = dict(extra, verify_schedule_state="absent")
    assert changed(schedule_playbook(sim_rack, absent)) > 0
    assert managed(sim_rack) == []
    assert sim_rack.kubectl("get", "priorityclass", "gpu-fabric-verify", check=False).returncode != 0
    sim_rack.kubectl("delete", "namespace", NAMESPACE, "--wait=false")
