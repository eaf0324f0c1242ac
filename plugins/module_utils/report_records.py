# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Read the verification records of a fleet and bring each to one shape.

Every check writes one record per rack, ``<report dir>/records/<check>/<rack>.json``::

    {"check": "nvbandwidth", "rack": "rack1", "clique": "<uuid>.<id>", "run_id": "20261201T101500Z-ab12",
     "outcome": "failed", "passed": false, "summary": "one line",  # outcome: passed|failed|incomplete|error
     "nodes": [trays measured], "failed_nodes": [trays blamed], "node_problems": {tray: "one line"},
     "trays": {"expected": 18, "found": [every GPU tray of the rack], "skipped": [{"node", "reason"}]},
     "details": {...}, "view": {"facts": [...], "tables": [...], "findings": [...]},
     "started": "2026-...Z", "finished": "2026-...Z", "cluster": {...}, "objects_left": 0}

``view`` is what the check shows of the rack (``check_view``); the report renders it without knowing the check.
A record without one (written before checks wrote views) shows its summary, trays and violations.

Every record carries a ``verdict`` a pipeline can act on: ``passed``; ``failed``, a check ran and found a
problem of the racks (or too few usable trays to verify one); ``error``, a check could not run or finish
(the API server unreachable, a component it needs missing, its own objects left behind, a record that
cannot be read): nothing is known of the fabric, run it again.

