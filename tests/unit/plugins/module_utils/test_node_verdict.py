# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""node_verdict: writing each GB200 tray's verdict through a fake API server, and the errors of its calls."""

from __future__ import annotations

import copy
import json
from datetime import timedelta

import pytest
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.node_plan import Settings as VerdictSettings
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.node_plan import desired_patch, plan_node
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.node_verdict import (
    JSON_MERGE_PATCH,
    STRATEGIC_MERGE_PATCH,
    NodeVerdictError,
    Request,
    error_line,
    write_verdicts,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.tray_verdict import TrayVerdict
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic.exceptions import (
    ConflictError,
    ForbiddenError,
    NotFoundError,
    ServiceUnavailableError,
    TooManyRequestsError,
)
from urllib3.exceptions import MaxRetryError, NewConnectionError
from verdict_nodes import (
    ANNOTATION,
    CONDITIONS,
    FAILED_SUMMARY,
    GPU_TAINT,
    LABEL,
    LATER,
    NOW,
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
    until,
    verified_tray,
)

# --- API errors ---------------------------------------------------------------------------------------------


def api_error(cls, status, reason, message=None, content_type="application/json"):
    exc = ApiException(status=status, reason=reason)
    exc.headers = {"Content-Type": content_type, "Audit-Id": "5e0c9c53-5bd4-4c77-b5b8-0b0b3f0a1d2e"}
    if message is not None:
        exc.body = json.dumps(
            {
                "kind": "Status",
                "apiVersion": "v1",
                "status": "Failure",
                "message": message,
                "reason": reason,
                "code": status,
            }
        )
    return cls(exc)


def conflict(name):
    return api_error(
        ConflictError,
        409,
        "Conflict",
        f'Operation cannot be fulfilled on nodes "{name}": the object has been modified; '
        "please apply your changes to the latest version and try again",
    )


def test_error_line_holds_the_message_and_no_headers():
    exc = api_error(
        ForbiddenError,
        403,
        "Forbidden",
        'nodes "gb200-r0-t3" is forbidden: User "verifier" cannot patch resource "nodes"',
    )
    assert error_line(exc) == (
        '403 Forbidden: nodes "gb200-r0-t3" is forbidden: User "verifier" cannot patch resource "nodes"'
    )
    html = api_error(ServiceUnavailableError, 503, "Service Unavailable", None, "text/html")
    html.body = "<html>\n<body>upstream\nconnect error</body>\n</html>"
    assert error_line(html) == "503 Service Unavailable: upstream connect error"
    empty = api_error(ServiceUnavailableError, 503, "Service Unavailable")
    assert error_line(empty) == "503 Service Unavailable"


# --- writing through a fake API server ----------------------------------------------------------------------


class NodeResource(str):
    """The Node resource and its ``status`` subresource, as the dynamic client names them."""

    def __new__(cls):
        return super().__new__(cls, "nodes")

    @property
    def subresources(self):
        return {"status": "nodes/status"}


class FakeNodes:
    """Enough of kubernetes.core's K8SClient for Nodes: list, get, and both patch types with preconditions."""

    def __init__(self, *nodes):
        self.nodes = {n["metadata"]["name"]: copy.deepcopy(n) for n in nodes}
        self.patches = []
        self.failures = []  # exceptions raised by the next calls, in order
        self.before_patch = None  # called before a patch is applied (another writer changing the node)
        self.calls = 0

    def resource(self, kind, api_version):
        assert (kind, api_version) == ("Node", "v1")
        return NodeResource()

    def _maybe_fail(self):
        self.calls += 1
        if self.failures:
            raise self.failures.pop(0)

    def get(self, resource, name=None, **params):
        self._maybe_fail()
        if name is None:
            return {"metadata": {}, "items": [copy.deepcopy(n) for n in self.nodes.values()]}
        if name not in self.nodes:
            raise api_error(NotFoundError, 404, "Not Found", f'nodes "{name}" not found')
        return copy.deepcopy(self.nodes[name])

    def patch(self, resource, body, name=None, content_type=None):
        self._maybe_fail()
        if self.before_patch:
            self.before_patch(self)
        if name not in self.nodes:
            raise api_error(NotFoundError, 404, "Not Found", f'nodes "{name}" not found')
        node = self.nodes[name]
        wanted_version = (body.get("metadata") or {}).get("resourceVersion")
        if wanted_version and wanted_version != node["metadata"]["resourceVersion"]:
            raise conflict(name)
        if resource == "nodes/status":
            self.patches.append((f"{name}/status", content_type, copy.deepcopy(body)))
            conditions = node["status"].setdefault("conditions", [])
            for change in body["status"]["conditions"]:  # a strategic merge by type
                kept = [c for c in conditions if c["type"] != change["type"]]
                conditions[:] = kept if change.get("$patch") == "delete" else [*kept, change]
            self.bump(name)
            return copy.deepcopy(node)
        self.patches.append((name, content_type, copy.deepcopy(body)))
        for key in ("labels", "annotations"):
            values = node["metadata"].setdefault(key, {})
            for item, value in ((body.get("metadata") or {}).get(key) or {}).items():
                if value is None:
                    values.pop(item, None)
                else:
                    values[item] = value
        if "spec" in body:
            node["spec"]["taints"] = body["spec"]["taints"]
        self.bump(name)
        return copy.deepcopy(node)

    def bump(self, name):
        meta = self.nodes[name]["metadata"]
        meta["resourceVersion"] = str(int(meta["resourceVersion"]) + 1)


TRAYS = {
    "gb200-r0-t2": {
        "verdict": "passed",
        "rack": "rack0",
        "checks_failed": [],
        "checks_passed": ["nvbandwidth"],
        "summary": "rack0: 4 of 4 checks passed",
    },
    "gb200-r0-t3": {"verdict": "failed", "rack": "rack0", "checks_failed": ["nvbandwidth"], "summary": FAILED_SUMMARY},
}


def test_write_taints_and_labels_then_nothing_on_the_second_run():
    api = FakeNodes(gb200_tray(0, 2, taints=[dict(OUR_TAINT)]), gb200_tray(0, 3, taints=[dict(GPU_TAINT)]))
    result = write_verdicts(api, Request(TRAYS, TIME, TAINTING))
    assert result["changed"] is True
    assert result["changed_nodes"] == ["gb200-r0-t2", "gb200-r0-t3"]
    assert result["nodes"] == {
        "gb200-r0-t2": {"label": "passed", "taint": "removed", "changed": True},
        "gb200-r0-t3": {"label": "failed", "taint": "added", "changed": True},
    }
    assert result["warnings"] == []
    # taints first, with the resourceVersion they were computed from; then the labels
    assert [(name, kind) for name, kind, _body in api.patches] == [
        ("gb200-r0-t2", JSON_MERGE_PATCH),
        ("gb200-r0-t2", STRATEGIC_MERGE_PATCH),
        ("gb200-r0-t3", JSON_MERGE_PATCH),
        ("gb200-r0-t3", STRATEGIC_MERGE_PATCH),
    ]
    assert api.nodes["gb200-r0-t3"]["spec"]["taints"] == [GPU_TAINT, OUR_TAINT]
    assert api.nodes["gb200-r0-t2"]["spec"]["taints"] == []
    assert result["diff"]["before"]["gb200-r0-t3"]["taints"] == [GPU_TAINT]
    assert result["diff"]["after"]["gb200-r0-t3"]["labels"] == labels("failed")

    api.patches.clear()
    again = write_verdicts(api, Request(TRAYS, TIME, TAINTING))
    assert again["changed"] is False
    assert again["changed_nodes"] == []
    assert again["diff"] == {"before": {}, "after": {}}
    assert api.patches == []


def test_check_mode_reports_and_changes_nothing():
    api = FakeNodes(gb200_tray(0, 2), gb200_tray(0, 3))
    result = write_verdicts(api, Request(TRAYS, TIME, TAINTING, check_mode=True))
    assert result["changed"] is True
    assert result["nodes"]["gb200-r0-t3"] == {"label": "failed", "taint": "added", "changed": True}
    assert result["diff"]["after"]["gb200-r0-t3"]["taints"] == [OUR_TAINT]
    assert api.patches == []
    assert api.nodes["gb200-r0-t3"] == gb200_tray(0, 3)


def test_a_node_that_is_gone_is_a_warning():
    api = FakeNodes(gb200_tray(0, 3))
    result = write_verdicts(api, Request(TRAYS, TIME))
    assert result["warnings"] == ["node gb200-r0-t2 does not exist; its verdict (passed) was not written"]
    assert result["nodes"]["gb200-r0-t2"] == {"label": None, "taint": "unchanged", "changed": False}
    assert result["changed_nodes"] == ["gb200-r0-t3"]


def test_a_node_deleted_between_the_list_and_the_patch_is_a_warning():
    api = FakeNodes(gb200_tray(0, 3))
    api.before_patch = lambda fake: fake.nodes.pop("gb200-r0-t3")
    result = write_verdicts(api, Request({"gb200-r0-t3": TRAYS["gb200-r0-t3"]}, TIME))
    assert result["changed"] is False
    assert result["warnings"] == ["node gb200-r0-t3 does not exist; its verdict (failed) was not written"]


def test_a_taint_added_by_another_writer_meanwhile_is_kept():
    api = FakeNodes(gb200_tray(0, 3))
    unreachable = {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute", "timeAdded": "2026-12-01T10:21:40Z"}

    def node_controller(fake):
        fake.before_patch = None
        fake.nodes["gb200-r0-t3"]["spec"]["taints"] = [dict(unreachable)]
        fake.bump("gb200-r0-t3")

    api.before_patch = node_controller
    result = write_verdicts(api, Request({"gb200-r0-t3": TRAYS["gb200-r0-t3"]}, TIME, TAINTING))
    assert result["nodes"]["gb200-r0-t3"] == {"label": "failed", "taint": "added", "changed": True}
    assert api.nodes["gb200-r0-t3"]["spec"]["taints"] == [unreachable, OUR_TAINT]
    assert api.patches[0] == (
        "gb200-r0-t3",
        JSON_MERGE_PATCH,
        {"metadata": {"resourceVersion": "4712"}, "spec": {"taints": [unreachable, OUR_TAINT]}},
    )


def test_a_node_that_never_settles_fails_naming_it():
    api = FakeNodes(gb200_tray(0, 3))
    api.before_patch = lambda fake: fake.bump("gb200-r0-t3")
    with pytest.raises(NodeVerdictError) as caught:
        write_verdicts(api, Request({"gb200-r0-t3": TRAYS["gb200-r0-t3"]}, TIME, TAINTING))
    assert caught.value.message.startswith(
        "cannot write the verdict to node gb200-r0-t3: the node changed 5 times while its taints were rewritten"
    )


def test_transient_errors_are_retried_with_a_back_off():
    api = FakeNodes(gb200_tray(0, 3))
    api.failures = [
        MaxRetryError(None, "/api/v1/nodes", NewConnectionError(None, "Connection refused")),
        api_error(TooManyRequestsError, 429, "Too Many Requests", "client rate limiter"),
    ]
    pauses = []
    result = write_verdicts(api, Request({"gb200-r0-t3": TRAYS["gb200-r0-t3"]}, TIME), sleep=pauses.append)
    assert pauses == [0.5, 1.0]
    assert result["changed_nodes"] == ["gb200-r0-t3"]


def test_a_final_transient_failure_is_one_line_naming_the_node():
    api = FakeNodes(gb200_tray(0, 2), gb200_tray(0, 3))
    unavailable = api_error(ServiceUnavailableError, 503, "Service Unavailable", "etcdserver: leader changed")
    pauses = []
    # the list and the first node pass; every call for gb200-r0-t3 answers 503
    original_patch = api.patch

    def patch(resource, body, name=None, content_type=None):
        if name == "gb200-r0-t3":
            raise unavailable
        return original_patch(resource, body, name=name, content_type=content_type)

    api.patch = patch
    with pytest.raises(NodeVerdictError) as caught:
        write_verdicts(api, Request(TRAYS, TIME), sleep=pauses.append)
    message = caught.value.message
    assert message == (
        "cannot patch node gb200-r0-t3 after 4 attempts: 503 Service Unavailable: etcdserver: leader changed; "
        "check that the API server runs and that the kubeconfig (gpu_fabric_kubeconfig, K8S_AUTH_KUBECONFIG) or the "
        "host options point at it, then run it again"
    )
    assert "\n" not in message and "Audit-Id" not in message
    assert pauses == [0.5, 1.0, 2.0]
    assert caught.value.result["changed_nodes"] == ["gb200-r0-t2"]


def test_a_refusal_is_not_retried():
    api = FakeNodes(gb200_tray(0, 3))
    forbidden = api_error(
        ForbiddenError,
        403,
        "Forbidden",
        'nodes "gb200-r0-t3" is forbidden: User "verifier" cannot patch resource "nodes"',
    )

    def patch(resource, body, name=None, content_type=None):
        raise forbidden

    api.patch = patch
    pauses = []
    with pytest.raises(NodeVerdictError) as caught:
        write_verdicts(api, Request({"gb200-r0-t3": TRAYS["gb200-r0-t3"]}, TIME), sleep=pauses.append)
    assert caught.value.message == (
        'the API server refused to patch node gb200-r0-t3: 403 Forbidden: nodes "gb200-r0-t3" is forbidden: '
        'User "verifier" cannot patch resource "nodes"'
    )
    assert pauses == []


def test_bad_input_fails_before_any_call():
    api = FakeNodes(gb200_tray(0, 3))
    with pytest.raises(NodeVerdictError) as caught:
        write_verdicts(api, Request({"gb200-r0-t3": {"verdict": "broken"}}, "now"))
    assert caught.value.message == (
        "time is 'now'; expected an RFC 3339 date-time such as 2026-12-01T10:15:00Z (the run's finish); "
        "trays['gb200-r0-t3'].verdict is 'broken'; expected one of passed, failed, skipped"
    )
    assert api.calls == 0


# --- the run, the expiry and conditions ---------------------------------------------------------------------


def test_a_verdict_with_its_condition_already_written_needs_no_patch():
    api = FakeNodes(gb200_tray(0, 2), gb200_tray(0, 3))
    write_verdicts(api, Request(TRAYS, TIME, CONDITIONS, run_id=RUN, now=NOW))
    node = api.nodes["gb200-r0-t3"]
    assert desired_patch(node, failed(), TIME, CONDITIONS, RUN) is None
    assert [c["type"] for c in node["status"]["conditions"]] == ["Ready", "GPUFabricVerified"]


def test_a_run_with_conditions_writes_each_tray_and_marks_expired_nodes_it_did_not_verify():
    old = gb200_tray(1, 0, labels=labels("passed"), annotations={ANNOTATION: annotation("passed", "ok")})
    api = FakeNodes(gb200_tray(0, 2), gb200_tray(0, 3), old, gb200_tray(1, 1))
    later = NOW + timedelta(days=8)
    trays = {**TRAYS, "gb200-r1-1": {"verdict": "skipped", "summary": "x"}}
    result = write_verdicts(api, Request(trays, "2026-12-09T10:00:00Z", CONDITIONS, run_id=RUN, now=later))
    assert result["nodes"]["gb200-r1-t0"] == {
        "label": "passed",
        "taint": "unchanged",
        "condition": "Unknown",
        "changed": True,
    }
    assert "gb200-r1-t1" not in result["nodes"]
    assert result["nodes"]["gb200-r0-t3"]["condition"] == "False"
    assert ("gb200-r1-t0/status", STRATEGIC_MERGE_PATCH) in [(n, k) for n, k, _body in api.patches]
    assert [(c["type"], c["status"]) for c in api.nodes["gb200-r1-t0"]["status"]["conditions"]] == [
        ("Ready", "True"),
        ("GPUFabricVerified", "Unknown"),
    ]
    # the second identical run changes nothing
    api.patches.clear()
    again = write_verdicts(api, Request(trays, "2026-12-09T10:00:00Z", CONDITIONS, run_id=RUN, now=later))
    assert (again["changed"], api.patches) == (False, [])


def test_check_mode_with_conditions_writes_nothing_and_diffs_the_condition():
    api = FakeNodes(gb200_tray(0, 2), gb200_tray(0, 3))
    result = write_verdicts(api, Request(TRAYS, TIME, CONDITIONS, check_mode=True, run_id=RUN, now=NOW))
    assert result["changed_nodes"] == ["gb200-r0-t2", "gb200-r0-t3"]
    assert result["diff"]["before"]["gb200-r0-t3"]["condition"] is None
    assert result["diff"]["after"]["gb200-r0-t3"]["condition"]["reason"] == "CheckFailed"
    assert api.patches == []


def test_valid_hours_must_be_positive():
    with pytest.raises(NodeVerdictError, match="valid_hours is 0"):
        write_verdicts(FakeNodes(), Request(TRAYS, TIME, Settings(valid_hours=0)))


# --- the uninstall ------------------------------------------------------------------------------------------


def test_the_removal_cleans_every_node_then_has_nothing_left():
    node = verified_tray("failed", FAILED_SUMMARY, taints=[dict(OUR_TAINT)])
    api = FakeNodes(node, gb200_tray(0, 4))
    write_verdicts(api, Request({"gb200-r0-t3": TRAYS["gb200-r0-t3"]}, TIME, CONDITIONS, now=NOW))
    result = write_verdicts(api, Request({}, "", state="absent"))
    assert result["changed_nodes"] == ["gb200-r0-t3"]
    cleaned = api.nodes["gb200-r0-t3"]
    assert LABEL not in cleaned["metadata"]["labels"] and UNTIL not in cleaned["metadata"]["labels"]
    assert ANNOTATION not in cleaned["metadata"]["annotations"]
    assert cleaned["spec"]["taints"] == []
    assert [c["type"] for c in cleaned["status"]["conditions"]] == ["Ready"]
    assert write_verdicts(api, Request({}, "", state="absent"))["changed"] is False


# --- per-check state, forward only, times that cannot be read, the refresh ----------------------------------

DEFAULT_SITE = VerdictSettings(condition=True)  # the default required checks: cliques, imex_channel, nvbandwidth


def ran(*checks, node="gb200-r0-t3", failed_checks=()):
    outcomes = tuple((check, "failed" if check in failed_checks else "passed", "") for check in checks)
    return TrayVerdict(node=node, verdict="failed" if failed_checks else "passed", outcomes=outcomes)


def written_state(node):
    return json.loads(node["metadata"]["annotations"][ANNOTATION])


def test_a_cliques_only_run_leaves_the_tray_incomplete_not_verified():
    api = FakeNodes(gb200_tray(0, 3))
    write = Request(
        {"gb200-r0-t3": {"verdict": "passed", "checks": {"cliques": {"outcome": "passed"}}}},
        TIME,
        DEFAULT_SITE,
        run_id=RUN,
        now=NOW,
    )
    result = write_verdicts(api, write)
    node = api.nodes["gb200-r0-t3"]
    assert result["nodes"]["gb200-r0-t3"] == {
        "label": "incomplete",
        "taint": "unchanged",
        "changed": True,
        "condition": "Unknown",
    }
    assert node["metadata"]["labels"][LABEL] == "incomplete" and UNTIL not in node["metadata"]["labels"]
    state = written_state(node)
    assert list(state["checks"]) == ["cliques"] and "valid_until" not in state
    assert state["summary"] == "incomplete: imex_channel never verified the tray; nvbandwidth never verified the tray"
    condition = node["status"]["conditions"][-1]
    assert (condition["status"], condition["reason"]) == ("Unknown", "ChecksMissing")

    # the other two checks pass an hour later: the tray passes until the cliques verdict, the earliest, expires
    later_time = "2026-12-01T11:21:37Z"
    rest = {
        "verdict": "passed",
        "checks": {"imex_channel": {"outcome": "passed"}, "nvbandwidth": {"outcome": "passed"}},
    }
    write_verdicts(
        api, Request({"gb200-r0-t3": rest}, later_time, DEFAULT_SITE, run_id="r2", now=NOW + timedelta(hours=1))
    )
    state = written_state(api.nodes["gb200-r0-t3"])
    assert (state["verdict"], state["valid_until"], state["run"]) == ("passed", "2026-12-08T10:21:37Z", "r2")
    assert api.nodes["gb200-r0-t3"]["metadata"]["labels"][UNTIL] == until(TIME)
    assert {name: entry["run"] for name, entry in state["checks"].items()} == {
        "cliques": RUN,
        "imex_channel": "r2",
        "nvbandwidth": "r2",
    }


def test_an_older_run_never_replaces_a_newer_check_entry_and_says_so():
    newer = ran("nvbandwidth", failed_checks=("nvbandwidth",))
    node = gb200_tray(0, 3)
    node["metadata"]["annotations"][ANNOTATION] = plan_node(node, newer, LATER, Settings(), "new").metadata_patch[
        "metadata"
    ]["annotations"][ANNOTATION]
    # a run that finished before LATER (its report written late) passed nvbandwidth and cliques
    plan = plan_node(node, ran("cliques", "nvbandwidth"), TIME, Settings(), "old")
    state = json.loads(plan.metadata_patch["metadata"]["annotations"][ANNOTATION])
    assert state["checks"]["nvbandwidth"]["run"] == "new" and state["checks"]["nvbandwidth"]["outcome"] == "failed"
    assert state["checks"]["cliques"]["run"] == "old"
    assert state["verdict"] == "failed"
    assert plan.kept_newer == {"nvbandwidth": LATER}
    api = FakeNodes(node)
    result = write_verdicts(
        api,
        Request(
            {"gb200-r0-t3": {"verdict": "passed", "checks_passed": ["nvbandwidth"]}}, TIME, Settings(), run_id="old"
        ),
    )
    assert result["nodes"]["gb200-r0-t3"] == {
        "label": None,
        "taint": "unchanged",
        "changed": False,
        "kept_newer": {"nvbandwidth": LATER},
    }
    assert api.patches == []


@pytest.mark.parametrize("bad", ["0001-01-01T00:00:00+01:00", "yesterday", 1796578800])
def test_a_time_on_a_node_that_cannot_be_read_stops_the_run_before_any_patch(bad):
    good = gb200_tray(0, 2)
    broken = verified_tray()
    record = json.loads(broken["metadata"]["annotations"][ANNOTATION])
    record["checks"]["nvbandwidth"]["time"] = bad
    broken["metadata"]["annotations"][ANNOTATION] = json.dumps(record)
    api = FakeNodes(good, broken)
    trays = {"gb200-r0-t2": TRAYS["gb200-r0-t2"], "gb200-r0-t3": TRAYS["gb200-r0-t3"]}
    with pytest.raises(NodeVerdictError) as raised:
        write_verdicts(api, Request(trays, LATER, Settings()))
    assert raised.value.message == (
        f"nothing was written: the annotation {ANNOTATION} of node gb200-r0-t3: checks.nvbandwidth.time "
        f"{bad!r} is "
        + ("out of range" if bad == "0001-01-01T00:00:00+01:00" else "not an RFC 3339 date-time")
        + f"; correct it or remove it (kubectl annotate node <node> {ANNOTATION}-, the tray is then due for every "
        "check) and run again"
    )
    assert api.patches == []


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("0001-01-01T00:30:00+01:00", "time '0001-01-01T00:30:00+01:00' is out of range"),
        ("9999-12-31T23:00:00Z", "time '9999-12-31T23:00:00Z' is out of range (1970 to 9998)"),
        ("9998-12-31T23:00:00Z", "time '9998-12-31T23:00:00Z' plus valid_hours 168 is past the year 9998"),
        ("1960-01-01T00:00:00Z", "time '1960-01-01T00:00:00Z' is out of range (1970 to 9998)"),
    ],
)
def test_a_run_time_that_cannot_be_written_is_refused_before_any_call(value, problem):
    api = FakeNodes(gb200_tray(0, 3))
    with pytest.raises(NodeVerdictError) as raised:
        write_verdicts(api, Request({"gb200-r0-t3": TRAYS["gb200-r0-t3"]}, value, Settings()))
    assert raised.value.message.startswith(problem + "; expected an RFC 3339 date-time")
    assert api.calls == 0


