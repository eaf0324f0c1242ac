# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The judges of the MPIJob checks: one rack's launcher log -> verdict, summary, blamed trays.

A judge reads the tool's output with the tool's parser and applies the one rule of that tool
(``bandwidth_rule`` for nvbandwidth, ``nccl`` for nccl-tests); the fleet lifecycle prefixes the
rack's name and writes the record. What every judge needs (the GPUs a run shows, ``gpu_coverage``; the
options' thresholds) is here; the nvbandwidth judge is the check's own (``checks.nvbandwidth``), so that
no judge here stands on the nvbandwidth parser and its rule.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.bandwidth_thresholds import (
    DEFAULT_MIN_FRACTION_OF_MEDIAN,
    DEFAULT_PEAK_TABLE,
    Thresholds,
    nvlink_peak_gbps,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.nccl import (
    DEFAULT_JUDGED_MIN_BYTES,
    busbw_reference,
    nccl_tests_summary,
    size_text,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.rack_plan import RackPlan
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.record import Record, failed_by
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.text import one_line, plural

# The host a rank prints (nvbandwidth's ``Process N (<host>)``, nccl-tests' ``on <host>``): the worker pod's
# hostname, ``<job>-worker-<index>`` under the MPI operator (a domain after it cut off).
WORKER_HOST_RE = re.compile(r"-worker-(?P<index>\d+)$")


def coverage_refusal(coverage: Any, details: Dict[str, Any]) -> Dict[str, Any]:
    """The verdict of a run whose output lacks a planned GPU (``gpu_coverage``'s problems): failed, naming the
    trays that lack one, and no figure judged."""
    return {
        "passed": False,
        "summary": one_line(coverage.summary()),
        "details": details,
        "failed_nodes": sorted(coverage.trays),
        "node_problems": dict(coverage.trays),
    }


def tray_of_rank(rank: int, host: str, nodes: Sequence[str], gpus_per_tray: int) -> Optional[str]:
    """The tray a rank ran on: that of the worker its host names (worker w runs on ``nodes[w]``), the tray its host
    is, else the one the launcher's hostfile gives the rank (``ppr:<gpus_per_tray>:node``: rank r on
    ``nodes[r // gpus_per_tray]``); None for a rank the plan has no tray for."""
    name = (host or "").split(".")[0]
    match = WORKER_HOST_RE.search(name)
    if match and int(match.group("index")) < len(nodes):
        return nodes[int(match.group("index"))]
    if name in nodes:
        return name
    index = rank // gpus_per_tray if gpus_per_tray > 0 else len(nodes)
    return nodes[index] if 0 <= index < len(nodes) else None


@dataclass
class Coverage:
    """What a run's output lacks of the GPUs planned: each tray's gap (tray -> one line naming its GPUs and ranks),
    what no tray explains, and how many GPUs it shows of those planned."""

    tool: str
    planned: int
    shown: int
    trays: Dict[str, str] = field(default_factory=dict)
    unplanned: List[str] = field(default_factory=list)

    @property
    def problems(self) -> List[str]:
        return [f"{tray}: {problem}" for tray, problem in self.trays.items()] + self.unplanned

    def summary(self) -> str:
        """One line: the GPUs the run shows of those planned, each tray's gap by name, then the rest."""
        parts = [f"{tray}: {problem}" for tray, problem in list(self.trays.items())[:3]]
        if len(self.trays) > 3:
            parts.append(f"and {plural(len(self.trays) - 3, 'more tray')}")
        parts.extend(self.unplanned[:2])
        shown = f" shows {self.shown} of the {self.planned} GPUs planned" if self.trays else ""
        return f"the {self.tool} output{shown}, no figure is judged: " + "; ".join(parts)


def gpu_coverage(
    tool: str,
    listed: Sequence[Tuple[int, str, int]],
    nodes: Sequence[str],
    gpus_per_tray: int,
    measured: Optional[int] = None,
    listing: str = "rank line",
) -> Coverage:
    """What the output of a run over ``nodes`` x ``gpus_per_tray`` GPUs lacks, judged before any figure.

    ``listed``: each rank the output lists, as (rank, host, CUDA device); ``measured``: the GPUs its result covers
    (nvbandwidth's matrix: GPU r is rank r), None when the tool has no such result. Every tray must show each of
    its GPUs 0 to gpus_per_tray - 1 (and in the result: rank ``w * gpus_per_tray + g`` for GPU g of the w-th tray).
    An output that lists no GPU at all blames no tray (and shows 0): the run did not start, its errors say why.
    """
    expected = len(nodes) * gpus_per_tray
    if not listed and not measured:
        return Coverage(tool, expected, 0)
    general: List[str] = []
    why: Dict[Tuple[str, int], List[str]] = {}
    # rank -> (tray, GPU): as the output's lines place it, else as the hostfile does
    placed = {rank: (nodes[rank // gpus_per_tray], rank % gpus_per_tray) for rank in range(expected)}
    if listed:
        placed = {}
        for rank, host, device in listed:
            tray = tray_of_rank(rank, host, nodes, gpus_per_tray)
            if tray is not None and rank < expected:
                placed[rank] = (tray, device)
        if len(placed) < len(listed) or len(listed) > expected:
            general.append(
                f"the {tool} output lists {len(listed)} ranks, the plan has {expected} ({plural(len(nodes), 'tray')} "
                f"x {gpus_per_tray}): check slotsPerWorker and the GPUs each worker requests"
            )
        shown = set(placed.values())
        for tray in nodes:
            for gpu in range(gpus_per_tray):
                if (tray, gpu) not in shown:
                    why.setdefault((tray, gpu), []).append(f"no {listing} names it")
    if measured is not None and measured > expected:
        general.append(
            f"the {tool} matrix covers {measured} GPUs, the plan has {expected} ({plural(len(nodes), 'tray')} x "
            f"{gpus_per_tray}): check slotsPerWorker and the GPUs each worker requests"
        )
    elif measured is not None:  # the matrix's GPU r is rank r, wherever that rank ran
        in_matrix = {where for rank, where in placed.items() if rank < measured}
        for tray in nodes:
            for gpu in range(gpus_per_tray):
                if (tray, gpu) not in in_matrix:
                    why.setdefault((tray, gpu), []).append("not in the matrix")
    problems: Dict[str, str] = {}
    for index, tray in enumerate(nodes):
        gpus = [gpu for gpu in range(gpus_per_tray) if (tray, gpu) in why]
        if not gpus:
            continue
        ranks = [index * gpus_per_tray + gpu for gpu in gpus]
        reasons = "; ".join(dict.fromkeys(reason for gpu in gpus for reason in why[(tray, gpu)]))
        if len(gpus) == gpus_per_tray:
            problems[tray] = (
                f"none of its {gpus_per_tray} GPUs is in the {tool} output (ranks {ranks[0]} to {ranks[-1]}: {reasons})"
            )
        else:
            many = "s" if len(gpus) > 1 else ""
            problems[tray] = (
                f"GPU{many} {', '.join(map(str, gpus))} (rank{many} {', '.join(map(str, ranks))}) not in the {tool} "
                f"output ({reasons}): a GPU off the bus or a rank that never started"
            )
    return Coverage(tool, expected, expected - len(why), problems, general)


def _positive(value: Any) -> Any:
    return float(value) if value is not None and float(value) > 0 else None


def nvbandwidth_thresholds(options: Mapping[str, Any]) -> Thresholds:
    median = options.get("min_fraction_of_median")
    return Thresholds(
        min_gbps=_positive(options.get("min_gbps")),
        min_fraction_of_peak=_positive(options.get("min_fraction_of_peak")),
        peak_gbps=_positive(options.get("peak_gbps")),
        min_fraction_of_median=DEFAULT_MIN_FRACTION_OF_MEDIAN if median is None else _positive(median),
    )


def peak_table(options: Mapping[str, Any]) -> Any:
    """The site's product table tried before the built-in one (None: the built-in one alone)."""
    extra = list(options.get("peak_gbps_by_product") or [])
    return extra + list(DEFAULT_PEAK_TABLE) if extra else None


def nccl_threshold(options: Mapping[str, Any], product: str, binary: str = "all_reduce_perf") -> Any:
    """The bus bandwidth every row of the judged sizes must reach, why, and the smallest judged size.

    The absolute value; else the fraction of the product's published figure for the benchmark (nccl.BUSBW_REFERENCES,
    at the sizes it was read at); else the fraction of the NVLink peak.
    """
    absolute = _positive(options.get("min_busbw_gbps"))
    if absolute:
        return absolute, f"{absolute:.2f} GB/s", DEFAULT_JUDGED_MIN_BYTES
    reference = busbw_reference(product, binary)
    fraction = _positive(options.get("min_fraction_of_reference"))
    if reference and fraction:
        return (
            round(reference.busbw_gbps * fraction, 2),
            f"{fraction:g} x {reference.busbw_gbps:.2f} GB/s, {reference.source}, at {size_text(reference.min_bytes)} "
            "and more",
            reference.min_bytes,
        )
    peak = _positive(options.get("peak_gbps")) or nvlink_peak_gbps(product, peak_table(options))
    fraction = _positive(options.get("min_fraction_of_peak"))
    if peak and fraction:
        return (
            round(peak * fraction, 2),
            f"{fraction:g} x {peak:.2f} GB/s NVLink peak of {product}",
            DEFAULT_JUDGED_MIN_BYTES,
        )
    return None, "no threshold (unknown GPU product: set verify_nccl_min_busbw_gbps)", DEFAULT_JUDGED_MIN_BYTES


def judge_nccl_log(
    log: str, plan: RackPlan, options: Mapping[str, Any], nodes: Optional[Sequence[str]] = None
) -> Dict[str, Any]:
    """The verdict on one rack's nccl-tests run: first each tray's GPUs in its ``# Rank`` lines (``nodes``: the
    tray of each worker in rank order, default the rack's trays in name order), then the figures."""
    nodes = list(nodes or plan.nodes)
    binary = options.get("binary", "all_reduce_perf")
    threshold, explanation, min_bytes = nccl_threshold(options, plan.gpu_product, binary)
    ranks = len(plan.nodes) * plan.gpus_per_tray
    require_mnnvl = bool(options.get("require_mnnvl", True))
    result = nccl_tests_summary(
        log,
        min_busbw_gbps=threshold,
        expected_ranks=ranks,
        require_mnnvl=require_mnnvl,
        min_bytes=min_bytes,
        floor_explanation=explanation,
    )
    listed = [(int(d["rank"]), str(d["host"]), int(d["device"])) for d in result["devices"]]
    coverage = gpu_coverage("nccl-tests", listed, nodes, plan.gpus_per_tray, listing="'# Rank' line")
    violations = coverage.problems + list(result["violations"])
    if not listed:  # nccl-tests lists every rank before its first row: without the list no GPU is shown to have run
        violations.append(
            f"the {binary} output lists no rank (no '#  Rank N ... on <host> device D' line under '# Using devices'): "
            f"it does not show which of the {ranks} planned GPUs ran; read the launcher's log"
        )
    if threshold is None:
        violations.append(f"no threshold: {explanation}")
    details = {
        "benchmark": binary,
        "rank_nodes": nodes,
        "expected_ranks": ranks,
        "missing_gpus": coverage.trays,
        "args": list(options.get("args") or []),
        "gpus_per_node": plan.gpus_per_tray,
        "gpu_product": plan.gpu_product,
        "threshold_gbps": threshold,
        "threshold_explanation": explanation,
        "ranks": result["ranks"],
        "avg_busbw_gbps": result["avg_busbw_gbps"],
        "max_busbw_gbps": result["max_busbw_gbps"],
        "judged_min_bytes": min_bytes,
        "judged_busbw_gbps": result["judged_busbw_gbps"],
        "rows": result["rows"],
        "warnings": result["warnings"],
        "mnnvl_required": require_mnnvl,
        "mnnvl_ranks": result["mnnvl_ranks"],
        "violations": violations,
    }
    if coverage.problems:  # no evidence of every planned GPU: no figure is judged, the trays that lack one are named
        return coverage_refusal(coverage, details)
    if violations:
        return {
            "passed": False,
            "summary": f"{binary} over {ranks} GPUs: " + "; ".join(violations[:3]),
            "details": details,
        }
    return {
        "passed": True,
        "summary": f"{binary} over {ranks} GPUs: bus bandwidth {result['judged_busbw_gbps']:.2f} GB/s or more at "
        f"{size_text(min_bytes)} and more, at or above {threshold:.2f} GB/s ({explanation}; average "
        f"{result['avg_busbw_gbps']:.2f} GB/s, best size {result['max_busbw_gbps']:.2f} GB/s)"
        + (f"; MNNVL on {result['mnnvl_ranks']} of {ranks} ranks" if require_mnnvl else ""),
        "details": details,
    }


def judge_fleet_busbw(records: Sequence[Record], min_fraction_of_median: Optional[float]) -> List[Record]:
    """Every rack's NCCL bus bandwidth held against the fleet's median of the same run: the records, the low racks'
    failed (new records, ``record.failed_by``), each measured one with the median in its details.

    A rack far below its peers has a fabric problem even above the absolute threshold (one rack with a lost
    NVLink per GPU averages about 17/18 of the others). Needs three racks that measured a bandwidth: with two, the
    median is their mean and a slow rack would pull it down.
    The figure compared is the one the floor judges (the lowest bus bandwidth at the judged sizes), else the
    average of a record that has no judged figure.
    """

    def figure(record: Mapping[str, Any]) -> Any:
        details = record.get("details") or {}
        judged = details.get("judged_busbw_gbps")
        if isinstance(judged, (int, float)):
            return float(judged), f"bus bandwidth at {size_text(int(details.get('judged_min_bytes') or 0))} and more"
        average = details.get("avg_busbw_gbps")
        return (float(average), "average bus bandwidth") if isinstance(average, (int, float)) else (None, "")

    fraction = _positive(min_fraction_of_median)
    measured = [r for r in records if figure(r)[0] is not None]
    if fraction is None or len(measured) < 3:
        return list(records)
    values = sorted(figure(r)[0] for r in measured)
    middle = len(values) // 2
    median = values[middle] if len(values) % 2 else (values[middle - 1] + values[middle]) / 2
    floor = fraction * median
    judged: List[Record] = []
    for record in records:
        value, name = figure(record)
        if value is None:
            judged.append(record)
        elif value >= floor:
            judged.append(Record(record, details=dict(record["details"], fleet_median_busbw_gbps=round(median, 2))))
        else:
            text = (
                f"{name} {value:.2f} GB/s is {value / median:.3f} of the fleet's median {median:.2f} GB/s "
                f"(below {fraction:g}): this rack is slower than its peers"
            )
            judged.append(failed_by(record, text, fleet_median_busbw_gbps=round(median, 2)))
    return judged
