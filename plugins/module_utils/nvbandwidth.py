# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Judge nvbandwidth output (text or ``-j`` JSON) against bandwidth thresholds.

nvbandwidth's exit code cannot be trusted: it exits 0 when a testcase is ``Waived``, when a
testcase threw a caught ``Error:``, and when a test name is unknown (``ERROR: Testcase <name> not
found!``). The verdict therefore comes from the output alone: the matrix, the ``SUM`` line (which
must agree with the cells), and the absence of error lines.

``check_nvbandwidth`` is the one call a caller makes: it parses the output (``nvbandwidth_text`` or
``nvbandwidth_json``, into the records of ``nvbandwidth_output``), picks the testcase, rejects a run that
did not complete or whose matrices are damaged (``errors``), and holds the matrix against the bandwidth
rule (``bandwidth_rule.judge``: ``violations``). Only the Python standard library is used: the module
runs on GPU hosts as well as on the controller.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import bandwidth_thresholds
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.bandwidth_rule import (
    Judgement,
    direction_violations,
    judge,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.bandwidth_thresholds import Baseline
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.nvbandwidth_json import detect_format, parse_json
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.nvbandwidth_output import (
    KNOWN_TESTCASES,
    STATUS_ERROR,
    STATUS_NOT_FOUND,
    STATUS_PASSED,
    STATUS_WAIVED,
    BandwidthMatrix,
    Cell,
    NvbandwidthOutput,
    NvbandwidthParseError,
    TestcaseResult,
    gpu_product_of,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.nvbandwidth_text import parse_text

# Testcases whose every matrix is N x N (GPU x GPU); bidirectional ones print three of them.
_SQUARE_RE = re.compile(r"device_to_device_(?:bidirectional_)?memcpy_(?:read|write)_(?:ce|sm)$")


def parse_nvbandwidth(content: Union[str, Dict[str, Any]], output_format: str = "auto") -> NvbandwidthOutput:
    """Parse ``content`` as text or JSON (``output_format``: ``auto``, ``text`` or ``json``)."""
    if isinstance(content, dict):
        return parse_json(content)
    if output_format == "json" or (output_format == "auto" and detect_format(content) == "json"):
        return parse_json(content)
    return parse_text(content)


def parse_to_dict(content: Union[str, Dict[str, Any]]) -> Dict[str, Dict[str, Any]]:
    """``{testcase name: {description, unit, matrix, sum, status, ...}}`` (the filter's shape)."""
    output = parse_nvbandwidth(content)
    return {name: testcase.to_dict() for name, testcase in output.testcases.items()}


@dataclass
class Thresholds(bandwidth_thresholds.Thresholds):
    """The bandwidth rule's thresholds (``bandwidth_thresholds.Thresholds``) plus the GPU count the matrix must cover.

    The per-pair floor is ``min_gbps`` when above 0, else ``min_fraction_of_peak`` (0.85) x the NVLink peak
    (``peak_gbps``, or the GPU product's); every pair must also reach ``min_fraction_of_median`` (0.97) x the
    matrix's median. See plugins/module_utils/bandwidth_rule.py.
    """

    expected_gpus: Optional[int] = None


@dataclass
class Verdict:
    """The judgement of one testcase. ``errors`` mean the test did not really run (always fatal)."""

    testcase: Optional[str]
    matrix: Optional[BandwidthMatrix] = None
    errors: List[str] = field(default_factory=list)
    violations: List[str] = field(default_factory=list)
    failing_pairs: List[Dict[str, Any]] = field(default_factory=list)
    threshold_gbps: Optional[float] = None
    warnings: List[str] = field(default_factory=list)
    output: Optional[NvbandwidthOutput] = None
    judgement: Optional[Judgement] = None
    gpu_product: Optional[str] = None

    @property
    def passed(self) -> bool:
        return not self.errors and not self.violations

    @property
    def summary(self) -> str:
        """One line: why the output shows no completed run, or the bandwidth rule's verdict."""
        if self.errors:
            return "the nvbandwidth output does not show a completed run: " + "; ".join(self.errors)
        judged = self.judgement.violations if self.judgement else []
        own = [v for v in self.violations if v not in judged]  # e.g. the GPU count
        parts = own + ([self.judgement.summary] if self.judgement and self.judgement.summary else [])
        return "; ".join(parts)

    def to_result(self) -> Dict[str, Any]:
        """The module's return values (documented in the module's RETURN)."""
        matrix = self.matrix
        values = matrix.values() if matrix else []
        rows, columns = matrix.shape if matrix else (0, 0)
        output = self.output or NvbandwidthOutput(format="text")
        judgement = self.judgement
        return {
            "testcase": self.testcase,
            "testcases": list(output.testcases),
            "format": output.format,
            "version": output.version,
            "driver_version": output.driver_version,
            "description": matrix.description if matrix else None,
            "matrix_key": matrix.key if matrix else None,
            "unit": matrix.unit if matrix else None,
            "matrix": [list(r) for r in matrix.rows] if matrix else [],
            "row_labels": list(matrix.row_labels) if matrix else [],
            "row_pairs": judgement.row_pairs if judgement else None,
            "column_labels": list(matrix.column_labels) if matrix else [],
            "gpus": gpu_count(matrix) if matrix else 0,
            "devices": [d.to_dict() for d in output.devices],
            "sum": matrix.reported_sum if matrix else None,
            "min": min(values) if values else None,
            "max": max(values) if values else None,
            "mean": round(sum(values) / len(values), 6) if values else None,
            "measured_cells": len(values),
            "shape": [rows, columns],
            "threshold_gbps": self.threshold_gbps,
            "threshold_explanation": judgement.threshold_explanation if judgement else None,
            "gpu_product": self.gpu_product,
            "peak_gbps": judgement.peak_gbps if judgement else None,
            "min_fraction_of_peak": judgement.min_fraction_of_peak if judgement else None,
            "min_fraction_of_median": judgement.min_fraction_of_median if judgement else None,
            "median_gbps": judgement.median_gbps if judgement else None,
            "median_threshold_gbps": judgement.median_threshold_gbps if judgement else None,
            "reference": dict(judgement.reference) if judgement and judgement.reference else None,
            "references": [dict(r) for r in judgement.references] if judgement else [],
            "failing_pairs": [dict(p) for p in self.failing_pairs],
            "low_gpus": [dict(g) for g in judgement.low_gpus] if judgement else [],
            "failed_nodes": list(judgement.failed_nodes) if judgement else [],
            "summary": self.summary,
            "violations": list(self.violations),
            "errors": list(self.errors),
            "warnings": list(self.warnings),
            "passed": self.passed,
        }


def gpu_count(matrix: BandwidthMatrix) -> int:
    """GPUs a matrix covers: N for an N x N matrix, the columns for a host<->device 1 x N one."""
    rows, columns = matrix.shape
    return columns if rows <= 1 or rows == columns else max(rows, columns)


def _select_testcase(output: NvbandwidthOutput, testcase: Optional[str]) -> Tuple[Optional[TestcaseResult], List[str]]:
    found = list(output.testcases)
    waived_note = (
        f"; the output shows {output.unnamed_waived} 'Waived:' line(s): nvbandwidth waives multinode testcases "
        "run with fewer than 2 MPI ranks and peer testcases on GPUs without peer access"
        if output.unnamed_waived
        else ""
    )
    if testcase is None:
        waived_count = f", plus {output.unnamed_waived} waived" if output.unnamed_waived else ""
        if len(found) + output.unnamed_waived > 1:
            return None, [
                f"the output holds several testcases ({', '.join(found) or 'none by name'}"
                f"{waived_count}); "
                "set testcase to the one to judge"
            ]
        if not found:
            return None, [f"no testcase ran: no 'Running <testcase>.' line and no matrix in the output{waived_note}"]
        return output.testcases[found[0]], []
    if testcase in output.testcases:
        return output.testcases[testcase], []
    known = (
        ""
        if testcase in KNOWN_TESTCASES
        else f"; '{testcase}' is not an nvbandwidth v0.8 testcase name (nvbandwidth -l lists them)"
    )
    return None, [
        f"testcase {testcase} did not run: it is not in the output (found: {', '.join(found) or 'none'})"
        f"{waived_note}{known}"
    ]


def evaluate(
    output: NvbandwidthOutput,
    testcase: Optional[str] = None,
    thresholds: Optional[bandwidth_thresholds.Thresholds] = None,
    part: Optional[str] = None,
    gpu_product: Optional[str] = None,
    nodes: Optional[Sequence[str]] = None,
    gpus_per_node: Optional[int] = None,
    peak_table: Optional[Sequence[Mapping[str, Any]]] = None,
    product_references: Optional[Sequence[Mapping[str, Any]]] = None,
    baseline: Optional[Baseline] = None,
) -> Verdict:
    """Judge ``testcase`` of ``output`` against ``thresholds`` with the bandwidth rule (``bandwidth_rule.judge``).

    ``errors`` (the test did not really run, or its output is damaged) and ``violations`` (a
    threshold missed) are kept apart so a caller can ignore violations but never errors.
    ``part`` picks one matrix of a bidirectional testcase (``total`` by default). ``gpu_product``
    (``nvidia.com/gpu.product``) picks the NVLink peak; GPU i lives on ``nodes[i // gpus_per_node]``, and
    without ``nodes`` on the host the output names for it (the ``Process N (host)`` lines). The product
    reference follows from ``gpu_product``, the testcase and the output's driver version (``product_references``
    tried first); ``baseline`` is the rack's earlier run. Without ``gpu_product`` (None or empty) the product is
    read from the output's device lines (``gpu_product_of``) for the product reference, which so applies on every
    route, also with ``min_gbps`` set.
    """
    thresholds = thresholds or Thresholds()
    verdict = Verdict(testcase=testcase, output=output, warnings=list(output.warnings), gpu_product=gpu_product)
    verdict.errors.extend(f"nvbandwidth reported an error: {line}" for line in output.errors)

    selected, problems = _select_testcase(output, testcase)
    verdict.errors.extend(problems)
    for name, other in output.testcases.items():
        if selected is not None and name != selected.name and other.status != STATUS_PASSED:
            verdict.warnings.append(f"testcase {name}: {other.status} {other.message}".rstrip())
    if selected is None:
        return verdict
    verdict.testcase = selected.name
    if output.unnamed_waived:
        verdict.warnings.append(f"{output.unnamed_waived} other testcase(s) of this run were waived")

    if selected.status in (STATUS_NOT_FOUND, "Not Found"):
        said = f" (it printed: ERROR: {selected.message})" if selected.message else ""
        verdict.errors.append(
            f"testcase {selected.name} is unknown to this nvbandwidth{said}; use a name from 'nvbandwidth -l' "
            "(multinode testcases need a build with -DMULTINODE=1)"
        )
        return verdict
    if selected.status == STATUS_WAIVED:
        verdict.errors.append(
            f"testcase {selected.name} was waived, not run: multinode testcases need 2 or more MPI ranks in one "
            "NVLink clique, peer testcases need 2 or more GPUs with peer access"
        )
        return verdict
    if selected.status == STATUS_ERROR:
        verdict.errors.append(f"testcase {selected.name} failed inside nvbandwidth: Error: {selected.message}")
        return verdict

    verdict.errors.extend(f"testcase {selected.name}: {problem}" for problem in selected.problems)
    matrix = selected.matrix_named(part)
    if matrix is None:
        if part is not None and selected.matrices:
            verdict.errors.append(
                f"testcase {selected.name} has no '{part}' matrix (it has: {', '.join(selected.parts())})"
            )
        else:
            verdict.errors.append(
                f"testcase {selected.name} started but printed no matrix: the output is truncated or the run "
                "aborted; read the launcher and worker logs"
            )
        return verdict
    verdict.matrix = matrix

    if selected.status != STATUS_PASSED:
        if selected.expected_parts() and selected.message:
            verdict.errors.append(
                f"testcase {selected.name} is incomplete: {selected.message}; the output is truncated or the run "
                "aborted"
            )
            return verdict
        missing = "SUM line" if matrix.rows else "matrix"
        verdict.errors.append(
            f"testcase {selected.name} has no {missing} for {matrix.key or selected.name}: the output is truncated "
            f"(status {selected.status}); the run did not finish"
        )
        return verdict
    if matrix.unit != "GB/s":
        verdict.errors.append(
            f"testcase {selected.name} reports {matrix.unit or 'an unknown unit'} ('{matrix.description}'), "
            "not bandwidth in GB/s: latency testcases cannot be judged against GB/s thresholds; "
            "run a *_memcpy_* testcase"
        )
    if not matrix.measured() and not matrix.invalid_cells:
        verdict.errors.append(
            f"testcase {selected.name} measured nothing: every cell is N/A (no peer access between the GPUs)"
        )
    # Every matrix of the testcase must be whole, not only the one judged: a bidirectional run whose Read1 is
    # damaged did not measure what its Total claims.
    for each in selected.matrices:
        verdict.errors.extend(_matrix_problems(selected, each))
    verdict.errors.extend(_parts_problems(selected))
    if verdict.errors:
        return verdict

    if not nodes:
        nodes, gpus_per_node = _hosts_of(output, matrix)
    named, note = gpu_product_of(output.devices) if not gpu_product else (None, None)
    if note:
        verdict.warnings.append(note)
    references = {"testcase": selected.name, "driver_version": output.driver_version, "named_product": named}
    references.update(product_references=product_references, baseline=baseline)
    _check_thresholds(verdict, matrix, thresholds, gpu_product, nodes, gpus_per_node, peak_table, references)
    directions = [m for m in selected.matrices if m.key in selected.expected_parts()[:2]]
    if len(directions) == 2:
        verdict.violations.extend(direction_violations(directions, thresholds.min_fraction_of_median))
    return verdict


def _matrix_problems(testcase: TestcaseResult, matrix: BandwidthMatrix) -> List[str]:
    """Why one matrix is damaged: a damaged row, a cell that is no bandwidth, a missing row, a SUM that disagrees."""
    problems = [f"matrix {matrix.key} has a damaged row: '{damaged}'" for damaged in matrix.damaged_rows]
    if matrix.invalid_cells:
        shown = "; ".join(matrix.invalid_cells[:3])
        more = f"; and {len(matrix.invalid_cells) - 3} more" if len(matrix.invalid_cells) > 3 else ""
        problems.append(f"matrix {matrix.key} has cells that are no bandwidth: {shown}{more}")
    rows, columns = len(matrix.rows), len(matrix.column_labels)
    widths = sorted({len(row) for row in matrix.rows})
    if len(widths) > 1:
        problems.append(f"matrix {matrix.key} has rows of {', '.join(map(str, widths))} cells: rows are damaged")
    elif _SQUARE_RE.search(testcase.name) and not rows == columns == (widths[0] if widths else 0):
        problems.append(
            f"matrix {matrix.key} has {rows} rows of {widths[0] if widths else 0} cells under {columns} columns; "
            f"{testcase.name} measures every GPU pair (N x N): rows are missing or doubled"
        )
    labels = matrix.row_labels
    if labels and all(label.isdigit() for label in labels) and labels != [str(n) for n in range(len(labels))]:
        problems.append(
            f"matrix {matrix.key} has the rows {', '.join(labels)}, expected 0 to {len(labels) - 1} in order: "
            "rows are missing or doubled"
        )
    computed, reported = matrix.computed_sum, matrix.reported_sum
    if reported is not None and not (math.isfinite(computed) and abs(computed - reported) <= matrix.sum_tolerance()):
        problems.append(
            f"matrix {matrix.key} is inconsistent: its cells add up to {computed:.2f} but the SUM line "
            f"says {reported:.2f}; rows are missing or damaged"
        )
    return problems


def _parts_problems(testcase: TestcaseResult) -> List[str]:
    """A bidirectional testcase's Total must be Read1 + Read2 cell by cell (nvbandwidth adds them up)."""
    expected = testcase.expected_parts()
    parts = {matrix.key: matrix for matrix in testcase.matrices}
    if not expected or any(key not in parts for key in expected):
        return []
    first, second, total = (parts[key] for key in expected)
    widths = [[len(row) for row in matrix.rows] for matrix in (first, second, total)]
    if not first.rows or not (widths[0] == widths[1] == widths[2]):
        return [
            f"the matrices of {testcase.name} differ in shape ({first.shape}, {second.shape}, {total.shape}): "
            "the output is damaged"
        ]
    wrong = []
    for r, row in enumerate(total.rows):
        for c, cell in enumerate(row):
            one, two = first.rows[r][c], second.rows[r][c]
            if cell is None and one is None and two is None:
                continue
            if cell is None or one is None or two is None or abs(cell - (one + two)) > 0.02 + 1e-5 * abs(cell):
                wrong.append(f"{r}->{c}: {_shown(one)} + {_shown(two)} is not {_shown(cell)}")
    if not wrong:
        return []
    more = f"; and {len(wrong) - 3} more" if len(wrong) > 3 else ""
    return [
        f"matrix {total.key} is not the sum of {first.key} and {second.key} "
        f"({'; '.join(wrong[:3])}{more}): the output is damaged"
    ]


def _shown(cell: Cell) -> str:
    return "N/A" if cell is None else f"{cell:.2f}"


def _hosts_of(output: NvbandwidthOutput, matrix: BandwidthMatrix) -> Tuple[Optional[List[str]], Optional[int]]:
    """The host of each GPU of the matrix, from the output's device list (one entry per GPU), or none."""
    gpus = gpu_count(matrix)
    by_index = {device.index: device.host for device in output.devices}
    hosts = [by_index.get(gpu) or "" for gpu in range(gpus)]
    if gpus and all(hosts):
        return hosts, 1
    return None, None


def _check_thresholds(
    verdict: Verdict,
    matrix: BandwidthMatrix,
    thresholds: bandwidth_thresholds.Thresholds,
    gpu_product: Optional[str],
    nodes: Optional[Sequence[str]],
    gpus_per_node: Optional[int],
    peak_table: Optional[Sequence[Mapping[str, Any]]],
    references: Optional[Mapping[str, Any]] = None,
) -> None:
    expected = getattr(thresholds, "expected_gpus", None)
    gpus = gpu_count(matrix)
    if expected is not None and gpus != expected:
        rows, columns = matrix.shape
        verdict.violations.append(
            f"the matrix covers {gpus} GPUs ({rows}x{columns}), expected {expected}: "
            "check the MPI rank count (-np), slots per worker and GPUs per node"
        )
    judgement = judge(
        matrix, thresholds, gpu_product, gpus_per_node, nodes, peak_table=peak_table, **dict(references or {})
    )
    verdict.judgement = judgement
    verdict.warnings.extend(judgement.warnings)
    verdict.threshold_gbps = judgement.threshold_gbps
    verdict.failing_pairs = sorted(judgement.failing_pairs, key=lambda p: (p["src"], p["dst"]))
    verdict.violations.extend(judgement.violations)


def check_nvbandwidth(
    content: Union[str, Dict[str, Any]],
    testcase: Optional[str] = None,
    thresholds: Optional[Thresholds] = None,
    output_format: str = "auto",
    part: Optional[str] = None,
    gpu_product: Optional[str] = None,
    nodes: Optional[Sequence[str]] = None,
    gpus_per_node: Optional[int] = None,
    peak_table: Optional[Sequence[Mapping[str, Any]]] = None,
    product_references: Optional[Sequence[Mapping[str, Any]]] = None,
    baseline: Optional[Baseline] = None,
) -> Verdict:
    """Parse ``content`` and judge it: the one call the module makes (arguments as for ``evaluate``)."""
    if isinstance(content, str) and not content.strip():
        verdict = Verdict(testcase=testcase)
        verdict.errors.append("the nvbandwidth output is empty: the launcher printed nothing (did the job run?)")
        return verdict
    try:
        output = parse_nvbandwidth(content, output_format)
    except NvbandwidthParseError as exc:
        verdict = Verdict(testcase=testcase)
        verdict.errors.append(f"{exc}: the content is not nvbandwidth -j output; use format=text or auto")
        return verdict
    return evaluate(
        output,
        testcase=testcase,
        thresholds=thresholds,
        part=part,
        gpu_product=gpu_product,
        nodes=nodes,
        gpus_per_node=gpus_per_node,
        peak_table=peak_table,
        product_references=product_references,
        baseline=baseline,
    )
