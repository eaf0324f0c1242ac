# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""node_plan: the patch each GB200 tray's Node needs, computed from the Node as read."""

from __future__ import annotations

import json

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.node_plan import desired_patch, plan_node, plan_removal
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.tray_verdict import TrayVerdict
from verdict_nodes import (
    ANNOTATION,
    BUSY,
    FAILED_SUMMARY,
    GPU_TAINT,
    LABEL,
    LATER,
    OUR_TAINT,
    RUN,
    TAINTING,
    TIME,
    UNTIL,
    Settings,
    annotation,
    failed,
    gb200_tray,
    labels,
    passed,
    skipped,
    until,
    verified_tray,
)

# --- the patches --------------------------------------------------------------------------------------------


def test_a_fresh_tray_that_passed_gets_the_label_and_the_annotation():
    plan = desired_patch(gb200_tray(0, 3), passed(), TIME, Settings())
    assert plan.metadata_patch == {
        "metadata": {
            "labels": {LABEL: "passed", UNTIL: "1796725297"},
            "annotations": {
                ANNOTATION: '{"verdict":"passed","time":"2026-12-01T10:21:37Z","run":"","summary":"passed nvbandwidth",'
                '"valid_until":"2026-12-08T10:21:37Z","checks":{"nvbandwidth":{"outcome":"passed",'
                '"time":"2026-12-01T10:21:37Z","run":"","valid_until":"2026-12-08T10:21:37Z"}}}'
            },
        }
    }
    assert plan.taints_patch is None
    assert (plan.label, plan.taint) == ("passed", "unchanged")
    assert plan.before == {"labels": {}, "annotations": {}, "taints": []}
    assert plan.after == {
        "labels": {LABEL: "passed", UNTIL: "1796725297"},
        "annotations": {ANNOTATION: annotation("passed", "rack0: 4 of 4 checks passed")},
        "taints": [],
    }


def test_a_tray_that_passed_before_and_fails_now_flips_its_label():
    node = gb200_tray(
        0, 3, labels=labels("passed"), annotations={ANNOTATION: annotation("passed", "rack0: 4 of 4 checks passed")}
    )
    plan = desired_patch(node, failed(), LATER, Settings())
    assert plan.metadata_patch == {
        "metadata": {
            # verified-until only while the tray passed
            "labels": {LABEL: "failed", UNTIL: None},
            "annotations": {ANNOTATION: annotation("failed", FAILED_SUMMARY, LATER)},
        }
    }
    assert plan.taints_patch is None
    assert plan.before["labels"] == labels("passed")
    assert plan.after["labels"] == labels("failed", LATER)


def test_a_new_run_time_rewrites_the_annotation_and_the_expiry_only():
    node = gb200_tray(0, 3, labels=labels("passed"), annotations={ANNOTATION: annotation("passed", "")})
    plan = desired_patch(node, passed(), LATER, Settings())
    assert plan.metadata_patch == {
        "metadata": {
            "labels": {UNTIL: until(LATER)},
            "annotations": {ANNOTATION: annotation("passed", "", LATER)},
        }
    }


