# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Parse nvbandwidth's ``-j`` JSON output into its records (see ``nvbandwidth_output``).

The document may sit inside a log (kubectl, mpirun); a log of a retried run holds several documents and
the last one is the run that counts. A bidirectional testcase appends its three ``N x N`` matrices into
one ``3N x N`` ``bandwidth_matrix`` and keeps only the total's ``sum``: the parser splits it back into
the three matrices the text output prints. A document of the wrong shape is read as far as it goes,
never raising. Only the Python standard library is used.
"""

from __future__ import annotations

import json
import re
from typing import Any, Dict, List, Optional, Union

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.nvbandwidth_output import (
    PROCESS_RE,
    STATUS_ERROR,
    STATUS_INCOMPLETE,
    STATUS_PASSED,
    BandwidthMatrix,
    Cell,
    Device,
    NvbandwidthOutput,
    NvbandwidthParseError,
    TestcaseResult,
    cell_value,
    clean_lines,
    description_of,
)

_JSON_DEVICE_RE = re.compile(r"^(?P<device>\d+): (?P<name>.+) \((?P<pci>[0-9a-fA-F:.]+)\): \((?P<host>[^)]*)\)$")
_JSON_START_RE = re.compile(r'\{\s*"nvbandwidth"\s*:')


def _decode_json_documents(content: str) -> List[Optional[Dict[str, Any]]]:
    """Every ``{"nvbandwidth": ...}`` start in ``content``, in order: its document, or None where it does not decode.

    A start inside a document already read is no new document; the scan goes on after that document's end.
    """
    decoder = json.JSONDecoder()
    found: List[Optional[Dict[str, Any]]] = []
    end = 0
    for match in _JSON_START_RE.finditer(content):
        if match.start() < end:
            continue
        try:
            document, end = decoder.raw_decode(content, match.start())
        except (ValueError, RecursionError):
            found.append(None)
            continue
        if isinstance(document, dict) and isinstance(document.get("nvbandwidth"), dict):
            found.append(document)
    return found


def json_documents(content: str) -> List[Optional[Dict[str, Any]]]:
    """The nvbandwidth ``-j`` documents in ``content`` (logs may surround them), None for one that is cut off.

    Documents whose lines carry log prefixes (``kubectl logs --timestamps``) or colour escapes are read from
    the cleaned lines, when those read better.
    """
    if not _JSON_START_RE.search(content) and '"nvbandwidth"' not in content:
        return []
    raw = _decode_json_documents(content)
    if raw and raw[-1] is not None and None not in raw:
        return raw
    cleaned = _decode_json_documents("\n".join(clean_lines(content)))
    if cleaned and (cleaned[-1] is not None or sum(map(bool, cleaned)) > sum(map(bool, raw))):
        return cleaned
    return raw


def find_json_document(content: str) -> Optional[Dict[str, Any]]:
    """The last complete ``{"nvbandwidth": ...}`` document inside ``content``, or None.

    A log that holds a retried run holds several documents; the last one is the run that counts, as the
    text parser judges the last ``Running <testcase>.`` of a name.
    """
    complete = [document for document in json_documents(content) if document is not None]
    return complete[-1] if complete else None


def detect_format(content: str) -> str:
    """``json`` when the content holds an nvbandwidth ``-j`` document, else ``text``."""
    return "json" if find_json_document(content) is not None else "text"


def _unit_of(description: str) -> str:
    described = description_of(description.strip())
    return described[1] if described else ""


def parse_json(content: Union[str, Dict[str, Any]]) -> NvbandwidthOutput:
    """Parse nvbandwidth's ``-j`` document (a string that holds it, or the decoded dict).

    A document of the wrong shape (a testcase that is no object, a matrix that is no list of rows, a cell or
    ``sum`` that is no number) is read as far as it goes; what is wrong becomes a problem of its testcase or
    an error of the output, never an exception.
    """
    documents = [content] if isinstance(content, dict) else json_documents(content)
    complete = [document for document in documents if document is not None]
    document = complete[-1] if complete else None
    if document is None or not isinstance(document.get("nvbandwidth"), dict):
        raise NvbandwidthParseError('no {"nvbandwidth": ...} JSON document found')
    root = document["nvbandwidth"]
    output = NvbandwidthOutput(format="json")
    if documents[-1] is None:
        # Judging the earlier, complete document would pass a retry that never finished.
        output.errors.append(
            f"the output holds {len(documents)} nvbandwidth JSON documents and the last one is cut off "
            "(not valid JSON): the last run did not complete; rerun nvbandwidth"
        )
    elif len(documents) > 1:
        output.warnings.append(
            f"the output holds {len(documents)} nvbandwidth JSON documents (a retried run): the last one is judged"
        )
    output.version = root.get("version") if isinstance(root.get("version"), str) else None
    output.driver_version = root.get("Driver Version") if isinstance(root.get("Driver Version"), str) else None
    cuda = root.get("CUDA Runtime Version")
    output.cuda_version = cuda if isinstance(cuda, int) and not isinstance(cuda, bool) else None
    devices = root.get("GPU Device list")
    for position, entry in enumerate(devices if isinstance(devices, list) else []):
        text = str(entry)
        match = _JSON_DEVICE_RE.match(text) or PROCESS_RE.match(text)
        if match is None:
            continue
        groups = match.groupdict()
        output.devices.append(
            Device(
                index=int(groups.get("rank") or position),
                device=int(groups["device"]),
                name=groups["name"].strip(),
                pci_bus_id=groups["pci"],
                host=groups.get("host") or "",
            )
        )
    if root.get("error"):
        output.errors.append(str(root["error"]))
    if root.get("warning"):
        output.warnings.append(str(root["warning"]))
    entries = root.get("testcases") or []
    if not isinstance(entries, list):
        output.errors.append(f"'testcases' is {type(entries).__name__}, not a list of testcase objects")
        entries = []
    for position, entry in enumerate(entries):
        if not isinstance(entry, dict):
            output.errors.append(f"testcases entry {position} is not a testcase object: {str(entry)[:80]!r}")
            continue
        testcase = _json_testcase(entry)
        output.testcases[testcase.name] = testcase
    return output


def _json_testcase(entry: Dict[str, Any]) -> TestcaseResult:
    name = str(entry.get("name", "unnamed"))
    status = str(entry.get("status", ""))
    error = entry.get("error")
    testcase = TestcaseResult(name=name, status=status, message=str(error or ""))
    if error and status in (STATUS_PASSED, ""):
        testcase.status = STATUS_ERROR  # a testcase that reports an error did not pass, whatever its status says
    raw = entry.get("bandwidth_matrix")
    description = str(entry.get("bandwidth_description", "")).strip()
    if raw is not None and not (isinstance(raw, list) and all(isinstance(row, list) for row in raw)):
        testcase.problems.append(f"its bandwidth_matrix is not a list of rows: {str(raw)[:80]!r}")
        raw = None
    total, problem = (None, None) if entry.get("sum") is None else cell_value(entry.get("sum"))
    if problem:
        testcase.problems.append(f"its sum is unreadable ({problem})")
    if raw:
        testcase.matrices = _split_json_matrix(name, description, raw, total)
    if testcase.status == STATUS_PASSED and (not raw or entry.get("sum") is None):
        testcase.status = STATUS_INCOMPLETE
    expected = testcase.expected_parts()
    keys = [matrix.key for matrix in testcase.matrices]
    if testcase.status == STATUS_PASSED and expected and keys != expected:
        testcase.status = STATUS_INCOMPLETE
        columns = max((len(row) for row in raw or []), default=0)
        testcase.message = (
            f"its bandwidth_matrix has {len(raw or [])} rows of {columns}; a bidirectional run appends its "
            f"three {columns}x{columns} matrices ({', '.join(expected)}) into {3 * columns} rows"
        )
    return testcase


def _json_matrix(key: str, description: str, unit: str, rows: List[List[Any]], reported: Cell) -> BandwidthMatrix:
    matrix = BandwidthMatrix(key=key, description=description, unit=unit, rows=[], reported_sum=reported)
    for number, row in enumerate(rows):
        matrix.add_row(str(number), row)
    matrix.column_labels = [str(c) for c in range(max((len(row) for row in rows), default=0))]
    return matrix


def _split_json_matrix(name: str, description: str, rows: List[List[Any]], total: Cell) -> List[BandwidthMatrix]:
    """One JSON matrix, or the three N x N blocks a bidirectional testcase appends into 3N rows."""
    columns = len(rows[0])
    unit = _unit_of(description)
    if "bidirectional" in name and columns > 1 and len(rows) == 3 * columns:
        direction = "write" if "write" in name.split("bidirectional", 1)[1] else "read"
        blocks = []
        for number, suffix in enumerate([f"_{direction}1", f"_{direction}2", "_total"]):
            # JSON keeps only the last description (Total); name the parts like the text does.
            part = description if suffix == "_total" else re.sub(r"\bTotal\b", suffix[1:].title(), description)
            block = _json_matrix(name + suffix, part, unit, rows[number * columns : (number + 1) * columns], None)
            # JSON keeps only the total's sum: the parts are checked against the total cell by cell.
            block.reported_sum = total if suffix == "_total" else block.computed_sum
            blocks.append(block)
        return blocks
    return [_json_matrix(name, description, unit, rows, total)]