def test_the_refresh_shows_an_expired_verdict_without_any_check():
    fresh = verified_tray(time=TIME)
    api = FakeNodes(fresh, gb200_tray(0, 4))
    settings = Settings(condition=True)
    # within the validity: nothing to refresh
    assert write_verdicts(api, Request({}, "", Settings(), now=NOW, state="refreshed"))["changed_nodes"] == []
    expired = NOW + timedelta(days=8)
    result = write_verdicts(api, Request({}, "", settings, now=expired, state="refreshed"))
    assert result["changed_nodes"] == ["gb200-r0-t3"]
    assert result["nodes"] == {
        "gb200-r0-t3": {"label": "incomplete", "taint": "unchanged", "changed": True, "condition": "Unknown"}
    }
    node = api.nodes["gb200-r0-t3"]
    assert node["metadata"]["labels"][LABEL] == "incomplete" and UNTIL not in node["metadata"]["labels"]
    assert written_state(node)["summary"] == "incomplete: nvbandwidth expired at 2026-12-08T10:21:37Z"
    assert written_state(node)["checks"] == json.loads(annotation("passed", "", TIME))["checks"]  # entries kept
    condition = node["status"]["conditions"][-1]
    assert (condition["status"], condition["reason"], condition["lastHeartbeatTime"]) == (
        "Unknown",
        "VerdictExpired",
        "2026-12-08T10:21:37Z",
    )
    again = write_verdicts(api, Request({}, "", settings, now=expired, state="refreshed"))
    assert again["changed"] is False
