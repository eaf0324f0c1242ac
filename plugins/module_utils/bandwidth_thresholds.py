# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""What each GPU pair of a bandwidth matrix is held against: the floor and the references.

``bandwidth_rule.judge`` applies the rule; this file says where its figures come from:

- **the floor**: ``min_gbps``, or ``min_fraction_of_peak`` x the NVLink peak of the GPU product
  (``DEFAULT_PEAK_TABLE``, which a site may replace): ``Thresholds``, ``pair_floor``;
- **the references**, each held against ``min_fraction_of_median``: the product reference
  (``DEFAULT_PRODUCT_REFERENCES``, each figure from a real measurement whose source is stated, extended by
  the site's table), the site baseline (the rack's own earlier run, ``Baseline``) and the run's median;
  ``References`` picks the strictest for the rack and for each pair.

The tables a user passes are checked here too (``peak_table_problems``, ``reference_table_problems``,
``baseline_problems``, whose home is ``record_validation``, the one judge of a kept record), so that a bad
entry is refused in one line before any run: every figure the rule reads is a finite number above 0
(``figure_problem``). A NaN compares false with everything, so a NaN reference or peak would let every pair
pass; a boolean is no figure either (``True`` reads as 1 GB/s). Only the Python
standard library is used: this file runs on GPU hosts as well as on the controller.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.record_validation import (
    baseline_problems,
    figure_problem,
)

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

# The rule a failing pair missed (its "rule" key); a Reference's kind is one of median, product and baseline.
RULE_FLOOR = "floor"
RULE_MEDIAN = "median"
RULE_PRODUCT = "product"
RULE_BASELINE = "baseline"
RULE_NOT_MEASURED = "not_measured"

# The healthy per-pair figure of a GPU product, by testcase and driver branch (the driver's major version),
# each from a real measurement. The figure is the median cell of that run; a pair is held against
# min_fraction_of_median x the figure, like the run's own median. A site adds its own entries (same keys)
# through the `product_references` option; they are tried before these.
#
#   GB200 read CE, driver 580: the guide's MPIJob, 2 trays x 4 GPUs of one NVL72 rack, driver 580.95.05,
#       nvbandwidth v0.7: 56 cells 820.35-822.16 GB/s, median 821.41 (tests/fixtures/nvbandwidth/gb200-2node-*).
#   GB200 read CE, driver 570: NVIDIA's published example (k8s-dra-driver-gpu docs, dra-cds.rst), 2 nodes x 4
#       GPUs, driver 570.124.06: cells 797.65-798.25 GB/s, SUM 44685.29 over 56 cells = 797.95 per cell.
#   H200 read CE / write CE, driver 580: a 2x H200 SXM machine, driver 580.159.04, nvbandwidth v0.8:
#       393.58-393.76 (read) and 396.20-396.25 (write) GB/s (tests/fixtures/nvbandwidth/h200x2-*).
#
# The intra-tray read CE testcase crosses the same NVLink switches as the multinode one on GB200, so the
# figure is given for both names. H200 NVL (PCIe cards with NVLink bridges) is a different fabric: the
# expression matches the SXM product label (NVIDIA-H200) only.
_GB200_READ = r"^(multinode_)?device_to_device_memcpy_read_ce$"
DEFAULT_PRODUCT_REFERENCES: Tuple[Dict[str, Any], ...] = (
    {
        "match": "GB200",
        "testcase": _GB200_READ,
        "driver_branch": 580,
        "gbps": 821.41,
        "source": "GB200 NVL72, 2 trays x 4 GPUs, driver 580.95.05, the guide's run: 820.35-822.16 GB/s",
    },
    {
        "match": "GB200",
        "testcase": _GB200_READ,
        "driver_branch": 570,
        "gbps": 797.95,
        "source": "GB200, 2 nodes x 4 GPUs, driver 570.124.06, NVIDIA's published example: 797.65-798.25 GB/s",
    },
    {
        "match": r"H200$|H200-SXM",
        "testcase": r"^device_to_device_memcpy_read_ce$",
        "driver_branch": 580,
        "gbps": 393.67,
        "source": "2x H200 SXM, driver 580.159.04, nvbandwidth v0.8: 393.58-393.76 GB/s",
    },
    {
        "match": r"H200$|H200-SXM",
        "testcase": r"^device_to_device_memcpy_write_ce$",
        "driver_branch": 580,
        "gbps": 396.22,
        "source": "2x H200 SXM, driver 580.159.04, nvbandwidth v0.8: 396.20-396.25 GB/s",
    },
)


