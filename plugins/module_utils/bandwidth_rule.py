# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The one rule that judges a GPU-to-GPU bandwidth matrix (nvbandwidth): a floor and a median rule.

Two rules, both applied to every measured GPU pair (every off-diagonal cell of the matrix):

1. **The floor** (absolute, per pair): ``min_gbps`` when it is above 0, else
   ``min_fraction_of_peak`` (default 0.85) x the NVLink peak per GPU and direction of the GPU product
   (``peak_gbps``, or the peak table by ``nvidia.com/gpu.product``). GB200: 0.85 x 900 = 765 GB/s.
   The floor catches a link that is far too slow, or a whole run that is slow.
2. **The median rule** (relative, per pair): every pair must also reach ``min_fraction_of_median``
   (default 0.97) x the median of all measured pairs of the same matrix. The median is the run's own
   healthy level, so the rule does not depend on the driver, the clocks or the buffer size that set
   that level, and it sees the loss of a single NVLink, which the floor cannot.

Why the floor alone misses a lost link: a GB200 GPU reaches its peers over 18 NVLink 5 links of
50 GB/s (900 GB/s per direction). The real GB200 run (tests/fixtures/nvbandwidth, 2 trays x 4 GPUs,
driver 580.95.05) measured 820.35-822.16 GB/s per pair; with one of the 18 links gone a GPU keeps
17/18 of its bandwidth, ~775.8 GB/s, which is above 765.

Why ``min_fraction_of_median`` defaults to 0.97 (see DEFAULT_MIN_FRACTION_OF_MEDIAN below for the
numbers): a lost link puts a pair at 17/18 = 0.944 of the median; healthy runs put their lowest pair
within 0.13 % of it. 0.97 sits about halfway between (0.972 is the midpoint of 0.944 and 1.0): a
healthy pair may fall 3 % below the median, 20 times the spread seen in the real runs, and a lost link
still misses the threshold by 2.6 points.

