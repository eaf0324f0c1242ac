# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Turn the verification records of a fleet into a report: JSON, Markdown, JUnit XML and an HTML page.

Every check writes one record per rack, ``<report dir>/records/<check>/<rack>.json``::

    {"check": "nvbandwidth", "rack": "rack1", "clique": "<uuid>.<id>", "run_id": "20261201T101500Z-ab12",
     "outcome": "failed", "passed": false, "summary": "one line",  # outcome: passed|failed|incomplete|error
     "nodes": [trays measured], "failed_nodes": [trays blamed], "node_problems": {tray: "one line"},
     "trays": {"expected": 18, "found": [every GPU tray of the rack], "skipped": [{"node", "reason"}]},
     "details": {...}, "started": "2026-...Z", "finished": "2026-...Z", "cluster": {...}, "objects_left": 0}

Every record and the report carry a ``verdict`` a pipeline can act on: ``passed``; ``failed``, a check
ran and found a problem of the racks (or too few usable trays to verify one); ``error``, a check could
not run or finish (the API server unreachable, a component it needs missing, its own objects left
behind, a record that cannot be read): nothing is known of the fabric, run it again. A fabric failure
wins over an error in the report's verdict.

The records of 0.1.0, ``records/<check>.json``, are read as rack ``-``. With a ``run_id`` only the
records of that run are current: the others are left out of the verdict and only named.

The report is built once as data (``build_report``, what ``report.json`` holds), then turned into a
view (``report_view``: every text, class, colour and tooltip ready) that the Jinja2 templates of
``report_templates`` only loop over. The output depends on the records alone (no clock is read),
so the same records give the same bytes and a second run of the report changes nothing.
"""

from __future__ import annotations

import json
import os
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Iterable, Optional

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.report_templates import (
    HTML_TEMPLATE,
    MARKDOWN_TEMPLATE,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.text import one_line

try:
    import jinja2

    HAS_JINJA2 = True
    JINJA2_IMPORT_ERROR: Optional[ImportError] = None
except ImportError as exc:  # pragma: no cover - jinja2 comes with ansible-core
    HAS_JINJA2 = False
    JINJA2_IMPORT_ERROR = exc

CHECK_ORDER = ("cliques", "imex_channel", "nvbandwidth", "nccl")
FORMATS = {
    "json": "report.json",
    "markdown": "report.md",
    "junit": "report.junit.xml",
    "html": "report.html",
}
TEMPLATE_FORMATS = ("markdown", "html")
JUNIT_SUITE = "gpu_fabric.mnnvl.verify"
NO_RACK = "-"  # the rack of a 0.1.0 record, which names none

PASSED, FAILED, INCOMPLETE, ERROR = "passed", "failed", "incomplete", "error"
OUTCOMES = (PASSED, FAILED, INCOMPLETE, ERROR)
VERDICTS = (PASSED, FAILED, ERROR)
SKIPPED = "skipped"  # a tray no check of the run blamed, and one skipped or none cleared

CELL_TEXT = {PASSED: "PASS", FAILED: "FAIL", INCOMPLETE: "INCOMPLETE", ERROR: "ERROR"}
NO_CELL = "\u2014"  # em dash: the check has no record for the rack
# A report lists this many pairs, GPUs or problems per check; report.json keeps them all.
LIST_LIMIT = 20
# A heatmap wider than this many GPUs shows colours only, the values in the tooltips.
COMPACT_HEATMAP = 16


@dataclass(frozen=True)
class RenderedFile:
    format: str
    name: str
    content: str


class ReportError(Exception):
    """The report cannot be rendered; the message says why and what to do."""


# ----------------------------------------------------------------------------------------- records


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
    return {
        "expected": expected if isinstance(expected, int) and not isinstance(expected, bool) and expected > 0 else 0,
        "found": _names(value.get("found")),
        "skipped": skipped,
    }


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
        source=source,
    )
    return record


def verdict_of(outcome: str, passed: bool) -> str:
    """A record's verdict: ``error`` when its check could not run or finish, else passed or failed."""
    if outcome == ERROR:
        return ERROR
    return PASSED if passed else FAILED


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


# ----------------------------------------------------------------------------------------- the report as data


def natural_key(text: str) -> tuple[tuple[int, Any], ...]:
    """rack2 before rack10, gb200-r0-t2 before gb200-r0-t10."""
    return tuple((1, int(part)) if part.isdigit() else (0, part) for part in re.split(r"(\d+)", str(text)))


def _check_key(check: str) -> tuple[int, str]:
    return (CHECK_ORDER.index(check) if check in CHECK_ORDER else len(CHECK_ORDER), check)


def _record_key(record: dict[str, Any]) -> tuple[Any, ...]:
    return (natural_key(record["rack"]), _check_key(record["check"]))


def _parse_time(value: Any) -> Optional[datetime]:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def duration_seconds(record: dict[str, Any]) -> Optional[float]:
    started, finished = _parse_time(record.get("started")), _parse_time(record.get("finished"))
    if started is None or finished is None:
        return None
    try:
        return round((finished - started).total_seconds(), 3)
    except TypeError:  # one aware and one naive timestamp
        return None


def cluster_of(records: list[dict[str, Any]]) -> dict[str, str]:
    """The API server the checks ran against, from the first record that names it."""
    for record in records:
        cluster = record.get("cluster")
        if isinstance(cluster, dict) and cluster.get("server_version") not in (None, "", "unknown"):
            return {key: str(value) for key, value in cluster.items() if value not in (None, "")}
    return {}


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _sorted_names(names: Iterable[str]) -> list[str]:
    return sorted(set(names), key=natural_key)


