# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The kept history of verification runs: one directory per run and an index; its files, and how they are read.

Layout under the history directory (``<report dir>/runs``)::

    index.json                  {"version": 1, "runs": [{"run_id", "started", "finished", "pinned",
                                                         "verdicts": {"<check>/<rack>": "passed"}}]}
    .lock                       flock'ed around every read-modify-write of the index
    <run_id>/.pinned            the pinned run's mark, so an index rebuilt from the directories keeps the pin
    <run_id>/<check>/<rack>.json  the records of that run, as the checks wrote them

Every file is written to a temporary file next to it and moved into place (``os.replace``), so a reader
sees a whole file or the earlier one; the index is read, changed and rewritten under an exclusive
``fcntl.flock`` of ``.lock`` (``locked``), so two runs at once both land in it. An index that cannot be read is
rebuilt from the run directories (``read_index``). A kept record is read for the readers (``kept_record``) with
its bandwidth figures (``record_figures``). Runs are recorded and pinned by ``history_runs``, which applies the
retention rule (``history_retention``); the baseline is chosen by ``history_baseline``, the trends drawn by
``history_trends``.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import tempfile
from datetime import datetime, timezone
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.gpu_index import node_of
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.record_validation import record_problems
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.times import parse_time

INDEX = "index.json"
LOCK = ".lock"
PIN_MARK = ".pinned"  # in the pinned run's directory: the pin survives an index rebuilt from the directories
INDEX_VERSION = 1
# A run id names a directory: letters, digits, '.', '_', '-' (playbooks/verify.yml makes 20261203T101500123456Z).
RUN_ID = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$")
OLDEST = datetime.min.replace(tzinfo=timezone.utc)  # where a run whose start names no time sorts


class HistoryError(Exception):
    """The history cannot be read or written; the message says what to do."""


# ----------------------------------------------------------------------------------------- files


def check_run_id(run_id: str) -> str:
    if not RUN_ID.match(run_id or ""):
        raise HistoryError(
            f"run id {run_id!r} cannot name a history directory; expected letters, digits, '.', '_' or '-' "
            "(at most 128), as playbooks/verify.yml makes them"
        )
    return run_id


def run_id_from(timestamp: str) -> str:
    """A run id for a run that was given none: its start time without separators (``20261203T101500Z``)."""
    return re.sub(r"[^0-9A-Za-z]", "", timestamp) or "run"


def write_json(path: str, data: Any) -> None:
    """``data`` as JSON at ``path``: a temporary file in the same directory, flushed, then moved into place."""
    directory = os.path.dirname(path) or "."
    os.makedirs(directory, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=".tmp-", suffix=".json", dir=directory)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(json.dumps(data, indent=2, sort_keys=True) + "\n")
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


@contextlib.contextmanager
def locked(history_dir: str) -> Iterator[None]:
    """An exclusive lock of the history (``.lock``), held while the index is read, changed and written."""
    os.makedirs(history_dir, exist_ok=True)
    with open(os.path.join(history_dir, LOCK), "a", encoding="utf-8") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _read_json(path: str) -> Any:
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


# ----------------------------------------------------------------------------------------- the index


def _instant(value: Any) -> datetime:
    """A time of the history as an instant: RFC 3339 parsed (``times.parse_time``), anything else the oldest."""
    return parse_time(value) or OLDEST


def first_time(values: Sequence[Any], latest: bool = False) -> Optional[str]:
    """The earliest (``latest``: the latest) of the times ``values`` by the instants they name
    (``times.parse_time``: ``2026-12-07T09:30:00+09:00`` is before ``2026-12-07T01:00:00Z``), as written; a text
    that names no time only when no other does. A run's start and finish, in the history and in the report."""
    texts = [v for v in values if isinstance(v, str) and v]
    if not texts:
        return None
    pick = max if latest else min
    timed = [v for v in texts if parse_time(v) is not None]
    return pick(timed, key=_instant) if timed else texts[0]


