# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A pending Helm release: another run's live operation (wait) or an interrupted one (roll back, uninstall)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import helm_release

NOW = datetime(2026, 12, 1, 13, 0, 0, tzinfo=timezone.utc)
# `helm history nvidia-dra-driver-gpu -o json` (Helm 3.19.5) after an install and an upgrade.
DEPLOYED = [
    {
        "revision": 1,
        "updated": "2026-12-01T12:40:01.599972874Z",
        "status": "superseded",
        "chart": "nvidia-dra-driver-gpu-25.8.0",
        "app_version": "25.8.0",
        "description": "Install complete",
    },
    {
        "revision": 2,
        "updated": "2026-12-01T12:50:11.000000001Z",
        "status": "deployed",
        "chart": "nvidia-dra-driver-gpu-25.8.0",
        "app_version": "25.8.0",
        "description": "Upgrade complete",
    },
]


def pending(status: str, age: float, revision: int = 3) -> dict:
    when = (NOW - timedelta(seconds=age)).strftime("%Y-%m-%dT%H:%M:%S.%f") + "123Z"
    return {"revision": revision, "updated": when, "status": status, "chart": "nvidia-dra-driver-gpu-25.8.0"}


def decide(entries: list, stale_after: float = 660):
    return helm_release.decide("ns/rel", helm_release.parse_history(json.dumps(entries)), NOW, stale_after)


def test_nothing_pending_needs_nothing():
    assert decide(DEPLOYED).kind == "none"
    assert decide([]).kind == "none"
    failed = [*DEPLOYED, {**pending("failed", 5), "status": "failed"}]
    assert decide(failed).kind == "none"  # a failed upgrade is Helm's to retry, not a lock


def test_a_young_pending_revision_is_another_runs_live_operation():
    action = decide([*DEPLOYED, pending("pending-upgrade", 30)])
    assert action.kind == "wait"
    assert action.message.startswith("release ns/rel revision 3 (nvidia-dra-driver-gpu-25.8.0) is pending-upgrade")
    assert "another Helm operation is running on it" in action.message


@pytest.mark.parametrize("status", ["pending-upgrade", "pending-rollback"])
def test_an_old_pending_revision_is_rolled_back_to_the_last_good_one(status):
    action = decide([*DEPLOYED, pending(status, 661)])
    assert (action.kind, action.revision) == ("rollback", 2)
    assert action.message.endswith("an interrupted one; rolling back to revision 2")


def test_an_interrupted_first_install_is_uninstalled():
    action = decide([pending("pending-install", 700, revision=1)])
    assert action.kind == "uninstall" and action.revision is None
    assert "an interrupted install" in action.message


def test_a_pending_revision_without_a_time_is_taken_as_interrupted():
    entry = {**pending("pending-install", 0, revision=1), "updated": ""}
    assert decide([entry]).kind == "uninstall"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("Error: something", "helm history printed no JSON"),
        ('{"revision": 1}', "not a list of revisions"),
        ('[{"status": "deployed"}]', "a revision without a number"),
    ],
)
def test_history_that_is_not_helms_json_is_refused_in_one_line(text, message):
    with pytest.raises(helm_release.HelmHistoryError, match=message):
        helm_release.parse_history(text)


def test_a_missing_release_is_recognised_from_helms_error():
    assert helm_release.history_missing("Error: release: not found\n")
    assert not helm_release.history_missing("Error: Kubernetes cluster unreachable")


def test_connection_args_follow_the_kubernetes_core_helm_options():
    assert helm_release.connection_args({"context": None, "host": None, "validate_certs": None}) == []
    params = {
        "context": "admin@rack",
        "host": "https://127.0.0.1:6443",
        "api_key": "token-1",
        "validate_certs": False,
        "ca_cert": "/etc/k8s/ca.crt",
    }
    assert helm_release.connection_args(params) == [
        "--kube-context",
        "admin@rack",
        "--kube-apiserver",
        "https://127.0.0.1:6443",
        "--kube-insecure-skip-tls-verify",
        "--kube-ca-file",
        "/etc/k8s/ca.crt",
    ]
    assert "--kube-insecure-skip-tls-verify" not in helm_release.connection_args({"validate_certs": True})


def test_helm_connection_takes_each_option_or_else_its_k8s_auth_variable():
    environ = {
        "K8S_AUTH_KUBECONFIG": "/etc/gpu-fabric/admin.kubeconfig",
        "K8S_AUTH_CONTEXT": "env-context",
        "K8S_AUTH_VERIFY_SSL": "no",
    }
    flags, env = helm_release.helm_connection({"context": "admin@rack", "kubeconfig": None}, environ)
    assert flags == ["--kube-context", "admin@rack", "--kube-insecure-skip-tls-verify"]
    assert env == {"KUBECONFIG": "/etc/gpu-fabric/admin.kubeconfig"}
    flags, env = helm_release.helm_connection({"kubeconfig": "/k", "validate_certs": True}, environ)
    assert flags == ["--kube-context", "env-context"]
    assert env == {"KUBECONFIG": "/k"}
    # a kubeconfig given as a mapping is the API client's alone; Helm reads its own default
    assert helm_release.helm_connection({"kubeconfig": {"clusters": []}}, {}) == ([], {})


