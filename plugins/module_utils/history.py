# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The kept history of verification runs: one directory per run, an index, retention, the baseline.

Layout under the history directory (``<report dir>/runs``)::

    index.json                  {"version": 1, "runs": [{"run_id", "started", "finished", "pinned",
                                                         "verdicts": {"<check>/<rack>": "passed"}}]}
    .lock                       flock'ed around every read-modify-write of the index
    <run_id>/.pinned            the pinned run's mark, so an index rebuilt from the directories keeps the pin
    <run_id>/<check>/<rack>.json  the records of that run, as the checks wrote them

Every file is written to a temporary file next to it and moved into place (``os.replace``), so a reader
sees a whole file or the earlier one; the index is read, changed and rewritten under an exclusive
``fcntl.flock`` of ``.lock``, so two runs at once both land in it. Retention keeps the newest
``keep_runs`` runs not older than ``keep_days`` days, and always the pinned run, the run being written, each
check's last passing run of each rack and the run that is each rack's baseline (``baseline_for``'s choice).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import statistics
import tempfile
from datetime import datetime, timedelta, timezone
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.gpu_index import node_of
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.outcomes import PASSED
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.record_validation import record_problems
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.times import parse_time

INDEX = "index.json"
LOCK = ".lock"
PIN_MARK = ".pinned"  # in the pinned run's directory: the pin survives an index rebuilt from the directories
INDEX_VERSION = 1
DEFAULT_KEEP_RUNS = 30
DEFAULT_KEEP_DAYS = 90
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


def _entry_of(records: Sequence[Mapping[str, Any]], run_id: str) -> Dict[str, Any]:
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
                entry = _entry_of(_run_records(history_dir, name, warnings), name)
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


def last_passing_runs(runs: Sequence[Mapping[str, Any]]) -> Dict[str, str]:
    """``<check>/<rack>`` -> the newest run (``newest_first``) in which that check passed on that rack."""
    found: Dict[str, str] = {}
    for entry in newest_first(runs):
        verdicts = entry.get("verdicts")
        for key, verdict in verdicts.items() if isinstance(verdicts, dict) else ():
            if verdict == PASSED:
                found.setdefault(str(key), str(entry.get("run_id")))
    return found


def retained(
    runs: Sequence[Mapping[str, Any]],
    keep_runs: int,
    keep_days: int,
    now: datetime,
    current: str = "",
    baselines: Optional[Mapping[str, Sequence[str]]] = None,
) -> Tuple[List[Mapping[str, Any]], List[Mapping[str, Any]], Dict[str, List[str]], Dict[str, List[str]]]:
    """(kept, removed, held, held_baselines): the newest ``keep_runs`` runs (0: any number) not older than
    ``keep_days`` days (0: any age), and always a pinned run, the run ``current``, each check's last passing run of
    each rack (``last_passing_runs``) and each run of ``baselines`` (run id -> the baselines it is: ``baseline_runs``);
    a run of unknown age is judged by count only. ``held``: run id -> the ``<check>/<rack>`` whose last pass it is,
    ``held_baselines``: run id -> the baselines it is, for each run kept only for those."""
    oldest = now - timedelta(days=keep_days) if keep_days > 0 else None
    last_pass: Dict[str, List[str]] = {}
    for key, run_id in sorted(last_passing_runs(runs).items()):
        last_pass.setdefault(run_id, []).append(key)
    baselines = baselines or {}
    kept, removed, held, held_baselines = [], [], {}, {}
    for position, entry in enumerate(newest_first(runs)):
        started = parse_time(entry.get("started"))
        too_many = keep_runs > 0 and position >= keep_runs
        too_old = oldest is not None and started is not None and started < oldest
        run_id = str(entry.get("run_id"))
        if entry.get("pinned") or run_id == current or not (too_many or too_old):
            kept.append(entry)
        elif run_id in last_pass or run_id in baselines:
            kept.append(entry)
            if run_id in last_pass:
                held[run_id] = last_pass[run_id]
            if run_id in baselines:
                held_baselines[run_id] = sorted(baselines[run_id])
        else:
            removed.append(entry)
    return kept, removed, held, held_baselines


def record_run(
    history_dir: str,
    run_id: str,
    records: Sequence[Mapping[str, Any]],
    keep_runs: int = DEFAULT_KEEP_RUNS,
    keep_days: int = DEFAULT_KEEP_DAYS,
    now: Optional[datetime] = None,
) -> Dict[str, Any]:
    """Keep ``records`` (one check's, every rack) as run ``run_id``, update the index, apply retention.

    A check run again in the same run replaces that check's records of the run. Returns
    ``{"run_dir", "files", "removed_runs", "kept_last_passing", "kept_baseline", "warnings"}``;
    ``kept_last_passing``: run id -> the ``<check>/<rack>`` whose last pass it holds, ``kept_baseline``: run id -> the
    baselines it is (``baseline_runs``), for each run retention kept only for those; ``warnings``: one line per run
    whose start names no time (``time_warnings``), for an index rebuilt (``read_index``) and for a kept record that
    cannot be a baseline (``baseline_runs``).
    """
    check_run_id(run_id)
    for record in records:
        names = [record.get("check"), record.get("rack")]
        if not all(isinstance(n, str) and RUN_ID.match(n) for n in names):
            raise HistoryError(
                f"a record of run {run_id} has check {names[0]!r} and rack {names[1]!r}; expected the names of a "
                "check and a rack (letters, digits, '.', '_', '-'), as fabric_verify returns them in its records"
            )
    run_dir = os.path.join(history_dir, run_id)
    files = []
    checks = sorted({str(r["check"]) for r in records})
    # the records are written under the lock too: another run's retention must not remove this run's
    # directory between its records and its index entry; the index is read first, so a history that
    # cannot be rebuilt is refused before anything is written
    warnings: List[str] = []
    with locked(history_dir):
        index = read_index(history_dir, warnings)
        for check in checks:
            directory = os.path.join(run_dir, check)
            wanted = {os.path.join(directory, f"{r['rack']}.json"): r for r in records if r["check"] == check}
            for path, record in wanted.items():
                write_json(path, record)
                files.append(path)
            for name in os.listdir(directory):
                path = os.path.join(directory, name)
                if name.endswith(".json") and not name.startswith(".") and path not in wanted:
                    os.unlink(path)
        runs = [dict(e) for e in index["runs"]]
        entry = next((e for e in runs if e.get("run_id") == run_id), None)
        fresh = _entry_of(records, run_id)
        if entry is None:
            runs.append(fresh)
        else:
            verdicts = {k: v for k, v in (entry.get("verdicts") or {}).items() if k.split("/", 1)[0] not in checks}
            verdicts.update(fresh["verdicts"])
            entry["verdicts"] = dict(sorted(verdicts.items()))
            entry["started"] = first_time([entry.get("started"), fresh["started"]])
            entry["finished"] = first_time([entry.get("finished"), fresh["finished"]], latest=True)
        warnings += time_warnings(runs)
        baselines = baseline_runs(history_dir, runs, warnings)
        kept, removed, held, held_baselines = retained(
            runs, keep_runs, keep_days, now or datetime.now(timezone.utc), current=run_id, baselines=baselines
        )
        write_json(os.path.join(history_dir, INDEX), {"version": INDEX_VERSION, "runs": newest_first(kept)})
        for gone in removed:
            if RUN_ID.match(str(gone.get("run_id"))):
                shutil.rmtree(os.path.join(history_dir, str(gone["run_id"])), ignore_errors=True)
    return {
        "run_dir": run_dir,
        "files": files,
        "removed_runs": [str(e["run_id"]) for e in removed],
        "kept_last_passing": held,
        "kept_baseline": held_baselines,
        "warnings": warnings,
    }


def pin_run(history_dir: str, run_id: str, warnings: Optional[List[str]] = None) -> bool:
    """Pin ``run_id`` as the site's baseline (the one pinned run; empty: none); whether the index changed.

    The pin is also a ``PIN_MARK`` file in the run's directory, so an index rebuilt from the directories keeps it.
    """
    if run_id:
        check_run_id(run_id)
    with locked(history_dir):
        found: List[str] = []
        index = read_index(history_dir, found)
        if warnings is not None:
            warnings.extend(found)
        runs = [dict(e) for e in index["runs"]]
        if run_id and not any(e.get("run_id") == run_id for e in runs):
            known = ", ".join(str(e.get("run_id")) for e in newest_first(runs)[:5]) or "none"
            raise HistoryError(
                f"the baseline run {run_id} is not in the history {history_dir} (newest runs: {known}); "
                "set gpu_fabric_verify_baseline_run to a kept run, or empty"
            )
        changed = False
        for entry in runs:
            pinned = entry.get("run_id") == run_id
            changed = changed or bool(entry.get("pinned")) != pinned
            entry["pinned"] = pinned
            _mark_pin(os.path.join(history_dir, str(entry["run_id"])), pinned)
        if changed or found:
            write_json(os.path.join(history_dir, INDEX), {"version": INDEX_VERSION, "runs": newest_first(runs)})
    return changed


def _mark_pin(run_dir: str, pinned: bool) -> None:
    mark = os.path.join(run_dir, PIN_MARK)
    if pinned and os.path.isdir(run_dir) and not os.path.exists(mark):
        write_json(mark, {"pinned": True})
    elif not pinned and os.path.exists(mark):
        os.unlink(mark)


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


def _figures(record: Mapping[str, Any], testcase: Optional[str]) -> Optional[Dict[str, Any]]:
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


def _candidates(runs: Sequence[Mapping[str, Any]], key: str, exclude_run: str = "") -> List[Mapping[str, Any]]:
    """The runs that judged ``key`` (``<check>/<rack>``), newest first, ``exclude_run`` left out."""
    ordered = [e for e in newest_first(runs) if isinstance(e, dict)]
    return [e for e in ordered if e.get("run_id") != exclude_run and key in (e.get("verdicts") or {})]


def _baseline_choice(
    history_dir: str, runs: Sequence[Mapping[str, Any]], check: str, rack: str, testcase: Optional[str]
) -> Optional[Tuple[str, Mapping[str, Any], Dict[str, Any], Dict[str, Any]]]:
    """(kind, index entry, record, figures) of the run that is the baseline of (check, rack[, testcase]) among
    ``runs`` (``_candidates``), or None: the one rule of ``baseline_for``, which retention asks too
    (``baseline_runs``). Raises HistoryError for a kept record that cannot be the baseline."""
    key = f"{check}/{rack}"
    pinned = [("pinned", e) for e in runs if e.get("pinned")]
    passing = [("last passing", e) for e in runs if not e.get("pinned") and e["verdicts"][key] == PASSED]
    for kind, entry in pinned + passing:
        record = run_record(history_dir, str(entry["run_id"]), check, rack)
        details = record.get("details") if record and isinstance(record.get("details"), dict) else {}
        held = details.get("references") if isinstance(details.get("references"), list) else []
        if kind != "pinned" and not any(isinstance(r, dict) and r.get("kind") == "product" for r in held):
            continue
        same_testcase = not testcase or details.get("testcase") in (None, testcase)
        # a run that passed has figures: one without them is refused too, never passed over to an older run
        if same_testcase and (details.get("median_gbps") is not None or entry["verdicts"][key] == PASSED):
            problems = record_problems(record or {}, baseline=True)
            if problems:
                path = os.path.join(history_dir, str(entry["run_id"]), check, f"{rack}.json")
                raise HistoryError(
                    f"the kept record {path} ({kind} run {entry['run_id']}) cannot be the baseline of {key}: "
                    f"{'; '.join(problems)}; remove that run from the history, or pin a run you trust "
                    "(gpu_fabric_verify_baseline_run)"
                )
        figures = _figures(record, testcase) if record else None
        if figures is None:
            continue
        return kind, entry, record, figures
    return None


def baseline_for(
    history_dir: str, check: str, rack: str, testcase: Optional[str] = None, exclude_run: str = ""
) -> Optional[Dict[str, Any]]:
    """The rack's baseline: the pinned run's record for (check, rack) when a run is pinned and holds it,
    else the newest run where (check, rack) passed against a product reference (its record's
    ``details.references`` lists one); ``exclude_run`` (the run being judged) never counts. A run that passed
    against its own median (or a baseline) alone never sets the bar: a rack faulty from its first run would pass
    against itself, then hold every later run to its fault. Only the site's pin makes such a run a baseline.

    Returns ``{"run_id", "recorded_at", "median_gbps", "matrix", "rank_nodes", "driver_version", "source"}``
    (the keys the nvbandwidth rule reads) or None when no run gives one. A record of another testcase, or
    without a median (a run that did not pass), is passed over. A record whose median or matrix holds what is no
    bandwidth (NaN, an infinity, a boolean, 0 or less), or anything a reader refuses (both:
    ``record_validation.record_problems(record, baseline=True)``), or a passed one without a median, is refused
    with HistoryError naming its file and entries: passing it over would judge the rack against an older run, or
    none, unsaid.
    """
    if not history_dir or not os.path.isdir(history_dir):
        return None
    runs = _candidates(read_index(history_dir)["runs"], f"{check}/{rack}", exclude_run)
    choice = _baseline_choice(history_dir, runs, check, rack, testcase)
    if choice is None:
        return None
    kind, entry, record, figures = choice
    return {
        "run_id": entry["run_id"],
        "recorded_at": record.get("finished") or entry.get("finished") or entry.get("started"),
        "median_gbps": figures["median_gbps"],
        "matrix": figures["matrix"],
        "rank_nodes": figures["rank_nodes"],
        "driver_version": figures["driver_version"],
        "source": f"{kind} run {entry['run_id']}",
    }


def baseline_runs(
    history_dir: str, runs: Sequence[Mapping[str, Any]], warnings: Optional[List[str]] = None
) -> Dict[str, List[str]]:
    """Run id -> the baselines it is among ``runs``: for each (check, rack) and each testcase its kept records
    name, the run ``baseline_for`` would choose (``_baseline_choice``, no run excluded), named
    ``<check>/<rack>/<testcase>`` (``<check>/<rack>`` for records that name none). Retention keeps these runs. A
    kept record that cannot be the baseline gives a line in ``warnings`` and holds no run for its (check, rack)."""
    found: Dict[str, List[str]] = {}
    keys = sorted({str(k) for e in runs if isinstance(e, dict) for k in (e.get("verdicts") or {})})
    for key in keys:
        check, rack = key.split("/", 1)
        candidates = _candidates(runs, key)
        testcases = set()
        for entry in candidates:
            if entry.get("pinned") or entry["verdicts"][key] == PASSED:
                record = run_record(history_dir, str(entry["run_id"]), check, rack) or {}
                details = record.get("details") if isinstance(record.get("details"), dict) else {}
                named = details.get("testcase")
                testcases.add(named if isinstance(named, str) and named else None)
        for testcase in sorted(testcases, key=lambda t: t or ""):
            try:
                choice = _baseline_choice(history_dir, candidates, check, rack, testcase)
            except HistoryError as exc:
                if warnings is not None:
                    warnings.append(f"retention holds no baseline run of {key}: {exc}")
                break
            if choice is not None:
                name = f"{key}/{testcase}" if testcase else key
                found.setdefault(str(choice[1]["run_id"]), []).append(name)
    return found


def options_with_baseline(
    options: Mapping[str, Any], history_dir: str, check: str, rack: str, run_id: str = ""
) -> Dict[str, Any]:
    """A rack's check options with ``baseline`` set from the history (None when it has none or the index
    cannot be read: the rule then says that no baseline held, and recording the run names the index's
    problem); unchanged without a history directory. A kept record that cannot be the baseline
    (``baseline_for``) raises HistoryError: the check is refused, naming the record."""
    if not history_dir:
        return dict(options)
    try:
        read_index(history_dir)
    except HistoryError:
        return dict(options, baseline=None)
    return dict(options, baseline=baseline_for(history_dir, check, rack, options.get("testcase"), exclude_run=run_id))


# ----------------------------------------------------------------------------------------- trends


def drop_against(latest: float, baseline: Optional[float], tolerance: float) -> Tuple[Optional[float], bool]:
    """(drop, flagged): the fraction ``latest`` is below ``baseline`` (None without a baseline), and whether it is
    more than ``tolerance`` below it. The one rule of a flagged drop, for a rack's median and a tray's lowest pair."""
    if not baseline:
        return None, False
    drop = 1 - latest / baseline
    return round(drop, 4), drop > tolerance


def tray_trends(
    seen: Sequence[Tuple[str, Mapping[str, Any]]], baseline: Mapping[str, float], tolerance: float
) -> List[Dict[str, Any]]:
    """Per tray of the runs ``seen`` ((run id, figures), newest first): its figure in each run that measured it
    (``series``, oldest first), in the newest run (``latest_gbps``, None when that run did not measure it) and in
    the baseline run, and its drop against that by ``drop_against``."""
    newest = seen[0][0] if seen else ""
    nodes = sorted({node for _run, figures in seen for node in figures.get("trays") or {}})
    rows = []
    for node in nodes:
        series = [
            {"run_id": run_id, "gbps": round(figures["trays"][node], 2)}
            for run_id, figures in reversed(seen)
            if node in (figures.get("trays") or {})
        ]
        latest = series[-1]["gbps"] if series[-1]["run_id"] == newest else None
        base = baseline.get(node)
        drop, dropped = drop_against(latest, base, tolerance) if latest is not None else (None, False)
        rows.append(
            {
                "node": node,
                "runs": len(series),
                "series": series,
                "latest_gbps": latest,
                "baseline_gbps": round(base, 2) if base is not None else None,
                "drop_fraction": drop,
                "dropped": dropped,
            }
        )
    return rows


def trends(
    history_dir: str,
    last_runs: int = 10,
    tolerance: float = 0.03,
    current: str = "",
    checks: Sequence[str] = (),
    warnings: Optional[List[str]] = None,
) -> List[Dict[str, Any]]:
    """Per (check, rack) with a bandwidth figure: over the newest ``last_runs`` runs the median of their
    medians and the lowest pair, the newest run's median, the baseline (as the newest run was judged:
    that run excluded) and ``dropped`` when the newest median is below the baseline's by more than
    ``tolerance`` (a fraction). ``current``: the run the report is about (newest when empty).

    ``series``: each run's median and lowest pair, oldest first (the chart); ``trays``: per tray its
    lowest pair in each run (``tray_lowest_pairs``), held against its figure in the same baseline run by
    the same rule (``tray_trends``).

    A kept record that cannot be read or is bad (``kept_record``), and a baseline the history cannot give
    (HistoryError), are left out with a line in ``warnings``."""
    if not history_dir or not os.path.isdir(history_dir):
        return []
    runs = newest_first(valid_runs(read_index(history_dir, warnings)))
    if current:
        names = [str(e.get("run_id")) for e in runs]
        runs = runs[names.index(current) :] if current in names else runs
    runs = runs[: max(last_runs, 1)]
    keys = sorted({k for e in runs for k in (e.get("verdicts") or {})})
    rows = []
    for key in keys:
        check, rack = key.split("/", 1)
        if checks and check not in checks:
            continue
        seen = []
        for entry in runs:
            if key not in (entry.get("verdicts") or {}):
                continue
            record = kept_record(history_dir, str(entry["run_id"]), check, rack, warnings)
            figures = _figures(record, None) if record else None
            if figures:
                seen.append((str(entry["run_id"]), entry["verdicts"][key], figures))
        if not seen:
            continue
        latest_run, latest_verdict, latest = seen[0]
        try:
            baseline = baseline_for(history_dir, check, rack, latest["testcase"], exclude_run=latest_run)
        except HistoryError as exc:
            baseline = None
            if warnings is not None:
                warnings.append(f"the trend of {key} has no baseline: {exc}")
        drop, dropped = drop_against(latest["median_gbps"], baseline["median_gbps"] if baseline else None, tolerance)
        kept = [run_figures for _run, _verdict, run_figures in seen]
        lows = [run["min_gbps"] for run in kept if run["min_gbps"] is not None]
        baseline_record = kept_record(history_dir, str(baseline["run_id"]), check, rack) if baseline else None
        baseline_figures = _figures(baseline_record, None) if baseline_record else None
        rows.append(
            {
                "check": check,
                "rack": rack,
                "runs": len(seen),
                "median_gbps": round(statistics.median(run["median_gbps"] for run in kept), 2),
                "min_gbps": round(min(lows), 2) if lows else None,
                "latest_run": latest_run,
                "latest_verdict": latest_verdict,
                "latest_median_gbps": round(latest["median_gbps"], 2),
                "baseline_run": baseline["run_id"] if baseline else None,
                "baseline_source": baseline["source"] if baseline else None,
                "baseline_median_gbps": round(baseline["median_gbps"], 2) if baseline else None,
                "drop_fraction": drop,
                "dropped": dropped,
                "series": [
                    {
                        "run_id": run_id,
                        "verdict": verdict,
                        "median_gbps": round(figures["median_gbps"], 2),
                        "min_gbps": round(figures["min_gbps"], 2) if figures["min_gbps"] is not None else None,
                    }
                    for run_id, verdict, figures in reversed(seen)
                ],
                "trays": tray_trends(
                    [(run_id, figures) for run_id, _verdict, figures in seen],
                    baseline_figures["trays"] if baseline_figures else {},
                    tolerance,
                ),
            }
        )
    return rows