# --------------------------------------------------------------------------------------------
# Peak and thresholds
# --------------------------------------------------------------------------------------------


def _figure(value: Any, name: str) -> float:
    """``value`` as a figure, or ValueError "<name> <why>"."""
    problem = figure_problem(value)
    if problem:
        raise ValueError(f"{name} {problem}")
    return float(value)


def peak_table_problems(table: Optional[Sequence[Mapping[str, Any]]]) -> List[str]:
    """Why a peak table cannot be used: each entry needs ``match`` (a regular expression) and ``peak_gbps`` > 0."""
    problems = []
    for position, entry in enumerate(table or []):
        try:
            re.compile(str(entry["match"]))
            _figure(entry["peak_gbps"], "peak_gbps")
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
            if value is not None and not 0 <= _number_or_nan(value) <= 1:
                found.append(f"{name} is {value!r}; it must be from 0 to 1 (e.g. 0.85; 0 turns the rule off)")
        if self.peak_gbps is not None and not 0 <= _number_or_nan(self.peak_gbps) < math.inf:
            found.append(f"peak_gbps is {self.peak_gbps!r}; it must be a positive GB/s value (GB200: 900)")
        for name in ("min_gbps", "min_sum_gbps"):
            value = getattr(self, name)
            if value is not None and not 0 <= _number_or_nan(value) < math.inf:
                found.append(f"{name} is {value!r}; it must be a finite GB/s value (0 turns it off)")
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


