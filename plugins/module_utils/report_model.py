# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The fleet as the records of one run show it: the report as data, what ``report.json`` holds.

``build_report`` takes the records (``report_records``) and gives each GPU tray its verdict
(``tray_verdicts``), each rack its verdict and the counts of its trays (``racks_of``), the fleet its
coverage (``coverage_of``) and one verdict with its summary line (``summary_line``). A fabric failure
wins over an error in the report's verdict. Records of other runs are left out of the verdict and only
named. ``due_next`` orders the trays by when each is due for its next verification. The views the
templates render (``report_page``) and the files (``report_render``) are built from this data alone.
"""

from __future__ import annotations

from typing import Any, Iterable, Optional

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.check_catalog import CHECK_NAMES, check_key
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.history import first_time
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.outcomes import ERROR, FAILED, INCOMPLETE, PASSED
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.rack_plan import is_selection_skip
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.report_records import NO_RACK, is_current
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.text import natural_key, plural
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.times import parse_time, rfc3339
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.tray_state import DEFAULT_VALID_HOURS, valid_until

# The checks in the order the report lists them (the catalog's, which the registry follows); a check not named
# there comes after them, by name (check_key).
CHECK_ORDER = CHECK_NAMES
SKIPPED = "skipped"  # a tray no check of the run blamed, and one skipped or none cleared


def _record_key(record: dict[str, Any]) -> tuple[Any, ...]:
    return (natural_key(record["rack"]), check_key(record["check"]))


def duration_seconds(record: dict[str, Any]) -> Optional[float]:
    started, finished = parse_time(record.get("started")), parse_time(record.get("finished"))
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


def _missing_entries(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The trays gpu_fabric_racks declares that no record found: [{node, rack, reason}], once each, by name."""
    entries: dict[str, dict[str, Any]] = {}
    for record in records:
        for entry in record["trays"].get("missing") or []:
            entries.setdefault(
                entry["node"], {"node": entry["node"], "rack": record["rack"], "reason": entry["reason"]}
            )
    return [entries[node] for node in _sorted_names(entries)]


def _rack_counts(records: list[dict[str, Any]], named_missing: list[dict[str, Any]]) -> tuple[int, int]:
    """(declared, unnamed missing) over the racks of ``records``: a rack declares the trays gpu_fabric_racks lists,
    else ``gpu_fabric_trays_per_clique`` (0: it declares none); the trays it expects beyond those found and those
    missing by name are missing without a name."""
    by_rack: dict[str, list[dict[str, Any]]] = {}
    for record in records:
        by_rack.setdefault(record["rack"], []).append(record)
    declared = unnamed = 0
    for rack, members in by_rack.items():
        names = {node for record in members for node in record["trays"].get("declared") or []}
        expected = max(record["trays"]["expected"] for record in members)
        found = {node for record in members for node in record["trays"]["found"]}
        missing = sum(1 for entry in named_missing if entry["rack"] == rack)
        declared += len(names) or expected
        unnamed += max(0, expected - len(found) - missing)
    return declared, unnamed


