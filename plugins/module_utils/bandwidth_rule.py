# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The one rule that judges a GPU-to-GPU bandwidth matrix (nvbandwidth): a floor and a reference rule.

Two rules, both applied to every measured GPU pair (every off-diagonal cell of the matrix):

1. **The floor** (absolute, per pair): ``min_gbps`` when it is above 0, else
   ``min_fraction_of_peak`` (default 0.85) x the NVLink peak per GPU and direction of the GPU product
   (``peak_gbps``, or the peak table by ``nvidia.com/gpu.product``). GB200: 0.85 x 900 = 765 GB/s.
   The floor catches a link that is far too slow, or a whole run that is slow.
2. **The reference rule** (relative, per pair): every pair must also reach ``min_fraction_of_median``
   (default 0.97) x the STRICTEST of up to three references:

   - the **product reference**: the healthy figure of the GPU product for the testcase and the driver
     branch, from a real measurement whose source is stated (``DEFAULT_PRODUCT_REFERENCES``, extended by
     the site's table);
   - the **site baseline**: this rack's own figures from its last passing (or pinned) run, per GPU pair
     where the ranks sit on the same trays, else that run's median;
   - the **run's median**: the run's own level. Alone it sees one lost NVLink on one GPU, but not many
     GPUs that lost a link at once: the median moves with them, and a rack whose every GPU lost a link
     is at its own median. The product reference and the baseline are what such a rack cannot pull
     down; a run held against the median alone says so in a warning.

   The option keeps its name, ``min_fraction_of_median``, from when the median was the only reference.

Why the floor alone misses a lost link: a GB200 GPU reaches its peers over 18 NVLink 5 links of
50 GB/s (900 GB/s per direction). The real GB200 run (tests/fixtures/nvbandwidth, 2 trays x 4 GPUs,
driver 580.95.05) measured 820.35-822.16 GB/s per pair; with one of the 18 links gone a GPU keeps
17/18 of its bandwidth, ~775.8 GB/s, which is above 765.

Why ``min_fraction_of_median`` defaults to 0.97 (see DEFAULT_MIN_FRACTION_OF_MEDIAN in bandwidth_thresholds for
the numbers): a lost link puts a pair at 17/18 = 0.944 of the median; healthy runs put their lowest pair
within 0.13 % of it. 0.97 sits about halfway between (0.972 is the midpoint of 0.944 and 1.0): a
healthy pair may fall 3 % below the median, 20 times the spread seen in the real runs, and a lost link
still misses the threshold by 2.6 points.

A GPU that lost links slows every pair it takes part in, as source and as destination. When a GPU's
whole row and column are below the median rule, the finding names that GPU ("GPU 5 on node X: its 14
pairs average ...") instead of listing its 2(N-1) pairs one by one, and only that GPU's node is blamed.

The figures the rules use (the peak table, the product references, the site baseline, the defaults) and
the choice of the strictest reference live in ``bandwidth_thresholds``; what the cells of a matrix are (GPU pairs,
rows that are pairs, host<->device cells, each GPU's tray) in ``bandwidth_cells``. Only the Python standard library
is used: this file runs on GPU hosts as well as on the controller.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.bandwidth_cells import (
    Layout,
    MeasuredCells,
    cell_problems,
    is_square_peer,
    rows_of,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.bandwidth_thresholds import (
    RULE_FLOOR,
    RULE_MEDIAN,
    RULE_NOT_MEASURED,
    RULE_PRODUCT,
    Baseline,
    Cell,
    Floor,
    Reference,
    References,
    Thresholds,
    pair_floor,
    peak_table_problems,
    positive_or_none,
    reference_table_problems,
)

MAX_SUMMARY_ITEMS = 5


@dataclass
class Judgement:
    """The verdict of the rule on one matrix; ``to_dict()`` gives the record/module keys."""

    passed: bool
    summary: str
    threshold_gbps: Optional[float]
    threshold_explanation: str
    peak_gbps: Optional[float]
    min_fraction_of_peak: Optional[float]
    min_fraction_of_median: Optional[float]
    median_gbps: Optional[float]
    median_threshold_gbps: Optional[float]
    pairs: int
    measured_pairs: int
    min_gbps: Optional[float]
    max_gbps: Optional[float]
    sum_gbps: Optional[float]
    failing_pairs: List[Dict[str, Any]] = field(default_factory=list)
    low_gpus: List[Dict[str, Any]] = field(default_factory=list)
    failed_nodes: List[str] = field(default_factory=list)
    node_problems: Dict[str, str] = field(default_factory=dict)
    violations: List[str] = field(default_factory=list)
    # The strictest rack-wide reference ({kind, gbps, source}), every reference used, and what the record
    # must say about them (a run held against its median alone, a baseline of another driver branch).
    reference: Optional[Dict[str, Any]] = None
    references: List[Dict[str, Any]] = field(default_factory=list)
    warnings: List[str] = field(default_factory=list)
    # The GPU pair [src, dst] of each row of a matrix whose rows are pairs (multinode_bisect_write_ce); else None.
    row_pairs: Optional[List[List[int]]] = None

    def to_dict(self) -> Dict[str, Any]:
        return {
            "passed": self.passed,
            "summary": self.summary,
            "threshold_gbps": self.threshold_gbps,
            "threshold_explanation": self.threshold_explanation,
            "peak_gbps": self.peak_gbps,
            "min_fraction_of_peak": self.min_fraction_of_peak,
            "min_fraction_of_median": self.min_fraction_of_median,
            "median_gbps": self.median_gbps,
            "median_threshold_gbps": self.median_threshold_gbps,
            "pairs": self.pairs,
            "measured_pairs": self.measured_pairs,
            "min": self.min_gbps,
            "max": self.max_gbps,
            "sum": self.sum_gbps,
            "failing_pairs": [dict(p) for p in self.failing_pairs],
            "low_gpus": [dict(g) for g in self.low_gpus],
            "failed_nodes": list(self.failed_nodes),
            "node_problems": dict(self.node_problems),
            "violations": list(self.violations),
            "reference": dict(self.reference) if self.reference else None,
            "references": [dict(r) for r in self.references],
            "warnings": list(self.warnings),
            "row_pairs": [list(p) for p in self.row_pairs] if self.row_pairs is not None else None,
        }


def _num(value: float) -> str:
    """A value as nvbandwidth showed it (up to 3 decimals, no trailing zeros)."""
    return f"{value:.3f}".rstrip("0").rstrip(".")


def _pair_label(description: str, rows: int, src: int, dst: int) -> str:
    """How a violation names a cell: "GPU 0 -> GPU 3", "CPU -> GPU 2", "GPU 2"."""
    if "CPU(row)" in description:
        return f"CPU -> GPU {dst}" if "->" in description else f"CPU <-> GPU {dst}"
    if rows == 1:
        return f"GPU {dst}"
    return f"GPU {src} -> GPU {dst}"


def _checked_rows(
    matrix: Any,
    thresholds: Thresholds,
    peak_table: Optional[Sequence[Mapping[str, Any]]],
    product_references: Optional[Sequence[Mapping[str, Any]]],
) -> List[List[Cell]]:
    """The matrix's rows, once the thresholds, the tables and every cell can be applied; else ValueError."""
    problems = thresholds.problems() + peak_table_problems(peak_table) + reference_table_problems(product_references)
    rows = rows_of(matrix)
    problems += cell_problems(rows)
    if problems:
        raise ValueError("; ".join(problems))
    return rows


@dataclass
class _Judging:
    """One matrix held against the floor and the references: its failing pairs, low GPUs, blamed nodes and words."""

    matrix: Any
    thresholds: Thresholds
    gpu_product: Optional[str]
    layout: Layout
    cells: MeasuredCells
    floor: Floor
    median_fraction: Optional[float]
    references: References
    rack_reference: Optional[Reference]

    def fraction(self, value: Optional[float]) -> Optional[float]:
        median = self.cells.median
        return round(value / median, 4) if value is not None and median else None

    def failing_pairs(self) -> Tuple[List[Dict[str, Any]], List[Optional[Reference]]]:
        """Each judged cell below the floor or its reference rule (or not measured in a peer matrix), in order."""
        layout, rack_reference, median_fraction = self.layout, self.rack_reference, self.median_fraction
        failing: List[Dict[str, Any]] = []
        failing_references: List[Optional[Reference]] = []
        for r, c, value in self.cells.judged:
            src, dst = layout.gpus_of(r, c)
            reference = self.references.of_pair(r, c, f"{src}->{dst}") if layout.per_cell else rack_reference
            threshold = median_fraction * reference.gbps if reference is not None and median_fraction else None
            if value is None:
                if not layout.square:
                    continue  # N/A outside a peer matrix is not a GPU pair
                rule = RULE_NOT_MEASURED
            elif self.floor.gbps is not None and value < self.floor.gbps:
                rule = RULE_FLOOR
            elif threshold is not None and value < threshold:
                rule = reference.kind
            else:
                continue
            failing_references.append(reference)
            failing.append(
                {
                    "src": src,
                    "dst": dst,
                    "gbps": value,
                    # A 1-row matrix has the CPU (or nothing) as its row; an N x 1 one no peer in its column.
                    "src_node": layout.node(src) if layout.per_cell or len(layout.rows) > 1 else None,
                    "dst_node": layout.node(dst) if layout.per_cell or len(layout.rows) == 1 else None,
                    "fraction_of_median": self.fraction(value),
                    "rule": rule,
                    "reference_gbps": reference.gbps if reference is not None else None,
                    "threshold_gbps": round(threshold, 4) if threshold is not None else None,
                    "low_gpu": None,
                }
            )
        return failing, failing_references

    def low_gpus(self) -> Tuple[List[Dict[str, Any]], Dict[int, float]]:
        """GPUs whose every measured pair, as source and as destination, is below its pair's reference rule.

        Not for rows that are pairs: bisect pairs GPU i with its peer both ways (i -> peer, peer -> i), so a lost
        link on either end shows on the same two rows, and both ends are named with their pair.
        """
        layout, rack_reference, rows, gpus = self.layout, self.rack_reference, self.layout.rows, self.layout.gpus
        low_gpus: List[Dict[str, Any]] = []
        means: Dict[int, float] = {}
        if not (layout.square and rack_reference is not None and gpus >= 3):
            return low_gpus, means
        for gpu in range(gpus):
            cells = [(gpu, c) for c in range(gpus) if c != gpu] + [(r, gpu) for r in range(gpus) if r != gpu]
            cells = [(r, c) for r, c in cells if rows[r][c] is not None]
            if len(cells) >= 2 and all(self.below_rule(r, c) for r, c in cells):
                gbps = [rows[r][c] for r, c in cells]
                mean = means[gpu] = sum(gbps) / len(gbps)
                low_gpus.append(
                    {
                        "gpu": gpu,
                        "node": layout.node(gpu),
                        "pairs": len(gbps),
                        "mean_gbps": round(mean, 3),
                        "median_gbps": round(statistics.median(gbps), 3),
                        "min_gbps": min(gbps),
                        "fraction_of_median": self.fraction(mean),
                        "fraction_of_reference": round(mean / rack_reference.gbps, 4),
                    }
                )
        return low_gpus, means

    def below_rule(self, r: int, c: int) -> bool:
        return self.layout.rows[r][c] < self.median_fraction * self.references.of_pair(r, c).gbps

    def domain_violations(self, failing: List[Dict[str, Any]], low_gpus: List[Dict[str, Any]]) -> List[str]:
        """The whole NVLink domain, when every GPU is low (or every pair of a matrix whose rows are pairs)."""
        layout, gpus = self.layout, self.layout.gpus
        every_pair_low = (
            layout.paired is not None
            and all(p["rule"] not in (RULE_FLOOR, RULE_NOT_MEASURED) for p in failing)
            and len(failing) == len(layout.rows)
        )
        if not ((layout.square and len(low_gpus) == gpus) or every_pair_low):
            return []
        return [
            f"every one of the {gpus} GPUs is below {self.median_fraction:g} x {self.rack_reference.words()} on "
            "each of its pairs: a fault of the whole NVLink domain (a switch tray, the fabric manager, a driver or "
            "clock setting), not of one GPU"
        ]

    def pair_violation(self, pair: Dict[str, Any], reference: Optional[Reference]) -> str:
        label = _pair_label(self.layout.description, len(self.layout.rows), pair["src"], pair["dst"])
        median, median_fraction = self.cells.median, self.median_fraction
        if pair["rule"] == RULE_NOT_MEASURED:
            return f"{label}: not measured (N/A), the pair has no peer access over NVLink"
        if pair["rule"] == RULE_FLOOR:
            return f"{label}: {_num(pair['gbps'])} GB/s is below the threshold {_num(self.floor.gbps)}"
        if pair["rule"] == RULE_MEDIAN:
            return (
                f"{label}: {_num(pair['gbps'])} GB/s is {pair['gbps'] / median:.3f} of the median "
                f"{median:.2f}, below {median_fraction:g} x the median ({pair['threshold_gbps']:.2f})"
            )
        return (
            f"{label}: {_num(pair['gbps'])} GB/s is {pair['gbps'] / reference.gbps:.3f} of {reference.words()}, "
            f"below {median_fraction:g} x that ({pair['threshold_gbps']:.2f})"
        )

    def matrix_violations(self) -> List[str]:
        """The matrix-wide violations: no peak for the floor, nothing measured, a SUM below min_sum_gbps."""
        other: List[str] = []
        if self.floor.peak_unknown:
            other.append(
                f"no NVLink peak is known for GPU product '{self.gpu_product}' (label nvidia.com/gpu.product), so "
                f"{self.thresholds.min_fraction_of_peak:g} x the peak cannot be worked out: set min_gbps, or "
                "peak_gbps, or add the product to the peak table"
            )
        if not self.cells.measured:
            other.append("no GPU pair was measured: every cell is N/A")
        min_sum, total = self.thresholds.min_sum_gbps, self.cells.total
        if min_sum is not None and total is not None and total < float(min_sum):
            key = getattr(self.matrix, "key", "") or "of the matrix"
            other.append(f"SUM {key} {_num(total)} is below min_sum_gbps {_num(float(min_sum))}")
        return other

    def judgement(self) -> Judgement:
        layout, cells, floor, rack_reference = self.layout, self.cells, self.floor, self.rack_reference
        failing, failing_references = self.failing_pairs()
        low_gpus, means = self.low_gpus()
        unexplained = _explained_by_low_gpus(failing, failing_references, low_gpus, layout.per_cell)
        gpu_items = [_low_gpu_words(gpu, means[gpu["gpu"]], rack_reference) for gpu in low_gpus]
        pair_items = [
            _pair_words(pair, floor, cells.median, layout.description, len(layout.rows)) for pair, _ref in unexplained
        ]
        failed_nodes, node_problems = _blamed_nodes(low_gpus, gpu_items, unexplained, pair_items)
        other = self.matrix_violations()
        violations = self.domain_violations(failing, low_gpus) + gpu_items
        violations += [self.pair_violation(pair, reference) for pair, reference in unexplained] + other
        median_threshold = self.median_fraction * rack_reference.gbps if rack_reference is not None else None
        values = cells.values
        judgement = Judgement(
            passed=not violations,
            summary="",
            threshold_gbps=floor.gbps,
            threshold_explanation=floor.explanation,
            peak_gbps=floor.peak_gbps,
            min_fraction_of_peak=(
                positive_or_none(self.thresholds.min_fraction_of_peak) if floor.source != "min_gbps" else None
            ),
            min_fraction_of_median=self.median_fraction,
            median_gbps=round(cells.median, 4) if cells.median is not None else None,
            median_threshold_gbps=round(median_threshold, 4) if median_threshold is not None else None,
            pairs=len(cells.judged) if layout.square else len(cells.measured),
            measured_pairs=len(cells.measured),
            min_gbps=min(values) if values else None,
            max_gbps=max(values) if values else None,
            sum_gbps=cells.total,
            failing_pairs=failing,
            low_gpus=low_gpus,
            failed_nodes=failed_nodes,
            node_problems=node_problems,
            violations=violations,
            reference=rack_reference.to_dict() if rack_reference is not None else None,
            references=[r.to_dict() for r in self.references.listed()],
            warnings=self.references.warnings,
            row_pairs=[list(p) for p in layout.paired] if layout.paired is not None else None,
        )
        judgement.summary = _summary(judgement, rack_reference, layout.gpu_to_gpu, gpu_items + pair_items, other)
        return judgement


def _explained_by_low_gpus(
    failing: List[Dict[str, Any]],
    failing_references: List[Optional[Reference]],
    low_gpus: List[Dict[str, Any]],
    per_cell: bool,
) -> List[Tuple[Dict[str, Any], Optional[Reference]]]:
    """Marks each failing pair with the low GPU that explains it; returns the pairs (and references) none explains."""
    low = {g["gpu"] for g in low_gpus}
    for pair in failing:
        explained = [g for g in (pair["src"], pair["dst"]) if g in low]
        pair["low_gpu"] = explained[0] if explained and per_cell else None
    return [(p, ref) for p, ref in zip(failing, failing_references) if p["low_gpu"] is None]


def _blamed_nodes(
    low_gpus: List[Dict[str, Any]],
    gpu_items: List[str],
    unexplained: List[Tuple[Dict[str, Any], Optional[Reference]]],
    pair_items: List[str],
) -> Tuple[List[str], Dict[str, str]]:
    """The nodes blamed, and what each is blamed for: those of the low GPUs, and both ends of each pair no low
    GPU explains."""
    findings: Dict[str, List[str]] = {}
    for gpu, words in zip(low_gpus, gpu_items):
        if gpu["node"]:
            findings.setdefault(gpu["node"], []).append(words)
    for (pair, _ref), words in zip(unexplained, pair_items):
        for name in dict.fromkeys(n for n in (pair["src_node"], pair["dst_node"]) if n):
            findings.setdefault(name, []).append("pair " + words)
    failed_nodes = sorted(findings)
    return failed_nodes, {name: _join_items(findings[name]) for name in failed_nodes}


def judge(
    matrix: Any,
    thresholds: Optional[Thresholds] = None,
    gpu_product: Optional[str] = None,
    gpus_per_node: Optional[int] = None,
    nodes: Optional[Sequence[str]] = None,
    *,
    peak_table: Optional[Sequence[Mapping[str, Any]]] = None,
    testcase: Optional[str] = None,
    driver_version: Optional[str] = None,
    product_references: Optional[Sequence[Mapping[str, Any]]] = None,
    baseline: Optional[Baseline] = None,
    named_product: Optional[str] = None,
) -> Judgement:
    """Judge one bandwidth matrix with the floor and the reference rule.

    ``matrix`` is a parsed nvbandwidth matrix (``nvbandwidth_output.BandwidthMatrix``: its ``rows``,
    ``description`` and ``reported_sum`` are read) or plain rows (lists of GB/s, None where not measured,
    taken as a GPU peer matrix). GPU i lives on ``nodes[i // gpus_per_node]``; without ``nodes`` the
    findings name no node. ``gpu_product`` is the ``nvidia.com/gpu.product`` value: when it is given (even
    empty) and the floor needs a peak that is unknown for it, that is a violation. ``peak_table`` replaces
    the built-in peak table. ``testcase`` and ``driver_version`` pick the product reference (with the site's
    ``product_references`` tried first); ``baseline`` is the rack's earlier run. ``named_product`` is the
    product the output's own device lines name: without ``gpu_product`` it picks the product reference (the
    floor's peak stays with ``gpu_product`` and ``peak_gbps``). Raises ValueError for thresholds or tables that
    cannot be applied.
    """
    thresholds = thresholds or Thresholds()
    rows = _checked_rows(matrix, thresholds, peak_table, product_references)
    layout = Layout.of(matrix, rows, testcase, nodes, gpus_per_node)
    floor = pair_floor(thresholds, gpu_product, peak_table)
    median_fraction = positive_or_none(thresholds.min_fraction_of_median) if layout.gpu_to_gpu else None
    cells = MeasuredCells.of(matrix, layout)
    references = References.of(
        median_fraction,
        cells.median,
        gpu_product or named_product,
        testcase,
        driver_version,
        product_references,
        baseline,
        rows,
        nodes,
        layout.gpus_per_node,
    )
    judging = _Judging(
        matrix, thresholds, gpu_product, layout, cells, floor, median_fraction, references, references.rack()
    )
    return judging.judgement()


def direction_violations(directions: Sequence[Any], min_fraction_of_median: Optional[float]) -> List[str]:
    """The median rule over both directions of a bidirectional run (Read1 and Read2, or Write1 and Write2).

    The Total of a pair is the sum of its two directions, so a link that lost bandwidth in one direction moves
    the Total by half as much: one lost NVLink of 18 (17/18 = 0.944 in one direction) leaves the Total at
    0.972 of its median, above 0.97. Both directions run at once over the same links and are alike on healthy
    hardware (the real captures' two directions differ by less than 0.1 %), so every cell of either direction
    must reach ``min_fraction_of_median`` x the median of the cells of both directions together. The floor is
    not applied to a single direction: the NVLink peak is the rate of a direction alone, not of one of two
    copies that share the links. Returns one violation per cell below the rule (empty when the rule is off).
    """
    fraction = positive_or_none(min_fraction_of_median)
    if fraction is None:
        return []
    cells = []
    for matrix in directions:
        rows = rows_of(matrix)
        square = is_square_peer(rows, True)
        name = str(getattr(matrix, "key", "") or "direction")
        cells.extend(
            (name, r, c, v)
            for r, row in enumerate(rows)
            for c, v in enumerate(row)
            if v is not None and not (square and r == c)
        )
    if not cells:
        return []
    median = statistics.median(cell[3] for cell in cells)
    threshold = fraction * median
    return [
        f"{name} GPU {r} -> GPU {c}: {_num(value)} GB/s is {value / median:.3f} of the median {median:.2f} of both "
        f"directions, below {fraction:g} x the median ({threshold:.2f}): a link slow in one direction"
        for name, r, c, value in cells
        if value < threshold
    ]


def _join_items(items: List[str]) -> str:
    """At most MAX_SUMMARY_ITEMS items, then "and N more"."""
    more = len(items) - MAX_SUMMARY_ITEMS
    return "; ".join(items[:MAX_SUMMARY_ITEMS]) + (f"; and {more} more" if more > 0 else "")


def _low_gpu_words(gpu: Dict[str, Any], mean: float, reference: Reference) -> str:
    where = f" on {gpu['node']}" if gpu["node"] else ""
    return (
        f"GPU {gpu['gpu']}{where}: its {gpu['pairs']} pairs average {mean:.2f} GB/s, "
        f"{mean / reference.gbps:.3f} of {reference.short()}: a GPU with lost NVLinks"
    )


def _pair_words(pair: Dict[str, Any], floor: Floor, median: Optional[float], description: str, rows: int) -> str:
    label = (
        f"{pair['src']}->{pair['dst']}"
        if rows > 1 and "CPU(row)" not in description
        else _pair_label(description, rows, pair["src"], pair["dst"])
    )
    nodes = [n for n in (pair["src_node"], pair["dst_node"]) if n]
    where = f" ({pair['src_node']} -> {pair['dst_node']})" if len(nodes) == 2 else (f" ({nodes[0]})" if nodes else "")
    if pair["rule"] == RULE_NOT_MEASURED:
        return f"{label} not measured (N/A){where}"
    words = f"{label} {pair['gbps']:.2f} GB/s{where}"
    if pair["rule"] == RULE_FLOOR:
        return f"{words}, below the floor {floor.gbps:.2f}"
    if pair["rule"] == RULE_MEDIAN:
        return f"{words}, {pair['gbps'] / median:.3f} of the median {median:.2f}"
    name = "the product reference" if pair["rule"] == RULE_PRODUCT else "the site baseline"
    return f"{words}, {pair['gbps'] / pair['reference_gbps']:.3f} of {name} {pair['reference_gbps']:.2f}"


def _summary(
    judgement: Judgement, reference: Optional[Reference], gpu_pairs: bool, items: List[str], other: List[str]
) -> str:
    """One line: the verdict, the rule's numbers, and at most 5 findings (GPUs first, then pairs)."""
    noun = "GPU pairs" if gpu_pairs else "cells"
    if judgement.passed:
        rules = []
        if judgement.threshold_gbps is not None:
            rules.append(f"{judgement.threshold_gbps:.2f} GB/s")
        if judgement.min_fraction_of_median is not None and reference is not None:
            rules.append(f"{judgement.min_fraction_of_median:g} of {reference.short()}")
        stats = f"min {judgement.min_gbps:.2f}"
        if judgement.sum_gbps is not None:
            stats += f", SUM {judgement.sum_gbps:.2f}"
        if rules:
            return f"{judgement.measured_pairs} of {judgement.pairs} {noun} at or above {' and '.join(rules)} ({stats})"
        return f"{judgement.measured_pairs} of {judgement.pairs} {noun} measured, no threshold set ({stats})"
    parts = []
    if judgement.failing_pairs:
        failed = f"{len(judgement.failing_pairs)} of {judgement.pairs} {noun}"
        if reference is not None and reference.kind != RULE_MEDIAN:
            failed += f" below the threshold, held against {reference.words()}"
        else:
            failed += " below the threshold"
        parts.append(f"{failed}: {_join_items(items)}")
    parts.extend(other)
    return "; ".join(parts)