The records of 0.1.0, ``records/<check>.json``, are read as rack ``-``. With a ``run_id`` only the
records of that run are current (``is_current``).
"""

from __future__ import annotations

import json
import os
from typing import Any, Optional

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.check_view import check_view, view_problems
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.outcomes import (
    ERROR,
    FAILED,
    OUTCOMES,
    PASSED,
    verdict_of,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.text import one_line

NO_RACK = "-"  # the rack of a 0.1.0 record, which names none


def _names(value: Any) -> list[str]:
    """A list of node names, once each, in the order given; anything else is an empty list."""
    if not isinstance(value, list):
        return []
    return list(dict.fromkeys(str(item) for item in value if isinstance(item, (str, int)) and str(item)))


def _trays(value: Any) -> dict[str, Any]:
    value = value if isinstance(value, dict) else {}
    expected = value.get("expected")
    skipped = [
        {"node": str(entry["node"]), "reason": one_line(entry.get("reason") or "no reason given")}
        for entry in value.get("skipped") or []
        if isinstance(entry, dict) and entry.get("node")
    ]
    trays = {
        "expected": expected if isinstance(expected, int) and not isinstance(expected, bool) and expected > 0 else 0,
        "found": _names(value.get("found")),
        "skipped": skipped,
    }
    if "declared" in value:  # a rack of gpu_fabric_racks (older records and undeclared racks have none of these)
        trays["declared"] = _names(value.get("declared"))
        trays["missing"] = [
            {"node": str(entry["node"]), "reason": one_line(entry.get("reason") or "no reason given")}
            for entry in value.get("missing") or []
            if isinstance(entry, dict) and entry.get("node")
        ]
        trays["undeclared"] = _names(value.get("undeclared"))
    if "due" in value or "partners" in value:  # an only-due run's (older records have neither)
        trays["due"] = [
            {"node": str(entry["node"]), "reason": one_line(entry.get("reason") or "no reason given")}
            for entry in value.get("due") or []
            if isinstance(entry, dict) and entry.get("node")
        ]
        trays["partners"] = _names(value.get("partners"))
    return trays


def _legacy_nodes(details: dict[str, Any]) -> list[str]:
    """The trays a 0.1.0 record measured, from its details."""
    if isinstance(details.get("nodes"), list):
        return _names(details["nodes"])
    if isinstance(details.get("node"), str):
        return [details["node"]]
    cliques = details.get("cliques")
    if isinstance(cliques, dict):
        return sorted({str(node) for members in cliques.values() if isinstance(members, list) for node in members})
    return []


def _unreadable(check: str, rack: str, source: str, problem: str, run_id: Optional[str] = None) -> dict[str, Any]:
    # run_id None: the run is unknown, so the failure counts in every run until the file is rewritten
    return {
        "check": check,
        "rack": rack,
        "clique": None,
        "run_id": run_id,
        "outcome": ERROR,
        "verdict": ERROR,
        "passed": False,
        "summary": f"the record {source} {problem}; run the check again to rewrite it",
        "nodes": [],
        "failed_nodes": [],
        "node_problems": {},
        "trays": _trays(None),
        "details": {},
        "source": source,
    }


def normalise_record(raw: Any, source: str, check: str = "", rack: str = NO_RACK) -> dict[str, Any]:
    """Return the record in the current shape, or a failing stand-in that says what is wrong with it.

    ``check`` and ``rack`` are what the file's place says (``records/<check>/<rack>.json``); the
    record's own keys win.
    """
    check = check or os.path.splitext(os.path.basename(source))[0]
    if not isinstance(raw, dict):
        return _unreadable(check, rack, source, f"holds a {type(raw).__name__}, not an object")
    run_id = raw["run_id"] if isinstance(raw.get("run_id"), str) else None
    check = str(raw.get("check") or check)
    rack = str(raw.get("rack") or rack)
    missing = [key for key in ("check", "passed", "summary") if key not in raw]
    if missing:
        return _unreadable(check, rack, source, f"lacks the keys {', '.join(missing)}", run_id)
    passed = raw["passed"]
    if not isinstance(passed, bool):
        return _unreadable(check, rack, source, f"has passed={passed!r}, not true or false", run_id)
    outcome = raw.get("outcome", PASSED if passed else FAILED)
    if outcome not in OUTCOMES:
        return _unreadable(check, rack, source, f"has outcome={outcome!r}, not {', '.join(OUTCOMES)}", run_id)
    if (outcome == PASSED and not passed) or (outcome in (FAILED, ERROR) and passed):
        return _unreadable(check, rack, source, f"has outcome={outcome} but passed={str(passed).lower()}", run_id)
    wrong_view = view_problems(raw["view"]) if raw.get("view") is not None else []
    if wrong_view:
        return _unreadable(check, rack, source, f"has a view of the wrong shape: {wrong_view[0]}", run_id)
    details = raw["details"] if isinstance(raw.get("details"), dict) else {}
    problems = raw.get("node_problems") if isinstance(raw.get("node_problems"), dict) else {}
    clique = raw.get("clique", details.get("clique"))
    record = dict(raw)
    record.update(
        check=check,
        rack=rack,
        clique=str(clique) if clique else None,
        run_id=run_id or "",
        outcome=outcome,
        verdict=verdict_of(outcome, passed),
        summary=one_line(raw["summary"]),
        nodes=_names(raw["nodes"]) if isinstance(raw.get("nodes"), list) else _legacy_nodes(details),
        failed_nodes=_names(raw.get("failed_nodes")),
        node_problems={str(node): one_line(text) for node, text in problems.items()},
        trays=_trays(raw.get("trays")),
        details=details,
        view=raw.get("view") or check_view(),
        source=source,
    )
    return record


def read_record(path: str, check: str, rack: str) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as handle:
            raw = json.load(handle)
    except (OSError, ValueError) as exc:
        return _unreadable(check, rack, path, f"could not be read ({exc})")
    return normalise_record(raw, path, check, rack)


def load_records(directory: str) -> list[dict[str, Any]]:
    """Every ``<check>/<rack>.json`` and 0.1.0 ``<check>.json`` of ``directory``; unreadable ones become failures."""
    records = []
    for name in sorted(os.listdir(directory)):
        path = os.path.join(directory, name)
        if os.path.isdir(path):
            for file in sorted(os.listdir(path)):
                if file.endswith(".json") and os.path.isfile(os.path.join(path, file)):
                    records.append(read_record(os.path.join(path, file), name, file[: -len(".json")]))
        elif name.endswith(".json") and os.path.isfile(path):
            records.append(read_record(path, name[: -len(".json")], NO_RACK))
    return records


def is_current(record: dict[str, Any], run_id: str) -> bool:
    """Whether the record belongs to the run ``run_id`` (every record does when no run is named)."""
    return not run_id or record.get("run_id") in (run_id, None)
