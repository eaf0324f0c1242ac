# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""fabric_verify with ``check: dcgm_diag``, run as Ansible runs it: each case of issue 40's "Seen" list for
``dcgm_diag``, put on one tray of a rack of three, fails that tray by name and only that tray, in one line. The
documents are written from DCGM 4.6.0's source (tests/fixtures/dcgm/README.md); the API server is a stand-in
(tray_pod_cluster.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.pod_sections import MARK

from tests.unit.plugins.modules.tray_pod_cluster import TRAYS, stand_in, verify

DCGM = Path(__file__).resolve().parents[3] / "fixtures" / "dcgm"
PASS = "dcgm-4.6.0-r1-gb200-pass.json"
ROW_REMAP = "dcgm-4.6.0-r1-gpu2-row-remap-pending.json"
SICK = "gb200-r0-t1"


def pod_log(text: str, status: int) -> str:
    """A pod's log: its host engine's start, then dcgmi's output and exit status."""
    return (
        f"{MARK} begin nv-hostengine\nStarted host engine version 4.6.0 using socket path: /tmp/nv-hostengine.sock\n"
        f"{MARK} end nv-hostengine rc=0\n{MARK} begin dcgmi diag\n{text.rstrip()}\n{MARK} end dcgmi diag rc={status}\n"
    )


def document(name: str = PASS) -> dict:
    return json.loads((DCGM / name).read_text())


def results(doc: dict) -> list:
    return doc["DCGM Diagnostic"]["test_categories"][0]["tests"][0]["results"]


def every_skip() -> str:
    doc = document()
    for result in results(doc):
        result.update(status="Skip", info=["The software test is not supported on this platform"])
    return pod_log(json.dumps(doc), 0)


def two_of_four() -> str:
    doc = document()
    del results(doc)[2:]
    return pod_log(json.dumps(doc), 0)


def not_run() -> str:
    doc = document()
    results(doc)[3]["status"] = "Not Run"
    return pod_log(json.dumps(doc), 0)


def warning_on_another_gpu() -> str:
    doc = document(ROW_REMAP)
    results(doc)[1]["status"] = "Fail"  # GPU 1 fails with no error of its own
    results(doc)[2]["status"] = "Pass"  # while GPU 2 passes, carrying the error
    return pod_log(json.dumps(doc), 226)


def nulls() -> str:
    doc = document(ROW_REMAP)
    results(doc)[0]["warnings"] = None
    results(doc).append(None)
    doc["entity_groups"] = None
    return pod_log(json.dumps(doc), 226)


ROW_REMAP_TEXT = (
    "GPU 2 had memory errors and row remappings are pending Check DCGM and system logs for errors. Reset GPU. "
    "Restart DCGM. Rerun diagnostics. (DCGM_FR code 85)"
)
FAULTS = {
    "every test skipped": (
        every_skip,
        "GPU 0, 1, 2, 3: software skipped, so not proven (The software test is not supported on this platform); "
        "give DCGM what the test needs or choose a level without it (dcgm_diag.level)",
    ),
    "two of four GPUs diagnosed": (
        two_of_four,
        "GPU 2, 3: software not run: DCGM printed no result for it (every test of the level runs on each of the "
        "tray's 4 GPUs)",
    ),
    "a result printed as not run": (
        not_run,
        "GPU 3: software not run: DCGM printed its result as Not Run, which proves nothing",
    ),
    "errors found with an all-pass JSON": (
        lambda: pod_log((DCGM / PASS).read_text(), 226),
        "dcgmi diag exited 226 (DCGM return code -30: errors found) but its JSON shows no error: the status and the "
        "results disagree; rerun the check and read the pod's log",
    ),
    "a warning attached to another GPU": (
        warning_on_another_gpu,
        "GPU 1: software Fail with no error from DCGM; GPU 2: software Pass with an error DCGM attached to it: "
        f"{ROW_REMAP_TEXT}; the result contradicts itself",
    ),
    "null entries": (nulls, f"GPU 2: software failed: {ROW_REMAP_TEXT}"),
}


def test_a_rack_whose_every_gpu_passed_passes(monkeypatch, tmp_path):
    stand_in(monkeypatch, "dcgm-diag", {node: pod_log((DCGM / PASS).read_text(), 0) for node in TRAYS})
    (record,) = verify(tmp_path, "dcgm_diag")["records"]
    assert (record["verdict"], record["failed_nodes"]) == ("passed", []), record["summary"]


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_each_case_fails_its_tray_by_name_and_leaves_the_others(monkeypatch, tmp_path, fault):
    make, problem = FAULTS[fault]
    logs = {node: pod_log((DCGM / PASS).read_text(), 0) for node in TRAYS}
    logs[SICK] = make()
    stand_in(monkeypatch, "dcgm-diag", logs)
    (record,) = verify(tmp_path, "dcgm_diag")["records"]
    assert (record["verdict"], record["failed_nodes"]) == ("failed", [SICK]), record["summary"]
    assert record["node_problems"] == {SICK: problem}


def test_malformed_json_fails_its_tray_in_one_line(monkeypatch, tmp_path):
    logs = {node: pod_log((DCGM / PASS).read_text(), 0) for node in TRAYS}
    logs[SICK] = pod_log((DCGM / PASS).read_text()[:400], 0)
    stand_in(monkeypatch, "dcgm-diag", logs)
    (record,) = verify(tmp_path, "dcgm_diag")["records"]
    assert (record["verdict"], record["failed_nodes"]) == ("failed", [SICK])
    problem = record["node_problems"][SICK]
    assert problem.startswith("dcgmi diag printed no result (exit 0, ") and "\n" not in problem
