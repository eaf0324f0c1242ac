# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Render the report as files: JSON (the data), Markdown and HTML (the page), JUnit XML (for a CI system).

The output depends on the records alone (no clock is read), so the same records give the same bytes
and a second run of the report changes nothing.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from typing import Any, Optional

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.outcomes import ERROR, INCOMPLETE
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.report_page import report_view
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.report_templates import (
    HTML_TEMPLATE,
    MARKDOWN_TEMPLATE,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.text import natural_key

try:
    import jinja2

    HAS_JINJA2 = True
    JINJA2_IMPORT_ERROR: Optional[ImportError] = None
except ImportError as exc:  # pragma: no cover - jinja2 comes with ansible-core
    HAS_JINJA2 = False
    JINJA2_IMPORT_ERROR = exc

FORMATS = {
    "json": "report.json",
    "markdown": "report.md",
    "junit": "report.junit.xml",
    "html": "report.html",
}
TEMPLATE_FORMATS = ("markdown", "html")
JUNIT_SUITE = "gpu_fabric.mnnvl.verify"


@dataclass(frozen=True)
class RenderedFile:
    format: str
    name: str
    content: str


class ReportError(Exception):
    """The report cannot be rendered or written; the message says why and what to do.

    ``result`` holds what the module returns with the failure besides the message (the files named so far).
    """

    def __init__(self, message: str, result: Optional[dict[str, Any]] = None) -> None:
        super().__init__(message)
        self.result = result or {}


def render_json(report: dict[str, Any]) -> str:
    return json.dumps(report, indent=2, sort_keys=True) + "\n"


# ----------------------------------------------------------------------------------------- Markdown and HTML

_MARKDOWN_TAG = re.compile(r"<(?=[A-Za-z/!?])")


def markdown_text(value: Any) -> str:
    """A value for one Markdown line or table cell: no line break, pipes and tag openers escaped."""
    if value is None:
        return ""
    text = str(value).replace("\r", " ").replace("\n", " ").replace("|", "\\|")
    return _MARKDOWN_TAG.sub("\\<", text)


def _environment(autoescape: bool) -> Any:
    if not HAS_JINJA2:
        raise ReportError(
            f"the Markdown and HTML reports need jinja2, which cannot be imported ({JINJA2_IMPORT_ERROR})"
        )
    return jinja2.Environment(
        autoescape=autoescape,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
        finalize=None if autoescape else markdown_text,
    )


def render_markdown(report: dict[str, Any]) -> str:
    return _environment(autoescape=False).from_string(MARKDOWN_TEMPLATE).render(report_view(report, heatmaps=False))


def render_html(report: dict[str, Any]) -> str:
    return _environment(autoescape=True).from_string(HTML_TEMPLATE).render(report_view(report, heatmaps=True))


# ----------------------------------------------------------------------------------------- JUnit XML

# Terminal escapes (colour, cursor) that log lines carry: dropped whole, so no "[0;31m" is left behind.
_TERMINAL_ESCAPE = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_])")
# What XML 1.0 cannot carry, not even as a character reference (its Char production): C0 controls but tab,
# line feed and carriage return; lone surrogates; U+FFFE and U+FFFF.
_NOT_XML_CHAR = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def xml_text(value: Any) -> str:
    """``value`` as text XML 1.0 can hold: terminal escapes removed, any other character outside XML 1.0
    written as ``\\xNN`` / ``\\uNNNN`` so the log line stays readable and the file stays parseable."""
    text = _TERMINAL_ESCAPE.sub("", str(value))
    return _NOT_XML_CHAR.sub(lambda match: ascii(match.group())[1:-1], text)


def _xml_safe(root: ET.Element) -> ET.Element:
    """Every text, tail and attribute of ``root``'s tree made XML 1.0 text: the one rule for all of them,
    so a CI server that parses the file strictly never drops it for one control character of a log line."""
    for element in root.iter():
        if element.text is not None:
            element.text = xml_text(element.text)
        if element.tail is not None:
            element.tail = xml_text(element.tail)
        for key, value in list(element.attrib.items()):
            element.attrib[key] = xml_text(value)
    return root


def _failure_text(record: dict[str, Any]) -> str:
    details = record.get("details") or {}
    lines = [record["summary"]]
    lines.extend(
        f"{node}: {record['node_problems'][node]}"
        for node in sorted(record["failed_nodes"], key=natural_key)
        if node in record["node_problems"]
    )
    lines.extend(str(violation) for violation in details.get("violations") or [])
    return "\n".join(lines)


def _system_out(record: dict[str, Any]) -> str:
    """The record's details for the CI system, without the matrix (report.json has it)."""
    details = {key: value for key, value in (record.get("details") or {}).items() if key != "matrix"}
    facts = {key: record.get(key) for key in ("nodes", "failed_nodes", "node_problems", "trays", "run_id", "source")}
    return json.dumps(dict(facts, details=details), indent=2, sort_keys=True)


def render_junit(report: dict[str, Any]) -> str:
    """One test case per (check, rack): classname gpu_fabric.<check>, name <rack>."""
    totals = report["totals"]
    checks = report["checks"]
    skipped = [record for record in checks if record["passed"] and record["outcome"] == INCOMPLETE]
    total_time = sum(record.get("duration_seconds") or 0.0 for record in checks)
    counts = {
        "tests": str(totals["checks"]),
        "failures": str(totals["failed"]),
        "errors": str(totals["errors"]),
        "skipped": str(len(skipped)),
        "time": f"{total_time:.3f}",
    }
    suites = ET.Element("testsuites", {"name": report["title"], **counts})
    suite_attributes = {"name": JUNIT_SUITE, **counts}
    if report.get("generated"):
        suite_attributes["timestamp"] = report["generated"]
    suite = ET.SubElement(suites, "testsuite", suite_attributes)
    # the GPU trays as the summary line counts them (report_model.coverage_of): one story in every format
    properties = ET.SubElement(suite, "properties")
    for state, count in report["coverage"]["counts"].items():
        ET.SubElement(properties, "property", {"name": f"gpu_trays_{state}", "value": str(count)})
    for record in checks:
        case = ET.SubElement(
            suite,
            "testcase",
            {
                "classname": f"gpu_fabric.{record['check']}",
                "name": record["rack"],
                "time": f"{record.get('duration_seconds') or 0.0:.3f}",
            },
        )
        if record["verdict"] == ERROR:  # the check could not run: a CI system shows it apart from failures
            error = ET.SubElement(case, "error", {"message": record["summary"], "type": "VerificationError"})
            error.text = _failure_text(record)
        elif not record["passed"]:
            kind = "VerificationIncomplete" if record["outcome"] == INCOMPLETE else "VerificationFailed"
            failure = ET.SubElement(case, "failure", {"message": record["summary"], "type": kind})
            failure.text = _failure_text(record)
        elif record["outcome"] == INCOMPLETE:
            ET.SubElement(case, "skipped", {"message": record["summary"]})
        out = ET.SubElement(case, "system-out")
        out.text = _system_out(record)
    ET.indent(_xml_safe(suites))
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"


RENDERERS = {
    "json": render_json,
    "markdown": render_markdown,
    "junit": render_junit,
    "html": render_html,
}


def render_report(report: dict[str, Any], formats: list[str]) -> list[RenderedFile]:
    return [RenderedFile(format=fmt, name=FORMATS[fmt], content=RENDERERS[fmt](report)) for fmt in formats]