A GPU that lost links slows every pair it takes part in, as source and as destination. When a GPU's
whole row and column are below the median rule, the finding names that GPU ("GPU 5 on node X: its 14
pairs average ...") instead of listing its 2(N-1) pairs one by one, and only that GPU's node is blamed.

Only the Python standard library is used: this file runs on GPU hosts as well as on the controller.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

Cell = Optional[float]

# NVLink peak per GPU and direction (GB/s) by nvidia.com/gpu.product label value, e.g. NVIDIA-GB200,
# NVIDIA-H200, NVIDIA-H100-80GB-HBM3. The first entry whose regular expression is found in the product
# wins (re.search, case-sensitive, as the role's `is search(...)` test did).
DEFAULT_PEAK_TABLE: Tuple[Dict[str, Any], ...] = (
    {"match": "GB200|GB300|B200|B300", "peak_gbps": 900.0},  # NVLink 5: 18 links x 50 GB/s
    {"match": "H100|H200|GH200", "peak_gbps": 450.0},  # NVLink 4: 18 links x 25 GB/s
)

DEFAULT_MIN_FRACTION_OF_PEAK = 0.85

# The median rule's default, derived from the real outputs in tests/fixtures/nvbandwidth:
#
#   GB200, 2 trays x 4 GPUs, 56 pairs: 820.35-822.16 GB/s, median 821.41;
#       lowest pair / median = 820.35 / 821.41 = 0.9987 (0.13 % below the median)
#   H200, 2 GPUs (read): 393.58 and 393.76, median 393.67; lowest / median = 0.9998
#   H200, 2 GPUs (write): 396.20 and 396.25; lowest / median = 0.9999
#   One NVLink of 18 lost: the GPU keeps 17/18 = 0.9444 of its bandwidth, on every pair it is part of
#       (GB200: 0.9444 x 821.41 = 775.8 GB/s, still above the 765 GB/s floor)
#
# 0.97 lies about halfway between a lost link (0.944) and a perfect run (1.0): it leaves a healthy pair
# 3 % of room below the median (more than 20 times the 0.13 % seen), and a lost link stays 2.6 points
# under it. A higher value (0.99) would leave too little room for real-world noise on 72 GPUs and 18 trays
# (no 72-GPU capture is at hand); a lower one (0.95) would let a lost link pass as soon as the measurement
# is 0.6 % kind to it. Run-to-run shifts do not matter here: the published GB200 run on driver 570.124.06
# (797.7-798.3 GB/s, 2.8 % below the 580.95.05 run) moves its median with it.
# Inference, not measured: a lost link is taken to cost its 1/18 of the measured bandwidth (the run reaches
# 91 % of the 900 GB/s peak, and 17 links give 850); no capture of a GPU with a lost link is at hand.
DEFAULT_MIN_FRACTION_OF_MEDIAN = 0.97

ONE_LOST_LINK_OF_18 = 17 / 18

RULE_FLOOR = "floor"
RULE_MEDIAN = "median"
RULE_NOT_MEASURED = "not_measured"

MAX_SUMMARY_ITEMS = 5


# --------------------------------------------------------------------------------------------
# Peak and thresholds
# --------------------------------------------------------------------------------------------


def peak_table_problems(table: Optional[Sequence[Mapping[str, Any]]]) -> List[str]:
    """Why a peak table cannot be used: each entry needs ``match`` (a regular expression) and ``peak_gbps`` > 0."""
    problems = []
    for position, entry in enumerate(table or []):
        try:
            re.compile(str(entry["match"]))
            if float(entry["peak_gbps"]) <= 0:
                raise ValueError("peak_gbps must be above 0")
        except (KeyError, TypeError, ValueError, re.error) as exc:
            problems.append(
                f"peak table entry {position} ({entry!r}) is not "
                f"{{match: <regular expression>, peak_gbps: <GB/s> > 0}}: {exc}"
            )
    return problems


def nvlink_peak_gbps(product: Optional[str], table: Optional[Sequence[Mapping[str, Any]]] = None) -> Optional[float]:
    """The NVLink peak per GPU and direction (GB/s) of a ``nvidia.com/gpu.product`` value, or None.

    ``table`` (when not empty) replaces the built-in one: a list of ``{match: <regular expression>,
    peak_gbps: <GB/s>}``, the first match wins. Raises ValueError for a table that cannot be used.
    """
    problems = peak_table_problems(table)
    if problems:
        raise ValueError("; ".join(problems))
    if not product:
        return None
    for entry in table or DEFAULT_PEAK_TABLE:
        if re.search(str(entry["match"]), str(product)):
            return float(entry["peak_gbps"])
    return None


@dataclass
class Thresholds:
    """What every GPU pair must reach. ``None`` (or 0) turns a rule off.

    ``min_gbps`` above 0 is the per-pair floor and wins over ``min_fraction_of_peak`` x peak; the peak is
    ``peak_gbps`` when it is above 0, else the peak of the GPU product. ``min_fraction_of_median`` is the
    median rule. ``min_sum_gbps`` is a floor for the matrix's SUM.
    """

    min_gbps: Optional[float] = None
    min_sum_gbps: Optional[float] = None
    min_fraction_of_peak: Optional[float] = DEFAULT_MIN_FRACTION_OF_PEAK
    peak_gbps: Optional[float] = None
    min_fraction_of_median: Optional[float] = DEFAULT_MIN_FRACTION_OF_MEDIAN

    def problems(self) -> List[str]:
        """Why these thresholds cannot be applied (empty when they can)."""
        found = []
        for name in ("min_fraction_of_peak", "min_fraction_of_median"):
            value = getattr(self, name)
            if value is not None and not 0 <= float(value) <= 1:
                found.append(f"{name} is {value}; it must be from 0 to 1 (e.g. 0.85; 0 turns the rule off)")
        if self.peak_gbps is not None and float(self.peak_gbps) < 0:
            found.append(f"peak_gbps is {self.peak_gbps}; it must be a positive GB/s value (GB200: 900)")
        return found

    def cell_threshold(self, gpu_product: Optional[str] = None) -> Optional[float]:
        """The per-pair floor in GB/s (see ``pair_floor``), or None."""
        return pair_floor(self, gpu_product).gbps


@dataclass
class Floor:
    """The per-pair floor, where it came from, and the words that say so."""

    gbps: Optional[float]
    explanation: str
    source: str  # "min_gbps", "peak_gbps", "product", or "none"
    peak_gbps: Optional[float] = None
    # True when a fraction of the peak was asked for but no peak is known for the product given.
    peak_unknown: bool = False


def _positive(value: Optional[float]) -> Optional[float]:
    return float(value) if value is not None and float(value) > 0 else None


def pair_floor(
    thresholds: Optional[Thresholds] = None,
    gpu_product: Optional[str] = None,
    peak_table: Optional[Sequence[Mapping[str, Any]]] = None,
) -> Floor:
    """The absolute per-pair floor: ``min_gbps`` (> 0) wins, else ``min_fraction_of_peak`` x the peak.

    The explanation reads e.g. "0.85 x 900.00 GB/s NVLink peak of NVIDIA-GB200". The floor is rounded to
    2 decimals, as nvbandwidth prints its cells.
    """
    thresholds = thresholds or Thresholds()
    minimum = _positive(thresholds.min_gbps)
    if minimum is not None:
        return Floor(round(minimum, 2), f"min_gbps {minimum:.2f} GB/s", "min_gbps")
    fraction = _positive(thresholds.min_fraction_of_peak)
    override = _positive(thresholds.peak_gbps)
    table_peak = nvlink_peak_gbps(gpu_product, peak_table)
    if fraction is None:
        return Floor(
            None, "no per-pair floor (min_gbps and min_fraction_of_peak unset)", "none", override or table_peak
        )
    if override is not None:
        of = f" of {gpu_product}" if gpu_product else ""
        return Floor(
            round(fraction * override, 2),
            f"{fraction:g} x {override:.2f} GB/s NVLink peak{of} (peak_gbps)",
            "peak_gbps",
            override,
        )
    if table_peak is not None:
        return Floor(
            round(fraction * table_peak, 2),
            f"{fraction:g} x {table_peak:.2f} GB/s NVLink peak of {gpu_product}",
            "product",
            table_peak,
        )
    if gpu_product is None:
        return Floor(None, "no per-pair floor (no min_gbps, no peak_gbps and no GPU product)", "none")
    return Floor(
        None,
        f"no NVLink peak is known for GPU product '{gpu_product}'",
        "none",
        peak_unknown=True,
    )


# --------------------------------------------------------------------------------------------
# Judging
# --------------------------------------------------------------------------------------------


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
        }


