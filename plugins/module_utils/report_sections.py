# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""One record as its section of the report shows it: every text, class, colour and tooltip ready.

``section_view`` turns the record of one check on one rack into what the templates of
``report_templates`` loop over: the facts of what the check ran on and measured (``check_facts``),
the trays it blamed, its problems, cliques, low GPUs, failing pairs and NCCL rows, and its bandwidth
matrix as a heatmap (``heatmap_view``). Long lists stop at ``LIST_LIMIT``; report.json keeps them all.
"""

from __future__ import annotations

import re
from typing import Any, Optional

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.report_model import natural_key, plural
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.report_records import (
    ERROR,
    FAILED,
    INCOMPLETE,
    PASSED,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.text import one_line

CELL_TEXT = {PASSED: "PASS", FAILED: "FAIL", INCOMPLETE: "INCOMPLETE", ERROR: "ERROR"}
# A report lists this many pairs, GPUs or problems per check; report.json keeps them all.
LIST_LIMIT = 20
# A heatmap wider than this many GPUs shows colours only, the values in the tooltips.
COMPACT_HEATMAP = 16


def number(value: Any, digits: int = 2) -> str:
    if value is None:
        return "N/A"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{value:.{digits}f}"
    return str(value)


def _fraction(value: Any) -> str:
    return f"{value:g}" if isinstance(value, (int, float)) and not isinstance(value, bool) else ""


def binary_size(size: Any) -> str:
    """1073741824 -> '1 GiB': nccl-tests sizes are powers of two."""
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        return str(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or size % 1024 or unit == "GiB":
            return f"{size} {unit}"
        size //= 1024
    return str(size)


# details key -> label, in the order the facts of a check are listed; "min_mean_max" is one line of three keys
FACTS = (
    ("gpu_nodes", "GPU nodes"),
    ("testcase", "test"),
    ("benchmark", "benchmark"),
    ("args", "arguments"),
    ("gpu_product", "GPU product"),
    ("gpus_per_node", "GPUs per tray"),
    ("ranks", "ranks"),
    ("peak_gbps", "NVLink peak per direction (GB/s)"),
    ("min_fraction_of_peak", "fraction of the peak required"),
    ("min_fraction_of_median", "fraction of the strictest reference required"),
    ("threshold_gbps", "threshold (GB/s)"),
    ("median_gbps", "median (GB/s)"),
    ("reference", "strictest reference"),
    ("median_threshold_gbps", "reference rule (GB/s)"),
    ("min_mean_max", "min / mean / max (GB/s)"),
    ("sum", "SUM (GB/s)"),
    ("avg_busbw_gbps", "average bus bandwidth (GB/s)"),
    ("namespace", "namespace"),
    ("compute_domain", "ComputeDomain"),
    ("job", "MPIJob"),
    ("pod", "pod"),
    ("node", "node"),
    ("channel0", "channel0"),
)
FRACTIONS = ("min_fraction_of_peak", "min_fraction_of_median")


def _fact_text(key: str, value: Any) -> str:
    if isinstance(value, list):
        return ", ".join(str(item) for item in value)
    if key in FRACTIONS:
        return _fraction(value)
    if isinstance(value, float):
        return number(value)
    return str(value)


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
    """{label, text, code} describing what a check ran on and measured."""
    details = record.get("details") or {}
    facts = []
    if record.get("nodes"):
        facts.append(("trays measured", trays_measured(record)))
    for key, label in FACTS:
        if key == "min_mean_max":
            values = [details.get(name) for name in ("min", "mean", "max")]
            if any(isinstance(value, (int, float)) for value in values):
                facts.append((label, " / ".join(number(value) for value in values)))
            continue
        value = details.get(key)
        if key == "reference" and isinstance(value, dict) and isinstance(value.get("gbps"), (int, float)):
            facts.append(
                (label, f"{value.get('kind')} {value['gbps']:.2f} GB/s ({value.get('source') or 'no source'})")
            )
            continue
        if value in (None, "", []) or isinstance(value, (dict, bool)):
            continue
        text = _fact_text(key, value)
        if key == "threshold_gbps" and details.get("threshold_explanation"):
            text += f" ({details['threshold_explanation']})"
        facts.append((label, text))
    if isinstance(record.get("objects_left"), int):
        facts.append(("objects left behind", str(record["objects_left"])))
    # the ls line is quoted as it came (its spacing is part of it); other values fit on one line
    return [
        {
            "label": label,
            "text": text.replace("\n", " ") if label == "channel0" else one_line(text),
            "code": label == "channel0",
        }
        for label, text in facts
    ]


def gpu_placement(details: dict[str, Any], nodes: Optional[list[str]] = None) -> list[tuple[str, str]]:
    """Which tray holds which GPU ranks of the matrix: [("0-3", "gb200-r0-t0"), ...].

    ``details.rank_nodes`` (the tray of each MPI worker in rank order, as the check saw them placed) wins
    over ``nodes`` (the record's trays in name order), which the scheduler need not have followed.
    """
    nodes = details.get("rank_nodes") or nodes or details.get("nodes")
    per_node, matrix = details.get("gpus_per_node"), details.get("matrix")
    if not (isinstance(nodes, list) and isinstance(per_node, int) and per_node > 0 and isinstance(matrix, list)):
        return []
    if not nodes or len(nodes) * per_node != len(matrix):
        return []
    return [(f"{i * per_node}-{(i + 1) * per_node - 1}", str(node)) for i, node in enumerate(nodes)]


def node_of_gpu(details: dict[str, Any], gpu: int, nodes: Optional[list[str]] = None) -> Optional[str]:
    placement = gpu_placement(details, nodes)
    if not placement or not 0 <= gpu < len(details["matrix"]):
        return None
    return placement[gpu // details["gpus_per_node"]][1]


def _int(value: Any) -> Optional[int]:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def failing_cells(details: dict[str, Any]) -> set[tuple[int, int]]:
    cells = set()
    for pair in details.get("failing_pairs") or []:
        if isinstance(pair, dict) and _int(pair.get("src")) is not None and _int(pair.get("dst")) is not None:
            cells.add((pair["src"], pair["dst"]))
    return cells


def _pair_nodes(record: dict[str, Any], pair: dict[str, Any]) -> str:
    details = record["details"]
    src = pair.get("src_node") or (
        node_of_gpu(details, pair["src"], record["nodes"]) if _int(pair.get("src")) is not None else None
    )
    dst = pair.get("dst_node") or (
        node_of_gpu(details, pair["dst"], record["nodes"]) if _int(pair.get("dst")) is not None else None
    )
    return f"{src} -> {dst}" if src and dst else (src or dst or "")


def _pairs_view(record: dict[str, Any]) -> tuple[list[dict[str, str]], str]:
    """The failing pairs no low GPU explains (at most LIST_LIMIT), and a line about the ones not listed."""
    pairs = [pair for pair in record["details"].get("failing_pairs") or [] if isinstance(pair, dict)]
    own = [pair for pair in pairs if pair.get("low_gpu") is None]
    shown = own[:LIST_LIMIT]
    notes = []
    explained = len(pairs) - len(own)
    if explained:
        notes.append(f"{plural(explained, 'more failing pair')} involve the low GPUs above")
    if len(own) > len(shown):
        notes.append(f"{plural(len(own) - len(shown), 'more failing pair')} not listed here")
    note = "; ".join(notes) + ("; report.json lists every pair." if notes else "")
    rows = [
        {
            "src": str(pair.get("src")),
            "dst": str(pair.get("dst")),
            "gbps": number(pair.get("gbps")),
            "fraction": number(pair.get("fraction_of_median"), 3) if pair.get("fraction_of_median") is not None else "",
            "rule": str(pair.get("rule") or "threshold"),
            "nodes": _pair_nodes(record, pair),
        }
        for pair in shown
    ]
    return rows, note


def _low_gpus_view(details: dict[str, Any]) -> list[dict[str, str]]:
    return [
        {
            "gpu": str(gpu.get("gpu")),
            "node": str(gpu.get("node") or ""),
            "pairs": str(gpu.get("pairs", "")),
            "mean": number(gpu.get("mean_gbps")),
            "median": number(gpu.get("median_gbps")),
            "fraction": number(gpu.get("fraction_of_median"), 3),
        }
        for gpu in (details.get("low_gpus") or [])[:LIST_LIMIT]
        if isinstance(gpu, dict)
    ]


def _cliques_view(details: dict[str, Any]) -> list[dict[str, str]]:
    cliques = details.get("cliques")
    if not isinstance(cliques, dict) or not cliques:
        return []
    rows = [
        {"label": str(label), "nodes": ", ".join(str(node) for node in cliques[label])} for label in sorted(cliques)
    ]
    unlabelled = details.get("unlabelled_nodes") or []
    if unlabelled:
        rows.append({"label": "(no label)", "nodes": ", ".join(str(node) for node in unlabelled)})
    return rows


def _nccl_rows_view(details: dict[str, Any]) -> list[dict[str, str]]:
    rows = details.get("rows")
    if not isinstance(rows, list):
        return []
    return [
        {
            "size": binary_size(row.get("size_bytes")),
            "bytes": str(row.get("size_bytes")),
            "busbw": number(row.get("busbw_gbps")),
            "wrong": str(row.get("wrong", 0)),
        }
        for row in rows
        if isinstance(row, dict)
    ]


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


def section_view(record: dict[str, Any], heatmaps: bool) -> dict[str, Any]:
    details = record["details"]
    result, css = outcome_cell(record)
    # a violation that only repeats the summary says nothing new
    violations = [one_line(text) for text in details.get("violations") or [] if one_line(text) != record["summary"]]
    pairs, more_pairs = _pairs_view(record)
    more = len(violations) - LIST_LIMIT
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
        "cliques": _cliques_view(details),
        "low_gpus": _low_gpus_view(details),
        "pairs": pairs,
        "more_pairs": more_pairs,
        "nccl_rows": _nccl_rows_view(details),
        "heatmap": heatmap_view(record) if heatmaps else None,
    }
