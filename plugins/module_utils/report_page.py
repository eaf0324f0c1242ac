# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The report as its page shows it: ``report_view`` gives the Markdown and HTML templates everything ready.

The data of ``report_model.build_report`` becomes plain strings and lists: the verdict and its words,
the facts of the run (``run_facts``), the fleet table of racks and checks, the map of every tray, the
trend table with a chart per row (``trend_view``) and per tray (``tray_trend_view``), one section per rack
and check (``report_sections.section_view``), the skipped trays and the trays due next (``due_view``). The
templates of ``report_templates`` only loop over it; the charts come ready from ``report_chart``.
"""

from __future__ import annotations

import re
from typing import Any

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.check_view import number
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.outcomes import ERROR, FAILED, PASSED
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.report_chart import block_sparkline, sparkline_svg
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.report_model import (
    check_key,
    coverage_words,
    verdict_words,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.report_sections import (
    LIST_LIMIT,
    anchor,
    outcome_cell,
    section_view,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.text import natural_key, plural
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.tray_state import DEFAULT_VALID_HOURS

NO_CELL = "\u2014"  # em dash: the check has no record for the rack


def _drop_text(row: dict[str, Any]) -> str:
    drop = row.get("drop_fraction")
    return "-" if drop is None else f"{100 * drop:.1f}%" + (" DROP" if row.get("dropped") else "")


def chart_label(subject: str, figure: str, values: list[float], baseline: Any, row: dict[str, Any]) -> str:
    """The chart's words: 'nvbandwidth of rack0, median GB/s of the last 3 runs: 820.00, 818.00, 776.00;
    baseline 820.00; 5.4% below it, flagged'."""
    words = f"{subject}, {figure} of the last {plural(len(values), 'run')}: {', '.join(number(v) for v in values)}"
    words += f"; baseline {number(baseline)}" if baseline is not None else "; no baseline yet"
    drop = row.get("drop_fraction")
    if drop is not None:
        words += f"; {100 * abs(drop):.1f}% {'below' if drop >= 0 else 'above'} it"
        words += ", flagged" if row.get("dropped") else ""
    return words


def trend_view(report: dict[str, Any]) -> list[dict[str, str]]:
    """The trend table's rows, as text: figures in GB/s, the drop as a percentage, flagged rows marked, and the
    runs' medians as a chart (``chart``: SVG; ``spark``: block characters)."""
    rows = []
    for row in report.get("trends") or []:
        medians = [point["median_gbps"] for point in row.get("series") or []]
        label = chart_label(
            f"{row['check']} of {row['rack']}", "median GB/s", medians, row.get("baseline_median_gbps"), row
        )
        rows.append(
            {
                "check": row["check"],
                "rack": row["rack"],
                "runs": str(row["runs"]),
                "median": number(row.get("median_gbps")),
                "min": number(row.get("min_gbps")),
                "latest": number(row.get("latest_median_gbps")),
                "baseline": f"{number(row['baseline_median_gbps'])} ({row['baseline_source']})"
                if row.get("baseline_source")
                else "none yet",
                "drop": _drop_text(row),
                "css": "fail" if row.get("dropped") else "",
                "chart": sparkline_svg(medians, label, row.get("baseline_median_gbps"), bool(row.get("dropped"))),
                "spark": block_sparkline(medians),
            }
        )
    return rows


def tray_trend_view(report: dict[str, Any]) -> list[dict[str, Any]]:
    """Per (check, rack) trend, its trays with two runs or more as small charts of their lowest pair (``trays``),
    and the flagged ones as text rows (``dropped``, the Markdown table)."""
    views = []
    for row in report.get("trends") or []:
        charted = [tray for tray in row.get("trays") or [] if tray["runs"] >= 2]
        if not charted:
            continue
        prefix = _common_prefix([tray["node"] for tray in charted])
        trays, dropped = [], []
        for tray in sorted(charted, key=lambda item: natural_key(item["node"])):
            values = [point["gbps"] for point in tray["series"]]
            label = chart_label(tray["node"], "lowest pair GB/s", values, tray.get("baseline_gbps"), tray)
            trays.append(
                {
                    "label": _tray_label(tray["node"], prefix),
                    "css": "spark-tray spark-tray-drop" if tray["dropped"] else "spark-tray",
                    "chart": sparkline_svg(values, label, tray.get("baseline_gbps"), tray["dropped"], 96, 24),
                }
            )
            if tray["dropped"]:
                dropped.append(
                    {
                        "node": tray["node"],
                        "runs": str(tray["runs"]),
                        "spark": block_sparkline(values),
                        "latest": number(tray.get("latest_gbps")),
                        "baseline": number(tray.get("baseline_gbps")),
                        "drop": _drop_text(tray),
                    }
                )
        views.append(
            {
                "check": row["check"],
                "rack": row["rack"],
                "caption": f"{row['check']} of {row['rack']}: {plural(len(trays), 'tray')}, "
                f"{len(dropped)} below the baseline beyond the tolerance",
                "trays": trays,
                "dropped": dropped,
            }
        )
    return views


