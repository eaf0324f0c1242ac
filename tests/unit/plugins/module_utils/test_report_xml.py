# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""report.junit.xml is XML 1.0 whatever text the records carry (log lines, node labels, terminal escapes)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.report_model import build_report
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.report_records import normalise_record
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.report_render import render_junit, xml_text
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

RUN = "20261201T101500Z-ab12"
# Any code point, lone surrogates included (a log decoded with surrogateescape), C0 controls, U+FFFE.
ANY_TEXT = st.text(st.characters(min_codepoint=0, max_codepoint=0x10FFFF, categories=None), max_size=60)
HOSTILE = (
    "ERROR: cuMemCreate failed \x1b[1;31m[CUDA_ERROR_OUT_OF_MEMORY]\x1b[0m\x00",
    "rack\x07-\x1b]0;title\x07bell\x08",
    "node\udcff\ufffe\x0b\x0c\x1f",
)


def record(rack: str, summary: str, problem: str, outcome: str = "failed") -> dict:
    node = f"{rack}-t0"
    raw = {
        "check": "nvbandwidth",
        "rack": rack,
        "run_id": RUN,
        "outcome": outcome,
        "passed": False,
        "summary": summary,
        "nodes": [node],
        "failed_nodes": [node],
        "node_problems": {node: problem},
        "details": {"violations": [problem], "label": problem},
        "trays": {"expected": 1, "found": [node], "skipped": []},
    }
    return normalise_record(raw, f"records/nvbandwidth/{rack}.json")


def parsed(records: list, title: str = "t") -> ET.Element:
    text = render_junit(build_report(records, title, RUN))
    text.encode("utf-8")  # the file is written as UTF-8: a lone surrogate would raise here
    return ET.fromstring(text)  # expat: strict XML 1.0


def test_junit_of_hostile_log_lines_parses_and_keeps_the_readable_text():
    root = parsed([record(HOSTILE[1], HOSTILE[0], HOSTILE[2]), record("r2", "x", "y", "error")], title=HOSTILE[2])
    case = next(case for case in root.iter("testcase") if case.get("name") != "r2")
    assert case.get("name") == "rack\\x07-bell\\x08"
    failure = case.find("failure")
    assert failure is not None
    assert failure.get("message") == "ERROR: cuMemCreate failed [CUDA_ERROR_OUT_OF_MEMORY]\\x00"
    assert "node\\udcff\\ufffe\\x0b\\x0c\\x1f" in failure.text
    assert root.get("name") == "node\\udcff\\ufffe\\x0b\\x0c\\x1f"


def test_xml_text_keeps_what_xml_can_carry():
    assert (
        xml_text("tab\tnew\nline\r é 漢 \U0001f600 \ud7ff \ue000") == "tab\tnew\nline\r é 漢 \U0001f600 \ud7ff \ue000"
    )
    assert xml_text("\x1b[0;32mPassed\x1b[0m") == "Passed"
    assert xml_text(7) == "7"


@settings(derandomize=True, max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None)
@given(ANY_TEXT, ANY_TEXT, ANY_TEXT, ANY_TEXT, st.sampled_from(["failed", "error"]))
def test_junit_of_any_text_parses(rack, summary, problem, title, outcome):
    root = parsed([record(rack.strip() or "r", summary or "s", problem, outcome)], title=title or "t")
    assert len(list(root.iter("testcase"))) == 1