def _rows_of(matrix: Any) -> List[List[Cell]]:
    rows = getattr(matrix, "rows", matrix)
    return [[None if v is None else float(v) for v in row] for row in rows or []]


def _is_gpu_to_gpu(matrix: Any, rows: List[List[Cell]]) -> bool:
    """A GPU<->GPU matrix (the median rule applies); host<->device matrices have CPU in their description."""
    description = getattr(matrix, "description", None)
    if description is None:
        return True  # plain rows: a peer matrix
    return "CPU" not in description


def _is_square_peer(rows: List[List[Cell]], gpu_to_gpu: bool) -> bool:
    return gpu_to_gpu and len(rows) > 1 and all(len(row) == len(rows) for row in rows)


def _node_of(gpu: int, nodes: Optional[Sequence[str]], gpus_per_node: Optional[int]) -> Optional[str]:
    if not nodes or not gpus_per_node or gpus_per_node < 1:
        return None
    index = gpu // gpus_per_node
    return str(nodes[index]) if 0 <= index < len(nodes) else None


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


def judge(
    matrix: Any,
    thresholds: Optional[Thresholds] = None,
    gpu_product: Optional[str] = None,
    gpus_per_node: Optional[int] = None,
    nodes: Optional[Sequence[str]] = None,
    *,
    peak_table: Optional[Sequence[Mapping[str, Any]]] = None,
) -> Judgement:
    """Judge one bandwidth matrix with the floor and the median rule.

    ``matrix`` is a parsed nvbandwidth matrix (``nvbandwidth.BandwidthMatrix``: its ``rows``,
    ``description`` and ``reported_sum`` are read) or plain rows (lists of GB/s, None where not measured,
    taken as a GPU peer matrix). GPU i lives on ``nodes[i // gpus_per_node]``; without ``nodes`` the
    findings name no node. ``gpu_product`` is the ``nvidia.com/gpu.product`` value: when it is given (even
    empty) and the floor needs a peak that is unknown for it, that is a violation. ``peak_table`` replaces
    the built-in peak table. Raises ValueError for thresholds that cannot be applied.
    """
    thresholds = thresholds or Thresholds()
    problems = thresholds.problems()
    if problems:
        raise ValueError("; ".join(problems))
    rows = _rows_of(matrix)
    description = str(getattr(matrix, "description", "") or "")
    gpu_to_gpu = _is_gpu_to_gpu(matrix, rows)
    square = _is_square_peer(rows, gpu_to_gpu)
    if nodes and (gpus_per_node is None or gpus_per_node < 1):
        gpus = len(rows) if square else max((len(r) for r in rows), default=0)
        gpus_per_node = max(1, gpus // len(nodes)) if gpus and gpus % len(nodes) == 0 else 1

    floor = pair_floor(thresholds, gpu_product, peak_table)
    median_fraction = _positive(thresholds.min_fraction_of_median) if gpu_to_gpu else None

    # The cells judged: every off-diagonal cell of a square peer matrix, every cell otherwise.
    judged: List[Tuple[int, int, Cell]] = [
        (r, c, v) for r, row in enumerate(rows) for c, v in enumerate(row) if not (square and r == c)
    ]
    measured = [(r, c, v) for r, c, v in judged if v is not None]
    values = [cell[2] for cell in measured]
    median = statistics.median(values) if values else None
    median_threshold = median_fraction * median if median_fraction is not None and median is not None else None
    reported_sum = getattr(matrix, "reported_sum", None)
    total = float(reported_sum) if reported_sum is not None else (round(sum(values), 2) if values else None)

    def node(gpu: int) -> Optional[str]:
        return _node_of(gpu, nodes, gpus_per_node)

    def fraction(value: Optional[float]) -> Optional[float]:
        return round(value / median, 4) if value is not None and median else None

    failing: List[Dict[str, Any]] = []
    for r, c, value in judged:
        if value is None:
            if not square:
                continue  # N/A outside a peer matrix is not a GPU pair
            rule = RULE_NOT_MEASURED
        elif floor.gbps is not None and value < floor.gbps:
            rule = RULE_FLOOR
        elif median_threshold is not None and value < median_threshold:
            rule = RULE_MEDIAN
        else:
            continue
        failing.append(
            {
                "src": r,
                "dst": c,
                "gbps": value,
                # A 1-row matrix has the CPU (or nothing) as its row; an N x 1 one no peer in its column.
                "src_node": node(r) if square or len(rows) > 1 else None,
                "dst_node": node(c) if square or len(rows) == 1 else None,
                "fraction_of_median": fraction(value),
                "rule": rule,
                "low_gpu": None,
            }
        )

    # GPUs whose every measured pair, as source and as destination, is below the median rule.
    low_gpus: List[Dict[str, Any]] = []
    means: Dict[int, float] = {}
    if square and median_threshold is not None and len(rows) >= 3:
        for gpu in range(len(rows)):
            cells = [rows[gpu][c] for c in range(len(rows)) if c != gpu] + [
                rows[r][gpu] for r in range(len(rows)) if r != gpu
            ]
            cells = [v for v in cells if v is not None]
            if len(cells) >= 2 and all(v < median_threshold for v in cells):
                mean = means[gpu] = sum(cells) / len(cells)
                low_gpus.append(
                    {
                        "gpu": gpu,
                        "node": node(gpu),
                        "pairs": len(cells),
                        "mean_gbps": round(mean, 3),
                        "median_gbps": round(statistics.median(cells), 3),
                        "min_gbps": min(cells),
                        "fraction_of_median": fraction(mean),
                    }
                )
    low = {g["gpu"] for g in low_gpus}
    for pair in failing:
        explained = [g for g in (pair["src"], pair["dst"]) if g in low]
        pair["low_gpu"] = explained[0] if explained and square else None
    unexplained = [p for p in failing if p["low_gpu"] is None]

    # The nodes blamed: those of the low GPUs, and both ends of each pair that no low GPU explains.
    median_words = f"{median:.2f}" if median is not None else "n/a"
    gpu_items = [_low_gpu_words(gpu, means[gpu["gpu"]], median) for gpu in low_gpus]
    pair_items = [_pair_words(pair, floor, median, description, len(rows)) for pair in unexplained]
    findings: Dict[str, List[str]] = {}
    for gpu, words in zip(low_gpus, gpu_items):
        if gpu["node"]:
            findings.setdefault(gpu["node"], []).append(words)
    for pair, words in zip(unexplained, pair_items):
        for name in dict.fromkeys(n for n in (pair["src_node"], pair["dst_node"]) if n):
            findings.setdefault(name, []).append("pair " + words)
    failed_nodes = sorted(findings)
    node_problems = {name: _join_items(findings[name]) for name in failed_nodes}

    # Violations: one per low GPU, one per pair no low GPU explains, then the matrix-wide ones.
    violations: List[str] = []
    violations.extend(gpu_items)
    for pair in unexplained:
        label = _pair_label(description, len(rows), pair["src"], pair["dst"])
        if pair["rule"] == RULE_NOT_MEASURED:
            violations.append(f"{label}: not measured (N/A), the pair has no peer access over NVLink")
        elif pair["rule"] == RULE_FLOOR:
            violations.append(f"{label}: {_num(pair['gbps'])} GB/s is below the threshold {_num(floor.gbps)}")
        else:
            violations.append(
                f"{label}: {_num(pair['gbps'])} GB/s is {pair['gbps'] / median:.3f} of the median "
                f"{median_words}, below {median_fraction:g} x the median ({median_threshold:.2f})"
            )
    other: List[str] = []
    if floor.peak_unknown:
        other.append(
            f"no NVLink peak is known for GPU product '{gpu_product}' (label nvidia.com/gpu.product), so "
            f"{thresholds.min_fraction_of_peak:g} x the peak cannot be worked out: set min_gbps, or peak_gbps, or "
            "add the product to the peak table"
        )
    if not measured:
        other.append("no GPU pair was measured: every cell is N/A")
    min_sum = thresholds.min_sum_gbps
    if min_sum is not None and total is not None and total < float(min_sum):
        key = getattr(matrix, "key", "") or "of the matrix"
        other.append(f"SUM {key} {_num(total)} is below min_sum_gbps {_num(float(min_sum))}")
    violations.extend(other)

    judgement = Judgement(
        passed=not violations,
        summary="",
        threshold_gbps=floor.gbps,
        threshold_explanation=floor.explanation,
        peak_gbps=floor.peak_gbps,
        min_fraction_of_peak=_positive(thresholds.min_fraction_of_peak) if floor.source != "min_gbps" else None,
        min_fraction_of_median=median_fraction,
        median_gbps=round(median, 4) if median is not None else None,
        median_threshold_gbps=round(median_threshold, 4) if median_threshold is not None else None,
        pairs=len(judged) if square else len(measured),
        measured_pairs=len(measured),
        min_gbps=min(values) if values else None,
        max_gbps=max(values) if values else None,
        sum_gbps=total,
        failing_pairs=failing,
        low_gpus=low_gpus,
        failed_nodes=failed_nodes,
        node_problems=node_problems,
        violations=violations,
    )
    judgement.summary = _summary(judgement, median, gpu_to_gpu, gpu_items + pair_items, other)
    return judgement


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
    fraction = _positive(min_fraction_of_median)
    if fraction is None:
        return []
    cells = []
    for matrix in directions:
        rows = _rows_of(matrix)
        square = _is_square_peer(rows, True)
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


def _low_gpu_words(gpu: Dict[str, Any], mean: float, median: float) -> str:
    where = f" on {gpu['node']}" if gpu["node"] else ""
    return (
        f"GPU {gpu['gpu']}{where}: its {gpu['pairs']} pairs average {mean:.2f} GB/s, "
        f"{mean / median:.3f} of the median {median:.2f}: a GPU with lost NVLinks"
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
    return f"{words}, {pair['gbps'] / median:.3f} of the median {median:.2f}"


def _summary(judgement: Judgement, median: Optional[float], gpu_pairs: bool, items: List[str], other: List[str]) -> str:
    """One line: the verdict, the rule's numbers, and at most 5 findings (GPUs first, then pairs)."""
    noun = "GPU pairs" if gpu_pairs else "cells"
    if judgement.passed:
        rules = []
        if judgement.threshold_gbps is not None:
            rules.append(f"{judgement.threshold_gbps:.2f} GB/s")
        if judgement.min_fraction_of_median is not None and median is not None:
            rules.append(f"{judgement.min_fraction_of_median:g} of the median {median:.2f}")
        stats = f"min {judgement.min_gbps:.2f}"
        if judgement.sum_gbps is not None:
            stats += f", SUM {judgement.sum_gbps:.2f}"
        if rules:
            return f"{judgement.measured_pairs} of {judgement.pairs} {noun} at or above {' and '.join(rules)} ({stats})"
        return f"{judgement.measured_pairs} of {judgement.pairs} {noun} measured, no threshold set ({stats})"
    parts = []
    if judgement.failing_pairs:
        parts.append(
            f"{len(judgement.failing_pairs)} of {judgement.pairs} {noun} below the threshold: {_join_items(items)}"
        )
    parts.extend(other)
    return "; ".join(parts)