def test_a_failed_tray_is_tainted_after_the_taints_it_already_has():
    node = gb200_tray(0, 3, taints=[dict(GPU_TAINT)], resource_version="91234")
    plan = desired_patch(node, failed(), TIME, TAINTING)
    assert plan.taints_patch == {
        "metadata": {"resourceVersion": "91234"},
        "spec": {"taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}, OUR_TAINT]},
    }
    assert plan.metadata_patch == {
        "metadata": {
            "labels": labels("failed"),
            "annotations": {ANNOTATION: annotation("failed", FAILED_SUMMARY)},
        }
    }
    assert plan.taint == "added"
    assert plan.before["taints"] == [GPU_TAINT]
    assert plan.after["taints"] == [GPU_TAINT, OUR_TAINT]


def test_a_tray_that_passes_loses_only_our_taint_and_the_others_keep_their_order():
    unreachable = {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute", "timeAdded": "2026-12-01T09:59:00Z"}
    node = gb200_tray(
        0,
        3,
        labels=labels("failed"),
        annotations={ANNOTATION: annotation("failed", FAILED_SUMMARY)},
        taints=[dict(GPU_TAINT), dict(OUR_TAINT), dict(unreachable)],
        resource_version="91240",
    )
    plan = desired_patch(node, passed(), LATER, TAINTING)
    assert plan.taints_patch == {
        "metadata": {"resourceVersion": "91240"},
        "spec": {"taints": [GPU_TAINT, unreachable]},
    }
    assert plan.metadata_patch == {
        "metadata": {
            "labels": labels("passed", LATER),
            "annotations": {ANNOTATION: annotation("passed", "rack0: 4 of 4 checks passed", LATER)},
        }
    }
    assert (plan.label, plan.taint) == ("passed", "removed")


def test_removing_the_last_taint_sends_an_empty_list():
    node = gb200_tray(0, 3, labels={LABEL: "passed"}, taints=[dict(OUR_TAINT)])
    plan = desired_patch(node, passed(), TIME, Settings(label=False, taint_failed=True))
    assert plan.taints_patch == {"metadata": {"resourceVersion": "4711"}, "spec": {"taints": []}}
    assert plan.metadata_patch is None
    assert plan.label == "passed"


def test_a_skipped_tray_is_left_as_it_is():
    node = gb200_tray(
        1,
        2,
        labels={LABEL: "failed"},
        annotations={ANNOTATION: annotation("failed", FAILED_SUMMARY)},
        taints=[dict(OUR_TAINT)],
    )
    skipped = TrayVerdict(node="gb200-r1-t2", verdict="skipped", summary="gb200-r1-t2 cordoned")
    assert desired_patch(node, skipped, LATER, TAINTING) is None
    plan = plan_node(node, skipped, LATER, TAINTING)
    assert (plan.label, plan.taint, plan.needed) == ("failed", "unchanged", False)


def test_a_tray_that_already_carries_its_verdict_needs_no_patch():
    node = gb200_tray(
        0,
        3,
        labels=labels("failed"),
        annotations={ANNOTATION: annotation("failed", FAILED_SUMMARY)},
        taints=[dict(GPU_TAINT), dict(OUR_TAINT)],
    )
    assert desired_patch(node, failed(), TIME, TAINTING) is None
    passed_node = gb200_tray(
        0, 3, labels=labels("passed"), annotations={ANNOTATION: annotation("passed", "ok")}, taints=[dict(GPU_TAINT)]
    )
    assert desired_patch(passed_node, passed(summary="ok"), TIME, TAINTING) is None


def test_without_taint_failed_taints_are_never_touched():
    node = gb200_tray(0, 3, labels={LABEL: "failed"}, taints=[dict(OUR_TAINT)])
    plan = desired_patch(node, passed(), TIME, Settings())
    assert plan.taints_patch is None
    assert plan.taint == "unchanged"
    assert plan.after["taints"] == [OUR_TAINT]


def test_without_label_only_the_taint_is_written():
    plan = desired_patch(gb200_tray(0, 3), failed(), TIME, Settings(label=False, taint_failed=True))
    assert plan.metadata_patch is None
    assert plan.taints_patch == {"metadata": {"resourceVersion": "4711"}, "spec": {"taints": [OUR_TAINT]}}
    assert plan.label is None


def test_custom_keys_are_used_everywhere():
    settings = Settings(
        taint_failed=True,
        label_key="example.com/ok",
        valid_until_label_key="example.com/until",
        annotation_key="example.com/why",
        taint_key="example.com/bad",
    )
    plan = desired_patch(gb200_tray(0, 3), failed(summary="x"), TIME, settings)
    assert plan.metadata_patch == {
        "metadata": {
            "labels": {"example.com/ok": "failed"},
            "annotations": {"example.com/why": annotation("failed", "x")},
        }
    }
    assert plan.taints_patch["spec"]["taints"] == [{"key": "example.com/bad", "value": "true", "effect": "NoSchedule"}]


def test_annotation_is_compact_one_line_json_with_the_summaries_cut():
    long_summary = "rack0 nvbandwidth:\n" + "low pair; " * 80
    tray = TrayVerdict(
        "gb200-r0-t3",
        "failed",
        long_summary,
        outcomes=(("nvbandwidth", "failed", long_summary[:300]), ("nccl", "failed", long_summary[:300])),
    )
    plan = desired_patch(gb200_tray(0, 3), tray, TIME, Settings(valid_hours=24), "20261201T101500Z-ab12")
    value = plan.metadata_patch["metadata"]["annotations"][ANNOTATION]
    record = json.loads(value)
    assert list(record) == ["verdict", "time", "run", "summary", "checks"]
    assert (record["run"], record["time"], record["verdict"]) == ("20261201T101500Z-ab12", TIME, "failed")
    assert record["checks"]["nccl"]["valid_until"] == "2026-12-02T10:21:37Z"
    assert len(record["summary"]) == 500
    assert record["summary"].startswith("nccl failed: rack0 nvbandwidth: low pair; low pair;")
    assert record["summary"].endswith("...")
    assert "\n" not in value
    assert ", " not in value.replace(record["summary"], "")


# --- the run, the expiry and skipped trays ------------------------------------------------------------------


def test_the_annotation_names_the_run_and_the_expiry_of_valid_hours():
    plan = desired_patch(gb200_tray(0, 3), passed(), TIME, Settings(valid_hours=24), RUN)
    written = json.loads(plan.metadata_patch["metadata"]["annotations"][ANNOTATION])
    assert (written["run"], written["valid_until"]) == (RUN, "2026-12-02T10:21:37Z")
    assert written["checks"]["nvbandwidth"] == {
        "outcome": "passed",
        "time": TIME,
        "run": RUN,
        "valid_until": "2026-12-02T10:21:37Z",
    }
    assert plan.metadata_patch["metadata"]["labels"][UNTIL] == until(hours=24)


def test_a_tray_skipped_for_its_own_state_keeps_its_verdict_and_gains_skipped():
    node = verified_tray()
    plan = desired_patch(node, skipped("gb200-r0-t3", BUSY), LATER, TAINTING, RUN)
    assert plan.taints_patch is None
    assert list(plan.metadata_patch["metadata"]) == ["annotations"]  # the labels stay
    written = json.loads(plan.metadata_patch["metadata"]["annotations"][ANNOTATION])
    assert written == {
        **json.loads(annotation("passed", "rack0: 4 of 4 checks passed")),
        "skipped": {"time": LATER, "run": RUN, "reason": BUSY},
    }
    # the same skip again: nothing; the next verdict drops "skipped"
    node["metadata"]["annotations"][ANNOTATION] = plan.metadata_patch["metadata"]["annotations"][ANNOTATION]
    assert desired_patch(node, skipped("gb200-r0-t3", BUSY), LATER, TAINTING, RUN) is None
    verdict = desired_patch(node, passed(), LATER, TAINTING, RUN)
    assert "skipped" not in json.loads(verdict.metadata_patch["metadata"]["annotations"][ANNOTATION])


def test_a_skip_the_run_chose_a_never_verified_tray_and_a_skip_without_reason_are_not_written():
    node = verified_tray()
    not_due = skipped("gb200-r0-t3", "not due (passed until 2026-12-08T10:21:37Z)")
    assert desired_patch(node, not_due, LATER, Settings()) is None
    assert (
        desired_patch(node, skipped("gb200-r0-t3", "not selected (gpu_fabric_verify_nodes)"), LATER, Settings()) is None
    )
    assert desired_patch(node, skipped("gb200-r0-t3"), LATER, Settings()) is None
    assert desired_patch(gb200_tray(0, 3), skipped("gb200-r0-t3", BUSY), LATER, Settings()) is None
    # a selection skip beside a skip of its own: only the tray's own reason is written
    plan = desired_patch(node, skipped("gb200-r0-t3", "not due (x)", "cordoned"), LATER, Settings(), RUN)
    assert json.loads(plan.metadata_patch["metadata"]["annotations"][ANNOTATION])["skipped"]["reason"] == "cordoned"


# --- the uninstall ------------------------------------------------------------------------------------------


def test_the_removal_takes_both_labels_the_annotation_our_taint_and_the_condition_only():
    node = verified_tray("failed", FAILED_SUMMARY, taints=[dict(GPU_TAINT), dict(OUR_TAINT)])
    node["status"]["conditions"].append({"type": "GPUFabricVerified", "status": "False", "reason": "CheckFailed"})
    plan = plan_removal(node, Settings())
    assert plan.metadata_patch == {"metadata": {"labels": {LABEL: None}, "annotations": {ANNOTATION: None}}}
    assert plan.taints_patch == {"metadata": {"resourceVersion": "4711"}, "spec": {"taints": [GPU_TAINT]}}
    assert plan.status_patch == {"status": {"conditions": [{"type": "GPUFabricVerified", "$patch": "delete"}]}}
    assert plan_removal(gb200_tray(0, 4, taints=[dict(GPU_TAINT)]), Settings()) is None
