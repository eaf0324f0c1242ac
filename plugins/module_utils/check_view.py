# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""What a check shows of one rack: the one shape that a reader who knows no check renders.

A check writes its view into its record (``record.with_view``) beside its own ``details``: facts (label,
value), tables (title, columns, rows, a note below) and per-tray findings (tray, the problems that fail it, the
notes that do not). The report renders every record's view with one loop (``report_sections``); a check added
later shows its findings with no report code of its own. Every value is text, ready to show. This module is a
leaf: it imports nothing of the collection.
"""

from __future__ import annotations

from typing import Any, List, Mapping, Sequence, TypedDict


class Fact(TypedDict, total=False):
    label: str
    value: str
    code: bool  # quoted as it came (an ``ls -l`` line: its spacing is part of it)


class Table(TypedDict, total=False):
    title: str  # a line above the table ('' for none)
    columns: List[str]
    rows: List[List[str]]  # each as long as ``columns``
    note: str  # a line below it (rows left out, rows explained elsewhere); shown also when no row is


class TrayFindings(TypedDict):
    tray: str
    problems: List[str]  # one line each, naming the GPU: they fail the tray
    notes: List[str]  # one line each: worth a look, they fail nothing


class CheckView(TypedDict):
    facts: List[Fact]
    tables: List[Table]
    findings: List[TrayFindings]


def number(value: Any, digits: int = 2) -> str:
    """820.5 -> '820.50'; None -> 'N/A'; anything else as it is."""
    if value is None:
        return "N/A"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{value:.{digits}f}"
    return str(value)


def fact(label: str, value: str, code: bool = False) -> Fact:
    return Fact(label=label, value=value, code=code) if code else Fact(label=label, value=value)


def table(columns: Sequence[str], rows: Sequence[Sequence[str]], title: str = "", note: str = "") -> Table:
    return Table(title=title, columns=list(columns), rows=[list(row) for row in rows], note=note)


def check_view(
    facts: Sequence[Fact] = (), tables: Sequence[Table] = (), findings: Sequence[TrayFindings] = ()
) -> CheckView:
    return CheckView(facts=list(facts), tables=list(tables), findings=list(findings))


def _texts(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def _table_problems(where: str, value: Any) -> List[str]:
    if not isinstance(value, dict):
        return [f"{where} is a {type(value).__name__}, not an object"]
    problems = [f"{where}.{key} is not text" for key in ("title", "note") if not isinstance(value.get(key, ""), str)]
    columns, rows = value.get("columns"), value.get("rows")
    if not _texts(columns) or not columns:
        return [*problems, f"{where}.columns is not a list of texts"]
    if not isinstance(rows, list):
        return [*problems, f"{where}.rows is not a list"]
    problems += [
        f"{where}.rows[{i}] is not {len(columns)} texts"
        for i, row in enumerate(rows)
        if not _texts(row) or len(row) != len(columns)
    ]
    return problems


def view_problems(value: Any) -> List[str]:
    """What makes ``value`` no ``CheckView`` (one line each, naming the place); empty: it is one."""
    if not isinstance(value, dict):
        return [f"the view is a {type(value).__name__}, not an object"]
    problems = [
        f"the view lacks {key}" for key in ("facts", "tables", "findings") if not isinstance(value.get(key), list)
    ]
    for i, item in enumerate(value.get("facts") if isinstance(value.get("facts"), list) else []):
        if (
            not isinstance(item, dict)
            or not isinstance(item.get("label"), str)
            or not isinstance(item.get("value"), str)
        ):
            problems.append(f"facts[{i}] is not a label and a value, both text")
        elif not isinstance(item.get("code", False), bool):
            problems.append(f"facts[{i}].code is not true or false")
    for i, item in enumerate(value.get("tables") if isinstance(value.get("tables"), list) else []):
        problems += _table_problems(f"tables[{i}]", item)
    for i, item in enumerate(value.get("findings") if isinstance(value.get("findings"), list) else []):
        if not isinstance(item, dict) or not isinstance(item.get("tray"), str) or not item["tray"]:
            problems.append(f"findings[{i}] names no tray")
        elif not _texts(item.get("problems")) or not _texts(item.get("notes")):
            problems.append(f"findings[{i}] ({item['tray']}): problems and notes are not lists of texts")
    return problems


def valid_view(value: Any) -> CheckView:
    """``value`` as a ``CheckView``; one that is none raises ValueError naming what is wrong."""
    problems = view_problems(value)
    if problems:
        raise ValueError("; ".join(problems))
    return CheckView(facts=value["facts"], tables=value["tables"], findings=value["findings"])


def view_of(record: Mapping[str, Any]) -> CheckView:
    """The view a record carries; an empty one for a record written before checks wrote views."""
    value = record.get("view")
    return check_view() if value is None else valid_view(value)