def _number_or_nan(value: Any) -> float:
    """``value`` as a number; NaN (which no range holds) for a boolean or anything that is no number."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return math.nan
    try:
        return float(value)
    except (ValueError, OverflowError):
        return math.nan


def positive_or_none(value: Optional[float]) -> Optional[float]:
    """``value`` as a float when it is above 0; None when it is unset or 0 (a rule turned off)."""
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
    minimum = positive_or_none(thresholds.min_gbps)
    if minimum is not None:
        return Floor(round(minimum, 2), f"min_gbps {minimum:.2f} GB/s", "min_gbps")
    fraction = positive_or_none(thresholds.min_fraction_of_peak)
    override = positive_or_none(thresholds.peak_gbps)
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
# References
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Reference:
    """A healthy per-pair level a pair is held against (times the fraction), and where it came from."""

    kind: str  # RULE_PRODUCT, RULE_BASELINE or RULE_MEDIAN
    gbps: float
    source: str

    def words(self) -> str:
        """How a message names it: "the product reference 821.41 GB/s (<source>)", "the median 821.41"."""
        if self.kind == RULE_MEDIAN:
            return f"the median {self.gbps:.2f}"
        name = "the product reference" if self.kind == RULE_PRODUCT else "the site baseline"
        return f"{name} {self.gbps:.2f} GB/s ({self.source})"

    def short(self) -> str:
        """The name and figure without the source: "the product reference 821.41", "the median 821.41"."""
        if self.kind == RULE_MEDIAN:
            return f"the median {self.gbps:.2f}"
        return f"{'the product reference' if self.kind == RULE_PRODUCT else 'the site baseline'} {self.gbps:.2f}"

    def to_dict(self) -> Dict[str, Any]:
        return {"kind": self.kind, "gbps": self.gbps, "source": self.source}


def reference_table_problems(table: Optional[Sequence[Mapping[str, Any]]]) -> List[str]:
    """Why a product reference table cannot be used: each entry needs ``match``, ``testcase``, ``gbps`` > 0."""
    problems = []
    for position, entry in enumerate(table or []):
        try:
            re.compile(str(entry["match"]))
            re.compile(str(entry["testcase"]))
            _figure(entry["gbps"], "gbps")
            branch = entry.get("driver_branch")
            if branch is not None and (figure_problem(branch) or int(branch) != float(branch)):
                raise ValueError(f"driver_branch {branch!r} is not a driver's major version (580)")
        except (KeyError, TypeError, ValueError, AttributeError, re.error) as exc:
            problems.append(
                f"product reference entry {position} ({entry!r}) is not {{match: <regular expression>, testcase: "
                f"<regular expression>, driver_branch: <major version, optional>, gbps: <GB/s> > 0, source: <text>}}: "
                f"{exc}"
            )
    return problems


def driver_branch(driver_version: Optional[str]) -> Optional[int]:
    """The branch (major version) of a driver version: 580 for "580.95.05"; None when it is not one."""
    head = str(driver_version or "").strip().split(".", maxsplit=1)[0]
    return int(head) if head.isdigit() else None


def product_reference(
    gpu_product: Optional[str],
    testcase: Optional[str],
    driver_version: Optional[str] = None,
    table: Optional[Sequence[Mapping[str, Any]]] = None,
) -> Tuple[Optional[Reference], Optional[str]]:
    """The product reference for a run, and a note when the choice needs saying (else None).

    The site's entries (``table``) are tried first: when any of them matches the product and the testcase,
    the built-in ones are not used. Among the matching entries, the one of the run's driver branch wins;
    else the newest branch below it (drivers rarely get slower); else, for a branch older than every
    entry or an unknown driver, the lowest figure, so that an unknown driver cannot fail a healthy rack.
    Raises ValueError for a site table that cannot be used.
    """
    problems = reference_table_problems(table)
    if problems:
        raise ValueError("; ".join(problems))
    if not gpu_product or not testcase:
        return None, None
    candidates: List[Mapping[str, Any]] = []
    for group in (list(table or []), list(DEFAULT_PRODUCT_REFERENCES)):
        candidates = [
            entry
            for entry in group
            if re.search(str(entry["match"]), str(gpu_product)) and re.search(str(entry["testcase"]), str(testcase))
        ]
        if candidates:
            break
    if not candidates:
        return None, None
    branch = driver_branch(driver_version)

    def entry_branch(entry: Mapping[str, Any]) -> Optional[int]:
        return None if entry.get("driver_branch") is None else int(entry["driver_branch"])

    exact = [e for e in candidates if entry_branch(e) == branch or entry_branch(e) is None]
    below = [e for e in candidates if branch is not None and (entry_branch(e) or 0) < branch]
    note = None
    if exact:
        chosen = exact[0]
    elif below:
        chosen = max(below, key=lambda e: entry_branch(e) or 0)
        note = (
            f"no product reference for driver branch {branch}; the one of branch {entry_branch(chosen)} is used "
            "(add the site's figure to product_references)"
        )
    else:
        chosen = min(candidates, key=lambda e: float(e["gbps"]))
        said = f"driver branch {branch}" if branch is not None else "an unknown driver version"
        note = (
            f"no product reference for {said}; the lowest of the product's figures ({float(chosen['gbps']):.2f} GB/s) "
            "is used"
        )
    source = str(chosen.get("source") or f"{gpu_product}, {testcase}")
    return Reference(RULE_PRODUCT, float(chosen["gbps"]), source), note


@dataclass
class Baseline:
    """The rack's own figures from an earlier run: its median, and per GPU pair where the ranks match.

    ``matrix`` is that run's matrix (rows of GB/s, None where not measured) and ``nodes`` the tray of each
    rank in that run; the per-pair figures are used only when the current run has the same trays in the
    same rank order and the same shape. ``driver_version``: that run's driver; a baseline of another
    driver branch is not used (the figure moves with the driver). A median or a cell that is no figure
    (``figure_problem``) is refused with ValueError: a NaN baseline would let every pair pass.
    """

    median_gbps: float
    source: str
    matrix: Optional[List[List[Cell]]] = None
    nodes: Optional[List[str]] = None
    driver_version: Optional[str] = None

    def __post_init__(self) -> None:
        problems = baseline_problems({"median_gbps": self.median_gbps, "matrix": self.matrix})
        if problems:
            raise ValueError(f"the site baseline ({self.source}): " + "; ".join(problems))

    @classmethod
    def from_record(cls, record: Optional[Mapping[str, Any]]) -> Optional[Baseline]:
        """A baseline from the history's record (keys median_gbps, matrix, rank_nodes or nodes, run_id, source).

        None for no record (None, empty, no ``median_gbps``); ValueError for a record whose figures are no
        numbers (``baseline_problems``)."""
        if not record or not isinstance(record, Mapping) or "median_gbps" not in record:
            return None
        source = str(record.get("source") or f"run {record.get('run_id', '(unknown)')}")
        problems = baseline_problems(record)
        if problems:
            raise ValueError(f"the site baseline ({source}): " + "; ".join(problems))
        matrix = record.get("matrix")
        nodes = record.get("rank_nodes") or record.get("nodes")
        return cls(
            median_gbps=float(record["median_gbps"]),
            source=source,
            matrix=[[None if v is None else float(v) for v in row] for row in matrix] if matrix else None,
            nodes=[str(n) for n in nodes] if nodes else None,
            driver_version=record.get("driver_version"),
        )


@dataclass
class References:
    """The references of one matrix: the product's, the baseline (per pair where it can be), the median."""

    product: Optional[Reference] = None
    baseline: Optional[Reference] = None
    median: Optional[Reference] = None
    baseline_rows: Optional[List[List[Cell]]] = None
    baseline_source: str = ""
    warnings: List[str] = field(default_factory=list)

    @classmethod
    def of(
        cls,
        fraction: Optional[float],
        median: Optional[float],
        gpu_product: Optional[str],
        testcase: Optional[str],
        driver_version: Optional[str],
        table: Optional[Sequence[Mapping[str, Any]]],
        baseline: Optional[Baseline],
        rows: List[List[Cell]],
        nodes: Optional[Sequence[str]],
        gpus_per_node: Optional[int],
    ) -> References:
        """The references of a matrix (``rows``), with the warnings that go with them.

        None when the rule is off (``fraction`` None) or nothing was measured (``median`` None).
        """
        found = cls()
        if fraction is None or median is None:
            return found
        found.median = Reference(RULE_MEDIAN, round(median, 4), "this run's median")
        product, note = product_reference(gpu_product, testcase, driver_version, table)
        found.product = product
        if note:
            found.warnings.append(note)
        if baseline is not None:
            branch, then = driver_branch(driver_version), driver_branch(baseline.driver_version)
            if branch is not None and then is not None and branch != then:
                found.warnings.append(
                    f"the site baseline ({baseline.source}) was measured on driver branch {then}, this run on "
                    f"{branch}: it is not used until a run on this branch passes"
                )
            else:
                found.baseline = Reference(RULE_BASELINE, baseline.median_gbps, baseline.source)
                same_shape = baseline.matrix is not None and [len(r) for r in baseline.matrix] == [len(r) for r in rows]
                if same_shape and nodes and baseline.nodes == [str(n) for n in nodes]:
                    found.baseline_rows = baseline.matrix
                    found.baseline_source = baseline.source
        if found.product is None:
            # A run held against no product reference may be faulty from the start: it never sets a later run's bar
            # (history_baseline.baseline_for takes a passing run only when its record lists a product reference).
            what = f"{gpu_product or 'this GPU product'}, {testcase or 'this testcase'}"
            if driver_version:
                what += f", driver {driver_version}"
            if found.baseline is None:
                found.warnings.append(
                    f"held against the run's median alone: no product reference ({what}) and no site baseline; "
                    "many GPUs that lost a link at once move the median with them and would pass, and this run "
                    "sets no baseline (add the product to product_references, or pin a run you trust with "
                    "gpu_fabric_verify_baseline_run)"
                )
            else:
                found.warnings.append(
                    f"no product reference ({what}): this run is held against the site baseline and its median, "
                    "and sets no baseline for later runs (add the product to product_references)"
                )
        return found

    def listed(self) -> List[Reference]:
        return [r for r in (self.product, self.baseline, self.median) if r is not None]

    def rack(self) -> Optional[Reference]:
        """The strictest rack-wide reference (the first of the highest: product, baseline, median)."""
        listed = self.listed()
        return max(listed, key=lambda r: r.gbps) if listed else None

    def of_pair(self, row: int, column: int, label: Optional[str] = None) -> Optional[Reference]:
        """The strictest reference of one cell: the baseline's own figure for it where there is one.

        ``label`` names the cell's GPU pair ("5->41") where it is not "<row>-><column>" (rows that are pairs).
        """
        listed = self.listed()
        if self.baseline_rows is not None:
            cell = self.baseline_rows[row][column] if row < len(self.baseline_rows) else None
            if cell is not None and column < len(self.baseline_rows[row]):
                own = Reference(RULE_BASELINE, cell, f"{self.baseline_source}, pair {label or f'{row}->{column}'}")
                listed = [r if r.kind != RULE_BASELINE else own for r in listed]
        return max(listed, key=lambda r: r.gbps) if listed else None
