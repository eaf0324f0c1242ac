# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Verdicts that expire, and runs that go where they are due, on the simulated fleet.

Two racks verified with their verdicts written to the Nodes; one tray made busy, the next run skips it; two trays'
verdicts expire (written back a week earlier through the API); the busy tray freed; a run of only the due trays
verifies exactly the busy tray (with one partner: nvbandwidth needs two trays) and the expired ones; the same run
again has nothing due and changes nothing on the Nodes. These runs are of nvbandwidth alone, on a site that requires
nvbandwidth alone (``gpu_fabric_verify_required_checks``).

A cliques-only run with the verdict on the trays, on a site that requires the default checks, leaves every tray
``incomplete`` (no bandwidth measured), and the only-due nvbandwidth plan that follows finds every tray due.

Three trays of each rack take part (``gpu_fabric_verify_node_names``), so that the test runs on a fleet of any size.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

import pytest
from verify_helpers import faults, run_verify

if TYPE_CHECKING:
    from conftest import SimRack

pytestmark = pytest.mark.sim

ANNOTATION = "gpu-fabric.nvidia.com/verification"
LABEL = "gpu-fabric.nvidia.com/verified"
UNTIL_LABEL = "gpu-fabric.nvidia.com/verified-until"
CONDITION = "GPUFabricVerified"
TRAYS = [f"gb200-r{rack}-t{tray}" for rack in (0, 1) for tray in (0, 1, 2)]
BUSY = "gb200-r0-t2"
EXPIRED = ["gb200-r1-t0", "gb200-r1-t1"]
LABELLED = {
    "gpu_fabric_verify_node_names": TRAYS,
    "gpu_fabric_verify_label_nodes": True,
    "gpu_fabric_verify_node_condition": True,
    "gpu_fabric_verify_required_checks": ["nvbandwidth"],
    "verify_nvbandwidth_timeout": 90,
}
ONLY_DUE = {**LABELLED, "gpu_fabric_verify_only_due": True}


def tray_state(sim_rack: SimRack) -> dict[str, dict[str, Any]]:
    """tray -> what a run writes on its Node: the labels, the annotation (parsed) and the condition."""
    nodes = {n["metadata"]["name"]: n for n in sim_rack.get_json("nodes")["items"]}
    state = {}
    for name in TRAYS:
        meta = nodes[name]["metadata"]
        conditions = [c for c in nodes[name]["status"].get("conditions") or [] if c["type"] == CONDITION]
        state[name] = {
            "labels": {k: v for k, v in meta.get("labels", {}).items() if k in (LABEL, UNTIL_LABEL)},
            "annotation": json.loads(meta.get("annotations", {}).get(ANNOTATION, "null")),
            "condition": conditions[0] if conditions else None,
        }
    return state


def tenant_pods(sim_rack: SimRack) -> list[str]:
    """The pods of the sim's busy-node fault still on ``BUSY``."""
    listed = sim_rack.kubectl("get", "pods", "-n", "gpu-fabric-sim-busy", "-o", "json", check=False)
    items = json.loads(listed.stdout)["items"] if listed.returncode == 0 else []
    return [p["metadata"]["name"] for p in items if p["spec"].get("nodeName") == BUSY]


