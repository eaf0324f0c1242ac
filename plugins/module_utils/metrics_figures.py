# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The figures the metrics show, in the units Prometheus names: bandwidth in bytes per second (the records' GB/s are
nvbandwidth's and nccl-tests' decimal gigabytes, 10^9 bytes), times in Unix seconds, and the figures of each tray
of a bandwidth record (its lowest pair, its median, its weakest GPU). A figure that was not measured is None, never a
0 that means "unknown"."""

from __future__ import annotations

import math
import statistics
from typing import Any, Dict, List, Mapping, Optional, Tuple

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.history import tray_lowest_pairs
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.rank_placement import node_of_gpu
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.times import parse_time

GIGA = 10**9  # the records' GB/s: decimal gigabytes per second, as nvbandwidth and nccl-tests print them
BANDWIDTH_UNIT = "GB/s"


def _number(value: Any) -> Optional[float]:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def bytes_per_second(gbps: Any) -> Optional[int]:
    """GB/s (10^9 bytes) -> bytes per second, whole; None when it is no number (not measured)."""
    value = _number(gbps)
    return None if value is None else round(value * GIGA)


def timestamp_seconds(text: Any) -> Optional[float]:
    """An RFC 3339 time of a record or the history (``2026-12-01T10:15:02.391077Z``) -> Unix seconds; naive is UTC."""
    parsed = parse_time(text)
    return None if parsed is None else round(parsed.timestamp(), 6)


def _pair_of(value: Any) -> Optional[Tuple[int, int]]:
    if isinstance(value, (list, tuple)) and len(value) == 2 and all(_index(v) for v in value):
        return int(value[0]), int(value[1])
    return None


def _index(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def matrix_pairs(details: Mapping[str, Any]) -> List[Tuple[int, int, float]]:
    """Every measured GPU pair of a bandwidth matrix: (source GPU, destination GPU, GB/s).

    A square matrix is source x destination, its diagonal left out; a matrix whose rows are GPU pairs
    (``row_pairs``, the bisect testcase: N x 1) gives each row's pair.
    """
    matrix = details.get("matrix")
    if not isinstance(matrix, list):
        return []
    pairs = details.get("row_pairs")
    paired = isinstance(pairs, list) and len(pairs) == len(matrix) and all(_pair_of(p) for p in pairs)
    found = []
    for r, row in enumerate(matrix):
        if not isinstance(row, list):
            continue
        for c, cell in enumerate(row):
            value = _number(cell)
            if value is None:
                continue
            src, dst = _pair_of(pairs[r]) if paired else (r, c)  # type: ignore[misc]
            if src != dst:
                found.append((src, dst, value))
    return found


def tray_bandwidth(record: Mapping[str, Any]) -> Dict[str, Dict[str, Optional[float]]]:
    """Per tray, over the measured pairs with a GPU on the tray (either end): ``min``, the lowest pair (by
    ``history.tray_lowest_pairs``, the figure of the report's tray trend: one rule), ``median``, and
    ``weakest_gpu``, the lowest of its GPUs' medians (each GPU's median over the pairs it reads or writes in).

    A pair belongs to two GPUs: a GPU that lost NVLinks lowers one pair with each GPU of the rack, so it lowers
    every tray's ``min`` a little; ``weakest_gpu`` points at its own tray. The GPUs are placed on trays as the
    report places them (``report_sections.node_of_gpu``: the trays the check's ranks ran on); a matrix whose
    GPUs cannot be placed gives no tray figure.
    """
    details = record.get("details") or {}
    nodes = record.get("nodes")
    pairs: Dict[str, List[float]] = {}
    gpus: Dict[int, List[float]] = {}
    for src, dst, value in matrix_pairs(details):
        for tray in {node_of_gpu(details, src, nodes), node_of_gpu(details, dst, nodes)} - {None}:
            pairs.setdefault(str(tray), []).append(value)
        gpus.setdefault(src, []).append(value)
        gpus.setdefault(dst, []).append(value)
    weakest: Dict[str, float] = {}
    for gpu, values in gpus.items():
        tray = node_of_gpu(details, gpu, nodes)
        if tray is not None:
            median = statistics.median(values)
            weakest[str(tray)] = min(weakest.get(str(tray), median), median)
    lowest = tray_lowest_pairs(
        details.get("matrix"),
        details.get("rank_nodes") or nodes,
        details.get("gpus_per_node"),
        details.get("row_pairs"),
    )
    return {
        tray: {"min": lowest.get(tray), "median": statistics.median(found), "weakest_gpu": weakest[tray]}
        for tray, found in pairs.items()
    }


def is_bandwidth(details: Mapping[str, Any]) -> bool:
    """Whether a record's figures are bandwidths (GB/s, the unit when none is said), not times."""
    return str(details.get("unit") or BANDWIDTH_UNIT) == BANDWIDTH_UNIT
