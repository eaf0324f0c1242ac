# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The scheduled run plans what a run by hand plans, from the same inventory, with no cluster.

A site's inventory (racks named by a node label, trays per rack, GPUs per tray, an image built from a site
variable, thresholds, NCCL and a check without a role of its own with its settings) applies the schedule: the
role renders its objects (playbooks/schedule.yml, stopped where it first reaches the API server) and the job's
inventory is read from its ConfigMap. Then playbooks/verify.yml runs twice, by hand from the site's inventory and
as the CronJob's command with the job's inventory. Each run's arguments of every check are what its
``fabric_verify`` task was given (a callback keeps them; the API server is a stand-in that answers the verify
preflight's one question and is unavailable (503) to every other call, so each check only says it could not
reach it). They are the same but for the report's place and the run id; and ``fabric_verify``
in check mode on one fake fleet plans the same racks, under the site's names, with the same trays and the same
objects, images and bars from both.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest
from ansible_collections.gpu_fabric.mnnvl.plugins.modules import fabric_verify

from tests.unit.plugins.modules.conftest import unavailable_api_kubeconfig
from tests.unit.plugins.modules.runner import run_module

REPO = Path(__file__).resolve().parents[4]
CHECKS = ["cliques", "imex_channel", "nvbandwidth", "nccl", "gpu_health"]
# the report's place and the run's name are the job's own (the volume; each run names itself)
OWN = {"records_dir", "history_dir", "run_id"}

SITE_VARS = """\
site_registry: registry.example.com/mirror
gpu_fabric_rack_label: example.com/rack
gpu_fabric_trays_per_clique: 2
gpu_fabric_gpus_per_tray: 4
gpu_fabric_verify_api_patience: 1
gpu_fabric_verify_namespace_prefix: site-verify
gpu_fabric_verify_nccl: true
gpu_fabric_verify_checks: [gpu_health]
gpu_fabric_verify_settings: {gpu_health: {image: "{{ site_registry }}/ubuntu:22.04", xid_window_hours: 48}}
gpu_fabric_verify_history: false
verify_nvbandwidth_image: "{{ site_registry }}/nvbandwidth:v0.7"
verify_nvbandwidth_min_fraction_of_peak: 0.8
verify_imex_channel_image: "{{ site_registry }}/busybox:1.36"
verify_nccl_min_busbw_gbps: 300
verify_nccl_image: "{{ site_registry }}/nccl-tests:2.13"
"""

CAPTURE = '''\
import json
import os

from ansible.plugins.callback import CallbackBase


class CallbackModule(CallbackBase):
    """Keeps every task's action and result, one JSON line each, in $CAPTURE_FILE."""

    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "capture"
    CALLBACK_NEEDS_ENABLED = True

    def _keep(self, result):
        with open(os.environ["CAPTURE_FILE"], "a", encoding="utf-8") as out:
            out.write(json.dumps({"action": result._task.action, "result": result._result}, default=str) + "\\n")

    v2_runner_on_ok = v2_runner_on_failed = _keep
'''


def playbook(args, tmp_path: Path, name: str, kubeconfig: Path) -> subprocess.Popen:
    """ansible-playbook with ``args`` from the repository, started; :func:`tasks_of` waits for it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("K8S_AUTH_", "KUBECONFIG"))}
    env.update(
        ANSIBLE_CONFIG=str(REPO / "ansible.cfg"),
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_CALLBACK_PLUGINS=str(tmp_path / "callbacks"),
        ANSIBLE_CALLBACKS_ENABLED="capture",
        CAPTURE_FILE=str(tmp_path / f"{name}.jsonl"),
        # the job's pod has no kubeconfig: its client takes the pod's account, here a port nothing listens on
        K8S_AUTH_KUBECONFIG=str(kubeconfig),
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    )
    output = (tmp_path / f"{name}.out").open("w")
    return subprocess.Popen(args, cwd=REPO, env=env, stdout=output, stderr=subprocess.STDOUT, text=True)


def tasks_of(run: subprocess.Popen, tmp_path: Path, name: str):
    """Every task's action and result of a playbook run, and the end of its output."""
    run.wait(timeout=300)
    output = (tmp_path / f"{name}.out").read_text()[-6000:]
    capture = tmp_path / f"{name}.jsonl"
    assert capture.is_file(), output
    return [json.loads(line) for line in capture.read_text().splitlines()], output


