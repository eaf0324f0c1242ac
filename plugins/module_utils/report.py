# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Turn verification records into a report: JSON, Markdown, JUnit XML and an HTML page.

Every verify role writes ``<report dir>/records/<check>.json``::

    {"check": "nvbandwidth", "passed": false, "summary": "one line",
     "details": {...}, "started": "2026-...Z", "finished": "2026-...Z",
     "cluster": {"server_version": "v1.34.4"}, "objects_left": 0}

``details`` is check specific; the renderers know a few keys that any check may carry:
``violations`` (list of sentences), ``cliques`` ({label: [nodes]}), ``unlabelled_nodes``,
``matrix`` (rows of numbers or null, an nvbandwidth matrix), ``failing_pairs`` ([{src, dst, gbps}]),
``threshold_gbps``, ``unit``, ``testcase``, ``nodes``, ``sum``, ``rows`` (nccl-tests sizes).

The output depends on the records alone (no clock is read), so rendering the same records twice
gives the same bytes and a second run of the report changes nothing.
"""

from __future__ import annotations

import html
import json
import os
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Optional

CHECK_ORDER = ("cliques", "imex_channel", "nvbandwidth", "nccl")
FORMATS = {
    "json": "report.json",
    "markdown": "report.md",
    "junit": "report.junit.xml",
    "html": "report.html",
}
JUNIT_SUITE = "gpu_fabric.mnnvl.verify"


@dataclass(frozen=True)
class RenderedFile:
    format: str
    name: str
    content: str


def _unreadable(check: str, source: str, problem: str) -> dict[str, Any]:
    return {
        "check": check,
        "passed": False,
        "summary": f"the record {source} {problem}; run the check again to rewrite it",
        "details": {},
        "source": source,
    }


def normalise_record(raw: Any, source: str) -> dict[str, Any]:
    """Return the record, or a failing stand-in that says what is wrong with it."""
    stem = os.path.splitext(os.path.basename(source))[0]
    if not isinstance(raw, dict):
        return _unreadable(stem, source, f"holds a {type(raw).__name__}, not an object")
    missing = [key for key in ("check", "passed", "summary") if key not in raw]
    if missing:
        return _unreadable(str(raw.get("check") or stem), source, f"lacks the keys {', '.join(missing)}")
    if not isinstance(raw["passed"], bool):
        return _unreadable(str(raw["check"]), source, f"has passed={raw['passed']!r}, not true or false")
    record = dict(raw)
    record["check"] = str(record["check"])
    record["summary"] = " ".join(str(record["summary"]).split())
    if not isinstance(record.get("details"), dict):
        record["details"] = {}
    record["source"] = source
    return record


def load_records(directory: str) -> list[dict[str, Any]]:
    """Read every ``*.json`` record of ``directory`` (sorted by name); unreadable ones become failures."""
    records = []
    for name in sorted(os.listdir(directory)):
        if not name.endswith(".json"):
            continue
        path = os.path.join(directory, name)
        if not os.path.isfile(path):
            continue
        try:
            with open(path, encoding="utf-8") as handle:
                raw = json.load(handle)
        except (OSError, ValueError) as exc:
            records.append(_unreadable(name[: -len(".json")], path, f"could not be read ({exc})"))
            continue
        records.append(normalise_record(raw, path))
    return records


def _order(record: dict[str, Any]) -> tuple[int, str]:
    check = record["check"]
    return (CHECK_ORDER.index(check) if check in CHECK_ORDER else len(CHECK_ORDER), check)


def _parse_time(value: Any) -> Optional[datetime]:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def duration_seconds(record: dict[str, Any]) -> Optional[float]:
    started, finished = _parse_time(record.get("started")), _parse_time(record.get("finished"))
    if started is None or finished is None:
        return None
    try:
        return round((finished - started).total_seconds(), 3)
    except TypeError:  # one aware and one naive timestamp
        return None


def cluster_of(records: list[dict[str, Any]]) -> dict[str, str]:
    """The API server the checks ran against, from the first record that names it."""
    for record in records:
        cluster = record.get("cluster")
        if isinstance(cluster, dict) and cluster.get("server_version") not in (None, "", "unknown"):
            return {key: str(value) for key, value in cluster.items() if value not in (None, "")}
    return {}


def build_report(records: list[dict[str, Any]], title: str) -> dict[str, Any]:
    """The report as data (what report.json holds)."""
    checks = sorted(records, key=_order)
    finished = [record["finished"] for record in checks if isinstance(record.get("finished"), str)]
    failed = [record["check"] for record in checks if not record["passed"]]
    started = [record["started"] for record in checks if isinstance(record.get("started"), str)]
    return {
        "title": title,
        "generated": max(finished) if finished else None,
        "started": min(started) if started else None,
        "cluster": cluster_of(checks),
        "passed": bool(checks) and not failed,
        "totals": {"checks": len(checks), "passed": len(checks) - len(failed), "failed": len(failed)},
        "failed_checks": failed,
        "checks": [dict(record, duration_seconds=duration_seconds(record)) for record in checks],
    }


def render_json(report: dict[str, Any]) -> str:
    return json.dumps(report, indent=2, sort_keys=True) + "\n"


# ----------------------------------------------------------------------------------------- Markdown


def _md(text: Any) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _number(value: Any, digits: int = 2) -> str:
    if value is None:
        return "N/A"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{value:.{digits}f}"
    return str(value)


def _duration(record: dict[str, Any]) -> str:
    seconds = record.get("duration_seconds")
    return "" if seconds is None else f"{seconds:.1f} s"


def failing_cells(details: dict[str, Any]) -> set[tuple[int, int]]:
    cells = set()
    for pair in details.get("failing_pairs") or []:
        try:
            cells.add((int(pair["src"]), int(pair["dst"])))
        except (KeyError, TypeError, ValueError):
            continue
    return cells


def _markdown_matrix(details: dict[str, Any]) -> list[str]:
    matrix = details.get("matrix")
    if not isinstance(matrix, list) or not matrix:
        return []
    failing = failing_cells(details)
    width = max(len(row) for row in matrix if isinstance(row, list))
    unit = details.get("unit") or "GB/s"
    placement = gpu_placement(details)
    lines = []
    if placement:
        where = ", ".join(f"{ranks} on {_md(node)}" for ranks, node in placement)
        lines.extend([f"GPUs {where}.", ""])
    lines += [
        f"Matrix ({_md(unit)}, row = source GPU, column = destination GPU; **bold** = below the threshold):",
        "",
        "| " + " | ".join([_md(unit)] + [str(column) for column in range(width)]) + " |",
        "| " + " | ".join(["---"] * (width + 1)) + " |",
    ]
    for src, row in enumerate(matrix):
        cells = []
        for dst, value in enumerate(row):
            text = _number(value)
            cells.append(f"**{text}**" if (src, dst) in failing else text)
        lines.append("| " + " | ".join([str(src), *cells]) + " |")
    lines.append("")
    return lines


# details key -> label, in the order the facts of a check are listed
FACTS = (
    ("gpu_nodes", "GPU nodes"),
    ("testcase", "test"),
    ("clique", "clique"),
    ("nodes", "nodes"),
    ("gpu_product", "GPU product"),
    ("gpus_per_node", "GPUs per node"),
    ("ranks", "ranks"),
    ("peak_gbps", "NVLink peak per direction (GB/s)"),
    ("min_fraction_of_peak", "fraction of the peak required"),
    ("threshold_gbps", "threshold (GB/s)"),
    ("min", "min (GB/s)"),
    ("mean", "mean (GB/s)"),
    ("max", "max (GB/s)"),
    ("sum", "sum (GB/s)"),
    ("avg_busbw_gbps", "average bus bandwidth (GB/s)"),
    ("namespace", "namespace"),
    ("compute_domain", "ComputeDomain"),
    ("job", "MPIJob"),
    ("pod", "pod"),
    ("node", "node"),
    ("channel0", "channel0"),
)


def check_facts(record: dict[str, Any]) -> list[tuple[str, str]]:
    """(label, text) pairs describing what a check ran on and measured, for both Markdown and HTML."""
    details = record.get("details") or {}
    facts = []
    for key, label in FACTS:
        value = details.get(key)
        if value in (None, "", []) or isinstance(value, (dict, bool)):
            continue
        if isinstance(value, list):
            text = ", ".join(str(item) for item in value)
        elif isinstance(value, float) and key != "min_fraction_of_peak":
            text = _number(value)
        else:
            text = str(value)
        # the ls line is quoted as it came (its spacing is part of it); other values fit on one line
        facts.append((label, text.replace("\n", " ") if key == "channel0" else " ".join(text.split())))
    if isinstance(record.get("objects_left"), int):
        facts.append(("objects left behind", str(record["objects_left"])))
    return facts


def gpu_placement(details: dict[str, Any]) -> list[tuple[str, str]]:
    """Which node holds which GPU ranks of the matrix: [("0-3", "gb200-r0-t0"), ...] (ranks fill nodes in order)."""
    nodes, per_node, matrix = details.get("nodes"), details.get("gpus_per_node"), details.get("matrix")
    if not (isinstance(nodes, list) and isinstance(per_node, int) and per_node > 0 and isinstance(matrix, list)):
        return []
    if len(nodes) * per_node != len(matrix):
        return []
    return [(f"{i * per_node}-{(i + 1) * per_node - 1}", str(node)) for i, node in enumerate(nodes)]


def node_of_gpu(details: dict[str, Any], gpu: int) -> Optional[str]:
    per_node = details.get("gpus_per_node")
    if not gpu_placement(details):
        return None
    return str(details["nodes"][gpu // per_node])


def binary_size(size: Any) -> str:
    """1073741824 -> '1 GiB': nccl-tests sizes are powers of two."""
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        return str(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or size % 1024 or unit == "GiB":
            return f"{size} {unit}"
        size //= 1024
    return str(size)


def _code(text: str) -> str:
    return text.replace("`", "'")


def _pair_nodes(details: dict[str, Any], pair: dict[str, Any]) -> str:
    try:
        src, dst = node_of_gpu(details, int(pair["src"])), node_of_gpu(details, int(pair["dst"]))
    except (KeyError, TypeError, ValueError, IndexError):
        return ""
    return "" if src is None or dst is None else _md(f"{src} -> {dst}")


def _markdown_details(record: dict[str, Any]) -> list[str]:
    details = record.get("details") or {}
    lines = [
        f"## {_md(record['check'])}",
        "",
        f"{'PASS' if record['passed'] else 'FAIL'}: {_md(record['summary'])}",
        "",
    ]
    facts = [
        f"- {label}: `{_code(text)}`" if label == "channel0" else f"- {label}: {_md(text)}"
        for label, text in check_facts(record)
    ]
    if facts:
        lines.extend([*facts, ""])
    violations = details.get("violations") or []
    if violations:
        lines.append("Problems found:")
        lines.append("")
        lines.extend(f"- {_md(violation)}" for violation in violations)
        lines.append("")
    cliques = details.get("cliques")
    if isinstance(cliques, dict) and cliques:
        lines.extend(["| clique | nodes |", "| --- | --- |"])
        for label in sorted(cliques):
            lines.append(f"| {_md(label)} | {_md(', '.join(str(node) for node in cliques[label]))} |")
        unlabelled = details.get("unlabelled_nodes") or []
        if unlabelled:
            lines.append(f"| (no label) | {_md(', '.join(str(node) for node in unlabelled))} |")
        lines.append("")
    pairs = details.get("failing_pairs") or []
    if pairs:
        lines.extend(
            ["Failing pairs:", "", "| source GPU | destination GPU | GB/s | nodes |", "| --- | --- | --- | --- |"]
        )
        lines.extend(
            f"| {pair.get('src')} | {pair.get('dst')} | {_number(pair.get('gbps'))} | {_pair_nodes(details, pair)} |"
            for pair in pairs
        )
        lines.append("")
    lines.extend(_markdown_matrix(details))
    rows = details.get("rows")
    if isinstance(rows, list) and rows:
        lines.extend(["| size | bytes | bus bandwidth (GB/s) | wrong |", "| --- | --- | --- | --- |"])
        lines.extend(
            f"| {binary_size(row.get('size_bytes'))} | {row.get('size_bytes')} | {_number(row.get('busbw_gbps'))} "
            f"| {row.get('wrong', 0)} |"
            for row in rows
        )
        lines.append("")
    return lines


def _second(timestamp: str) -> str:
    """2026-12-01T10:01:02.500000Z -> 2026-12-01T10:01:02Z: a reader needs no microseconds."""
    return re.sub(r"\.\d+(?=Z$|[+-]\d\d:\d\d$)", "", timestamp)


def run_facts(report: dict[str, Any]) -> list[tuple[str, str]]:
    """Where and when the checks ran: the header of the Markdown and HTML reports."""
    facts = []
    cluster = report.get("cluster") or {}
    if cluster:
        where = cluster.get("host", "")
        version = cluster.get("server_version")
        facts.append(("cluster", f"{where} (Kubernetes {version})".strip() if version else where))
    if report.get("started") and report.get("generated"):
        facts.append(("checks ran", f"{_second(report['started'])} to {_second(report['generated'])}"))
    elif report.get("generated"):
        facts.append(("last check finished", _second(report["generated"])))
    return facts


def render_markdown(report: dict[str, Any]) -> str:
    totals = report["totals"]
    verdict = "PASSED" if report["passed"] else "FAILED"
    lines = [
        f"# {_md(report['title'])}",
        "",
        f"**{verdict}**: {totals['passed']} of {totals['checks']} checks passed.",
        "",
    ]
    facts = [f"- {label}: {_md(text)}" for label, text in run_facts(report)]
    if facts:
        lines.extend([*facts, ""])
    lines += [
        "| check | result | summary | duration |",
        "| --- | --- | --- | --- |",
    ]
    for record in report["checks"]:
        result = "PASS" if record["passed"] else "FAIL"
        lines.append(f"| {_md(record['check'])} | {result} | {_md(record['summary'])} | {_duration(record)} |")
    lines.append("")
    for record in report["checks"]:
        lines.extend(_markdown_details(record))
    return "\n".join(lines).rstrip("\n") + "\n"


# ----------------------------------------------------------------------------------------- JUnit XML


def _failure_text(record: dict[str, Any]) -> str:
    details = record.get("details") or {}
    lines = [record["summary"]]
    lines.extend(str(violation) for violation in details.get("violations") or [])
    lines.extend(
        f"pair {pair.get('src')} -> {pair.get('dst')}: {_number(pair.get('gbps'))} GB/s"
        for pair in details.get("failing_pairs") or []
    )
    return "\n".join(lines)


def render_junit(report: dict[str, Any]) -> str:
    totals = report["totals"]
    total_time = sum(record.get("duration_seconds") or 0.0 for record in report["checks"])
    suites = ET.Element(
        "testsuites",
        {
            "name": report["title"],
            "tests": str(totals["checks"]),
            "failures": str(totals["failed"]),
            "errors": "0",
            "time": f"{total_time:.3f}",
        },
    )
    suite_attributes = {
        "name": JUNIT_SUITE,
        "tests": str(totals["checks"]),
        "failures": str(totals["failed"]),
        "errors": "0",
        "skipped": "0",
        "time": f"{total_time:.3f}",
    }
    if report.get("generated"):
        suite_attributes["timestamp"] = report["generated"]
    suite = ET.SubElement(suites, "testsuite", suite_attributes)
    for record in report["checks"]:
        case = ET.SubElement(
            suite,
            "testcase",
            {
                "classname": JUNIT_SUITE,
                "name": record["check"],
                "time": f"{record.get('duration_seconds') or 0.0:.3f}",
            },
        )
        if not record["passed"]:
            failure = ET.SubElement(case, "failure", {"message": record["summary"], "type": "VerificationFailed"})
            failure.text = _failure_text(record)
        out = ET.SubElement(case, "system-out")
        out.text = json.dumps(record.get("details") or {}, indent=2, sort_keys=True)
    ET.indent(suites)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"


# ----------------------------------------------------------------------------------------- HTML

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #1d232a; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; }
th, td { border: 1px solid #c9d1d9; padding: 0.3em 0.6em; text-align: left; }
.pass { color: #1a7f37; font-weight: bold; }
.fail { color: #cf222e; font-weight: bold; }
table.heatmap td { text-align: right; font-variant-numeric: tabular-nums; min-width: 4.5em; }
table.heatmap td.na { background: #eaeef2; color: #57606a; text-align: center; }
table.heatmap td.cell-fail { outline: 3px solid #cf222e; outline-offset: -3px; font-weight: bold; }
table.facts th { background: #f6f8fa; font-weight: normal; color: #57606a; }
table.facts { margin: 0.3em 0 1em; }
table.facts code { white-space: pre; }
"""


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


