# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A rack's baseline in the kept history: the pinned run, else its newest run that passed against a product reference.

``baseline_for`` gives the nvbandwidth rule its site baseline (``options_with_baseline`` sets it in a rack's check
options); ``baseline_runs`` names the run each baseline is, which retention keeps (``history_retention``). Both ask
one rule (``_baseline_choice``). A kept record that cannot be the baseline is refused with HistoryError, never
passed over.
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.history import (
    HistoryError,
    newest_first,
    read_index,
    record_figures,
    run_record,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.outcomes import PASSED
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.record_validation import record_problems


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
        figures = record_figures(record, testcase) if record else None
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