def due_view(report: dict[str, Any]) -> dict[str, Any]:
    """The trays due next (at most LIST_LIMIT rows, then a line for the rest) and the words above them."""
    due = report.get("due") or []
    rows = [
        {
            "node": entry["node"],
            "rack": entry["rack"],
            "due": _second(entry["due"]) if entry["due"] else "-",
            "reason": entry["reason"],
            "css": {FAILED: "fail", "skipped": "incomplete"}.get(entry["verdict"], ""),
        }
        for entry in due[:LIST_LIMIT]
    ]
    more = len(due) - len(rows)
    hours = report.get("valid_hours", DEFAULT_VALID_HOURS)
    return {
        "intro": (
            "The trays by when each is due for its next verification: the trays this run skipped or failed are due "
            f"at its finish, a passed one {hours:g} h after it."
        ),
        "rows": rows,
        "more": f"and {plural(more, 'more tray')} (report.json lists them all)" if more > 0 else "",
    }


def not_current_words(report: dict[str, Any]) -> str:
    """'nccl (record of run 20261124T083000Z-7c01)': the checks whose records are of other runs."""
    current_checks = {record["check"] for record in report["checks"]}
    by_check: dict[str, list[dict[str, Any]]] = {}
    for record in report["not_current"]:
        by_check.setdefault(record["check"], []).append(record)
    words = []
    for check in sorted(by_check, key=check_key):
        older = by_check[check]
        runs = list(dict.fromkeys(record["run_id"] or "" for record in older))
        named = [run for run in runs if run]
        noun = "record" if len(older) == 1 else "records"
        where = f" on {', '.join(record['rack'] for record in older)}" if check in current_checks else ""
        if named:
            of = f"of run {named[0]}" if len(named) == 1 else f"of runs {', '.join(named)}"
            of += " and without a run id" if len(named) < len(runs) else ""
        else:
            of = "without a run id"
        words.append(f"{check}{where} ({noun} {of})")
    return ", ".join(words)


def _second(timestamp: str) -> str:
    """2026-12-01T10:01:02.500000Z -> 2026-12-01T10:01:02Z: a reader needs no microseconds."""
    return re.sub(r"\.\d+(?=Z$|[+-]\d\d:\d\d$)", "", timestamp)


def run_facts(report: dict[str, Any]) -> list[tuple[str, str]]:
    """The header of the Markdown and HTML reports: where, what was covered, which run, when."""
    facts = []
    cluster = report.get("cluster") or {}
    if cluster:
        where = cluster.get("host", "")
        version = cluster.get("server_version")
        facts.append(("cluster", f"{where} (Kubernetes {version})".strip() if version else where))
    facts.append(("coverage", coverage_words(report["coverage"])))
    if report.get("run_id"):
        facts.append(("run", report["run_id"]))
    if report.get("started") and report.get("generated"):
        facts.append(("checks ran", f"{_second(report['started'])} to {_second(report['generated'])}"))
    elif report.get("generated"):
        facts.append(("last check finished", _second(report["generated"])))
    if report["not_current"]:
        facts.append(("not run this time", not_current_words(report)))
    return facts


def _tray_label(node: str, prefix: str) -> str:
    return node[len(prefix) :] or node


def _common_prefix(names: list[str]) -> str:
    """The prefix the trays of a rack share, up to its last separator: 'gb200-r0-' for gb200-r0-t0..t17."""
    if len(names) < 2:
        return ""
    first, last = min(names), max(names)
    length = next((i for i, (a, b) in enumerate(zip(first, last)) if a != b), min(len(first), len(last)))
    prefix = first[:length]
    cut = max(prefix.rfind(separator) for separator in "-._")
    return prefix[: cut + 1] if cut >= 0 else ""