def index_entry(records: Sequence[Mapping[str, Any]], run_id: str) -> Dict[str, Any]:
    """The index entry of run ``run_id`` from its records: its start and finish, each (check, rack) verdict."""
    return {
        "run_id": run_id,
        "started": first_time([r.get("started") for r in records]),
        "finished": first_time([r.get("finished") for r in records], latest=True),
        "pinned": False,
        "verdicts": {f"{r['check']}/{r['rack']}": str(r.get("verdict") or "") for r in records},
    }


def _run_records(history_dir: str, run_id: str, warnings: Optional[List[str]] = None) -> List[Dict[str, Any]]:
    records = []
    directory = os.path.join(history_dir, run_id)
    for check in sorted(os.listdir(directory)):
        if not os.path.isdir(os.path.join(directory, check)):
            continue
        for name in sorted(os.listdir(os.path.join(directory, check))):
            if name.endswith(".json") and not name.startswith("."):
                record = kept_record(history_dir, run_id, check, name[: -len(".json")], warnings)
                if record is not None:
                    records.append(dict(record, check=check, rack=name[: -len(".json")]))
    return records


def rebuild_index(history_dir: str, warnings: Optional[List[str]] = None) -> Dict[str, Any]:
    """The index made again from the run directories: each run's entry from its records (a bad one left out,
    ``kept_record``), its pin from its ``PIN_MARK``. Raises OSError when the directories cannot be listed."""
    runs = []
    if os.path.isdir(history_dir):
        for name in sorted(os.listdir(history_dir)):
            if RUN_ID.match(name) and os.path.isdir(os.path.join(history_dir, name)):
                entry = index_entry(_run_records(history_dir, name, warnings), name)
                entry["pinned"] = os.path.exists(os.path.join(history_dir, name, PIN_MARK))
                runs.append(entry)
    return {"version": INDEX_VERSION, "runs": newest_first(runs)}


def _entry_problem(entry: Any, position: int) -> Optional[str]:
    if not isinstance(entry, dict):
        return f"has run {position + 1} as a {type(entry).__name__}, not an object"
    run_id = entry.get("run_id")
    if not isinstance(run_id, str) or not RUN_ID.match(run_id):
        return f"has run {position + 1} with run_id {run_id!r}, not the name of a run directory"
    verdicts = entry.get("verdicts", {})
    if not isinstance(verdicts, dict) or not all(
        isinstance(k, str) and "/" in k and isinstance(v, str) for k, v in verdicts.items()
    ):
        return f"has run {run_id} with verdicts {str(verdicts)[:60]!r}, not '<check>/<rack>': verdict"
    for key in ("started", "finished"):
        if entry.get(key) is not None and not isinstance(entry.get(key), str):
            return f"has run {run_id} with {key} {entry.get(key)!r}, not an RFC 3339 time"
    if not isinstance(entry.get("pinned", False), bool):
        return f"has run {run_id} with pinned {entry.get('pinned')!r}, not true or false"
    return None


def index_problem(index: Any) -> Optional[str]:
    """What makes ``index`` no history index (a JSON object whose ``runs`` is a list of entries, each with a run
    directory's name, '<check>/<rack>': verdict, times as text, pinned true or false, each run once), or None."""
    if not isinstance(index, dict):
        return f"holds a {type(index).__name__}, not an object"
    if not isinstance(index.get("runs"), list):
        return "has no list 'runs'"
    seen = set()
    for position, entry in enumerate(index["runs"]):
        problem = _entry_problem(entry, position)
        if problem:
            return problem
        if entry["run_id"] in seen:
            return f"lists run {entry['run_id']} twice"
        seen.add(entry["run_id"])
    return None


def valid_runs(index: Mapping[str, Any]) -> List[Dict[str, Any]]:
    """The entries of ``index`` that are history entries (``index_problem`` finds nothing wrong with them)."""
    runs = index.get("runs") if isinstance(index, Mapping) else None
    return [e for n, e in enumerate(runs if isinstance(runs, list) else []) if _entry_problem(e, n) is None]


