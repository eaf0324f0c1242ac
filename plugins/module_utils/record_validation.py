# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Whether a kept record, or a baseline taken from one, can be read: the one judge of both.

The history's readers (trend, index, metrics) leave out a record ``record_problems`` names; the history refuses a
baseline record ``record_problems(record, baseline=True)`` names; the bandwidth rule refuses a baseline given to it
(``baseline_problems``). A reader's figure is a finite number (``number_problem``: a measured minimum may be 0); a
figure the bandwidth rule holds pairs against is one above 0 (``figure_problem``). A NaN compares false with
everything, so a NaN baseline would let every pair pass; a boolean is no figure either (``True`` reads as 1 GB/s);
a numeric string (as a template renders a number) reads as its number.

A leaf: it imports nothing of the collection, so the history, the report, the metrics and the bandwidth rule on a
GPU host all use it without loading anything else.
"""

from __future__ import annotations

import math
from typing import Any, List, Mapping, Optional, Tuple

# The figures of a record's details that the readers compute with: each a number when it is there.
FIGURE_KEYS = ("median_gbps", "min", "max", "sum")


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def number_problem(value: Any) -> Optional[str]:
    """Why ``value`` is no finite number, or None when it is one (a numeric string read as its number)."""
    if isinstance(value, bool):
        return f"{_shown(value)} is a boolean, not a number"
    if not isinstance(value, (int, float, str)):
        return f"{_shown(value)} is not a number"
    try:
        number = float(value)
    except (ValueError, OverflowError):
        return f"{_shown(value)} is not a number"
    if not math.isfinite(number):
        return f"{_shown(value)} is not a finite number"
    return None


def figure_problem(value: Any) -> Optional[str]:
    """Why ``value`` is no bandwidth figure (a finite number above 0: ``number_problem``), or None when it is one."""
    problem = number_problem(value)
    if problem:
        return problem
    if float(value) <= 0:
        return f"{_shown(value)} is not above 0"
    return None


def baseline_problems(record: Any) -> List[str]:
    """Why a baseline record (``median_gbps``, optionally ``matrix``) cannot be used: each entry that is no figure.

    The median must be a figure (``figure_problem``); each cell of the matrix a figure or None (not measured).
    At most three cells are named, then how many more.
    """
    if not isinstance(record, Mapping):
        return [f"{_shown(record)} is not a mapping with median_gbps"]
    if "median_gbps" not in record:
        return ["median_gbps is missing"]
    problems = []
    median = figure_problem(record["median_gbps"])
    if median:
        problems.append(f"median_gbps {median}")
    matrix = record.get("matrix")
    if matrix is not None:
        if not isinstance(matrix, (list, tuple)) or not all(isinstance(row, (list, tuple)) for row in matrix):
            problems.append(f"matrix {matrix!r} is not a list of rows"[:200])
        else:
            cells = [
                f"matrix row {r} column {c} {why}"
                for r, row in enumerate(matrix)
                for c, value in enumerate(row)
                if value is not None
                for why in [figure_problem(value)]
                if why
            ]
            more = f"; and {len(cells) - 3} more cells" if len(cells) > 3 else ""
            problems.extend(cells[:3])
            if more:
                problems[-1] += more
    return problems


def _non_finite(value: Any, where: str) -> Optional[Tuple[str, float]]:
    if isinstance(value, float) and not math.isfinite(value):
        return where, value
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        found = _non_finite(item, f"{where}.{key}" if where else str(key))
        if found:
            return found
    return None


def record_problems(record: Any, baseline: bool = False) -> List[str]:
    """What makes a kept record one that no reader can use (empty: none): not an object, details that are not an
    object, a number that is not finite anywhere in it (JSON's NaN, Infinity), a figure of ``FIGURE_KEYS`` that is
    no number (``number_problem``). ``baseline``: the record is to be a baseline, and its details' median and
    matrix are held to ``baseline_problems`` first."""
    if not isinstance(record, dict):
        return [f"it holds a {type(record).__name__}, not an object"]
    details = record.get("details", {})
    if not isinstance(details, dict):
        return [f"details {_shown(details)} is not an object"]
    if baseline:
        problems = baseline_problems(details)
        if problems:
            return problems
    found = _non_finite(record, "")
    if found:
        return [f"{found[0]} {found[1]!r} is not a finite number"]
    return [
        f"details.{key} {why}"
        for key in FIGURE_KEYS
        if details.get(key) is not None
        for why in [number_problem(details[key])]
        if why
    ]