def _skip_entries(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per tray that some record skipped: its reasons and the checks that skipped it.

    A tray that one check measured and another skipped is not verified: the run did not cover it.
    """
    entries: dict[str, dict[str, Any]] = {}
    for record in records:
        for skip in record["trays"]["skipped"]:
            entry = entries.setdefault(skip["node"], {"node": skip["node"], "rack": record["rack"], "reasons": []})
            entry.setdefault("checks", []).append(record["check"])
            if skip["reason"] not in entry["reasons"]:
                entry["reasons"].append(skip["reason"])
    return [
        {"node": entry["node"], "rack": entry["rack"], "reason": "; ".join(entry["reasons"]), "checks": entry["checks"]}
        for entry in sorted(entries.values(), key=lambda item: natural_key(item["node"]))
    ]


def _tray_racks(records: list[dict[str, Any]]) -> dict[str, str]:
    """Every GPU tray the records name (found, measured or blamed) -> the rack of the first record naming it."""
    racks: dict[str, str] = {}
    for record in records:
        for node in [*record["trays"]["found"], *record["nodes"], *record["failed_nodes"]]:
            racks.setdefault(node, record["rack"])
    return racks


def coverage_of(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Which GPU trays the records found, which were verified, and which were skipped and why.

    A tray is verified when a record measured it and no record skipped it; a tray any record skipped
    is skipped, even when another record measured it. The rest were measured by none (unmeasured): a
    check that could not run (verdict error) measured nothing.
    """
    trays = _tray_racks(records)
    skipped = _skip_entries(records)
    skipped_nodes = {entry["node"] for entry in skipped}
    measured = {node for record in records if record["verdict"] != ERROR for node in record["nodes"]}
    verified = measured - skipped_nodes
    unmeasured = [node for node in trays if node not in verified and node not in skipped_nodes]
    return {
        "trays": _sorted_names(trays),
        "verified": _sorted_names(verified),
        "skipped": skipped,
        "unmeasured": _sorted_names(unmeasured),
        "counts": {
            "trays": len(trays),
            "verified": len(verified),
            "skipped": len(skipped),
            "unmeasured": len(unmeasured),
        },
    }


def _clears(record: dict[str, Any], node: str) -> bool:
    """Whether a record that measured ``node`` vouches for it.

    A record that passed does; so does a failed one that blamed other trays (a degraded pair on two
    trays says nothing against the other 16). A failure that names no tray vouches for none.
    """
    return record["passed"] or (bool(record["failed_nodes"]) and node not in record["failed_nodes"])


def _tray_summary(node: str, verdict: str, records: list[dict[str, Any]]) -> str:
    measured = [record for record in records if node in record["nodes"]]
    if verdict == FAILED:
        return "; ".join(
            f"{record['check']} failed: {record['node_problems'].get(node) or record['summary']}"
            for record in records
            if node in record["failed_nodes"]
        )
    if verdict == PASSED:
        missing = []
        for record in records:
            if node in record["nodes"]:
                continue
            reasons = [skip["reason"] for skip in record["trays"]["skipped"] if skip["node"] == node]
            if not reasons:
                reasons = [INCOMPLETE if record["outcome"] == INCOMPLETE else "not among its trays"]
            missing.append(f"{record['check']} ({reasons[0]})")
        text = "passed " + ", ".join(record["check"] for record in measured)
        return text + (f"; not measured by {', '.join(missing)}" if missing else "")
    could_not = [record["check"] for record in measured if record["verdict"] == ERROR]
    if could_not:
        return f"not verified: {', '.join(could_not)} could not run"
    doubtful = [record["check"] for record in measured if not _clears(record, node)]
    if doubtful:
        return f"not verified: {', '.join(doubtful)} failed without naming a tray"
    reasons = list(
        dict.fromkeys(
            skip["reason"] for record in records for skip in record["trays"]["skipped"] if skip["node"] == node
        )
    )
    if reasons:
        return f"skipped: {'; '.join(reasons)}"
    return "not measured by any check of this run"


def tray_verdicts(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """node -> {verdict, rack, checks_failed, checks_passed, summary}: the tray's worst verdict over the records.

    Failed when a record blames the tray; passed when records measured it, every one of them vouches
    for it and none skipped it; skipped otherwise (skipped by any record, even when another measured it;
    unmeasured; or measured by a failure that names no tray).
    """
    by_rack: dict[str, list[dict[str, Any]]] = {}
    for record in records:
        by_rack.setdefault(record["rack"], []).append(record)
    verdicts = {}
    for node, rack in sorted(_tray_racks(records).items(), key=lambda item: natural_key(item[0])):
        own = by_rack[rack]  # a tray is measured and blamed by the records of its rack
        measured = [record for record in own if node in record["nodes"]]
        checks_failed = [record["check"] for record in own if node in record["failed_nodes"]]
        skipped_by = [record for record in own if any(skip["node"] == node for skip in record["trays"]["skipped"])]
        if checks_failed:
            verdict = FAILED
        elif measured and not skipped_by and all(_clears(record, node) for record in measured):
            verdict = PASSED
        else:
            verdict = SKIPPED
        verdicts[node] = {
            "verdict": verdict,
            "rack": rack,
            "checks_failed": checks_failed,
            "checks_passed": [record["check"] for record in measured if record["passed"]],
            "summary": _tray_summary(node, verdict, own),
        }
    return verdicts


def rack_verdict(records: list[dict[str, Any]]) -> str:
    if any(record["verdict"] == FAILED for record in records):
        return FAILED
    if any(record["verdict"] == ERROR for record in records):
        return ERROR
    if any(record["outcome"] == INCOMPLETE for record in records):
        return INCOMPLETE
    return PASSED


def racks_of(records: list[dict[str, Any]], trays: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """rack -> its clique, the outcome of each check, and how many of its trays were verified."""
    by_rack: dict[str, list[dict[str, Any]]] = {}
    for record in records:
        by_rack.setdefault(record["rack"], []).append(record)
    racks = {}
    for rack, members in by_rack.items():
        coverage = coverage_of(members)
        counts = coverage["counts"]
        cliques = [record["clique"] for record in members if record["clique"]]
        racks[rack] = {
            "clique": cliques[0] if cliques else None,
            "verdict": rack_verdict(members),
            "checks": {record["check"]: record["outcome"] for record in members},
            "trays": {
                "expected": max(record["trays"]["expected"] for record in members),
                "found": counts["trays"],
                "verified": counts["verified"],
                "skipped": counts["skipped"],
                "unmeasured": counts["unmeasured"],
            },
            "skipped_trays": [{"node": entry["node"], "reason": entry["reason"]} for entry in coverage["skipped"]],
            "failed_trays": [
                node for node, tray in trays.items() if tray["rack"] == rack and tray["verdict"] == FAILED
            ],
        }
    return racks


def _entry(record: dict[str, Any]) -> dict[str, Any]:
    return {"check": record["check"], "rack": record["rack"], "summary": record["summary"]}


def _older(record: dict[str, Any]) -> dict[str, Any]:
    keys = ("check", "rack", "run_id", "outcome", "passed", "summary", "finished", "source")
    return {key: record.get(key) for key in keys}


def build_report(
    records: list[dict[str, Any]], title: str, run_id: str = "", trends: Optional[list[dict[str, Any]]] = None
) -> dict[str, Any]:
    """The report as data (what report.json holds); with ``run_id`` only that run's records count.

    ``trends``: per (check, rack) the figures of the last kept runs (``history.trends``); a drop against the
    baseline is flagged, it does not change the verdict (the check's own rule holds the rack to the baseline).
    """
    current = sorted((record for record in records if is_current(record, run_id)), key=_record_key)
    older = sorted((record for record in records if not is_current(record, run_id)), key=_record_key)
    trays = tray_verdicts(current)
    racks = racks_of(current, trays)
    failed = [record for record in current if record["verdict"] == FAILED]
    errors = [record for record in current if record["verdict"] == ERROR]
    incomplete = [record for record in current if record["outcome"] == INCOMPLETE and record["passed"]]
    finished = [record["finished"] for record in current if isinstance(record.get("finished"), str)]
    started = [record["started"] for record in current if isinstance(record.get("started"), str)]
    report = {
        "title": title,
        "run_id": run_id,
        "generated": max(finished) if finished else None,
        "started": min(started) if started else None,
        "cluster": cluster_of(current),
        "passed": bool(current) and not failed and not errors,
        "verdict": FAILED if failed else ERROR if errors or not current else PASSED,
        "totals": {
            "racks": len(racks),
            "checks": len(current),
            "passed": len(current) - len(failed) - len(errors),
            "failed": len(failed),
            "errors": len(errors),
            "incomplete": sum(1 for record in current if record["outcome"] == INCOMPLETE),
            "not_current": len(older),
        },
        "failed_checks": [_entry(record) for record in failed],
        "error_checks": [_entry(record) for record in errors],
        "incomplete_checks": [_entry(record) for record in incomplete],
        "checks": [dict(record, duration_seconds=duration_seconds(record)) for record in current],
        "not_current": [_older(record) for record in older],
        "racks": racks,
        "coverage": coverage_of(current),
        "trays": trays,
        "trends": list(trends or []),
    }
    report["summary"] = summary_line(report)
    return report


# ----------------------------------------------------------------------------------------- one-line texts


def _by_check(entries: list[dict[str, Any]]) -> str:
    """[{check, rack}] -> 'nvbandwidth (rack1, rack2), nccl (rack0)'."""
    racks: dict[str, list[str]] = {}
    for entry in entries:
        racks.setdefault(entry["check"], [])
        if entry["rack"] != NO_RACK:
            racks[entry["check"]].append(entry["rack"])
    return ", ".join(
        f"{check} ({', '.join(names)})" if names else check
        for check, names in sorted(racks.items(), key=lambda i: _check_key(i[0]))
    )


def verdict_words(report: dict[str, Any]) -> str:
    """'3 racks, 8 of 9 checks passed; failed: nvbandwidth (rack1); incomplete, allowed: nvbandwidth (rack0)'."""
    totals = report["totals"]
    if not totals["checks"]:
        return f"no check of run {report['run_id']} wrote a record" if report["run_id"] else "no record to report"
    words = [f"{plural(totals['racks'], 'rack')}, {totals['passed']} of {totals['checks']} checks passed"]
    if report["failed_checks"]:
        words.append(f"failed: {_by_check(report['failed_checks'])}")
    if report["error_checks"]:
        words.append(f"could not run (not a verdict on the fabric): {_by_check(report['error_checks'])}")
    if report["incomplete_checks"]:
        words.append(f"incomplete, allowed: {_by_check(report['incomplete_checks'])}")
    return "; ".join(words)


def coverage_words(coverage: dict[str, Any]) -> str:
    """'36 of 54 GPU trays verified; 18 skipped'."""
    counts = coverage["counts"]
    words = f"{counts['verified']} of {counts['trays']} GPU trays verified; {counts['skipped']} skipped"
    if counts["unmeasured"]:
        words += f"; {counts['unmeasured']} not measured by any check"
    return words


def summary_line(report: dict[str, Any]) -> str:
    verdict = report["verdict"].upper()
    return f"{verdict}: {verdict_words(report)}; {coverage_words(report['coverage'])}{drop_words(report)}"


def drop_words(report: dict[str, Any]) -> str:
    """``; <check> of rack0 dropped 14.6% below its baseline (pinned run r1)`` for each flagged trend."""
    drops = [row for row in report.get("trends") or [] if row.get("dropped")]
    return "".join(
        f"; {row['check']} of {row['rack']} dropped {100 * row['drop_fraction']:.1f}% below its baseline "
        f"({row['baseline_source']})"
        for row in drops
    )


def trend_view(report: dict[str, Any]) -> list[dict[str, str]]:
    """The trend table's rows, as text: figures in GB/s, the drop as a percentage, flagged rows marked."""
    rows = []
    for row in report.get("trends") or []:
        drop = row.get("drop_fraction")
        rows.append(
            {
                "check": row["check"],
                "rack": row["rack"],
                "runs": str(row["runs"]),
                "median": number(row.get("median_gbps")),
                "min": number(row.get("min_gbps")),
                "latest": number(row.get("latest_median_gbps")),
                "baseline": f"{number(row['baseline_median_gbps'])} ({row['baseline_source']})"
                if row.get("baseline_source")
                else "none yet",
                "drop": "-" if drop is None else f"{100 * drop:.1f}%" + (" DROP" if row.get("dropped") else ""),
                "css": "fail" if row.get("dropped") else "",
            }
        )
    return rows


def not_current_words(report: dict[str, Any]) -> str:
    """'nccl (record of run 20261124T083000Z-7c01)': the checks whose records are of other runs."""
    current_checks = {record["check"] for record in report["checks"]}
    by_check: dict[str, list[dict[str, Any]]] = {}
    for record in report["not_current"]:
        by_check.setdefault(record["check"], []).append(record)
    words = []
    for check in sorted(by_check, key=_check_key):
        older = by_check[check]
        runs = list(dict.fromkeys(record["run_id"] or "" for record in older))
        named = [run for run in runs if run]
        noun = "record" if len(older) == 1 else "records"
        where = f" on {', '.join(record['rack'] for record in older)}" if check in current_checks else ""
        if named:
            of = f"of run {named[0]}" if len(named) == 1 else f"of runs {', '.join(named)}"
            of += " and without a run id" if len(named) < len(runs) else ""
        else:
            of = "without a run id"
        words.append(f"{check}{where} ({noun} {of})")
    return ", ".join(words)


def _second(timestamp: str) -> str:
    """2026-12-01T10:01:02.500000Z -> 2026-12-01T10:01:02Z: a reader needs no microseconds."""
    return re.sub(r"\.\d+(?=Z$|[+-]\d\d:\d\d$)", "", timestamp)


def run_facts(report: dict[str, Any]) -> list[tuple[str, str]]:
    """The header of the Markdown and HTML reports: where, what was covered, which run, when."""
    facts = []
    cluster = report.get("cluster") or {}
    if cluster:
        where = cluster.get("host", "")
        version = cluster.get("server_version")
        facts.append(("cluster", f"{where} (Kubernetes {version})".strip() if version else where))
    facts.append(("coverage", coverage_words(report["coverage"])))
    if report.get("run_id"):
        facts.append(("run", report["run_id"]))
    if report.get("started") and report.get("generated"):
        facts.append(("checks ran", f"{_second(report['started'])} to {_second(report['generated'])}"))
    elif report.get("generated"):
        facts.append(("last check finished", _second(report["generated"])))
    if report["not_current"]:
        facts.append(("not run this time", not_current_words(report)))
    return facts


def render_json(report: dict[str, Any]) -> str:
    return json.dumps(report, indent=2, sort_keys=True) + "\n"


# ----------------------------------------------------------------------------------------- the view


def number(value: Any, digits: int = 2) -> str:
    if value is None:
        return "N/A"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{value:.{digits}f}"
    return str(value)


def _fraction(value: Any) -> str:
    return f"{value:g}" if isinstance(value, (int, float)) and not isinstance(value, bool) else ""


def binary_size(size: Any) -> str:
    """1073741824 -> '1 GiB': nccl-tests sizes are powers of two."""
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        return str(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or size % 1024 or unit == "GiB":
            return f"{size} {unit}"
        size //= 1024
    return str(size)


# details key -> label, in the order the facts of a check are listed; "min_mean_max" is one line of three keys
FACTS = (
    ("gpu_nodes", "GPU nodes"),
    ("testcase", "test"),
    ("benchmark", "benchmark"),
    ("args", "arguments"),
    ("gpu_product", "GPU product"),
    ("gpus_per_node", "GPUs per tray"),
    ("ranks", "ranks"),
    ("peak_gbps", "NVLink peak per direction (GB/s)"),
    ("min_fraction_of_peak", "fraction of the peak required"),
    ("min_fraction_of_median", "fraction of the strictest reference required"),
    ("threshold_gbps", "threshold (GB/s)"),
    ("median_gbps", "median (GB/s)"),
    ("reference", "strictest reference"),
    ("median_threshold_gbps", "reference rule (GB/s)"),
    ("min_mean_max", "min / mean / max (GB/s)"),
    ("sum", "SUM (GB/s)"),
    ("avg_busbw_gbps", "average bus bandwidth (GB/s)"),
    ("namespace", "namespace"),
    ("compute_domain", "ComputeDomain"),
    ("job", "MPIJob"),
    ("pod", "pod"),
    ("node", "node"),
    ("channel0", "channel0"),
)
FRACTIONS = ("min_fraction_of_peak", "min_fraction_of_median")


def _fact_text(key: str, value: Any) -> str:
    if isinstance(value, list):
        return ", ".join(str(item) for item in value)
    if key in FRACTIONS:
        return _fraction(value)
    if isinstance(value, float):
        return number(value)
    return str(value)


def trays_measured(record: dict[str, Any]) -> str:
    """'all 18 of the rack', '17 of 18, not gb200-r2-t7', or the trays themselves."""
    nodes, found = record["nodes"], record["trays"]["found"]
    missing = [node for node in found if node not in nodes]
    if not found or not set(nodes) <= set(found) or len(missing) > len(nodes):
        return f"{len(nodes)} ({', '.join(nodes)})"
    if not missing:
        return f"all {len(found)} of the rack"
    return f"{len(nodes)} of {len(found)}, not {', '.join(missing)}"


def check_facts(record: dict[str, Any]) -> list[dict[str, Any]]:
    """{label, text, code} describing what a check ran on and measured."""
    details = record.get("details") or {}
    facts = []
    if record.get("nodes"):
        facts.append(("trays measured", trays_measured(record)))
    for key, label in FACTS:
        if key == "min_mean_max":
            values = [details.get(name) for name in ("min", "mean", "max")]
            if any(isinstance(value, (int, float)) for value in values):
                facts.append((label, " / ".join(number(value) for value in values)))
            continue
        value = details.get(key)
        if key == "reference" and isinstance(value, dict) and isinstance(value.get("gbps"), (int, float)):
            facts.append(
                (label, f"{value.get('kind')} {value['gbps']:.2f} GB/s ({value.get('source') or 'no source'})")
            )
            continue
        if value in (None, "", []) or isinstance(value, (dict, bool)):
            continue
        text = _fact_text(key, value)
        if key == "threshold_gbps" and details.get("threshold_explanation"):
            text += f" ({details['threshold_explanation']})"
        facts.append((label, text))
    if isinstance(record.get("objects_left"), int):
        facts.append(("objects left behind", str(record["objects_left"])))
    # the ls line is quoted as it came (its spacing is part of it); other values fit on one line
    return [
        {
            "label": label,
            "text": text.replace("\n", " ") if label == "channel0" else one_line(text),
            "code": label == "channel0",
        }
        for label, text in facts
    ]


def gpu_placement(details: dict[str, Any], nodes: Optional[list[str]] = None) -> list[tuple[str, str]]:
    """Which tray holds which GPU ranks of the matrix: [("0-3", "gb200-r0-t0"), ...].

    ``details.rank_nodes`` (the tray of each MPI worker in rank order, as the check saw them placed) wins
    over ``nodes`` (the record's trays in name order), which the scheduler need not have followed.
    """
    nodes = details.get("rank_nodes") or nodes or details.get("nodes")
    per_node, matrix = details.get("gpus_per_node"), details.get("matrix")
    if not (isinstance(nodes, list) and isinstance(per_node, int) and per_node > 0 and isinstance(matrix, list)):
        return []
    if not nodes or len(nodes) * per_node != len(matrix):
        return []
    return [(f"{i * per_node}-{(i + 1) * per_node - 1}", str(node)) for i, node in enumerate(nodes)]


def node_of_gpu(details: dict[str, Any], gpu: int, nodes: Optional[list[str]] = None) -> Optional[str]:
    placement = gpu_placement(details, nodes)
    if not placement or not 0 <= gpu < len(details["matrix"]):
        return None
    return placement[gpu // details["gpus_per_node"]][1]


def _int(value: Any) -> Optional[int]:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def failing_cells(details: dict[str, Any]) -> set[tuple[int, int]]:
    cells = set()
    for pair in details.get("failing_pairs") or []:
        if isinstance(pair, dict) and _int(pair.get("src")) is not None and _int(pair.get("dst")) is not None:
            cells.add((pair["src"], pair["dst"]))
    return cells


def _pair_nodes(record: dict[str, Any], pair: dict[str, Any]) -> str:
    details = record["details"]
    src = pair.get("src_node") or (
        node_of_gpu(details, pair["src"], record["nodes"]) if _int(pair.get("src")) is not None else None
    )
    dst = pair.get("dst_node") or (
        node_of_gpu(details, pair["dst"], record["nodes"]) if _int(pair.get("dst")) is not None else None
    )
    return f"{src} -> {dst}" if src and dst else (src or dst or "")


def _pairs_view(record: dict[str, Any]) -> tuple[list[dict[str, str]], str]:
    """The failing pairs no low GPU explains (at most LIST_LIMIT), and a line about the ones not listed."""
    pairs = [pair for pair in record["details"].get("failing_pairs") or [] if isinstance(pair, dict)]
    own = [pair for pair in pairs if pair.get("low_gpu") is None]
    shown = own[:LIST_LIMIT]
    notes = []
    explained = len(pairs) - len(own)
    if explained:
        notes.append(f"{plural(explained, 'more failing pair')} involve the low GPUs above")
    if len(own) > len(shown):
        notes.append(f"{plural(len(own) - len(shown), 'more failing pair')} not listed here")
    note = "; ".join(notes) + ("; report.json lists every pair." if notes else "")
    rows = [
        {
            "src": str(pair.get("src")),
            "dst": str(pair.get("dst")),
            "gbps": number(pair.get("gbps")),
            "fraction": number(pair.get("fraction_of_median"), 3) if pair.get("fraction_of_median") is not None else "",
            "rule": str(pair.get("rule") or "threshold"),
            "nodes": _pair_nodes(record, pair),
        }
        for pair in shown
    ]
    return rows, note


def _low_gpus_view(details: dict[str, Any]) -> list[dict[str, str]]:
    return [
        {
            "gpu": str(gpu.get("gpu")),
            "node": str(gpu.get("node") or ""),
            "pairs": str(gpu.get("pairs", "")),
            "mean": number(gpu.get("mean_gbps")),
            "median": number(gpu.get("median_gbps")),
            "fraction": number(gpu.get("fraction_of_median"), 3),
        }
        for gpu in (details.get("low_gpus") or [])[:LIST_LIMIT]
        if isinstance(gpu, dict)
    ]


def _cliques_view(details: dict[str, Any]) -> list[dict[str, str]]:
    cliques = details.get("cliques")
    if not isinstance(cliques, dict) or not cliques:
        return []
    rows = [
        {"label": str(label), "nodes": ", ".join(str(node) for node in cliques[label])} for label in sorted(cliques)
    ]
    unlabelled = details.get("unlabelled_nodes") or []
    if unlabelled:
        rows.append({"label": "(no label)", "nodes": ", ".join(str(node) for node in unlabelled)})
    return rows


def _nccl_rows_view(details: dict[str, Any]) -> list[dict[str, str]]:
    rows = details.get("rows")
    if not isinstance(rows, list):
        return []
    return [
        {
            "size": binary_size(row.get("size_bytes")),
            "bytes": str(row.get("size_bytes")),
            "busbw": number(row.get("busbw_gbps")),
            "wrong": str(row.get("wrong", 0)),
        }
        for row in rows
        if isinstance(row, dict)
    ]


def heat_colour(value: float, low: float, high: float) -> str:
    """A red (low) to green (high) background for a matrix cell."""
    fraction = 1.0 if high <= low else max(0.0, min(1.0, (value - low) / (high - low)))
    return f"hsl({round(120 * fraction)}, 70%, 80%)"


def _gpu_title(gpu: int, node: Optional[str]) -> str:
    return f"GPU {gpu} on {node}" if node else f"GPU {gpu}"


def _pair_of(value: Any) -> Optional[tuple[int, int]]:
    """A row's [src, dst] GPU pair as ints, or None."""
    if isinstance(value, (list, tuple)) and len(value) == 2 and all(_int(v) is not None for v in value):
        return int(value[0]), int(value[1])
    return None


def heatmap_view(record: dict[str, Any]) -> Optional[dict[str, Any]]:
    """The bandwidth matrix as rows of cells: class, background and tooltip of each (None: no matrix)."""
    details = record["details"]
    matrix = details.get("matrix")
    if not isinstance(matrix, list) or not matrix or not all(isinstance(row, list) for row in matrix):
        return None
    failing = {
        (pair["src"], pair["dst"]): pair
        for pair in details.get("failing_pairs") or []
        if isinstance(pair, dict) and _int(pair.get("src")) is not None and _int(pair.get("dst")) is not None
    }
    numbers = [value for row in matrix for value in row if isinstance(value, (int, float))]
    high = max(numbers, default=0.0)
    threshold = details.get("threshold_gbps")
    low = min(numbers + ([threshold] if isinstance(threshold, (int, float)) else []), default=0.0)
    width = max(len(row) for row in matrix)
    unit = str(details.get("unit") or "GB/s")
    compact = width > COMPACT_HEATMAP
    nodes = record["nodes"]

    def node(gpu: int) -> Optional[str]:
        return node_of_gpu(details, gpu, nodes)

    # A matrix whose rows are GPU pairs (multinode_bisect_write_ce: N x 1) names each row's pair.
    pairs = details.get("row_pairs")
    paired = isinstance(pairs, list) and len(pairs) == len(matrix) and all(_pair_of(p) for p in pairs)

    rows = []
    for r, row in enumerate(matrix):
        cells = []
        for c, value in enumerate(row):
            src, dst = _pair_of(pairs[r]) if paired else (r, c)
            if not isinstance(value, (int, float)):
                cells.append(
                    {
                        "css": "na",
                        "style": "",
                        "text": "" if compact else "N/A",
                        "title": f"GPU {src} -> GPU {dst}: not measured",
                    }
                )
                continue
            pair = failing.get((src, dst))
            title = f"GPU {src} -> GPU {dst}: {value:.2f} {unit}"
            if pair is not None:
                where = f" ({node(src)} -> {node(dst)})" if node(src) and node(dst) else ""
                rule = f"fails the {pair['rule']} rule" if pair.get("rule") else "below the threshold"
                title = f"GPU {src} -> GPU {dst}{where}: {value:.2f} {unit} ({rule})"
            cells.append(
                {
                    "css": "cell-fail" if pair is not None else "cell-ok",
                    "style": f"background: {heat_colour(value, low, high)}",
                    "text": "" if compact else f"{value:.2f}",
                    "title": title,
                }
            )
        if paired:
            src, dst = _pair_of(pairs[r])
            rows.append(
                {"label": f"{src}->{dst}", "title": f"{_gpu_title(src, node(src))} writes to GPU {dst}", "cells": cells}
            )
        else:
            rows.append({"label": str(r), "title": _gpu_title(r, node(r)), "cells": cells})
    caption = (
        "Bisect: each GPU writes to the GPU half a rack away, all at once (row = writer -> target)"
        if paired
        else "Bandwidth matrix (row = source GPU, column = destination GPU)"
    )
    median_rule = details.get("median_threshold_gbps")
    if isinstance(threshold, (int, float)) and isinstance(median_rule, (int, float)):
        caption += f"; outlined cells are below the floor of {threshold:.2f} GB/s or the reference rule "
        caption += f"({median_rule:.2f} GB/s)"
    elif isinstance(threshold, (int, float)):
        caption += f"; outlined cells are below the threshold of {threshold:.2f} GB/s"
    if compact:
        caption += "; hover a cell for its value"
    placement = gpu_placement(details, nodes)
    if placement:
        caption += "; " + "; ".join(f"GPUs {ranks} on {tray}" for ranks, tray in placement)
    return {
        "css": "heatmap compact" if compact else "heatmap",
        "unit": unit,
        "caption": caption + ".",
        "columns": [{"label": str(gpu), "title": _gpu_title(gpu, node(gpu))} for gpu in range(width)],
        "rows": rows,
    }


def _anchor(*parts: str) -> str:
    return "-".join(re.sub(r"[^A-Za-z0-9_.-]+", "_", part) for part in parts)


def _result(record: dict[str, Any]) -> tuple[str, str]:
    """(text, CSS class) of a record's verdict."""
    text = CELL_TEXT[record["outcome"]]
    if record["verdict"] == ERROR:
        return text, "error"
    if not record["passed"]:
        return text, "fail"
    return text, "incomplete" if record["outcome"] == INCOMPLETE else "pass"


def section_view(record: dict[str, Any], heatmaps: bool) -> dict[str, Any]:
    details = record["details"]
    result, css = _result(record)
    # a violation that only repeats the summary says nothing new
    violations = [one_line(text) for text in details.get("violations") or [] if one_line(text) != record["summary"]]
    pairs, more_pairs = _pairs_view(record)
    more = len(violations) - LIST_LIMIT
    return {
        "check": record["check"],
        "anchor": _anchor(record["rack"], record["check"]),
        "result": result if record["outcome"] != INCOMPLETE or not record["passed"] else f"{result} (allowed)",
        "css": css,
        "summary": record["summary"],
        "facts": check_facts(record),
        "blamed": [
            {"node": node, "problem": record["node_problems"].get(node, "")}
            for node in sorted(record["failed_nodes"], key=natural_key)
        ],
        "violations": violations[:LIST_LIMIT],
        "more_violations": f"and {plural(more, 'more problem')} (report.json lists them all)" if more > 0 else "",
        "cliques": _cliques_view(details),
        "low_gpus": _low_gpus_view(details),
        "pairs": pairs,
        "more_pairs": more_pairs,
        "nccl_rows": _nccl_rows_view(details),
        "heatmap": heatmap_view(record) if heatmaps else None,
    }


def _tray_label(node: str, prefix: str) -> str:
    return node[len(prefix) :] or node


def _common_prefix(names: list[str]) -> str:
    """The prefix the trays of a rack share, up to its last separator: 'gb200-r0-' for gb200-r0-t0..t17."""
    if len(names) < 2:
        return ""
    first, last = min(names), max(names)
    length = next((i for i, (a, b) in enumerate(zip(first, last)) if a != b), min(len(first), len(last)))
    prefix = first[:length]
    cut = max(prefix.rfind(separator) for separator in "-._")
    return prefix[: cut + 1] if cut >= 0 else ""


def report_view(report: dict[str, Any], heatmaps: bool = True) -> dict[str, Any]:
    """Everything the templates show, as plain strings and lists."""
    checks = report["checks"]
    columns = sorted({record["check"] for record in checks}, key=_check_key)
    rack_names = sorted(report["racks"], key=natural_key)
    by_cell = {(record["rack"], record["check"]): record for record in checks}
    fleet_rows = []
    fleet_map = []
    racks = []
    for rack in rack_names:
        info = report["racks"][rack]
        cells = []
        for check in columns:
            record = by_cell.get((rack, check))
            if record is None:
                cells.append({"text": NO_CELL, "css": "none", "anchor": "", "title": f"no {check} record for {rack}"})
                continue
            text, css = _result(record)
            cells.append({"text": text, "css": css, "anchor": _anchor(rack, check), "title": record["summary"]})
        counts = info["trays"]
        total = max(counts["expected"], counts["found"])
        trays_text = f"{counts['verified']} of {total}"
        if counts["skipped"]:
            trays_text += f", {counts['skipped']} skipped"
        if counts["unmeasured"]:
            trays_text += f", {counts['unmeasured']} not measured"
        fleet_rows.append({"rack": rack, "anchor": _anchor(rack), "cells": cells, "trays": trays_text})

        nodes = [node for node, tray in report["trays"].items() if tray["rack"] == rack]
        prefix = _common_prefix(nodes)
        fleet_map.append(
            {
                "rack": rack,
                "anchor": _anchor(rack),
                "trays": [
                    {
                        "label": _tray_label(node, prefix),
                        "css": f"tray tray-{report['trays'][node]['verdict']}",
                        "title": f"{node}: {report['trays'][node]['summary']}",
                    }
                    for node in nodes
                ],
            }
        )
        headline = f"clique {info['clique']}" if info["clique"] else "no single clique"
        headline += f"; {counts['verified']} of {total} GPU trays verified"
        headline += f", {counts['skipped']} skipped" if counts["skipped"] else ""
        racks.append(
            {
                "rack": rack,
                "anchor": _anchor(rack),
                "headline": headline,
                "sections": [section_view(record, heatmaps) for record in checks if record["rack"] == rack],
            }
        )
    return {
        "title": report["title"],
        "verdict": report["verdict"].upper(),
        "verdict_css": {PASSED: "pass", FAILED: "fail", ERROR: "error"}[report["verdict"]],
        "verdict_words": verdict_words(report),
        "facts": [{"label": label, "text": text} for label, text in run_facts(report)],
        "columns": columns,
        "fleet_rows": fleet_rows,
        "fleet_map": fleet_map,
        "trends": trend_view(report),
        "racks": racks,
        "skipped": [
            {
                "node": entry["node"],
                "rack": entry["rack"],
                "reason": entry["reason"],
                "checks": ", ".join(entry["checks"]),
            }
            for entry in report["coverage"]["skipped"]
        ]
        + [
            {"node": node, "rack": report["trays"][node]["rack"], "reason": "not measured by any check", "checks": ""}
            for node in report["coverage"]["unmeasured"]
        ],
    }


# ----------------------------------------------------------------------------------------- Markdown and HTML

_MARKDOWN_TAG = re.compile(r"<(?=[A-Za-z/!?])")


def markdown_text(value: Any) -> str:
    """A value for one Markdown line or table cell: no line break, pipes and tag openers escaped."""
    if value is None:
        return ""
    text = str(value).replace("\r", " ").replace("\n", " ").replace("|", "\\|")
    return _MARKDOWN_TAG.sub("\\<", text)


def _environment(autoescape: bool) -> Any:
    if not HAS_JINJA2:
        raise ReportError(
            f"the Markdown and HTML reports need jinja2, which cannot be imported ({JINJA2_IMPORT_ERROR})"
        )
    return jinja2.Environment(
        autoescape=autoescape,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
        finalize=None if autoescape else markdown_text,
    )


def render_markdown(report: dict[str, Any]) -> str:
    return _environment(autoescape=False).from_string(MARKDOWN_TEMPLATE).render(report_view(report, heatmaps=False))


def render_html(report: dict[str, Any]) -> str:
    return _environment(autoescape=True).from_string(HTML_TEMPLATE).render(report_view(report, heatmaps=True))


# ----------------------------------------------------------------------------------------- JUnit XML

# Terminal escapes (colour, cursor) that log lines carry: dropped whole, so no "[0;31m" is left behind.
_TERMINAL_ESCAPE = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_])")
# What XML 1.0 cannot carry, not even as a character reference (its Char production): C0 controls but tab,
# line feed and carriage return; lone surrogates; U+FFFE and U+FFFF.
_NOT_XML_CHAR = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def xml_text(value: Any) -> str:
    """``value`` as text XML 1.0 can hold: terminal escapes removed, any other character outside XML 1.0
    written as ``\\xNN`` / ``\\uNNNN`` so the log line stays readable and the file stays parseable."""
    text = _TERMINAL_ESCAPE.sub("", str(value))
    return _NOT_XML_CHAR.sub(lambda match: ascii(match.group())[1:-1], text)


def _xml_safe(root: ET.Element) -> ET.Element:
    """Every text, tail and attribute of ``root``'s tree made XML 1.0 text: the one rule for all of them,
    so a CI server that parses the file strictly never drops it for one control character of a log line."""
    for element in root.iter():
        if element.text is not None:
            element.text = xml_text(element.text)
        if element.tail is not None:
            element.tail = xml_text(element.tail)
        for key, value in list(element.attrib.items()):
            element.attrib[key] = xml_text(value)
    return root


def _failure_text(record: dict[str, Any]) -> str:
    details = record.get("details") or {}
    lines = [record["summary"]]
    lines.extend(
        f"{node}: {record['node_problems'][node]}"
        for node in sorted(record["failed_nodes"], key=natural_key)
        if node in record["node_problems"]
    )
    lines.extend(str(violation) for violation in details.get("violations") or [])
    return "\n".join(lines)


def _system_out(record: dict[str, Any]) -> str:
    """The record's details for the CI system, without the matrix (report.json has it)."""
    details = {key: value for key, value in (record.get("details") or {}).items() if key != "matrix"}
    facts = {key: record.get(key) for key in ("nodes", "failed_nodes", "node_problems", "trays", "run_id", "source")}
    return json.dumps(dict(facts, details=details), indent=2, sort_keys=True)


def render_junit(report: dict[str, Any]) -> str:
    """One test case per (check, rack): classname gpu_fabric.<check>, name <rack>."""
    totals = report["totals"]
    checks = report["checks"]
    skipped = [record for record in checks if record["passed"] and record["outcome"] == INCOMPLETE]
    total_time = sum(record.get("duration_seconds") or 0.0 for record in checks)
    counts = {
        "tests": str(totals["checks"]),
        "failures": str(totals["failed"]),
        "errors": str(totals["errors"]),
        "skipped": str(len(skipped)),
        "time": f"{total_time:.3f}",
    }
    suites = ET.Element("testsuites", {"name": report["title"], **counts})
    suite_attributes = {"name": JUNIT_SUITE, **counts}
    if report.get("generated"):
        suite_attributes["timestamp"] = report["generated"]
    suite = ET.SubElement(suites, "testsuite", suite_attributes)
    for record in checks:
        case = ET.SubElement(
            suite,
            "testcase",
            {
                "classname": f"gpu_fabric.{record['check']}",
                "name": record["rack"],
                "time": f"{record.get('duration_seconds') or 0.0:.3f}",
            },
        )
        if record["verdict"] == ERROR:  # the check could not run: a CI system shows it apart from failures
            error = ET.SubElement(case, "error", {"message": record["summary"], "type": "VerificationError"})
            error.text = _failure_text(record)
        elif not record["passed"]:
            kind = "VerificationIncomplete" if record["outcome"] == INCOMPLETE else "VerificationFailed"
            failure = ET.SubElement(case, "failure", {"message": record["summary"], "type": kind})
            failure.text = _failure_text(record)
        elif record["outcome"] == INCOMPLETE:
            ET.SubElement(case, "skipped", {"message": record["summary"]})
        out = ET.SubElement(case, "system-out")
        out.text = _system_out(record)
    ET.indent(_xml_safe(suites))
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"


RENDERERS = {
    "json": render_json,
    "markdown": render_markdown,
    "junit": render_junit,
    "html": render_html,
}


def render_report(report: dict[str, Any], formats: list[str]) -> list[RenderedFile]:
    return [RenderedFile(format=fmt, name=FORMATS[fmt], content=RENDERERS[fmt](report)) for fmt in formats]