def expire(sim_rack: SimRack, node: str, annotation: dict[str, Any]) -> None:
    """The verdict as a run a week earlier left it: expired an hour ago (the nvbandwidth entry and the tray's)."""
    until = datetime.now(timezone.utc) - timedelta(hours=1)
    moments = {
        "time": (until - timedelta(hours=168)).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "valid_until": until.strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    old = dict(
        annotation,
        **moments,
        checks=dict(annotation["checks"], nvbandwidth={**annotation["checks"]["nvbandwidth"], **moments}),
    )
    sim_rack.kubectl("annotate", "--overwrite", "node", node, f"{ANNOTATION}={json.dumps(old, separators=(',', ':'))}")
    sim_rack.kubectl("label", "--overwrite", "node", node, f"{UNTIL_LABEL}={int(until.timestamp())}")


def test_a_run_of_only_the_due_trays_verifies_the_busy_and_the_expired_ones_and_then_nothing(
    cluster_stage: SimRack, tmp_path
):
    first = run_verify(cluster_stage, tmp_path / "first", "--tags", "nvbandwidth", extra_vars=LABELLED)
    assert first.process.returncode == 0, first.output[-3000:]
    with faults(cluster_stage, ("busy-node", {"node": BUSY})):
        busy = run_verify(cluster_stage, tmp_path / "busy", "--tags", "nvbandwidth", extra_vars=LABELLED)
    assert busy.process.returncode == 0, busy.output[-3000:]
    cluster_stage.wait_until(f"the tenant's pod on {BUSY} gone", lambda: not tenant_pods(cluster_stage))
    busy_run = busy.record("nvbandwidth", "rack0")["run_id"]
    before = tray_state(cluster_stage)
    assert {name: s["labels"][LABEL] for name, s in before.items()} == dict.fromkeys(TRAYS, "passed")
    skipped = before[BUSY]["annotation"]["skipped"]
    assert skipped["run"] == busy_run and skipped["reason"].startswith("GPUs in use: 4 of 4")
    for name in EXPIRED:
        expire(cluster_stage, name, before[name]["annotation"])

    # the plan first: check mode names the due trays, the partner and the trays not due
    plan = run_verify(cluster_stage, tmp_path / "plan", "--tags", "nvbandwidth", "--check", extra_vars=ONLY_DUE)
    assert plan.process.returncode == 0, plan.output[-3000:]
    said = " ".join(plan.output.split())  # the summary as one line, however the callback wraps it
    assert f"only the due trays: rack0: 1 tray due ({BUSY} skipped at {skipped['time']}: GPUs in use" in said
    assert "1 partner (gb200-r0-t0), 1 not due; rack1: 2 trays due (gb200-r1-t0 expired at" in said

    due = run_verify(cluster_stage, tmp_path / "due", "--tags", "nvbandwidth", extra_vars=ONLY_DUE)
    assert due.process.returncode == 0, due.output[-3000:]
    rack0, rack1 = due.record("nvbandwidth", "rack0"), due.record("nvbandwidth", "rack1")
    # the busy tray and a partner (the oldest verdict, then by name); the two expired trays
    assert rack0["nodes"] == ["gb200-r0-t0", BUSY] and rack0["trays"]["partners"] == ["gb200-r0-t0"]
    assert [d["node"] for d in rack0["trays"]["due"]] == [BUSY]
    assert rack1["nodes"] == EXPIRED and rack1["trays"]["partners"] == []
    assert [d["reason"][:11] for d in rack1["trays"]["due"]] == ["expired at "] * 2
    not_due = {
        s["node"]: s["reason"] for r in (rack0, rack1) for s in r["trays"]["skipped"] if s["reason"][:7] == "not due"
    }
    assert sorted(not_due) == ["gb200-r0-t1", "gb200-r1-t2"]
    after = tray_state(cluster_stage)
    runs = {name: s["annotation"]["run"] for name, s in after.items()}
    measured = ["gb200-r0-t0", BUSY, *EXPIRED]
    assert {name for name, run in runs.items() if run == rack0["run_id"]} == set(measured)
    for name in ("gb200-r0-t1", "gb200-r1-t2"):  # not due: left as the busy run wrote them
        assert after[name] == before[name]
    for name in measured:
        assert after[name]["labels"][LABEL] == "passed" and "skipped" not in after[name]["annotation"]
        assert after[name]["condition"]["status"] == "True"
        until = datetime.fromisoformat(after[name]["annotation"]["valid_until"].replace("Z", "+00:00"))
        assert after[name]["labels"][UNTIL_LABEL] == str(int(until.timestamp()))
    assert due.report()["passed"] is True

    again = run_verify(cluster_stage, tmp_path / "again", "--tags", "nvbandwidth", extra_vars=ONLY_DUE)
    assert again.process.returncode == 0, again.output[-3000:]
    for rack in ("rack0", "rack1"):
        record = again.record("nvbandwidth", rack)
        assert record["summary"].startswith(f"rack {rack}: nothing due (3 of ")
        assert (record["passed"], record["outcome"], record["nodes"]) == (True, "passed", [])
    assert tray_state(cluster_stage) == after


def test_a_cliques_only_run_leaves_every_tray_due_for_nvbandwidth(cluster_stage: SimRack, tmp_path):
    for name in TRAYS:  # no verdict of another test: only what this run writes
        cluster_stage.kubectl("annotate", "node", name, f"{ANNOTATION}-")
        cluster_stage.kubectl("label", "node", name, f"{LABEL}-", f"{UNTIL_LABEL}-")
    site = {key: value for key, value in LABELLED.items() if key != "gpu_fabric_verify_required_checks"}
    cliques = run_verify(cluster_stage, tmp_path / "cliques", "--tags", "cliques", extra_vars=site)
    assert cliques.process.returncode == 0, cliques.output[-3000:]
    state = tray_state(cluster_stage)
    # the clique check said its word; no bandwidth was measured: not verified, and nothing to affinity
    assert {name: s["labels"] for name, s in state.items()} == {key: {LABEL: "incomplete"} for key in TRAYS}
    assert {name: sorted(s["annotation"]["checks"]) for name, s in state.items()} == {key: ["cliques"] for key in TRAYS}
    assert {s["condition"]["reason"] for s in state.values()} == {"ChecksMissing"}

    plan = run_verify(
        cluster_stage,
        tmp_path / "plan",
        "--tags",
        "nvbandwidth",
        "--check",
        extra_vars={**site, "gpu_fabric_verify_only_due": True},
    )
    assert plan.process.returncode == 0, plan.output[-3000:]
    said = " ".join(plan.output.split())
    for rack in ("0", "1"):
        due = ", ".join(f"gb200-r{rack}-t{t} never verified by nvbandwidth" for t in range(3))
        assert f"rack{rack}: 3 trays due ({due})" in said
    assert "nothing due" not in said
