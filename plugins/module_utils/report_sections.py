# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""One record as its section of the report shows it: every text, class, colour and tooltip ready.

``section_view`` turns the record of one check on one rack into what the templates of
``report_templates`` loop over, the same way for every check: the facts of what it ran on and measured
(``check_facts``), the trays it blamed, its problems, and the view the check wrote into its record
(``check_view``: facts, tables, per-tray findings). The one picture it knows by name is the bandwidth matrix,
drawn as a heatmap (``heatmap_view``). Long lists stop at ``LIST_LIMIT``; report.json keeps them all.
"""

from __future__ import annotations

import re
from typing import Any, Optional

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.check_view import view_of
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.outcomes import ERROR, FAILED, INCOMPLETE, PASSED
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.rank_placement import gpu_placement, node_of_gpu
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.text import natural_key, one_line, plural

CELL_TEXT = {PASSED: "PASS", FAILED: "FAIL", INCOMPLETE: "INCOMPLETE", ERROR: "ERROR"}
# A report lists this many problems or findings per check; report.json keeps them all.
LIST_LIMIT = 20
# A heatmap wider than this many GPUs shows colours only, the values in the tooltips.
COMPACT_HEATMAP = 16


def trays_measured(record: dict[str, Any]) -> str:
    """'all 18 of the rack', '17 of 18, not gb200-r2-t7', '17 of 18, not gb200-r1-t17 (missing)' (declared in
    gpu_fabric_racks, no GPU Node), or the trays themselves."""
    nodes, found = record["nodes"], record["trays"]["found"]
    absent = [entry["node"] for entry in record["trays"].get("missing") or []]
    unmeasured = [node for node in found if node not in nodes]
    if not found or not set(nodes) <= set(found) or len(unmeasured) + len(absent) > len(nodes):
        return f"{len(nodes)} ({', '.join(nodes)})"
    if not unmeasured and not absent:
        return f"all {len(found)} of the rack"
    left_out = unmeasured + [f"{node} (missing)" for node in absent]
    return f"{len(nodes)} of {len(found) + len(absent)}, not {', '.join(left_out)}"


def check_facts(record: dict[str, Any]) -> list[dict[str, Any]]:
    """{label, text, code}: the trays the check measured, the facts of its view, the objects it left behind."""
    facts = [{"label": "trays measured", "text": trays_measured(record), "code": False}] if record.get("nodes") else []
    for fact in view_of(record)["facts"]:
        code = bool(fact.get("code"))
        # a quoted value keeps its spacing (an ls line); other values fit on one line
        text = fact["value"].replace("\n", " ") if code else one_line(fact["value"])
        facts.append({"label": fact["label"], "text": text, "code": code})
    if isinstance(record.get("objects_left"), int):
        facts.append({"label": "objects left behind", "text": str(record["objects_left"]), "code": False})
    return facts


def _int(value: Any) -> Optional[int]:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def failing_cells(details: dict[str, Any]) -> set[tuple[int, int]]:
    cells = set()
    for pair in details.get("failing_pairs") or []:
        if isinstance(pair, dict) and _int(pair.get("src")) is not None and _int(pair.get("dst")) is not None:
            cells.add((pair["src"], pair["dst"]))
    return cells


def heat_colour(value: float, low: float, high: float) -> str:
    """A red (low) to green (high) background for a matrix cell."""
    fraction = 1.0 if high <= low else max(0.0, min(1.0, (value - low) / (high - low)))
    return f"hsl({round(120 * fraction)}, 70%, 80%)"


def _gpu_title(gpu: int, node: Optional[str]) -> str:
    return f"GPU {gpu} on {node}" if node else f"GPU {gpu}"


def _pair_of(value: Any) -> Optional[tuple[int, int]]:
    """A row's [src, dst] GPU pair as ints, or None."""
    if isinstance(value, (list, tuple)) and len(value) == 2 and all(_int(v) is not None for v in value):
        return int(value[0]), int(value[1])
    return None


