# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Runs kept in the history: a run's records recorded (its directory, its index entry, then retention), the pin.

The records are written and the index read, changed and rewritten under the history's lock (``history.locked``);
retention (``history_retention.retained``) then removes the runs it does not keep, holding each rack's baseline run
(``history_baseline.baseline_runs``).
"""

from __future__ import annotations

import os
import shutil
from datetime import datetime, timezone
from typing import Any, Dict, List, Mapping, Optional, Sequence

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.history import (
    INDEX,
    INDEX_VERSION,
    PIN_MARK,
    RUN_ID,
    HistoryError,
    check_run_id,
    first_time,
    index_entry,
    locked,
    newest_first,
    read_index,
    time_warnings,
    write_json,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.history_baseline import baseline_runs
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.history_retention import (
    DEFAULT_KEEP_DAYS,
    DEFAULT_KEEP_RUNS,
    retained,
)


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
        fresh = index_entry(records, run_id)
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
