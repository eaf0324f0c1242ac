# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""dcgm_json: ``dcgmi diag -j`` documents written from DCGM 4.6.0's source (tests/fixtures/dcgm/README.md), read
per test per GPU; nulls read as absent; a document of the wrong shape is one line (bad cases written here)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.dcgm_json import (
    DcgmParseError,
    DiagWarning,
    parse_diag_json,
    parse_diag_run,
)

DCGM = Path(__file__).resolve().parents[4] / "tests" / "fixtures" / "dcgm"


def document(name: str = "dcgm-4.6.0-r1-gpu2-row-remap-pending.json") -> dict:
    return json.loads((DCGM / name).read_text())


def software(doc: dict) -> dict:
    return doc["DCGM Diagnostic"]["test_categories"][0]["tests"][0]


def test_a_run_is_read_per_test_per_gpu_with_each_warning():
    run = parse_diag_run(document())
    assert [(r.test, r.entity_id, r.status) for r in run.results] == [
        ("software", 0, "Pass"),
        ("software", 1, "Pass"),
        ("software", 2, "Fail"),
        ("software", 3, "Pass"),
    ]
    assert run.result("software", 2).warnings[0].error_id == 85 and run.result("software", 4) is None
    assert run.found_errors and not parse_diag_run(document("dcgm-4.6.0-r1-gb200-pass.json")).found_errors


def test_a_log_line_before_the_json_is_skipped():
    text = "Successfully ran diagnostic\n" + (DCGM / "dcgm-4.6.0-r1-gb200-pass.json").read_text()
    (run,) = parse_diag_json(text).runs
    assert sorted(run.serials) == [0, 1, 2, 3]


def test_nulls_read_as_absent():
    doc = document()
    test = software(doc)
    test["results"][0]["warnings"] = None
    test["results"][0]["info"] = None
    test["results"][1]["entity_group"] = None
    test["results"][2]["warnings"].append(None)
    test["results"].append(None)
    test["test_summary"] = None
    doc["entity_groups"] = None
    doc["metadata"] = None
    doc["DCGM Diagnostic"]["test_categories"].append(None)
    doc["DCGM Diagnostic"]["test_categories"][0]["tests"].append(None)
    (run,) = parse_diag_json(json.dumps(doc)).runs
    assert [(r.entity, r.status) for r in run.results] == [
        ("GPU 0", "Pass"),
        ("GPU 1", "Pass"),
        ("GPU 2", "Fail"),
        ("GPU 3", "Pass"),
    ]
    assert run.result("software", 0).warnings == [] and run.summaries == {} and run.serials == {}
    assert run.result("software", 2).warnings == [
        DiagWarning(
            "GPU 2 had memory errors and row remappings are pending Check DCGM and system logs for errors. "
            "Reset GPU. Restart DCGM. Rerun diagnostics.",
            85,
            10,
            6,
        )
    ]
    assert run.dcgm_version == ""


@pytest.mark.parametrize(
    "change, message",
    [
        (
            lambda d: software(d)["results"][1].update(entity_id="GPU1"),
            "test software result 1 entity_id is 'GPU1', expected a number",
        ),
        (
            lambda d: software(d)["results"][1].update(entity_id=None),
            "test software result 1 has no entity_id: DCGM names the entity of every result",
        ),
        (lambda d: software(d).update(results={"GPU 0": "Pass"}), "test software results is dict, expected a list"),
        (lambda d: d["DCGM Diagnostic"].update(test_categories="software"), "test_categories is str, expected a list"),
        (
            lambda d: d.update({"DCGM Diagnostic": ["x"]}),
            "no 'DCGM Diagnostic' object (keys: DCGM Diagnostic, entity_groups, metadata)",
        ),
        (
            lambda d: software(d)["results"][2]["warnings"][0].update(error_id=[85]),
            "test software result 2 warning 0 error_id is [85], expected a number",
        ),
    ],
)
def test_a_document_of_the_wrong_shape_is_one_line_naming_the_place(change, message):
    doc = document()
    change(doc)
    with pytest.raises(DcgmParseError) as raised:
        parse_diag_json(json.dumps(doc))
    assert str(raised.value) == message


def test_no_json_and_an_empty_iterations_list_are_errors():
    with pytest.raises(DcgmParseError, match=r"^no JSON of DCGM's diagnostic$"):
        parse_diag_json("Error: unable to establish a connection to the specified host")
    with pytest.raises(DcgmParseError, match=r"^the iterations form lists no run$"):
        parse_diag_json('{"iterations": null, "Overall Result": "Pass"}')


def test_iterations_and_the_overall_result_are_read():
    report = parse_diag_json((DCGM / "dcgm-4.6.0-r1-iterations-2.json").read_text())
    assert [run.found_errors for run in report.runs] == [False, True] and report.overall == "Fail"
    assert report.found_errors


def test_the_parser_loads_no_kubernetes_client_and_no_check():

    from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import dcgm_json

    root = Path(dcgm_json.__file__).parents[5]  # the directory that holds ansible_collections
    code = (
        "import sys; import ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.dcgm_json; "
        "print(sorted(m for m in sys.modules if m.startswith(('kubernetes', 'ansible_collections')) "
        "and ('kube' in m or '.checks' in m or m.startswith('kubernetes'))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env={"PYTHONPATH": str(root)}, capture_output=True, text=True, check=False
    )
    assert (out.returncode, out.stdout.strip()) == (0, "[]"), out.stderr