def heat_colour(value: float, low: float, high: float) -> str:
    """A red (low) to green (high) background for a matrix cell."""
    fraction = 1.0 if high <= low else max(0.0, min(1.0, (value - low) / (high - low)))
    return f"hsl({round(120 * fraction)}, 70%, 80%)"


def _gpu_header(details: dict[str, Any], gpu: int) -> str:
    node = node_of_gpu(details, gpu)
    return f"<th>{gpu}</th>" if node is None else f'<th title="GPU {gpu} on {_e(node)}">{gpu}</th>'


def render_heatmap(details: dict[str, Any]) -> str:
    matrix = details.get("matrix")
    if not isinstance(matrix, list) or not matrix:
        return ""
    failing = failing_cells(details)
    values = [value for row in matrix for value in row if isinstance(value, (int, float))]
    high = max(values, default=0.0)
    threshold = details.get("threshold_gbps")
    low = min(values + ([threshold] if isinstance(threshold, (int, float)) else []), default=0.0)
    width = max(len(row) for row in matrix)
    unit = details.get("unit") or "GB/s"
    parts = [
        '<table class="heatmap">',
        "<tr><th>" + _e(unit) + "</th>" + "".join(_gpu_header(details, column) for column in range(width)) + "</tr>",
    ]
    for src, row in enumerate(matrix):
        cells = []
        for dst, value in enumerate(row):
            if not isinstance(value, (int, float)):
                cells.append(f'<td class="na" title="GPU {src} -&gt; GPU {dst}: not measured">N/A</td>')
                continue
            state = "cell-fail" if (src, dst) in failing else "cell-ok"
            note = " (below the threshold)" if state == "cell-fail" else ""
            cells.append(
                f'<td class="{state}" style="background: {heat_colour(value, low, high)}" '
                f'title="GPU {src} -&gt; GPU {dst}: {value:.2f} {_e(unit)}{note}">{value:.2f}</td>'
            )
        parts.append(f"<tr>{_gpu_header(details, src)}{''.join(cells)}</tr>")
    parts.append("</table>")
    return "\n".join(parts)


