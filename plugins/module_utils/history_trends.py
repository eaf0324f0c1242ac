# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The trends of the kept history: per (check, rack) its bandwidth figures over the last runs, held against its
baseline, and per tray its lowest pair held against the same baseline run (the report's trend section)."""

from __future__ import annotations

import os
import statistics
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.history import (
    HistoryError,
    kept_record,
    newest_first,
    read_index,
    record_figures,
    valid_runs,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.history_baseline import baseline_for


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
            figures = record_figures(record, None) if record else None
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
        baseline_figures = record_figures(baseline_record, None) if baseline_record else None
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
