# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""gpu_fabric.mnnvl.node_verdict against the simulated rack, run as a user runs it (``ansible localhost -m``).

The rack is shared: the test writes only to two trays of the last rack, keeps the NoSchedule taint on
for as short a time as it can, and removes its labels, annotation, taints and condition in a fixture,
whatever happened.
"""

from __future__ import annotations

import datetime
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

pytestmark = pytest.mark.sim

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT / "sim"))
from simrack import accounts, audit  # noqa: E402

LABEL = "gpu-fabric.nvidia.com/verified"
UNTIL = "gpu-fabric.nvidia.com/verified-until"
CONDITION = "GPUFabricVerified"
ANNOTATION = "gpu-fabric.nvidia.com/verification"
TAINT = "gpu-fabric.nvidia.com/unverified"
OUR_TAINT = {"key": TAINT, "value": "true", "effect": "NoSchedule"}
# Stands for a taint someone else put on the tray; PreferNoSchedule keeps the shared rack schedulable.
OTHER_TAINT = {"key": "gpu-fabric.test/keep-me", "value": "node-verdict", "effect": "PreferNoSchedule"}
# Two runs of the last hours: the module judges the verdicts at the moment it reads the nodes, so they hold now.
_HOUR_AGO = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(hours=1)
FIRST_RUN = _HOUR_AGO.strftime("%Y-%m-%dT%H:%M:%SZ")
SECOND_RUN = (_HOUR_AGO + datetime.timedelta(minutes=40)).strftime("%Y-%m-%dT%H:%M:%SZ")
THIRD_RUN = (_HOUR_AGO + datetime.timedelta(minutes=50)).strftime("%Y-%m-%dT%H:%M:%SZ")
# The site of these tests requires the bandwidth check alone: its pass makes a tray pass.
REQUIRED = {"required_checks": ["nvbandwidth"]}
FAILED_SUMMARY = "rack1 nvbandwidth: 1 of 56 GPU pairs below 765.00 GB/s: 12->5 402.11 GB/s"


def last_rack_trays(sim_rack) -> tuple[str, str, str]:
    """Three trays of the highest-numbered rack: the one that fails, the one that passes, one skipped."""
    names = sorted(
        (item["metadata"]["name"] for item in sim_rack.get_json("nodes", "-l", "type=kwok")["items"]),
        key=lambda name: (
            tuple(int(part) for part in name.removeprefix("gb200-r").split("-t"))
            if name.startswith("gb200-r")
            else (-1, -1)
        ),
    )
    rack = names[-1].split("-t")[0]
    trays = [name for name in names if name.startswith(f"{rack}-t")]
    assert len(trays) >= 3, f"need 3 trays in {rack}, found {trays}"
    return trays[-1], trays[-2], trays[-3]


def clear(sim_rack, node: str) -> None:
    sim_rack.kubectl("label", "node", node, f"{LABEL}-", f"{UNTIL}-", check=False)
    if condition(sim_rack, node) is not None:
        sim_rack.kubectl(
            "patch",
            "node",
            node,
            "--subresource=status",
            "--type=strategic",
            "-p",
            json.dumps({"status": {"conditions": [{"type": CONDITION, "$patch": "delete"}]}}),
        )
    sim_rack.kubectl("annotate", "node", node, f"{ANNOTATION}-", check=False)
    sim_rack.kubectl("taint", "node", node, f"{TAINT}-", check=False)
    sim_rack.kubectl("taint", "node", node, f"{OTHER_TAINT['key']}-", check=False)


@pytest.fixture
def trays(sim_rack):
    names = last_rack_trays(sim_rack)
    for node in names:
        clear(sim_rack, node)
    try:
        yield names
    finally:
        for node in names:
            clear(sim_rack, node)


def node_verdict(sim_rack, args: dict[str, Any], *flags: str, kubeconfig: Path | None = None) -> dict[str, Any]:
    """One ``ansible localhost -m gpu_fabric.mnnvl.node_verdict`` (as the admin, or with ``kubeconfig``); the
    module's result."""
    env = dict(sim_rack.env)
    if kubeconfig is not None:
        env.update(K8S_AUTH_KUBECONFIG=str(kubeconfig), KUBECONFIG=str(kubeconfig))
    env.update(
        ANSIBLE_LOAD_CALLBACK_PLUGINS="1",
        ANSIBLE_STDOUT_CALLBACK="ansible.posix.json",
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_LOCALHOST_WARNING="0",
        ANSIBLE_INVENTORY_UNPARSED_WARNING="0",
    )
    process = subprocess.run(
        [
            str(REPO_ROOT / ".venv" / "bin" / "ansible"),
            "localhost",
            "-m",
            "gpu_fabric.mnnvl.node_verdict",
            "-a",
            json.dumps(args),
            *flags,
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO_ROOT,
        timeout=180,
        check=False,
    )
    assert process.stdout.strip(), f"no output (exit {process.returncode}):\n{process.stderr[-4000:]}"
    report = json.loads(process.stdout)
    return report["plays"][0]["tasks"][0]["hosts"]["localhost"]


def condition(sim_rack, node: str, kind: str = CONDITION) -> dict[str, Any] | None:
    conditions = sim_rack.get_json("node", node)["status"].get("conditions") or []
    return next((c for c in conditions if c["type"] == kind), None)


def valid_until(time: str, hours: float = 168.0) -> str:
    moment = datetime.datetime.fromisoformat(time.replace("Z", "+00:00")) + datetime.timedelta(hours=hours)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def written(time: str, verdict: str, summary: str, run: str = "") -> dict[str, Any]:
    """The per-check state of a tray whose nvbandwidth check ``verdict`` (``summary``: what it said of the tray)."""
    entry = {"outcome": verdict, "time": time, "run": run, "valid_until": valid_until(time)}
    tray = {"verdict": verdict, "time": time, "run": run}
    if verdict == "failed":
        tray["summary"] = f"nvbandwidth failed: {summary}"
        entry["summary"] = summary
    else:
        tray.update(summary="passed nvbandwidth", valid_until=valid_until(time))
    return {**tray, "checks": {"nvbandwidth": entry}}


def state(sim_rack, node: str) -> dict[str, Any]:
    obj = sim_rack.get_json("node", node)
    annotation = (obj["metadata"].get("annotations") or {}).get(ANNOTATION)
    return {
        "label": (obj["metadata"].get("labels") or {}).get(LABEL),
        "annotation": json.loads(annotation) if annotation else None,
        "taints": obj["spec"].get("taints") or [],
    }


def test_label_taint_then_pass_then_idempotent_and_check_mode(sim_rack, trays):
    bad, good, skipped = trays
    sim_rack.kubectl("taint", "node", bad, f"{OTHER_TAINT['key']}={OTHER_TAINT['value']}:{OTHER_TAINT['effect']}")
    untouched = state(sim_rack, skipped)

    def args(bad_verdict: str, time: str) -> dict[str, Any]:
        bad_summary = FAILED_SUMMARY if bad_verdict == "failed" else "rack1: 4 of 4 checks passed"
        return {
            **REQUIRED,
            "time": time,
            "taint_failed": True,
            "trays": {
                bad: {
                    "verdict": bad_verdict,
                    "rack": "rack1",
                    "checks_failed": ["nvbandwidth"] if bad_verdict == "failed" else [],
                    "checks_passed": [] if bad_verdict == "failed" else ["nvbandwidth"],
                    "summary": bad_summary,
                },
                good: {
                    "verdict": "passed",
                    "rack": "rack1",
                    "checks_failed": [],
                    "checks_passed": ["nvbandwidth"],
                    "summary": "rack1: 4 of 4 checks passed",
                },
                skipped: {"verdict": "skipped", "rack": "rack1", "checks_failed": [], "summary": f"{skipped} cordoned"},
            },
        }

    # check mode predicts, changes nothing
    predicted = node_verdict(sim_rack, args("failed", FIRST_RUN), "--check", "--diff")
    assert predicted.get("failed") is not True, predicted.get("msg")
    assert predicted["changed"] is True
    assert predicted["changed_nodes"] == sorted([bad, good])
    assert predicted["diff"]["after"][bad]["taints"] == [OTHER_TAINT, OUR_TAINT]
    assert state(sim_rack, bad) == {"label": None, "annotation": None, "taints": [OTHER_TAINT]}
    assert state(sim_rack, good) == {"label": None, "annotation": None, "taints": []}

    # the failed tray is labelled and tainted after the taint it had; the other one is labelled passed
    first = node_verdict(sim_rack, args("failed", FIRST_RUN), "--diff")
    assert first.get("failed") is not True, first.get("msg")
    assert first["changed"] is True
    assert first["nodes"] == {
        bad: {"label": "failed", "taint": "added", "changed": True},
        good: {"label": "passed", "taint": "unchanged", "changed": True},
        skipped: {"label": untouched["label"], "taint": "unchanged", "changed": False},
    }
    assert state(sim_rack, bad) == {
        "label": "failed",
        "annotation": written(FIRST_RUN, "failed", FAILED_SUMMARY),
        "taints": [OTHER_TAINT, OUR_TAINT],
    }
    assert state(sim_rack, good)["label"] == "passed"
    assert state(sim_rack, skipped) == untouched

    # the tray passes: our taint goes, the other stays, the label flips
    second = node_verdict(sim_rack, args("passed", SECOND_RUN))
    assert second["changed"] is True
    assert second["changed_nodes"] == sorted([bad, good])
    assert second["nodes"][bad] == {"label": "passed", "taint": "removed", "changed": True}
    assert state(sim_rack, bad) == {
        "label": "passed",
        "annotation": written(SECOND_RUN, "passed", "rack1: 4 of 4 checks passed"),
        "taints": [OTHER_TAINT],
    }

    # the same trays and time again: nothing to do
    again = node_verdict(sim_rack, args("passed", SECOND_RUN))
    assert again["changed"] is False
    assert again["changed_nodes"] == []

    # check mode with a new failure reports it and writes nothing
    before = {node: state(sim_rack, node) for node in trays}
    checked = node_verdict(sim_rack, args("failed", THIRD_RUN), "--check")
    assert checked["changed"] is True
    assert checked["nodes"][bad] == {"label": "failed", "taint": "added", "changed": True}
    assert {node: state(sim_rack, node) for node in trays} == before


def test_a_missing_node_is_a_warning(sim_rack, trays):
    bad, _good, _skipped = trays
    result = node_verdict(
        sim_rack,
        {
            **REQUIRED,
            "time": FIRST_RUN,
            "trays": {
                "gb200-r99-t99": {"verdict": "failed", "checks_failed": ["nvbandwidth"], "summary": "gone"},
                bad: {"verdict": "passed", "checks_passed": ["nvbandwidth"], "summary": "ok"},
            },
        },
    )
    assert result.get("failed") is not True, result.get("msg")
    assert result["warnings"] == ["node gb200-r99-t99 does not exist; its verdict (failed) was not written"]
    assert result["changed_nodes"] == [bad]
    assert state(sim_rack, bad)["label"] == "passed"


def test_a_verdict_already_on_the_nodes_sends_the_api_server_no_write(sim_rack, trays, tmp_path):
    """Run as the verify stage's account with the node verdict's shipped rights alone, so that the API server's
    audit log holds its requests: the same verdicts again read the nodes and write nothing."""
    bad, good, _skipped = trays
    shipped = yaml.safe_load_all((REPO_ROOT / "docs" / "rbac" / "verify-stage.yaml").read_text())
    sim_rack.apply([doc for doc in shipped if doc["metadata"]["name"] == "gpu-fabric-verify-node-verdict"])
    kubeconfig, _token = sim_rack.service_account_kubeconfig("gpu-fabric-verify", tmp_path / "kc")
    args = {
        **REQUIRED,
        "time": FIRST_RUN,
        "taint_failed": True,
        "trays": {
            bad: {"verdict": "failed", "rack": "rack1", "checks_failed": ["nvbandwidth"], "summary": FAILED_SUMMARY},
            good: {"verdict": "passed", "rack": "rack1", "checks_passed": ["nvbandwidth"], "summary": "ok"},
        },
    }
    user = audit.service_account_user(accounts.NAMESPACE, "gpu-fabric-verify")
    started = datetime.datetime.now(datetime.timezone.utc)
    first = node_verdict(sim_rack, args, kubeconfig=kubeconfig)
    assert first.get("failed") is not True, first.get("msg")
    assert first["changed_nodes"] == sorted([bad, good])
    # the log holds this account's writes: patches of each node whose verdict changed (the taint is its own)
    assert {(r.verb, r.name) for r in audit.writes(sim_rack.audited(user, started))} == {
        ("patch", bad),
        ("patch", good),
    }
    started = datetime.datetime.now(datetime.timezone.utc)

    again = node_verdict(sim_rack, args, kubeconfig=kubeconfig)

    assert again.get("failed") is not True and again["changed"] is False, again
    requests = sim_rack.audited(user, started)
    assert [r for r in requests if r.resource == "nodes"], "the account's reads of the nodes were not logged"
    assert audit.writes(requests) == []


def test_condition_on_pass_and_fail_kept_by_the_heartbeat_then_the_uninstall_removes_everything(sim_rack, trays):
    """The condition beside the kubelet's (kwok's) conditions: written, unchanged by the same run again, still there
    after the node's next heartbeat (a strategic merge patch of its status, as a kubelet's), and removed with the
    labels, the annotation and the taint by ``state=absent``."""
    bad, good, busy = trays
    run = "20261201T101500Z-nv01"
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    every = {check: {"outcome": "passed"} for check in ("cliques", "imex_channel", "nvbandwidth")}
    args = {
        "time": now,
        "run_id": run,
        "taint_failed": True,
        "condition": True,
        "trays": {
            bad: {
                "verdict": "failed",
                "checks": {**every, "nvbandwidth": {"outcome": "failed", "summary": FAILED_SUMMARY}},
                "summary": f"nvbandwidth failed: {FAILED_SUMMARY}",
            },
            good: {"verdict": "passed", "checks": every, "summary": "passed cliques, imex_channel, nvbandwidth"},
        },
    }
    ready_before = condition(sim_rack, good, "Ready")
    first = node_verdict(sim_rack, args, "--diff")
    assert first.get("failed") is not True, first.get("msg")
    assert first["nodes"][bad]["condition"] == "False" and first["nodes"][good]["condition"] == "True"
    assert first["diff"]["before"][good]["condition"] is None
    failed_condition = condition(sim_rack, bad)
    assert {k: failed_condition[k] for k in ("status", "reason", "lastTransitionTime")} == {
        "status": "False",
        "reason": "CheckFailed",
        "lastTransitionTime": now,
    }
    assert failed_condition["message"] == f"nvbandwidth failed: {FAILED_SUMMARY}"
    assert condition(sim_rack, good)["reason"] == "Passed"
    assert condition(sim_rack, good, "Ready")["status"] == "True"
    written_bad = state(sim_rack, bad)["annotation"]
    assert (written_bad["verdict"], written_bad["summary"]) == ("failed", f"nvbandwidth failed: {FAILED_SUMMARY}")
    assert sorted(written_bad["checks"]) == ["cliques", "imex_channel", "nvbandwidth"]
    assert written_bad["checks"]["nvbandwidth"] == {
        "outcome": "failed",
        "time": now,
        "run": run,
        "valid_until": valid_until(now),
        "summary": FAILED_SUMMARY,
    }

    # a tray skipped for its own state keeps its verdict; the annotation says it was skipped
    skip = {"verdict": "skipped", "summary": "skipped: cordoned", "skip_reasons": ["cordoned"]}
    node_verdict(sim_rack, {**args, "trays": {busy: {"verdict": "passed", "checks": every, "summary": "ok"}}})
    marked = node_verdict(sim_rack, {**args, "time": now, "trays": {busy: skip}})
    assert marked["changed_nodes"] == [busy]
    assert state(sim_rack, busy)["annotation"]["skipped"] == {"time": now, "run": run, "reason": "cordoned"}
    assert state(sim_rack, busy)["label"] == "passed"

    again = node_verdict(sim_rack, args)
    assert again["changed"] is False, again["changed_nodes"]

    # the node's next heartbeat (kwok's stage: every 2 to 3 minutes) keeps the condition
    deadline = time.monotonic() + 200
    while condition(sim_rack, good, "Ready")["lastHeartbeatTime"] == ready_before["lastHeartbeatTime"]:
        assert time.monotonic() < deadline, "no heartbeat of the node within 200 s"
        time.sleep(5)
    kept = condition(sim_rack, good)
    assert (kept["status"], kept["reason"], kept["lastHeartbeatTime"]) == ("True", "Passed", now)
    assert condition(sim_rack, bad) == failed_condition

    removed = node_verdict(sim_rack, {"state": "absent"}, "--diff")
    assert removed.get("failed") is not True, removed.get("msg")
    assert {bad, good, busy} <= set(removed["changed_nodes"])
    for node in (bad, good, busy):
        assert condition(sim_rack, node) is None
        assert condition(sim_rack, node, "Ready")["status"] == "True"
        assert state(sim_rack, node) == {"label": None, "annotation": None, "taints": []}
        labels = sim_rack.get_json("node", node)["metadata"].get("labels") or {}
        assert UNTIL not in labels
    assert node_verdict(sim_rack, {"state": "absent"})["changed"] is False