def _load_index(history_dir: str) -> Tuple[Dict[str, Any], List[str]]:
    """(the index, []), or (the index rebuilt from the run directories, warnings saying why)."""
    path = os.path.join(history_dir, INDEX)
    if not os.path.exists(path):
        problem = "is missing"
    else:
        try:
            index = _read_json(path)
        except (OSError, ValueError) as exc:
            problem = f"cannot be read ({exc})"
        else:
            problem = index_problem(index)
            if problem is None:
                return index, []
    skipped: List[str] = []
    try:
        rebuilt = rebuild_index(history_dir, skipped)
    except OSError as exc:
        raise HistoryError(
            f"the history index {path} {problem} and the run directories of {history_dir} cannot be read to "
            f"rebuild it ({exc}); make {history_dir} readable by this user, or move it away to start a new history"
        ) from exc
    if not rebuilt["runs"]:
        return rebuilt, skipped  # a new history: nothing to rebuild, nothing lost
    pinned = [str(e["run_id"]) for e in rebuilt["runs"] if e["pinned"]]
    pin = (
        f"pinned run: {pinned[0]}"
        if pinned
        else "no run is pinned now: pin the baseline run again if one was (gpu_fabric_verify_baseline_run)"
    )
    return rebuilt, [
        f"the history index {path} {problem}; rebuilt it from the {len(rebuilt['runs'])} run directories of "
        f"{history_dir} ({pin})",
        *skipped,
    ]


def read_index(history_dir: str, warnings: Optional[List[str]] = None) -> Dict[str, Any]:
    """The index of ``history_dir``. One that is missing, cannot be read or is no history index
    (``index_problem``) is rebuilt from the run directories (``rebuild_index``), with a line in ``warnings`` that
    says so; when those cannot be read either, HistoryError says what to do."""
    index, found = _load_index(history_dir)
    if warnings is not None:
        warnings.extend(found)
    return index


def _started_key(entry: Mapping[str, Any]) -> Tuple[datetime, str]:
    return (_instant(entry.get("started")), str(entry.get("run_id") or ""))


def newest_first(runs: Sequence[Mapping[str, Any]]) -> List[Mapping[str, Any]]:
    """The runs by the instant each started (``2026-12-07T09:00:00+09:00`` before ``2026-12-07T01:00:00Z``), newest
    first; a run whose start names no time is the oldest."""
    return sorted(runs, key=_started_key, reverse=True)


def time_warnings(runs: Sequence[Mapping[str, Any]]) -> List[str]:
    """One line per run whose start names no RFC 3339 time: it counts as the oldest run, which retention removes
    first."""
    return [
        f"run {entry.get('run_id')} of the history has the start time {entry.get('started')!r}, not an RFC 3339 time "
        "(2026-12-07T01:00:00Z); it counts as the oldest run, which retention removes first; correct its 'started' "
        "in the history index, or remove the run"
        for entry in runs
        if parse_time(entry.get("started")) is None
    ]


# ----------------------------------------------------------------------------------------- reading runs


def kept_record(
    history_dir: str, run_id: str, check: str, rack: str, warnings: Optional[List[str]] = None
) -> Optional[Dict[str, Any]]:
    """The record of (check, rack) in run ``run_id`` for the readers (report, metrics, a rebuilt index); None when
    it is not there, and None with a line in ``warnings`` when it cannot be read or
    ``record_validation.record_problems`` finds it bad."""
    if not RUN_ID.match(run_id or ""):
        return None
    path = os.path.join(history_dir, run_id, check, f"{rack}.json")
    try:
        record = _read_json(path)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        problems = [f"it cannot be read ({exc})"]
    else:
        problems = record_problems(record)
    if not problems:
        return record
    if warnings is not None:
        warnings.append(
            f"the kept record {path}: {'; '.join(problems)}; left out of the history's readers (trend, index); "
            f"correct it or remove the run {run_id} from the history"
        )
    return None