class ScriptedHelm:
    """Answers each Helm call with the next of ``answers`` (rc, stdout, stderr) and records the calls."""

    def __init__(self, *answers):
        self.answers = list(answers)
        self.calls = []

    def __call__(self, *args):
        self.calls.append(args)
        return self.answers.pop(0)


def history(*entries) -> tuple:
    return 0, json.dumps(list(entries)), ""


def settle(helm, check_mode=False, clock=None):
    sleeps = []
    done = helm_release.settle(
        helm, "rel", "ns/rel", 660, 5.0, check_mode, sleep=sleeps.append, now=clock or (lambda: NOW)
    )
    return done, sleeps


def test_settle_waits_for_a_live_operation_to_end_and_says_so():
    helm = ScriptedHelm(history(*DEPLOYED, pending("pending-upgrade", 30)), history(*DEPLOYED))
    done, sleeps = settle(helm)
    assert (done.changed, done.action, sleeps) == (False, "waited", [5.0])
    assert done.warnings == ["release ns/rel: the other operation ended after 5 s"]
    assert helm.calls == [("history", "rel", "--output", "json", "--max", "20")] * 2


def test_settle_reads_every_poll_delay_until_the_other_operation_ends():
    live = history(*DEPLOYED, pending("pending-upgrade", 30))
    helm = ScriptedHelm(live, live, live, history(*DEPLOYED))
    done, sleeps = settle(helm)
    assert (done.action, sleeps, len(helm.calls)) == ("waited", [5.0, 5.0, 5.0], 4)
    assert done.msg == "release ns/rel: the other operation ended after 15 s"


def test_settle_rolls_back_an_interrupted_upgrade_and_check_mode_only_says_it():
    stale = history(*DEPLOYED, pending("pending-upgrade", 3600))
    done = settle(ScriptedHelm(stale), check_mode=True)[0]
    assert (done.changed, done.action) == (True, "rollback")
    helm = ScriptedHelm(stale, (0, "Rollback was a success!", ""))
    done = settle(helm)[0]
    assert helm.calls[1] == ("rollback", "rel", "2", "--wait", "--timeout", "660s")
    assert done.warnings == [done.msg]


def test_settle_of_a_release_that_is_not_there_or_whose_repair_fails():
    assert settle(ScriptedHelm((1, "", "Error: release: not found")))[0].msg == "release ns/rel: not installed"
    with pytest.raises(helm_release.SettleError, match=r"helm history ns/rel failed \(rc 1\): Error: cluster down"):
        settle(ScriptedHelm((1, "", "Error:\n  cluster down\n")))
    with pytest.raises(helm_release.SettleError, match="helm uninstall failed"):
        settle(ScriptedHelm(history(pending("pending-install", 3600, revision=1)), (1, "", "Error: timed out")))


def test_settle_hands_on_the_latest_revision_it_read_unless_it_changed_the_release():
    done = settle(ScriptedHelm(history(*DEPLOYED)))[0]
    assert (done.latest.number, done.latest.status, done.latest.chart) == (
        2,
        "deployed",
        "nvidia-dra-driver-gpu-25.8.0",
    )
    assert done.latest.app_version == "25.8.0"
    waited = settle(ScriptedHelm(history(*DEPLOYED, pending("pending-upgrade", 30)), history(*DEPLOYED)))[0]
    assert waited.latest.number == 2  # the read after the other operation ended
    stale = history(*DEPLOYED, pending("pending-upgrade", 3600))
    assert settle(ScriptedHelm(stale), check_mode=True)[0].latest.status == "pending-upgrade"  # nothing was done
    assert settle(ScriptedHelm(stale, (0, "Rollback was a success!", "")))[0].latest is None  # read it again
    assert settle(ScriptedHelm((1, "", "Error: release: not found")))[0].latest is None


def test_the_latest_revision_is_one_history_entry_or_none():
    helm = ScriptedHelm(history(DEPLOYED[-1]))
    assert helm_release.latest_revision(helm, "rel", "ns/rel").number == 2
    assert helm.calls == [("history", "rel", "--output", "json", "--max", "1")]
    assert helm_release.latest_revision(ScriptedHelm((1, "", "Error: release: not found")), "rel", "ns/rel") is None
    with pytest.raises(helm_release.SettleError, match=r"helm history ns/rel failed \(rc 1\): Error: forbidden"):
        helm_release.latest_revision(ScriptedHelm((1, "", "Error: forbidden\n")), "rel", "ns/rel")
    with pytest.raises(helm_release.SettleError, match="release ns/rel: helm history printed no JSON"):
        helm_release.latest_revision(ScriptedHelm((0, "<html>", "")), "rel", "ns/rel")


def test_the_bearer_token_reaches_helm_in_its_environment_never_on_its_command_line():
    # a command line is world-readable in /proc/<pid>/cmdline; a process's environment is its owner's
    flags, env = helm_release.helm_connection({"host": "https://10.0.0.1:6443", "api_key": "secret-token"}, {})
    assert "secret-token" not in " ".join(flags)
    assert flags == ["--kube-apiserver", "https://10.0.0.1:6443"]
    assert env == {"HELM_KUBETOKEN": "secret-token"}
    flags, env = helm_release.helm_connection({}, {"K8S_AUTH_API_KEY": "env-token", "K8S_AUTH_KUBECONFIG": "/k"})
    assert "env-token" not in " ".join(flags)
    assert env == {"KUBECONFIG": "/k", "HELM_KUBETOKEN": "env-token"}