def coverage_of(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Every GPU tray the records account for, each once: verified, failed, skipped with its reasons, not verified,
    not measured, or missing (declared in gpu_fabric_racks, no GPU Node) with its reason.

    ``verified`` and ``failed`` are the trays' own verdicts (``tray_verdicts``: passed, failed), so the coverage,
    the trays' state and the summary line count alike. Of the other trays, one a record skipped is ``skipped``;
    one a check measured without vouching for it (a failure naming no tray) is ``unverified``; the rest were
    measured by none (``unmeasured``: a check that could not run measured nothing). The counts add up to
    ``trays``: the trays found or skipped plus the missing ones, named or (fewer trays than
    ``gpu_fabric_trays_per_clique``) not.
    """
    verdicts = tray_verdicts(records)
    found = _sorted_names(node for record in records for node in record["trays"]["found"])
    verified = [node for node, tray in verdicts.items() if tray["verdict"] == PASSED]
    failed = [node for node, tray in verdicts.items() if tray["verdict"] == FAILED]
    judged = set(verified) | set(failed)
    skipped = [entry for entry in _skip_entries(records) if entry["node"] not in judged]
    skipped_nodes = {entry["node"] for entry in skipped}
    measured = {node for record in records if record["verdict"] != ERROR for node in record["nodes"]}
    rest = [node for node in verdicts if node not in judged and node not in skipped_nodes]
    unverified = [node for node in rest if node in measured]
    unmeasured = [node for node in rest if node not in measured]
    missing = _missing_entries(records)
    declared, unnamed = _rack_counts(records, missing)
    trays = _sorted_names([*verdicts, *skipped_nodes])
    return {
        "trays": trays,
        "verified": _sorted_names(verified),
        "failed": _sorted_names(failed),
        "skipped": skipped,
        "unverified": _sorted_names(unverified),
        "unmeasured": _sorted_names(unmeasured),
        "missing": missing,
        "counts": {
            "trays": len(trays) + len(missing) + unnamed,
            "declared": declared,
            "found": len(found),
            "verified": len(verified),
            "failed": len(failed),
            "skipped": len(skipped),
            "unverified": len(unverified),
            "unmeasured": len(unmeasured),
            "missing": len(missing) + unnamed,
        },
    }


def _clears(record: dict[str, Any], node: str) -> bool:
    """Whether a record that measured ``node`` vouches for it.

    A record that passed does; so does a failed one that blamed other trays (a degraded pair on two
    trays says nothing against the other 16), or that names as its problem a tray gpu_fabric_racks declares and
    the cluster lacks (``node_problems`` of a ``trays.missing`` tray: the clique check whose only finding is that
    tray). A failure that names no tray vouches for none.
    """
    missing = {entry["node"] for entry in record["trays"].get("missing") or []}
    names_its_failure = bool(record["failed_nodes"]) or bool(missing & set(record["node_problems"]))
    return record["passed"] or (names_its_failure and node not in record["failed_nodes"])


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


def _check_outcomes(node: str, records: list[dict[str, Any]]) -> dict[str, dict[str, str]]:
    """check -> what its record of this run said of the tray: ``failed`` (with the record's words on the tray),
    ``skipped`` (with the reason), ``passed`` (measured and vouched for, ``_clears``); a check that measured the
    tray without a verdict on it (an error, a failure naming no tray) is left out."""
    outcomes: dict[str, dict[str, str]] = {}
    for record in records:
        reasons = [skip["reason"] for skip in record["trays"]["skipped"] if skip["node"] == node]
        if node in record["failed_nodes"]:
            summary = record["node_problems"].get(node) or record["summary"]
            outcomes[record["check"]] = {"outcome": FAILED, "summary": summary}
        elif reasons:
            outcomes[record["check"]] = {"outcome": SKIPPED, "reason": "; ".join(dict.fromkeys(reasons))}
        elif node in record["nodes"] and record["verdict"] != ERROR and _clears(record, node):
            outcomes[record["check"]] = {"outcome": PASSED}
    return outcomes


def tray_verdicts(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """node -> {verdict, rack, checks_failed, checks_passed, summary, skip_reasons, checks}: the tray's worst verdict,
    and per check what this run's record said of the tray (``checks``: ``_check_outcomes``, which ``node_verdict``
    merges into the tray's per-check state).

    Failed when a record blames the tray; passed when records measured it, every one of them vouches
    for it and none skipped it; skipped otherwise (skipped by any record, even when another measured it;
    unmeasured; or measured by a failure that names no tray). ``skip_reasons``: the reasons the records skipped the
    tray for, each once (empty unless a record skipped it), for ``node_verdict`` to tell a skip for the tray's own
    state from one the run chose (``rack_plan.is_selection_skip``).
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
        skip_reasons = [skip["reason"] for record in own for skip in record["trays"]["skipped"] if skip["node"] == node]
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
            "skip_reasons": list(dict.fromkeys(skip_reasons)),
            "checks": _check_outcomes(node, own),
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
            "trays": dict(counts, expected=max(record["trays"]["expected"] for record in members)),
            "skipped_trays": [{"node": entry["node"], "reason": entry["reason"]} for entry in coverage["skipped"]],
            "missing_trays": [{"node": entry["node"], "reason": entry["reason"]} for entry in coverage["missing"]],
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


# The order of due_next: what this run found due, then what it verified, then what it left to the Nodes' verdicts.
DUE_SKIPPED, DUE_FAILED, DUE_VERIFIED, DUE_NOT_THIS_RUN = range(4)


def due_next(
    records: list[dict[str, Any]], trays: dict[str, dict[str, Any]], finished: Optional[str], valid_hours: float
) -> list[dict[str, Any]]:
    """Every tray of the run by when it is due for its next verification: [{node, rack, due, reason, verdict}].

    First the trays the run skipped for their state or could not verify (due at the run's finish, ``due``, with
    the reason), then the failed ones (due then too), then the verified ones by the end of their verdict's
    validity, the run's finish plus ``valid_hours`` (``tray_state.valid_until``, as the verdict written to the
    Node holds), and last the trays the run chose to leave (``rack_plan.is_selection_skip``: not selected, not
    due), of which the run knows nothing new (``due`` null: their Node's verdict says when). Without a finish
    time ``due`` is null.
    """
    finish = parse_time(finished)
    now = rfc3339(finish) if finish else None
    reasons: dict[str, list[str]] = {}
    for record in records:
        for skip in record["trays"]["skipped"]:
            reasons.setdefault(skip["node"], []).append(str(skip["reason"]))
    entries = []
    for node, tray in trays.items():
        own = list(dict.fromkeys(reasons.get(node, [])))
        state = [reason for reason in own if not is_selection_skip(reason)]
        if tray["verdict"] == PASSED:
            rank, due = DUE_VERIFIED, rfc3339(valid_until(finish, valid_hours)) if finish else None
            reason = tray["summary"]
        elif tray["verdict"] == FAILED:
            rank, due, reason = DUE_FAILED, now, tray["summary"]
        elif own and not state:
            rank, due, reason = DUE_NOT_THIS_RUN, None, f"not verified by this run: {'; '.join(own)}"
        else:
            rank, due = DUE_SKIPPED, now
            reason = f"skipped: {'; '.join(state)}" if state else tray["summary"]
        entries.append(
            (rank, due or "", natural_key(node), {"node": node, "rack": tray["rack"], "due": due, "reason": reason})
        )
    return [
        dict(entry, verdict=trays[entry["node"]]["verdict"])
        for _rank, _due, _key, entry in sorted(entries, key=lambda item: item[:3])
    ]


def build_report(
    records: list[dict[str, Any]],
    title: str,
    run_id: str = "",
    trends: Optional[list[dict[str, Any]]] = None,
    valid_hours: float = DEFAULT_VALID_HOURS,
) -> dict[str, Any]:
    """The report as data (what report.json holds); with ``run_id`` only that run's records count.

    ``trends``: per (check, rack) the figures of the last kept runs (``history_trends.trends``); a drop against the
    baseline is flagged, it does not change the verdict (the check's own rule holds the rack to the baseline).
    ``valid_hours``: how long a verdict holds after the run (``due``: ``due_next``).
    """
    current = sorted((record for record in records if is_current(record, run_id)), key=_record_key)
    older = sorted((record for record in records if not is_current(record, run_id)), key=_record_key)
    trays = tray_verdicts(current)
    racks = racks_of(current, trays)
    failed = [record for record in current if record["verdict"] == FAILED]
    errors = [record for record in current if record["verdict"] == ERROR]
    incomplete = [record for record in current if record["outcome"] == INCOMPLETE and record["passed"]]
    # by the instants they name: a record written in another time zone gives the run's true start and end
    finished = first_time([record.get("finished") for record in current], latest=True)
    started = first_time([record.get("started") for record in current])
    report = {
        "title": title,
        "run_id": run_id,
        "generated": finished,
        "started": started,
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
        "valid_hours": valid_hours,
        "due": due_next(current, trays, finished, valid_hours),
    }
    report["summary"] = summary_line(report)
    return report


# ----------------------------------------------------------------------------------------- the summary line


def _by_check(entries: list[dict[str, Any]]) -> str:
    """[{check, rack}] -> 'nvbandwidth (rack1, rack2), nccl (rack0)'."""
    racks: dict[str, list[str]] = {}
    for entry in entries:
        racks.setdefault(entry["check"], [])
        if entry["rack"] != NO_RACK:
            racks[entry["check"]].append(entry["rack"])
    return ", ".join(
        f"{check} ({', '.join(names)})" if names else check
        for check, names in sorted(racks.items(), key=lambda i: check_key(i[0]))
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


MISSING_NAMED = 5  # the summary line names this many missing trays; report.json lists them all


def coverage_words(coverage: dict[str, Any]) -> str:
    """'35 of 54 GPU trays verified; 18 skipped; 1 failed', with the trays declared and found when they differ, and
    the missing ones by name: '17 of 18 GPU trays verified (18 declared, 17 found); 0 skipped; 1 missing
    (gb200-r1-t17)'."""
    counts = coverage["counts"]
    words = f"{counts['verified']} of {counts['trays']} GPU trays verified"
    if counts.get("declared") and (counts["declared"] != counts["found"] or counts["missing"]):
        words += f" ({counts['declared']} declared, {counts['found']} found)"
    words += f"; {counts['skipped']} skipped"
    if counts.get("failed"):
        words += f"; {counts['failed']} failed"
    if counts.get("missing"):
        names = [entry["node"] for entry in coverage.get("missing") or []]
        shown = names[:MISSING_NAMED] + ([f"{len(names) - MISSING_NAMED} more"] if len(names) > MISSING_NAMED else [])
        unnamed = counts["missing"] - len(names)
        if unnamed:
            shown.append(f"{unnamed} unnamed: fewer GPU trays than gpu_fabric_trays_per_clique")
        words += f"; {counts['missing']} missing ({', '.join(shown)})"
    if counts.get("unverified"):
        words += f"; {counts['unverified']} measured, not verified (a check failed naming no tray, or could not run)"
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