def _html_details(record: dict[str, Any]) -> str:
    details = record.get("details") or {}
    css = "pass" if record["passed"] else "fail"
    parts = [
        f'<section id="{_e(record["check"])}">',
        f'<h2>{_e(record["check"])} <span class="{css}">{"PASS" if record["passed"] else "FAIL"}</span></h2>',
        f"<p>{_e(record['summary'])}</p>",
    ]
    facts = check_facts(record)
    if facts:
        parts.append(
            '<table class="facts">'
            + "".join(
                f"<tr><th>{_e(label)}</th><td><code>{_e(text)}</code></td></tr>"
                if label == "channel0"
                else f"<tr><th>{_e(label)}</th><td>{_e(text)}</td></tr>"
                for label, text in facts
            )
            + "</table>"
        )
    violations = details.get("violations") or []
    if violations:
        parts.append("<ul>" + "".join(f"<li>{_e(violation)}</li>" for violation in violations) + "</ul>")
    cliques = details.get("cliques")
    if isinstance(cliques, dict) and cliques:
        rows = "".join(
            f"<tr><td>{_e(label)}</td><td>{_e(', '.join(str(node) for node in cliques[label]))}</td></tr>"
            for label in sorted(cliques)
        )
        unlabelled = details.get("unlabelled_nodes") or []
        if unlabelled:
            rows += f"<tr><td>(no label)</td><td>{_e(', '.join(str(node) for node in unlabelled))}</td></tr>"
        parts.append(f"<table><tr><th>clique</th><th>nodes</th></tr>{rows}</table>")
    heatmap = render_heatmap(details)
    if heatmap:
        threshold = details.get("threshold_gbps")
        caption = "Bandwidth matrix (row = source GPU, column = destination GPU)"
        if isinstance(threshold, (int, float)):
            caption += f"; outlined cells are below the threshold of {threshold:.2f} GB/s"
        placement = gpu_placement(details)
        if placement:
            caption += "; " + "; ".join(f"GPUs {ranks} on {node}" for ranks, node in placement)
        parts.append(f"<p>{_e(caption)}.</p>")
        parts.append(heatmap)
    parts.append("</section>")
    return "\n".join(parts)


