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


def test_helm_times_with_nanoseconds_are_read_to_the_microsecond():
    assert helm_release.parse_time("2026-12-01T12:59:01.599972874Z") == datetime(
        2026, 12, 1, 12, 59, 1, 599972, tzinfo=timezone.utc
    )
    assert helm_release.parse_time("2026-12-01T12:59:01+02:00").utcoffset() == timedelta(hours=2)
    assert helm_release.parse_time("yesterday") is None


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
        "--kube-token",
        "token-1",
        "--kube-insecure-skip-tls-verify",
        "--kube-ca-file",
        "/etc/k8s/ca.crt",
    ]
    assert "--kube-insecure-skip-tls-verify" not in helm_release.connection_args({"validate_certs": True})
