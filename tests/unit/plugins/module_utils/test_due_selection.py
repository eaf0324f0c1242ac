# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Runs that go where they are due: the plan of an only-due run (due trays with their reason, partners, racks with
nothing due), the record of a rack with nothing due, and the plan in check mode.

Trays are the GB200 tray Node of the Kubernetes 1.34 API server (``tests/fixtures/k8s/gb200-tray-node.json``) with the
verdict annotation a run writes: per check (``tray_state.tray_record``), and the tray-wide one written before
verdicts were per check (``tray_state.annotation_fields``).
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from ansible_collections.gpu_fabric.mnnvl.plugins.action.variable_check import collection_variables, validate
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import fleet
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.record import (
    OUTCOME_PASSED,
    nothing_due_record,
    record_for,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.report_model import build_report, tray_verdicts
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.report_records import normalise_record
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.tray_state import (
    ANNOTATION_KEY,
    annotation_fields,
    check_fields,
    tray_record,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.verification import Scope, plan_fleet

from tests.unit.plugins.module_utils.test_fleet_run import Cluster, never_write
from tests.unit.plugins.module_utils.test_fleet_run import params as module_params
from tests.unit.plugins.module_utils.test_verification import RACK_LABEL, gpu_pod, tray

NOW = datetime(2026, 12, 6, 17, 40, tzinfo=timezone.utc)


def verified(node: dict, days_ago: float, verdict: str = "passed", hours: float = 168, **more) -> dict:
    """``node`` as a run ``days_ago`` left it (valid ``hours`` from then)."""
    fields = annotation_fields(NOW - timedelta(days=days_ago), verdict, f"{verdict} nvbandwidth", "run-1", hours)
    node["metadata"].setdefault("annotations", {})[ANNOTATION_KEY] = json.dumps(dict(fields, **more))
    return node


def rack(index: int, ages, **changes) -> list:
    """The trays of rack ``index``: one per age in days (None: never verified)."""
    return [
        tray(index, t, **changes) if age is None else verified(tray(index, t, **changes), age)
        for t, age in enumerate(ages)
    ]


def only_due(**more) -> Scope:
    return Scope(rack_label=RACK_LABEL, only_due=True, now=NOW, **more)


def plan(nodes, pods=(), **more):
    return plan_fleet(nodes, list(pods), only_due(**more)).racks


def test_without_only_due_the_verdicts_change_nothing():
    (rack0,) = plan_fleet(rack(0, [None, 1, 2, 3]), [], Scope(rack_label=RACK_LABEL, now=NOW)).racks
    assert rack0.nodes == ["gb200-r0-t0", "gb200-r0-t1", "gb200-r0-t2", "gb200-r0-t3"]
    assert (rack0.due, rack0.partners, rack0.nothing_due, rack0.skipped) == ([], [], False, [])
    assert set(rack0.trays()) == {"expected", "found", "skipped"}  # the records of runs before only-due


def test_never_verified_failed_and_expired_trays_are_due_the_others_are_skipped_as_not_due():
    nodes = rack(0, [None, 1, 8, 2, 3])
    verified(nodes[3], 0.5, verdict="failed")
    (rack0,) = plan(nodes)
    assert rack0.due == [
        {"node": "gb200-r0-t0", "reason": "never verified"},
        {"node": "gb200-r0-t2", "reason": "expired at 2026-12-05T17:40:00Z"},
        {"node": "gb200-r0-t3", "reason": "failed at 2026-12-06T05:40:00Z"},
    ]
    assert rack0.nodes == ["gb200-r0-t0", "gb200-r0-t2", "gb200-r0-t3"]
    assert rack0.partners == []
    assert rack0.trays() == {
        "expected": 0,
        "found": ["gb200-r0-t0", "gb200-r0-t1", "gb200-r0-t2", "gb200-r0-t3", "gb200-r0-t4"],
        "skipped": [
            {"node": "gb200-r0-t1", "reason": "not due (passed until 2026-12-12T17:40:00Z)"},
            {"node": "gb200-r0-t4", "reason": "not due (passed until 2026-12-10T17:40:00Z)"},
        ],
        "due": rack0.due,
        "partners": [],
    }
    assert not rack0.incomplete and not rack0.nothing_due


def test_a_verdict_expiring_within_the_window_is_due():
    (rack0,) = plan(rack(0, [1, 6.5, 6.9]), due_within_hours=12)
    assert rack0.due == [
        {"node": "gb200-r0-t1", "reason": "expires at 2026-12-07T05:40:00Z, within 12 h"},
        {"node": "gb200-r0-t2", "reason": "expires at 2026-12-06T20:04:00Z, within 12 h"},
    ]
    assert rack0.skipped == [{"node": "gb200-r0-t0", "reason": "not due (passed until 2026-12-12T17:40:00Z)"}]


def test_a_tray_skipped_as_busy_last_time_is_due_and_gets_the_fewest_partners_oldest_verdict_first():
    nodes = rack(0, [1, 3, 2, 3, 1])
    skip = {"time": "2026-12-06T10:00:00Z", "run": "run-2", "reason": "GPUs in use: 4 of 4"}
    verified(nodes[4], 1, skipped=skip)
    (rack0,) = plan(nodes)
    assert rack0.due == [{"node": "gb200-r0-t4", "reason": "skipped at 2026-12-06T10:00:00Z: GPUs in use: 4 of 4"}]
    # t1 and t3 were verified 3 days ago: the older verdict first, then by name
    assert rack0.partners == ["gb200-r0-t1"]
    assert rack0.nodes == ["gb200-r0-t1", "gb200-r0-t4"]
    assert [s["node"] for s in rack0.skipped] == ["gb200-r0-t0", "gb200-r0-t2", "gb200-r0-t3"]
    assert not rack0.incomplete
    assert rack0.to_dict()["partners"] == ["gb200-r0-t1"]
    assert rack0.trays()["partners"] == ["gb200-r0-t1"]


def test_partners_are_usable_trays_only():
    nodes = rack(0, [None, 5, 1])
    nodes[1]["spec"]["unschedulable"] = True  # the oldest verdict, but cordoned
    (rack0,) = plan(nodes)
    assert rack0.partners == ["gb200-r0-t2"]
    assert {"node": "gb200-r0-t1", "reason": "cordoned"} in rack0.skipped


def test_a_due_tray_with_no_usable_partner_leaves_the_rack_incomplete():
    nodes = rack(0, [None, 1])
    (rack0,) = plan(nodes, [gpu_pod("gb200-r0-t1", 4)])
    assert rack0.nodes == ["gb200-r0-t0"] and rack0.partners == []
    assert rack0.incomplete and not rack0.nothing_due


def test_a_rack_with_nothing_due_is_not_run_and_is_not_incomplete():
    rack0, rack1 = plan(rack(0, [None, 1, 1]) + rack(1, [1, 2, 3]))
    assert rack0.due and not rack0.nothing_due
    assert rack1.nothing_due and not rack1.incomplete
    assert (rack1.nodes, rack1.partners) == ([], [])
    assert [s["reason"][:7] for s in rack1.skipped] == ["not due"] * 3


def test_a_rack_whose_due_trays_are_all_busy_has_nothing_due_to_run():
    nodes = rack(1, [None, 1, 2])
    (rack1,) = plan(nodes, [gpu_pod("gb200-r1-t0", 4)])
    assert rack1.nothing_due and rack1.nodes == []
    assert rack1.skipped[0] == {
        "node": "gb200-r1-t0",
        "reason": "GPUs in use: 4 of 4 nvidia.com/gpu held by team-a/train-0 (4)",
    }


def test_a_check_without_gpus_still_takes_the_due_trays_of_a_busy_rack():
    (rack0,) = plan_fleet(rack(0, [None, 1]), [gpu_pod("gb200-r0-t0", 4)], only_due(), uses_gpus=False).racks
    assert rack0.nodes == ["gb200-r0-t0", "gb200-r0-t1"] and rack0.partners == ["gb200-r0-t1"]


def test_the_node_list_and_nodes_per_clique_narrow_an_only_due_run_too():
    (rack0,) = plan(rack(0, [None, None, None, 1]), nodes_per_clique=2)
    assert rack0.nodes == ["gb200-r0-t0", "gb200-r0-t1"]
    assert [d["node"] for d in rack0.due] == ["gb200-r0-t0", "gb200-r0-t1"]
    assert {"node": "gb200-r0-t2", "reason": "not selected (gpu_fabric_verify_nodes_per_clique is 2)"} in rack0.skipped
    (rack0,) = plan(rack(0, [None, 1, 1]), node_names=["gb200-r0-t1", "gb200-r0-t2"])
    assert rack0.nothing_due


def test_an_unreadable_verdict_makes_its_tray_due():
    nodes = rack(0, [1, 1])
    nodes[0]["metadata"]["annotations"][ANNOTATION_KEY] = "{broken"
    (rack0,) = plan(nodes)
    assert rack0.due == [
        {
            "node": "gb200-r0-t0",
            "reason": "unreadable verdict (annotation gpu-fabric.nvidia.com/verification is not JSON)",
        }
    ]
    assert rack0.partners == ["gb200-r0-t1"]


def test_the_record_of_a_rack_with_nothing_due_passes_and_the_report_leaves_its_trays_alone():
    nodes = rack(1, [1, 2, 3])
    nodes[2]["spec"]["unschedulable"] = True
    (rack1,) = plan(nodes)
    record = nothing_due_record("nvbandwidth", rack1, "run-2")
    assert record["summary"] == "rack rack1: nothing due (2 of 3 trays not due; skipped gb200-r1-t2: cordoned)"
    assert (record["outcome"], record["verdict"], record["passed"], record["nodes"]) == (
        OUTCOME_PASSED,
        "passed",
        True,
        [],
    )
    assert record["details"] == {"nothing_due": True, "violations": []}
    assert record["trays"]["due"] == [] and len(record["trays"]["skipped"]) == 3
    done = normalise_record(dict(record, started="2026-12-06T17:40:00Z", finished="2026-12-06T17:40:01Z"), "x.json")
    assert done["trays"]["due"] == [] and done["trays"]["partners"] == []
    assert {tray["verdict"] for tray in tray_verdicts([done]).values()} == {"skipped"}


def test_an_older_record_without_due_trays_reads_as_before():
    (rack0,) = plan_fleet(rack(0, [1, 2]), [], Scope(rack_label=RACK_LABEL)).racks
    record = nothing_due_record("nvbandwidth", rack0, "r")  # any record of a run that was not only-due
    done = normalise_record(dict(record, started="2026-12-06T17:40:00Z", finished="2026-12-06T17:40:01Z"), "x.json")
    assert set(done["trays"]) == {"expected", "found", "skipped"}


def test_the_run_records_a_rack_with_nothing_due_without_running_it():
    rack0, rack1 = plan(rack(0, [1, 2]) + rack(1, [None, 1]))
    settings = fleet.Settings(run_id="run-2", cluster={"host": "h"})
    check = type("Check", (), {"name": "nvbandwidth"})()
    records = fleet.run_racks(check, api=None, plans=[rack0], settings=settings, parallel=1)
    assert records[0]["summary"] == "rack rack0: nothing due (2 of 2 trays not due)"
    assert records[0]["passed"] and records[0]["cluster"] == {"host": "h"}
    assert rack1.due == [{"node": "gb200-r1-t0", "reason": "never verified"}]


def test_the_check_mode_summary_lists_due_trays_partners_and_racks_with_nothing_due():
    nodes = rack(1, [1, 3, 2, 1]) + rack(2, [1, 1])
    skip = {"time": "2026-12-06T10:00:00Z", "run": "run-2", "reason": "4 GPUs in use"}
    verified(nodes[3], 1, skipped=skip)
    plans = plan(nodes)
    racks = [p.to_dict() for p in plans]
    racks[0]["would_create"] = {"namespace": "n", "expected": "expected 2 min"}
    racks[1]["would_create"] = {}
    assert fleet.check_mode_summary("nvbandwidth", racks) == (
        "check mode: nvbandwidth would run on 1 of 2 rack(s); nothing created; rack rack1: expected 2 min; "
        "only the due trays: rack1: 1 tray due (gb200-r1-t3 skipped at 2026-12-06T10:00:00Z: 4 GPUs in use), "
        "1 partner (gb200-r1-t1), 2 not due; rack2: nothing due"
    )


def test_the_check_mode_summary_of_a_run_that_is_not_only_due_is_as_before():
    racks = [p.to_dict() for p in plan_fleet(rack(0, [None, 1]), [], Scope(rack_label=RACK_LABEL)).racks]
    racks[0]["would_create"] = {"namespace": "n"}
    assert fleet.check_mode_summary("imex_channel", racks) == (
        "check mode: imex_channel would run on 1 rack(s); nothing created"
    )


def params(**given) -> dict:
    base = {
        "racks": {},
        "rack_label": RACK_LABEL,
        "cliques": [],
        "nodes_per_clique": "all",
        "node_names": [],
        "gpus_per_tray": 0,
        "trays_per_clique": 0,
        "allow_incomplete": False,
        "tolerations": [],
        "mnnvl_products": ["GB200"],
        "only_due": False,
        "due_within_hours": 0.0,
    }
    return dict(base, **given)


def test_the_module_options_reach_the_scope_with_one_moment_for_the_run():
    scope = fleet.scope_of(params(only_due=True, due_within_hours=24.0), now=NOW)
    assert (scope.only_due, scope.due_within_hours, scope.now) == (True, 24.0, NOW)
    assert fleet.scope_of(params()).now.tzinfo is not None


def test_a_negative_window_is_refused_naming_the_variable():
    with pytest.raises(ValueError, match=r"^gpu_fabric_verify_due_within_hours is -1.0: give 0"):
        fleet.scope_of(params(due_within_hours=-1.0))


def test_report_of_an_only_due_run_keeps_the_due_trays_and_partners():
    (rack0,) = plan(rack(0, [None, 1, 2]))
    record = record_for("nvbandwidth", rack0, OUTCOME_PASSED, "rack rack0: passed", {}, run_id="run-2")
    done = normalise_record(dict(record, started="2026-12-06T17:40:00Z", finished="2026-12-06T17:40:01Z"), "x.json")
    assert done["trays"]["due"] == [{"node": "gb200-r0-t0", "reason": "never verified"}]
    assert done["trays"]["partners"] == ["gb200-r0-t2"]
    assert build_report([done], "t")["racks"]["rack0"]["verdict"] == "passed"


def test_the_inventory_variables_are_typed_by_verify_common_for_the_variable_check():
    found = collection_variables(Path(__file__).resolve().parents[4])
    options = found["options"]["verify_common"]
    assert options["gpu_fabric_verify_only_due"] == {"type": "bool"}
    assert options["gpu_fabric_verify_due_within_hours"] == {"type": "float"}
    spec = {"gpu_fabric_verify_due_within_hours": options["gpu_fabric_verify_due_within_hours"]}
    assert validate(spec, {"gpu_fabric_verify_due_within_hours": "soon"}) != []


def test_the_module_plans_an_only_due_run_in_check_mode():
    result = fleet.verify(module_params("imex_channel", only_due=True), True, Cluster, never_write)
    (rack,) = result["racks"]
    assert [d["reason"] for d in rack["due"]] == ["never verified", "never verified"]
    assert rack["would_create"]["pods"] == ["imex-channel-gb200-r0-t0", "imex-channel-gb200-r0-t1"]
    assert result["summary"] == (
        "check mode: imex_channel would run on 1 rack(s); nothing created; only the due trays: clique-c0-1: 2 trays "
        "due (gb200-r0-t0 never verified, gb200-r0-t1 never verified)"
    )


def test_the_module_refuses_a_negative_window_before_any_rack():
    with pytest.raises(fleet.Refused, match=r"^gpu_fabric_verify_due_within_hours is -2\.0"):
        fleet.verify(module_params("imex_channel", only_due=True, due_within_hours=-2), True, Cluster, never_write)


# --- due is per check ------------------------------------------------------------------------------------------


def checked(node: dict, **checks) -> dict:
    """``node`` with per-check state: check -> (outcome, days ago) of its last verdict, valid a week."""
    entries = {
        name: check_fields(outcome, NOW - timedelta(days=age), "run-1", NOW - timedelta(days=age) + timedelta(days=7))
        for name, (outcome, age) in checks.items()
    }
    record = tray_record(entries, None, ("cliques", "imex_channel", "nvbandwidth"), NOW)[0]
    node["metadata"].setdefault("annotations", {})[ANNOTATION_KEY] = json.dumps(record)
    return node


def test_a_cliques_only_verdict_leaves_every_tray_due_for_nvbandwidth():
    trays = [checked(tray(0, t), cliques=("passed", 1)) for t in range(3)]
    (rack0,) = plan(trays, due_check="nvbandwidth")
    assert rack0.nodes == ["gb200-r0-t0", "gb200-r0-t1", "gb200-r0-t2"]
    assert {d["reason"] for d in rack0.due} == {"never verified by nvbandwidth"}
    (cliques,) = plan(trays, due_check="cliques")
    assert cliques.nothing_due and cliques.nodes == []
    assert cliques.skipped[0]["reason"] == "not due (cliques passed until 2026-12-12T17:40:00Z)"


def test_the_partner_is_the_tray_whose_check_was_verified_longest_ago():
    trays = [
        checked(tray(0, 0), nvbandwidth=("passed", 2), cliques=("passed", 6)),
        checked(tray(0, 1), nvbandwidth=("passed", 5), cliques=("passed", 1)),
        checked(tray(0, 2), nvbandwidth=("failed", 1)),
    ]
    (rack0,) = plan(trays, due_check="nvbandwidth")
    assert rack0.due == [{"node": "gb200-r0-t2", "reason": "failed at 2026-12-05T17:40:00Z"}]
    assert rack0.partners == ["gb200-r0-t1"]  # nvbandwidth's oldest verdict, not the tray's newest entry


@pytest.mark.parametrize("bad", ["0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00", 17, None])
def test_a_time_on_a_node_that_cannot_be_formatted_makes_the_tray_due_and_never_stops_the_plan(bad):
    broken = checked(tray(0, 0), nvbandwidth=("passed", 1))
    record = json.loads(broken["metadata"]["annotations"][ANNOTATION_KEY])
    record["checks"]["nvbandwidth"]["valid_until"] = bad
    broken["metadata"]["annotations"][ANNOTATION_KEY] = json.dumps(record)
    old_format = verified(tray(0, 1), 1)
    old_format["metadata"]["annotations"][ANNOTATION_KEY] = json.dumps(
        dict(json.loads(old_format["metadata"]["annotations"][ANNOTATION_KEY]), valid_until=bad, time=bad)
    )
    (rack0,) = plan([broken, old_format, checked(tray(0, 2), nvbandwidth=("passed", 1))], due_check="nvbandwidth")
    assert rack0.due[0]["node"] == "gb200-r0-t0"
    assert rack0.due[0]["reason"].startswith("unreadable nvbandwidth state (checks.nvbandwidth.valid_until ")
    assert rack0.due[1] == {
        "node": "gb200-r0-t1",
        "reason": "no per-check state (a verdict written before verdicts were per check)",
    }
    # planned as a whole tray (no check), the tray-wide time out of range reads as missing, never a crash
    (whole,) = plan([old_format])
    assert whole.due == [
        {"node": "gb200-r0-t1", "reason": "verdict without an expiry (written before verdicts expired)"}
    ]


def test_the_check_of_the_run_is_the_check_its_due_trays_are_planned_for():
    scope = fleet.scope_of(params(only_due=True, check="nvbandwidth"), now=NOW)
    assert scope.due_check == "nvbandwidth"