def checks_args(tasks, output: str) -> dict:
    """Each check's ``fabric_verify`` arguments, by check."""
    found = {}
    for task in tasks:
        if task["action"] == "gpu_fabric.mnnvl.fabric_verify":
            args = task["result"]["invocation"]["module_args"]
            found[args["check"]] = args
    assert sorted(found) == sorted(CHECKS), output
    return found


def tray(rack: str, index: int) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": f"gb200-{rack}-t{index}",
            "labels": {
                "nvidia.com/gpu.present": "true",
                "nvidia.com/gpu.product": "NVIDIA-GB200",
                "nvidia.com/gpu.clique": f"6f1e2d3c-{rack}.1",
                "example.com/rack": rack,
            },
        },
        "spec": {},
        "status": {
            "allocatable": {"nvidia.com/gpu": "4"},
            "capacity": {"nvidia.com/gpu": "4"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


class Fleet:
    """kubernetes.core's client as fabric_verify uses it: two racks of two trays, no pods, no API group."""

    def __init__(self):
        self.configuration = types.SimpleNamespace(host="https://fleet.example:6443")
        self.client = types.SimpleNamespace(version={"kubernetes": {"gitVersion": "v1.34.2"}}, request=self.groups)

    def resource(self, kind, api_version):
        return kind

    def get(self, resource, serialize=True, **params):
        items = [tray(rack, i) for rack in ("rack-a", "rack-b") for i in range(2)] if resource == "Node" else []
        return {"kind": f"{resource}List", "metadata": {}, "items": items}

    def groups(self, method, path):
        return {"kind": "APIGroupList", "groups": []}


def plan(args: dict, monkeypatch) -> dict:
    """fabric_verify in check mode on the fake fleet, with a run's arguments as its task gave them."""
    monkeypatch.setattr(fabric_verify, "get_api_client", lambda module: Fleet())
    given = {k: v for k, v in copy.deepcopy(args).items() if v is not None}
    result = run_module(fabric_verify.main, given, check_mode=True)
    assert not result["failed"], result.get("msg")
    # the time a record was made is the one thing two plans of the same fleet may differ in
    for record in result["records"]:
        for key in ("started", "finished", "made", "valid_until"):
            record.pop(key, None)
    return result


@pytest.fixture(scope="module")
def runs(tmp_path_factory, unavailable_api):
    """The arguments of every check: from the run by hand, from the scheduled run; and the job's inventory."""
    tmp_path = tmp_path_factory.mktemp("schedule_plan")
    (tmp_path / "callbacks").mkdir()
    (tmp_path / "callbacks" / "capture.py").write_text(CAPTURE)
    kubeconfig = unavailable_api_kubeconfig(tmp_path / "kubeconfig", unavailable_api)
    site = tmp_path / "site"
    (site / "group_vars").mkdir(parents=True)
    (site / "hosts.yml").write_text(
        "k8s_controller:\n  hosts:\n    localhost:\n      ansible_connection: local\n"
        f"      ansible_python_interpreter: {sys.executable}\n"
    )
    (site / "group_vars" / "all.yml").write_text(
        SITE_VARS + f"gpu_fabric_kubeconfig: {kubeconfig}\ngpu_fabric_report_dir: {tmp_path / 'hand-report'}\n"
    )
    job_dir, job_report = tmp_path / "job", tmp_path / "job-report"
    job_dir.mkdir()
    ansible_playbook = str(Path(sys.executable).parent / "ansible-playbook")

    # the schedule, rendered by its role from the site's inventory (the apply then meets the closed port)
    extra = {
        "verify_schedule_image": "registry.example.com/gpu-fabric-ee:0.4.0",
        "verify_schedule_inventory_mount_path": str(job_dir),
        "verify_schedule_report_mount_path": str(job_report),
    }
    # the role stops at its first call of the API server: this identity's kubeconfig is no file
    extra["verify_schedule_kubeconfig"] = str(tmp_path / "no-kubeconfig")
    schedule = [ansible_playbook, "-i", str(site), str(REPO / "playbooks" / "schedule.yml"), "-e", json.dumps(extra)]
    tasks, output = tasks_of(playbook(schedule, tmp_path, "schedule", kubeconfig), tmp_path, "schedule")
    rendered = [t["result"]["ansible_facts"]["verify_schedule_objects"] for t in tasks if "set_fact" in t["action"]]
    assert rendered, output
    config, cronjob = rendered[-1]["schedule"]
    (job_dir / "inventory.yml").write_text(config["data"]["inventory.yml"])
    command = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["command"]

    # the two runs at once: by hand from the site's inventory, and the CronJob's command as it is
    hand = playbook([ansible_playbook, "-i", str(site), "gpu_fabric.mnnvl.verify"], tmp_path, "hand", kubeconfig)
    job = playbook(command, tmp_path, "job", kubeconfig)
    hand_tasks, hand_output = tasks_of(hand, tmp_path, "hand")
    job_tasks, job_output = tasks_of(job, tmp_path, "job")
    return {
        "hand": checks_args(hand_tasks, hand_output),
        "scheduled": checks_args(job_tasks, job_output),
        "inventory": config["data"]["inventory.yml"],
        "job_report": job_report,
        "hand_report": tmp_path / "hand-report",
    }


def test_every_check_gets_the_same_arguments_but_the_reports_place_and_the_run_id(runs):
    hand, scheduled = runs["hand"], runs["scheduled"]
    for check in CHECKS:
        names = set(hand[check]) | set(scheduled[check])
        differ = {name for name in names if hand[check].get(name) != scheduled[check].get(name)}
        assert differ - OWN == set(), check
        assert scheduled[check]["records_dir"] == f"{runs['job_report']}/records"
        assert hand[check]["records_dir"] == f"{runs['hand_report']}/records"
    # the site's values, resolved where the schedule was applied, as the hand run resolves them
    assert scheduled["nvbandwidth"]["rack_label"] == "example.com/rack"
    assert (scheduled["nvbandwidth"]["trays_per_clique"], scheduled["nvbandwidth"]["gpus_per_tray"]) == (2, 4)
    bandwidth = scheduled["nvbandwidth"]["settings"]["nvbandwidth"]
    assert (bandwidth["image"], bandwidth["min_fraction_of_peak"]) == (
        "registry.example.com/mirror/nvbandwidth:v0.7",
        0.8,
    )
    assert scheduled["nccl"]["settings"]["nccl"]["min_busbw_gbps"] == 300
    assert scheduled["gpu_health"]["settings"]["gpu_health"] == {
        "image": "registry.example.com/mirror/ubuntu:22.04",
        "xid_window_hours": 48,
    }
    assert "{{" not in runs["inventory"].replace("'{{ ansible_playbook_python }}'", "")


def test_the_scheduled_run_plans_the_same_racks_trays_and_objects_under_the_sites_names(runs, monkeypatch):
    for check in CHECKS:
        hand = plan(runs["hand"][check], monkeypatch)
        scheduled = plan(runs["scheduled"][check], monkeypatch)
        assert [r["rack"] for r in scheduled["racks"]] == ["rack-a", "rack-b"], check
        assert scheduled["racks"] == hand["racks"], check
        assert scheduled["summary"] == hand["summary"], check
        for record in hand["records"] + scheduled["records"]:
            record.pop("run_id", None)
        assert scheduled["records"] == hand["records"], check
