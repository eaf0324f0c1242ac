# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the history keeps: the retention rule (pure, over the index's entries).

Retention keeps the newest ``keep_runs`` runs not older than ``keep_days`` days, and always the pinned run, the run
being written, each check's last passing run of each rack and the run that is each rack's baseline
(``history_baseline.baseline_runs``). ``history_runs.record_run`` applies it after each run it records.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.history import newest_first
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.outcomes import PASSED
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.times import parse_time

DEFAULT_KEEP_RUNS = 30
DEFAULT_KEEP_DAYS = 90


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
