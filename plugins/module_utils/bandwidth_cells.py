# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The cells of a bandwidth matrix as the bandwidth rule reads them: the rows (plain lists or a parsed
nvbandwidth matrix), the cells that are no bandwidth, what the cells are (GPU pairs of a square peer matrix, rows
that are pairs, or host<->device cells), the tray of each GPU, and the measured cells with their median and sum.

The rule itself (the floor, the references, the findings and their words) is ``bandwidth_rule``. Only the Python
standard library is used: this file runs on GPU hosts as well as on the controller.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass
from typing import Any, List, Optional, Sequence, Tuple

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.gpu_index import node_of
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.nvbandwidth_output import Cell


def rows_of(matrix: Any) -> List[List[Cell]]:
    rows = getattr(matrix, "rows", matrix)
    return [[v if v is None or isinstance(v, bool) else float(v) for v in row] for row in rows or []]


def cell_problems(rows: List[List[Cell]]) -> List[str]:
    """The cells that are no bandwidth (a boolean, NaN, an infinity, below 0): a NaN cell passes every rule."""
    bad = [
        f"row {r} column {c}: {v!r}"
        for r, row in enumerate(rows)
        for c, v in enumerate(row)
        if v is not None and (isinstance(v, bool) or not 0 <= v < float("inf"))
    ]
    if not bad:
        return []
    more = f"; and {len(bad) - 3} more" if len(bad) > 3 else ""
    return [f"the matrix has cells that are no bandwidth (a finite GB/s, 0 or more): {', '.join(bad[:3])}{more}"]


def is_gpu_to_gpu(matrix: Any, rows: List[List[Cell]]) -> bool:
    """A GPU<->GPU matrix (the median rule applies); host<->device matrices have CPU in their description."""
    description = getattr(matrix, "description", None)
    if description is None:
        return True  # plain rows: a peer matrix
    return "CPU" not in description


def is_square_peer(rows: List[List[Cell]], gpu_to_gpu: bool) -> bool:
    return gpu_to_gpu and len(rows) > 1 and all(len(row) == len(rows) for row in rows)


BISECT_TESTCASE = "multinode_bisect_write_ce"
_ROW_PAIR_RE = re.compile(r"^\s*(\d+)\s*->\s*(\d+)\s*$")


def row_pairs(matrix: Any, rows: List[List[Cell]], testcase: Optional[str]) -> Optional[List[Tuple[int, int]]]:
    """The GPU pair of each row of a matrix whose rows are pairs, or None for a matrix of GPUs x GPUs.

    ``multinode_bisect_write_ce`` prints an N x 1 matrix: row i is GPU i writing to GPU (i + N/2) mod N, all
    GPUs at once (nvbandwidth ``multinode_testcases.cpp``), labelled "<i>-><peer>" in the text output. The
    labels are read where they are all pairs; JSON output has none, and the pairs follow from the testcase.
    """
    if len(rows) < 2 or any(len(row) != 1 for row in rows):
        return None
    labels = [_ROW_PAIR_RE.match(str(label)) for label in getattr(matrix, "row_labels", None) or []]
    if len(labels) == len(rows) and all(labels):
        return [(int(m.group(1)), int(m.group(2))) for m in labels]
    if testcase != BISECT_TESTCASE:
        return None
    return [(i, (i + len(rows) // 2) % len(rows)) for i in range(len(rows))]


@dataclass
class Layout:
    """What a matrix's cells are: GPU pairs (square, or rows that are pairs) or other cells, and each GPU's tray."""

    rows: List[List[Cell]]
    description: str
    gpu_to_gpu: bool
    square: bool
    paired: Optional[List[Tuple[int, int]]]
    nodes: Optional[Sequence[str]]
    gpus_per_node: Optional[int]

    @classmethod
    def of(
        cls,
        matrix: Any,
        rows: List[List[Cell]],
        testcase: Optional[str],
        nodes: Optional[Sequence[str]],
        gpus_per_node: Optional[int],
    ) -> Layout:
        gpu_to_gpu = is_gpu_to_gpu(matrix, rows)
        square = is_square_peer(rows, gpu_to_gpu)
        paired = row_pairs(matrix, rows, testcase) if gpu_to_gpu and not square else None
        layout = cls(rows, str(getattr(matrix, "description", "") or ""), gpu_to_gpu, square, paired, nodes, None)
        if nodes and (gpus_per_node is None or gpus_per_node < 1):
            count = layout.gpus or max((len(r) for r in rows), default=0)
            gpus_per_node = max(1, count // len(nodes)) if count and count % len(nodes) == 0 else 1
        layout.gpus_per_node = gpus_per_node
        return layout

    @property
    def per_cell(self) -> bool:
        """A cell is judged against its own reference where the rows and columns are GPUs, or the rows are pairs."""
        return self.square or self.paired is not None

    @property
    def gpus(self) -> int:
        return len(self.rows) if self.per_cell else 0

    def gpus_of(self, r: int, c: int) -> Tuple[int, int]:
        return self.paired[r] if self.paired is not None else (r, c)

    def node(self, gpu: int) -> Optional[str]:
        return node_of(gpu, self.nodes, self.gpus_per_node)

    def judged(self) -> List[Tuple[int, int, Cell]]:
        """The cells judged: every off-diagonal cell of a square peer matrix, every cell otherwise."""
        return [(r, c, v) for r, row in enumerate(self.rows) for c, v in enumerate(row) if not (self.square and r == c)]


@dataclass
class MeasuredCells:
    """The judged cells of a matrix, those measured, and their median and sum (nvbandwidth's SUM where printed)."""

    judged: List[Tuple[int, int, Cell]]
    measured: List[Tuple[int, int, Cell]]
    values: List[float]
    median: Optional[float]
    total: Optional[float]

    @classmethod
    def of(cls, matrix: Any, layout: Layout) -> MeasuredCells:
        judged = layout.judged()
        measured = [(r, c, v) for r, c, v in judged if v is not None]
        values = [cell[2] for cell in measured]
        median = statistics.median(values) if values else None
        reported_sum = getattr(matrix, "reported_sum", None)
        total = float(reported_sum) if reported_sum is not None else (round(sum(values), 2) if values else None)
        return cls(judged, measured, values, median, total)