def run_record(history_dir: str, run_id: str, check: str, rack: str) -> Optional[Dict[str, Any]]:
    """The record of (check, rack) in run ``run_id``; None when it is not there or cannot be read."""
    if not RUN_ID.match(run_id or ""):
        return None
    try:
        record = _read_json(os.path.join(history_dir, run_id, check, f"{rack}.json"))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def _gbps(value: Any) -> Optional[float]:
    """A kept figure as GB/s; None for what is no bandwidth (a boolean, NaN, an infinity, below 0). A numeric
    string is read as its number, as the bandwidth rule reads a baseline (``record_validation.number_problem``)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return None
    try:
        number = float(value)
    except (ValueError, OverflowError):
        return None
    return number if 0 <= number < float("inf") else None


def tray_lowest_pairs(
    matrix: Any, nodes: Optional[Sequence[str]], gpus_per_node: Any, row_pairs: Any = None
) -> Dict[str, float]:
    """Per tray, its bandwidth figure of one run: the lowest measured GPU pair with a GPU of the tray at either end.

    The figure of the tray trend. The lowest pair, not a median: a GPU that lost one of its 18 NVLinks slows only
    its own pairs (a quarter of the pairs that touch its tray), which a median of the tray's pairs would hide. A
    slow pair between two trays lowers the figure of both. GPU i lives on ``nodes[i // gpus_per_node]``, as the
    bandwidth rule places it; a square matrix gives its off-diagonal cells, a bisect matrix (one row per pair,
    ``row_pairs``) its rows. A matrix the trays do not fill (another shape, no placement) gives no figure.
    """
    if not isinstance(matrix, list) or not all(isinstance(row, list) for row in matrix) or not matrix:
        return {}
    if not nodes or not isinstance(gpus_per_node, int) or isinstance(gpus_per_node, bool) or gpus_per_node < 1:
        return {}
    if len(nodes) * gpus_per_node != len(matrix):
        return {}
    paired = isinstance(row_pairs, list) and len(row_pairs) == len(matrix)
    if not paired and any(len(row) != len(matrix) for row in matrix):
        return {}
    lowest: Dict[str, float] = {}
    for r, row in enumerate(matrix):
        for c, value in enumerate(row):
            gbps = _gbps(value)
            if gbps is None or (not paired and r == c):
                continue
            gpus = row_pairs[r] if paired else (r, c)
            for gpu in gpus if isinstance(gpus, (list, tuple)) else ():
                node = node_of(gpu, nodes, gpus_per_node) if isinstance(gpu, int) else None
                if node is not None and (node not in lowest or gbps < lowest[node]):
                    lowest[node] = gbps
    return lowest


def record_figures(record: Mapping[str, Any], testcase: Optional[str]) -> Optional[Dict[str, Any]]:
    """The bandwidth figures of a kept record (median, lowest pair, matrix, placement, each tray's lowest pair), or
    None for a record of another ``testcase`` or without a median: what the baseline and the trends read."""
    details = record.get("details") if isinstance(record.get("details"), dict) else {}
    if testcase and details.get("testcase") not in (None, testcase):
        return None
    median = _gbps(details.get("median_gbps"))
    if not median:  # no median, or one that is no bandwidth: no figures of this run
        return None
    matrix = details.get("matrix") if isinstance(details.get("matrix"), list) else None
    rank_nodes = details.get("rank_nodes") or record.get("nodes") or None
    return {
        "median_gbps": median,
        "min_gbps": _gbps(details.get("min")),
        "matrix": matrix,
        "rank_nodes": rank_nodes,
        "driver_version": details.get("driver_version"),
        "testcase": details.get("testcase"),
        "trays": tray_lowest_pairs(matrix, rank_nodes, details.get("gpus_per_node"), details.get("row_pairs")),
    }