def tray_count_words(counts: dict[str, int]) -> str:
    """', 1 skipped, 3 failed, 1 missing': what a rack's verified count leaves out (``report_model.coverage_of``)."""
    words = [
        ("skipped", "skipped"),
        ("failed", "failed"),
        ("missing", "missing"),
        ("unverified", "not verified"),
        ("unmeasured", "not measured"),
    ]
    return "".join(f", {counts[key]} {text}" for key, text in words if counts.get(key))


def map_trays(report: dict[str, Any], rack: str) -> list[dict[str, str]]:
    """The rack's cells of the fleet map, in natural order of their names: one per tray a record found, coloured by
    its verdict, and one per tray gpu_fabric_racks declares that the cluster lacks (the rack's ``missing_trays``),
    marked missing with its reason: the map shows the fleet as declared, not only what the cluster showed."""
    found = {node: tray for node, tray in report["trays"].items() if tray["rack"] == rack}
    missing = {
        entry["node"]: entry["reason"]
        for entry in report["racks"][rack].get("missing_trays") or []
        if entry["node"] not in found
    }
    names = sorted([*found, *missing], key=natural_key)
    prefix = _common_prefix(names)
    return [
        {
            "label": _tray_label(node, prefix),
            "css": f"tray tray-{found[node]['verdict']}" if node in found else "tray tray-missing",
            "title": f"{node}: {found[node]['summary']}" if node in found else f"{node}: missing: {missing[node]}",
        }
        for node in names
    ]


def report_view(report: dict[str, Any], heatmaps: bool = True) -> dict[str, Any]:
    """Everything the templates show, as plain strings and lists."""
    checks = report["checks"]
    columns = sorted({record["check"] for record in checks}, key=check_key)
    rack_names = sorted(report["racks"], key=natural_key)
    by_cell = {(record["rack"], record["check"]): record for record in checks}
    fleet_rows = []
    fleet_map = []
    racks = []
    tray_trends = tray_trend_view(report)
    for rack in rack_names:
        info = report["racks"][rack]
        cells = []
        for check in columns:
            record = by_cell.get((rack, check))
            if record is None:
                cells.append({"text": NO_CELL, "css": "none", "anchor": "", "title": f"no {check} record for {rack}"})
                continue
            text, css = outcome_cell(record)
            cells.append({"text": text, "css": css, "anchor": anchor(rack, check), "title": record["summary"]})
        counts = info["trays"]
        total = counts["trays"]
        trays_text = f"{counts['verified']} of {total}" + tray_count_words(counts)
        fleet_rows.append({"rack": rack, "anchor": anchor(rack), "cells": cells, "trays": trays_text})

        fleet_map.append({"rack": rack, "anchor": anchor(rack), "trays": map_trays(report, rack)})
        headline = f"clique {info['clique']}" if info["clique"] else "no single clique"
        headline += f"; {counts['verified']} of {total} GPU trays verified" + tray_count_words(counts)
        racks.append(
            {
                "rack": rack,
                "anchor": anchor(rack),
                "headline": headline,
                "sections": [section_view(record, heatmaps) for record in checks if record["rack"] == rack],
            }
        )
    return {
        "title": report["title"],
        "verdict": report["verdict"].upper(),
        "verdict_css": {PASSED: "pass", FAILED: "fail", ERROR: "error"}[report["verdict"]],
        "verdict_words": verdict_words(report),
        "facts": [{"label": label, "text": text} for label, text in run_facts(report)],
        "columns": columns,
        "fleet_rows": fleet_rows,
        "fleet_map": fleet_map,
        "trends": trend_view(report),
        "tray_trends": tray_trends,
        "tray_drops": [
            dict(tray, check=view["check"], rack=view["rack"]) for view in tray_trends for tray in view["dropped"]
        ],
        "due": due_view(report),
        "racks": racks,
        "skipped": [
            {
                "node": entry["node"],
                "rack": entry["rack"],
                "reason": entry["reason"],
                "checks": ", ".join(entry["checks"]),
            }
            for entry in report["coverage"]["skipped"]
        ]
        + [
            {"node": node, "rack": report["trays"][node]["rack"], "reason": "not measured by any check", "checks": ""}
            for node in report["coverage"]["unmeasured"]
        ]
        + [
            {
                "node": node,
                "rack": report["trays"][node]["rack"],
                "reason": report["trays"][node]["summary"],
                "checks": "",
            }
            for node in report["coverage"].get("unverified") or []
        ]
        + [
            {"node": entry["node"], "rack": entry["rack"], "reason": f"missing: {entry['reason']}", "checks": ""}
            for entry in report["coverage"].get("missing") or []
        ],
    }