def render_html(report: dict[str, Any]) -> str:
    verdict_css = "pass" if report["passed"] else "fail"
    totals = report["totals"]
    summary_rows = "".join(
        f'<tr><td><a href="#{_e(record["check"])}">{_e(record["check"])}</a></td>'
        f'<td class="{"pass" if record["passed"] else "fail"}">{"PASS" if record["passed"] else "FAIL"}</td>'
        f"<td>{_e(record['summary'])}</td><td>{_e(_duration(record))}</td></tr>"
        for record in report["checks"]
    )
    body = "\n".join(_html_details(record) for record in report["checks"])
    facts = run_facts(report)
    header = (
        '<table class="facts">'
        + "".join(f"<tr><th>{_e(label)}</th><td>{_e(text)}</td></tr>" for label, text in facts)
        + "</table>\n"
        if facts
        else ""
    )
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{_e(report['title'])}</title>\n<style>{_STYLE}</style>\n</head>\n<body>\n"
        f"<h1>{_e(report['title'])}</h1>\n"
        f'<p class="{verdict_css}">{"PASSED" if report["passed"] else "FAILED"}: '
        f"{totals['passed']} of {totals['checks']} checks passed.</p>\n{header}"
        "<table><tr><th>check</th><th>result</th><th>summary</th><th>duration</th></tr>"
        f"{summary_rows}</table>\n{body}\n</body>\n</html>\n"
    )


RENDERERS = {
    "json": render_json,
    "markdown": render_markdown,
    "junit": render_junit,
    "html": render_html,
}


def render_report(records: list[dict[str, Any]], title: str, formats: list[str]) -> list[RenderedFile]:
    report = build_report(records, title)
    return [RenderedFile(format=fmt, name=FORMATS[fmt], content=RENDERERS[fmt](report)) for fmt in formats]