def heatmap_view(record: dict[str, Any]) -> Optional[dict[str, Any]]:
    """The bandwidth matrix as rows of cells: class, background and tooltip of each (None: no matrix)."""
    details = record["details"]
    matrix = details.get("matrix")
    if not isinstance(matrix, list) or not matrix or not all(isinstance(row, list) for row in matrix):
        return None
    failing = {
        (pair["src"], pair["dst"]): pair
        for pair in details.get("failing_pairs") or []
        if isinstance(pair, dict) and _int(pair.get("src")) is not None and _int(pair.get("dst")) is not None
    }
    numbers = [value for row in matrix for value in row if isinstance(value, (int, float))]
    high = max(numbers, default=0.0)
    threshold = details.get("threshold_gbps")
    low = min(numbers + ([threshold] if isinstance(threshold, (int, float)) else []), default=0.0)
    width = max(len(row) for row in matrix)
    unit = str(details.get("unit") or "GB/s")
    compact = width > COMPACT_HEATMAP
    nodes = record["nodes"]

    def node(gpu: int) -> Optional[str]:
        return node_of_gpu(details, gpu, nodes)

    # A matrix whose rows are GPU pairs (multinode_bisect_write_ce: N x 1) names each row's pair.
    pairs = details.get("row_pairs")
    paired = isinstance(pairs, list) and len(pairs) == len(matrix) and all(_pair_of(p) for p in pairs)

    rows = []
    for r, row in enumerate(matrix):
        cells = []
        for c, value in enumerate(row):
            src, dst = _pair_of(pairs[r]) if paired else (r, c)
            if not isinstance(value, (int, float)):
                cells.append(
                    {
                        "css": "na",
                        "style": "",
                        "text": "" if compact else "N/A",
                        "title": f"GPU {src} -> GPU {dst}: not measured",
                    }
                )
                continue
            pair = failing.get((src, dst))
            title = f"GPU {src} -> GPU {dst}: {value:.2f} {unit}"
            if pair is not None:
                where = f" ({node(src)} -> {node(dst)})" if node(src) and node(dst) else ""
                rule = f"fails the {pair['rule']} rule" if pair.get("rule") else "below the threshold"
                title = f"GPU {src} -> GPU {dst}{where}: {value:.2f} {unit} ({rule})"
            cells.append(
                {
                    "css": "cell-fail" if pair is not None else "cell-ok",
                    "style": f"background: {heat_colour(value, low, high)}",
                    "text": "" if compact else f"{value:.2f}",
                    "title": title,
                }
            )
        if paired:
            src, dst = _pair_of(pairs[r])
            rows.append(
                {"label": f"{src}->{dst}", "title": f"{_gpu_title(src, node(src))} writes to GPU {dst}", "cells": cells}
            )
        else:
            rows.append({"label": str(r), "title": _gpu_title(r, node(r)), "cells": cells})
    caption = (
        "Bisect: each GPU writes to the GPU half a rack away, all at once (row = writer -> target)"
        if paired
        else "Bandwidth matrix (row = source GPU, column = destination GPU)"
    )
    median_rule = details.get("median_threshold_gbps")
    if isinstance(threshold, (int, float)) and isinstance(median_rule, (int, float)):
        caption += f"; outlined cells are below the floor of {threshold:.2f} GB/s or the reference rule "
        caption += f"({median_rule:.2f} GB/s)"
    elif isinstance(threshold, (int, float)):
        caption += f"; outlined cells are below the threshold of {threshold:.2f} GB/s"
    if compact:
        caption += "; hover a cell for its value"
    placement = gpu_placement(details, nodes)
    if placement:
        caption += "; " + "; ".join(f"GPUs {ranks} on {tray}" for ranks, tray in placement)
    return {
        "css": "heatmap compact" if compact else "heatmap",
        "unit": unit,
        "caption": caption + ".",
        "columns": [{"label": str(gpu), "title": _gpu_title(gpu, node(gpu))} for gpu in range(width)],
        "rows": rows,
    }


def anchor(*parts: str) -> str:
    """The HTML id of a rack or of a check of a rack: rack1-nvbandwidth."""
    return "-".join(re.sub(r"[^A-Za-z0-9_.-]+", "_", part) for part in parts)


def outcome_cell(record: dict[str, Any]) -> tuple[str, str]:
    """(text, CSS class) of a record's verdict."""
    text = CELL_TEXT[record["outcome"]]
    if record["verdict"] == ERROR:
        return text, "error"
    if not record["passed"]:
        return text, "fail"
    return text, "incomplete" if record["outcome"] == INCOMPLETE else "pass"


def findings_table(record: dict[str, Any]) -> dict[str, Any]:
    """The view's per-tray findings as one table: a row per problem (it fails the tray) and per note (it does not),
    at most LIST_LIMIT, then a line for the rest."""
    rows = [
        [finding["tray"], kind, line]
        for finding in view_of(record)["findings"]
        for kind, lines in (("problem", finding["problems"]), ("note", finding["notes"]))
        for line in lines
    ]
    more = len(rows) - LIST_LIMIT
    note = f"and {plural(more, 'more finding')} (report.json lists them all)" if more > 0 else ""
    return {
        "title": "Findings per tray:",
        "columns": ["tray", "finding", "line"],
        "rows": rows[:LIST_LIMIT],
        "note": note,
    }


def section_view(record: dict[str, Any], heatmaps: bool) -> dict[str, Any]:
    """One record's section: its verdict, summary, facts, blamed trays, violations, and the tables of its view,
    the per-tray findings first (any check's, the same way); the bandwidth matrix as a heatmap."""
    details = record["details"]
    result, css = outcome_cell(record)
    view = view_of(record)
    # a violation that only repeats the summary, or a tray's finding listed below, says nothing new
    found = {f"{finding['tray']}: {line}" for finding in view["findings"] for line in finding["problems"]}
    violations = [
        one_line(text)
        for text in details.get("violations") or []
        if one_line(text) != record["summary"] and one_line(text) not in found
    ]
    more = len(violations) - LIST_LIMIT
    tables = [findings_table(record)] if view["findings"] else []
    tables += [dict(table, title=table.get("title") or "", note=table.get("note") or "") for table in view["tables"]]
    return {
        "check": record["check"],
        "anchor": anchor(record["rack"], record["check"]),
        "result": result if record["outcome"] != INCOMPLETE or not record["passed"] else f"{result} (allowed)",
        "css": css,
        "summary": record["summary"],
        "facts": check_facts(record),
        "blamed": [
            {"node": node, "problem": record["node_problems"].get(node, "")}
            for node in sorted(record["failed_nodes"], key=natural_key)
        ],
        "violations": violations[:LIST_LIMIT],
        "more_violations": f"and {plural(more, 'more problem')} (report.json lists them all)" if more > 0 else "",
        "tables": tables,
        "heatmap": heatmap_view(record) if heatmaps else None,
    }
