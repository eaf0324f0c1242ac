# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Parse nvbandwidth's text output (single node or multinode, one or several testcases) into its records.

The layout is described in ``nvbandwidth_output``. nvbandwidth's exit code cannot be trusted: it exits 0
when a testcase is ``Waived``, when a testcase threw a caught ``Error:``, and when a test name is unknown
(``ERROR: Testcase <name> not found!``). The parser therefore records, from the output alone, each
testcase's status, its matrices with their ``SUM`` line, and every error line; ``nvbandwidth`` judges them.
Log collectors' line prefixes and terminal escapes are removed first (``clean_lines``), and a log that holds
a retried run is read for its last run. Only the Python standard library is used.
"""

from __future__ import annotations

import re
from typing import List, Optional, Tuple

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.nvbandwidth_output import (
    PROCESS_RE,
    STATUS_ERROR,
    STATUS_INCOMPLETE,
    STATUS_NOT_FOUND,
    STATUS_PASSED,
    STATUS_WAIVED,
    BandwidthMatrix,
    Device,
    NvbandwidthOutput,
    TestcaseResult,
    cell_value,
    clean_lines,
    description_of,
)

_RUNNING_RE = re.compile(r"^Running (\S+)\.\s*$")
_WAIVING_OLD_RE = re.compile(r"^Waiving (\S+)\.\s*$")  # nvbandwidth before v0.5
_WAIVED_RE = re.compile(r"^Waived:\s*(.*)$")
_ERROR_UPPER_RE = re.compile(r"^ERROR:\s*(.*)$")
_ERROR_RE = re.compile(r"^Error:\s*(.*)$")
_NOT_FOUND_RE = re.compile(r"Testcase (?:index )?(\S+) (?:not found!|out of bound!)")
# CU_ASSERT/CUDA_ASSERT print "[<error name>] <text> in expression ...", NVML_ASSERT "NVML_ERROR: [...]",
# ASSERT "ASSERT in expression ...": each one aborts the run (multinode: MPI_Abort).
_CUDA_ERROR_RE = re.compile(
    r"\[(?:CUDA_ERROR_[A-Z_]+|cudaError[A-Za-z]+)\]|NVML_ERROR: \[|^ASSERT in expression |MPI_ABORT was invoked"
    r"|\bCUDA error\b"
)
_SUM_RE = re.compile(r"^SUM (?P<key>\S+) (?P<value>\S+)\s*$")
_PERF_RE = re.compile(r"^&&&& PERF (?P<key>\S+) (?P<value>[-+0-9.eE]+|nan|inf)\s*(?P<unit>\S*)\s*$")
_STAT_RE = re.compile(r"^(?P<stat>MIN|MAX|AVG) (?P<key>\S+) (?P<value>\S+)\s*$")
_VERSION_RE = re.compile(r"^nvbandwidth Version: (\S+)")
_DRIVER_RE = re.compile(r"^Driver Version: (\S+)")
_CUDA_RE = re.compile(r"^CUDA Driver Version: (\d+)")
_DEVICE_RE = re.compile(r"^Device (?P<device>\d+): (?P<name>.+) \((?P<pci>[0-9a-fA-F:.]+)\)\s*$")
# A token that can be a cell of a row: a number, N/A, or nan/inf (read, then reported as no bandwidth).
_CELL_RE = re.compile(r"^(?:N/A|[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|nan|inf)$")


def _split_row(line: str, columns: int) -> Optional[Tuple[str, List[str]]]:
    """A matrix row as (label, cells), or None when the line is not a row of ``columns`` cells.

    Cells are the last ``columns`` whitespace-separated tokens; whatever precedes them is the row
    label, which may itself hold spaces (``multinode_bisect_write_ce`` labels rows "40-> 4").
    """
    tokens = line.split()
    if len(tokens) < columns + 1:
        return None
    cells = tokens[-columns:]
    if not all(_CELL_RE.match(token) for token in cells):
        return None
    label = line[: len(line.rstrip())].rsplit(None, columns)[0].strip()
    return label, cells


def _ends_matrix(line: str) -> bool:
    return bool(
        _SUM_RE.match(line) or _PERF_RE.match(line) or _RUNNING_RE.match(line) or description_of(line) is not None
    )


def _continues_matrix(lines: List[str], index: int, matrix: BandwidthMatrix, columns: int) -> bool:
    """Whether the first non-blank line from ``index`` on is a row of ``matrix`` (a blank line inside it)."""
    while index < len(lines) and not lines[index].strip():
        index += 1
    if index >= len(lines) or _ends_matrix(lines[index]):
        return False
    return _split_row(lines[index], columns) is not None or lines[index].split()[0] == str(len(matrix.rows))


def _is_error_line(line: str) -> bool:
    return bool(
        _CUDA_ERROR_RE.search(line)
        or _ERROR_UPPER_RE.match(line)
        or _ERROR_RE.match(line)
        or _WAIVED_RE.match(line)
        or _WAIVING_OLD_RE.match(line)
    )


def _read_text_matrix(
    lines: List[str], start: int, description: str, unit: str, errors: Optional[List[str]] = None
) -> Tuple[BandwidthMatrix, int]:
    """Read the header and rows that follow a description line; return the matrix and the next index.

    An error line printed between the rows (``ERROR:``, ``[CUDA_ERROR_...]``, ``MPI_ABORT``, ``Waived:``)
    goes to ``errors``: it is no row, but the run it interrupts did not complete.
    """
    index = start
    matrix = BandwidthMatrix(key="", description=description, unit=unit, rows=[])
    # The header is the column labels (GPU indices); a log line before it is skipped.
    while index < len(lines):
        tokens = lines[index].split()
        if tokens and all(token.isdigit() for token in tokens):
            break
        if tokens and (
            _ends_matrix(lines[index]) or any(_CELL_RE.match(t) and ("." in t or t == "N/A") for t in tokens)
        ):
            return matrix, index  # no header: the output was cut right after the description
        if tokens and _is_error_line(lines[index].strip()) and errors is not None:
            errors.append(f"{lines[index].strip()} (printed before the matrix '{description}')")
        index += 1
    if index >= len(lines):
        return matrix, index
    header = lines[index].split()
    matrix.column_labels = header
    index += 1
    columns = len(header)
    while index < len(lines):
        line = lines[index]
        if not line.strip():
            # Blank lines between the header and a row, or between rows, are skipped at once: the scan stays
            # linear in the blank lines, however many there are.
            following = index
            while following < len(lines) and not lines[following].strip():
                following += 1
            if _continues_matrix(lines, following, matrix, columns):
                index = following
                continue
            break
        if _ends_matrix(line):
            break
        row = _split_row(line, columns)
        if row is None:
            # A log line interleaved with the matrix (mpirun, ssh) is kept out of the cells; a line that
            # starts like a row of this matrix but lacks cells means the matrix itself is damaged.
            stripped = line.strip()
            if _is_error_line(stripped):
                if errors is not None:
                    errors.append(f"{stripped} (printed inside the matrix '{description}')")
            elif stripped.split()[0] == str(len(matrix.rows)):
                matrix.damaged_rows.append(stripped)
            index += 1
            continue
        matrix.add_row(*row)
        index += 1
    return matrix, index


def parse_text(content: str) -> NvbandwidthOutput:
    """Parse nvbandwidth's text output (single node or multinode, one or several testcases)."""
    lines = clean_lines(content)
    output = NvbandwidthOutput(format="text")
    current: Optional[TestcaseResult] = None
    last_matrix: Optional[BandwidthMatrix] = None
    previous_line = ""
    runs = 1
    index = 0
    while index < len(lines):
        line = lines[index]
        stripped = line.strip()
        if _CUDA_ERROR_RE.search(stripped):
            output.errors.append(stripped)
        if match := _VERSION_RE.match(line):
            if output.testcases or output.devices:
                # A log of a retried run holds several runs: the last one is judged, as for JSON documents,
                # and one that is cut off fails rather than leaving an earlier pass standing.
                runs += 1
                output = NvbandwidthOutput(format="text", warnings=output.warnings)
                current, last_matrix = None, None
            output.version = match.group(1)
        elif match := _DRIVER_RE.match(line):
            output.driver_version = match.group(1)
        elif match := _CUDA_RE.match(line):
            output.cuda_version = int(match.group(1))
        elif match := PROCESS_RE.match(line):
            output.devices.append(
                Device(
                    index=int(match.group("rank")),
                    device=int(match.group("device")),
                    name=match.group("name").strip(),
                    pci_bus_id=match.group("pci"),
                    host=match.group("host"),
                )
            )
        elif match := _DEVICE_RE.match(line):
            host = previous_line.strip() if not output.devices and " " not in previous_line.strip() else ""
            if output.devices and output.devices[-1].host:
                host = output.devices[-1].host
            output.devices.append(
                Device(
                    index=int(match.group("device")),
                    device=int(match.group("device")),
                    name=match.group("name").strip(),
                    pci_bus_id=match.group("pci"),
                    host=host,
                )
            )
        elif match := _RUNNING_RE.match(line):
            current = TestcaseResult(name=match.group(1), status=STATUS_INCOMPLETE)
            if current.name in output.testcases:
                # A log of a retried run: the last run of a testcase is the one judged, as for JSON documents.
                output.warnings.append(
                    f"testcase {current.name} ran more than once in this output: the last run is judged"
                )
            output.testcases[current.name] = current
            last_matrix = None
        elif match := _WAIVING_OLD_RE.match(line):
            output.testcases[match.group(1)] = TestcaseResult(name=match.group(1), status=STATUS_WAIVED)
            current = None
        elif match := _WAIVED_RE.match(line):
            # v0.8 prints a bare "Waived: " without the testcase's name.
            output.unnamed_waived += 1
            current = None
        elif match := _ERROR_UPPER_RE.match(line):
            message = match.group(1).strip()
            found = _NOT_FOUND_RE.search(message)
            if found:
                output.testcases[found.group(1)] = TestcaseResult(
                    name=found.group(1), status=STATUS_NOT_FOUND, message=message
                )
            else:
                output.errors.append(stripped)
            current = None
        elif match := _ERROR_RE.match(line):
            message = match.group(1).strip()
            if current is not None:
                current.status = STATUS_ERROR
                current.message = message
            else:
                output.errors.append(stripped)
        elif described := description_of(line):
            matrix, index = _read_text_matrix(lines, index + 1, *described, output.errors)
            if current is None:
                output.warnings.append(
                    f"a matrix ({matrix.description}) appears outside any 'Running <testcase>.' line"
                )
                current = TestcaseResult(name="unnamed", status=STATUS_INCOMPLETE)
                output.testcases.setdefault(current.name, current)
            current.matrices.append(matrix)
            last_matrix = matrix
            previous_line = line
            continue
        elif (match := _SUM_RE.match(line)) or (match := _PERF_RE.match(line)):
            if last_matrix is not None and current is not None and last_matrix.reported_sum is None:
                key = match.group("key")
                last_matrix.key = key
                if current.name != "unnamed" and key != current.name and not key.startswith(current.name + "_"):
                    current.problems.append(
                        f"its matrix '{last_matrix.description}' ends in the SUM line of another testcase "
                        f"('{stripped}'): the output of two runs is mixed"
                    )
                reported, problem = cell_value(match.group("value"))
                if problem or reported is None:
                    output.errors.append(f"unreadable SUM line: {stripped}")
                last_matrix.reported_sum = reported
                if current.status == STATUS_INCOMPLETE:
                    current.status = STATUS_PASSED
        elif _STAT_RE.match(line):
            pass  # -v statistics are recomputed from the cells
        previous_line = line
        index += 1

    for testcase in output.testcases.values():
        _finish_testcase(testcase)
    if runs > 1:
        output.warnings.append(f"the output holds {runs} nvbandwidth runs (a retried run): the last one is judged")
    return output


def _finish_testcase(testcase: TestcaseResult) -> None:
    """Mark a testcase incomplete when any of its matrices lacks cells or a SUM line, or a part is missing.

    A bidirectional device-to-device testcase is complete with its three matrices only (``_read1``,
    ``_read2``, ``_total``): a run cut after the first one must not be judged as if it were whole.
    """
    if testcase.status != STATUS_PASSED:
        return
    for matrix in testcase.matrices:
        if not matrix.rows or matrix.reported_sum is None:
            testcase.status = STATUS_INCOMPLETE
        if not matrix.key:
            matrix.key = testcase.name
    expected = testcase.expected_parts()
    keys = [matrix.key for matrix in testcase.matrices]
    if expected and keys != expected:
        missing = [key for key in expected if key not in keys]
        testcase.status = STATUS_INCOMPLETE
        testcase.message = f"it printed {', '.join(keys) or 'no matrix'}; nvbandwidth prints {', '.join(expected)}" + (
            f" (missing: {', '.join(missing)})" if missing else ""
        )
