# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The views the checks write of their details (``check_view``): the facts every check lists, and the tables
of the cliques, bandwidth and NCCL checks.

``detail_facts`` lists what a check ran on and measured from the keys of its details (``FACTS``), in one order
for every check; each check adds its own tables (``Check.view``). Long tables stop at ``LIST_LIMIT`` rows;
report.json keeps every value in the details.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Tuple

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.check_view import Fact, Table, fact, number, table
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.rank_placement import node_of_gpu
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.text import one_line, plural

# A view lists this many pairs, GPUs or findings per check; report.json keeps them all.
LIST_LIMIT = 20

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
QUOTED = ("channel0",)  # the ls line is quoted as it came (its spacing is part of it)


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


def _fact_text(key: str, value: Any) -> str:
    if isinstance(value, list):
        return ", ".join(str(item) for item in value)
    if key in FRACTIONS:
        return _fraction(value)
    if isinstance(value, float):
        return number(value)
    return str(value)


def detail_facts(details: Mapping[str, Any]) -> List[Fact]:
    """The facts of ``details`` that ``FACTS`` names, in its order: what a check ran on and measured."""
    facts: List[Tuple[str, str, str]] = []
    for key, label in FACTS:
        if key == "min_mean_max":
            values = [details.get(name) for name in ("min", "mean", "max")]
            if any(isinstance(value, (int, float)) for value in values):
                facts.append((key, label, " / ".join(number(value) for value in values)))
            continue
        value = details.get(key)
        if key == "reference" and isinstance(value, dict) and isinstance(value.get("gbps"), (int, float)):
            text = f"{value.get('kind')} {value['gbps']:.2f} GB/s ({value.get('source') or 'no source'})"
            facts.append((key, label, text))
            continue
        if value in (None, "", []) or isinstance(value, (dict, bool)):
            continue
        text = _fact_text(key, value)
        if key == "threshold_gbps" and details.get("threshold_explanation"):
            text += f" ({details['threshold_explanation']})"
        facts.append((key, label, text))
    return [
        fact(label, text.replace("\n", " "), code=True) if key in QUOTED else fact(label, one_line(text))
        for key, label, text in facts
    ]


def _int(value: Any) -> Optional[int]:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _pair_nodes(details: Dict[str, Any], nodes: List[str], pair: Dict[str, Any]) -> str:
    src = pair.get("src_node") or (
        node_of_gpu(details, pair["src"], nodes) if _int(pair.get("src")) is not None else None
    )
    dst = pair.get("dst_node") or (
        node_of_gpu(details, pair["dst"], nodes) if _int(pair.get("dst")) is not None else None
    )
    return f"{src} -> {dst}" if src and dst else (src or dst or "")


def pairs_table(details: Dict[str, Any], nodes: List[str]) -> Table:
    """The failing pairs no low GPU explains (at most LIST_LIMIT), and a note about the ones not listed;
    ``nodes``: the record's trays, in name order (for a matrix whose details name no ``rank_nodes``)."""
    pairs = [pair for pair in details.get("failing_pairs") or [] if isinstance(pair, dict)]
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
        [
            str(pair.get("src")),
            str(pair.get("dst")),
            number(pair.get("gbps")),
            number(pair.get("fraction_of_median"), 3) if pair.get("fraction_of_median") is not None else "",
            str(pair.get("rule") or "threshold"),
            _pair_nodes(details, nodes, pair),
        ]
        for pair in shown
    ]
    columns = ("source GPU", "destination GPU", "GB/s", "fraction of the median", "rule", "trays")
    return table(columns, rows, title="Failing pairs:", note=note)


def low_gpus_table(details: Mapping[str, Any]) -> Table:
    rows = [
        [
            str(gpu.get("gpu")),
            str(gpu.get("node") or ""),
            str(gpu.get("pairs", "")),
            number(gpu.get("mean_gbps")),
            number(gpu.get("median_gbps")),
            number(gpu.get("fraction_of_median"), 3),
        ]
        for gpu in (details.get("low_gpus") or [])[:LIST_LIMIT]
        if isinstance(gpu, dict)
    ]
    columns = ("GPU", "tray", "pairs", "mean GB/s", "median GB/s", "fraction of the median")
    return table(columns, rows, title="Low GPUs (every pair of the GPU below its reference rule):")


def cliques_table(details: Mapping[str, Any]) -> Table:
    cliques = details.get("cliques")
    if not isinstance(cliques, dict) or not cliques:
        return table(("clique", "trays"), [])
    rows = [[str(label), ", ".join(str(node) for node in cliques[label])] for label in sorted(cliques)]
    unlabelled = details.get("unlabelled_nodes") or []
    if unlabelled:
        rows.append(["(no label)", ", ".join(str(node) for node in unlabelled)])
    return table(("clique", "trays"), rows)


def nccl_rows_table(details: Mapping[str, Any]) -> Table:
    rows = details.get("rows")
    columns = ("size", "bytes", "bus bandwidth (GB/s)", "wrong")
    if not isinstance(rows, list):
        return table(columns, [])
    return table(
        columns,
        [
            [
                binary_size(row.get("size_bytes")),
                str(row.get("size_bytes")),
                number(row.get("busbw_gbps")),
                str(row.get("wrong", 0)),
            ]
            for row in rows
            if isinstance(row, dict)
        ],
    )


def shown(*tables: Table) -> List[Table]:
    """The tables with a row or a note to show."""
    return [item for item in tables if item["rows"] or item.get("note")]
