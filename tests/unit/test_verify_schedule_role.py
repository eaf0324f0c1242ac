# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The role verify_schedule as playbooks/schedule.yml runs it, with no cluster: the objects it renders from its
variables as a user gives them (extra vars as JSON or as key=value text), stopped where it first reaches the API
server (the applying identity's kubeconfig is no file)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, Tuple

import pytest

REPO = Path(__file__).resolve().parents[2]
ANSIBLE_PLAYBOOK = str(Path(sys.executable).parent / "ansible-playbook")

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


def controller(tmp_path: Path) -> Tuple[Path, Dict[str, str]]:
    """An inventory of this machine as the controller, and the environment of a playbook run with no connection of
    the caller's (no K8S_AUTH_*, no KUBECONFIG)."""
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(
        "k8s_controller:\n  hosts:\n    localhost:\n      ansible_connection: local\n"
        f"      ansible_python_interpreter: {sys.executable}\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("K8S_AUTH_", "KUBECONFIG"))}
    env.update(ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    return inventory, env


def rendered(tmp_path: Path, *extra: str) -> dict:
    """The schedule's objects as the role renders them (its set_fact), with ``extra`` as ``-e`` arguments."""
    (tmp_path / "callbacks").mkdir()
    (tmp_path / "callbacks" / "capture.py").write_text(CAPTURE)
    inventory, env = controller(tmp_path)
    env.update(
        ANSIBLE_CALLBACK_PLUGINS=str(tmp_path / "callbacks"),
        ANSIBLE_CALLBACKS_ENABLED="capture",
        CAPTURE_FILE=str(tmp_path / "tasks.jsonl"),
    )
    base = {"verify_schedule_image": "registry.example.com/gpu-fabric-ee:0.4.0"}
    base["verify_schedule_kubeconfig"] = str(tmp_path / "no-kubeconfig")
    args = [ANSIBLE_PLAYBOOK, "-i", str(inventory), str(REPO / "playbooks" / "schedule.yml"), "-e", json.dumps(base)]
    for value in extra:
        args += ["-e", value]
    run = subprocess.run(args, cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False)
    capture = tmp_path / "tasks.jsonl"
    assert capture.is_file(), run.stdout[-4000:] + run.stderr[-2000:]
    tasks = [json.loads(line) for line in capture.read_text().splitlines()]
    facts = [t["result"]["ansible_facts"]["verify_schedule_objects"] for t in tasks if "set_fact" in t["action"]]
    assert facts, run.stdout[-4000:] + run.stderr[-2000:]
    return facts[-1]


def test_with_the_node_verdict_rights_the_role_renders_the_hourly_refresh_cronjob(tmp_path):
    objects = rendered(tmp_path, json.dumps({"verify_schedule_node_verdict_rbac": True}))
    (refresh,) = objects["refresh"]
    assert (refresh["metadata"]["name"], refresh["spec"]["schedule"]) == ("gpu-fabric-verify-refresh", "0 * * * *")
    assert refresh["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["command"][-1] == (
        "gpu_fabric.mnnvl.refresh_state"
    )
    assert objects["removed"] == []
    assert [o["kind"] for o in objects["schedule"]] == ["ConfigMap", "CronJob"]


@pytest.mark.parametrize(
    "refresh",
    [
        json.dumps({"verify_schedule_refresh_schedule": False}),
        json.dumps({"verify_schedule_refresh_schedule": ""}),
        "verify_schedule_refresh_schedule=false",
    ],
)
def test_a_refresh_schedule_of_false_or_empty_leaves_the_refresh_cronjob_out_and_removes_an_earlier_one(
    tmp_path, refresh
):
    objects = rendered(tmp_path, json.dumps({"verify_schedule_node_verdict_rbac": True}), refresh)
    assert objects["refresh"] == []
    assert objects["removed"] == [
        {
            "apiVersion": "batch/v1",
            "kind": "CronJob",
            "metadata": {"name": "gpu-fabric-verify-refresh", "namespace": "gpu-fabric"},
        }
    ]


# A kubeconfig that loads, of an API server nothing listens on.
CLOSED_PORT = """\
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
"""


def failures(tmp_path: Path, kubeconfig: Path, state: str, **settings: Any) -> list:
    """The message of every failed task of playbooks/schedule.yml run with ``kubeconfig`` in ``state``."""
    inventory, env = controller(tmp_path)
    env.update(ANSIBLE_STDOUT_CALLBACK="ansible.posix.json")
    variables = {
        "verify_schedule_image": "registry.example.com/gpu-fabric-ee:0.4.0",
        "verify_schedule_kubeconfig": str(kubeconfig),
        "verify_schedule_state": state,
        "verify_schedule_api_patience": 0,
        **settings,
    }
    run = subprocess.run(
        [ANSIBLE_PLAYBOOK, "-i", str(inventory), str(REPO / "playbooks" / "schedule.yml"), "-e", json.dumps(variables)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == 2, run.stdout[-3000:]
    return [
        result["msg"]
        for play in json.loads(run.stdout)["plays"]
        for task in play["tasks"]
        for result in task["hosts"].values()
        if result.get("failed")
    ]


@pytest.mark.parametrize("state", ["present", "absent"])
def test_an_api_server_that_does_not_answer_is_one_line_naming_it_in_both_states(tmp_path, state):
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(CLOSED_PORT)
    # the removal said urllib3's "HTTPSConnectionPool(host='127.0.0.1', port=1): Max retries exceeded ..." before
    assert failures(tmp_path, kubeconfig, state) == [
        "cannot reach the Kubernetes API at https://127.0.0.1:1: connection refused; nothing was changed; check that "
        "the API server runs and that the kubeconfig (gpu_fabric_kubeconfig, K8S_AUTH_KUBECONFIG) or the host options "
        "point at it, then run it again"
    ]


def test_a_kubeconfig_that_is_no_file_is_named_with_its_path(tmp_path):
    # before: "Could not create API client: Invalid kube-config file. No configuration found."
    assert failures(tmp_path, tmp_path / "absent", "present") == [
        f"the kubeconfig {tmp_path / 'absent'} (K8S_AUTH_KUBECONFIG) does not exist: set K8S_AUTH_KUBECONFIG to the "
        "kubeconfig file of the cluster"
    ]


def test_a_setting_the_schedule_cannot_be_made_from_is_its_own_line(tmp_path):
    # before: "Finalization of task args for 'ansible.builtin.set_fact' failed: Error while resolving value for
    # 'verify_schedule_objects': The filter plugin 'gpu_fabric.mnnvl.verify_schedule_objects' failed: ..."
    assert failures(tmp_path, tmp_path / "absent", "present", verify_schedule_extra_args=[""]) == [
        "verify_schedule_extra_args holds an empty argument"
    ]
