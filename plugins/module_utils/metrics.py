# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The verification report as Prometheus metrics: the text exposition format 0.0.4.

``metric_families`` turns the report (``report_model.build_report``) and the last passing run of each rack
(``last_passes``, from the kept history's index) into families of samples; ``render`` writes them as text, as
node-exporter's textfile collector and the Pushgateway read it: ``# HELP`` and ``# TYPE`` once per family,
label values escaped, samples in a fixed order, no timestamps (the textfile collector refuses them).

Units are base units, as Prometheus names them: seconds, and bandwidth in bytes per second (the records' GB/s
are nvbandwidth's and nccl-tests' decimal gigabytes, 10^9 bytes). A figure that was not measured has no sample:
never a 0 that means "unknown".
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Set, Tuple

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.history import (
    newest_first,
    read_index,
    valid_runs,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.metrics_figures import (
    bytes_per_second,
    is_bandwidth,
    timestamp_seconds,
    tray_bandwidth,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.outcomes import (
    ERROR,
    FAILED,
    INCOMPLETE,
    PASSED,
    VERDICTS,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.report_model import (
    SKIPPED,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.text import natural_key

PREFIX = "gpu_fabric_"
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
RACK_VERDICTS = (PASSED, INCOMPLETE, FAILED, ERROR)  # report_model.rack_verdict's values
TRAY_VERDICTS = (PASSED, FAILED, SKIPPED)


@dataclass
class Family:
    """One metric family: its name, type, help line, label names and samples (label values -> value)."""

    name: str
    kind: str  # gauge (every family here: each is the state of the last run)
    help: str
    labels: Tuple[str, ...]
    samples: Dict[Tuple[str, ...], float] = field(default_factory=dict)

    def add(self, value: Optional[float], **labels: Any) -> None:
        """A sample; none when ``value`` is None (not measured) or not a finite number."""
        if value is None or isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            return
        self.samples[tuple(str(labels[name]) for name in self.labels)] = value


# ----------------------------------------------------------------------------------------- the text format


def escape_label_value(value: str) -> str:
    """A label value as the text format quotes it: backslash, double quote and newline escaped."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def escape_help(text: str) -> str:
    """A HELP line's text: backslash and newline escaped."""
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def format_value(value: float) -> str:
    """An integer as one (bytes per second, 1/0), any other float as Python's shortest exact form."""
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer() and abs(value) < 2**53):
        return str(int(value))
    return repr(float(value))


def _sample_key(item: Tuple[Tuple[str, ...], float]) -> Tuple[Any, ...]:
    return tuple(natural_key(value) for value in item[0])


def render(families: Iterable[Family]) -> str:
    """The families as the text exposition format 0.0.4; a family without a sample is left out."""
    lines: List[str] = []
    for family in families:
        if not family.samples:
            continue
        lines.append(f"# HELP {family.name} {escape_help(family.help)}")
        lines.append(f"# TYPE {family.name} {family.kind}")
        for values, value in sorted(family.samples.items(), key=_sample_key):
            labels = ",".join(f'{name}="{escape_label_value(text)}"' for name, text in zip(family.labels, values))
            lines.append(
                f"{family.name}{{{labels}}} {format_value(value)}" if labels else f"{family.name} {format_value(value)}"
            )
    return "\n".join(lines) + "\n" if lines else ""


# ----------------------------------------------------------------------------------------- the last pass


def rack_passed(verdicts: Iterable[str]) -> bool:
    """Whether a rack passed in a run: it has verdicts and every one is ``passed`` (an allowed incomplete is)."""
    found = list(verdicts)
    return bool(found) and all(verdict == PASSED for verdict in found)


def last_passes(index: Mapping[str, Any]) -> Dict[str, float]:
    """rack -> Unix time of the newest kept run in which the rack passed (its end, else its start).

    ``index``: the history's index (``history.read_index``); a run's verdicts are ``<check>/<rack>: verdict``; an
    entry that is no history entry (``history.valid_runs``) is passed over.
    """
    found: Dict[str, float] = {}
    for entry in newest_first(valid_runs(index)):
        by_rack: Dict[str, List[str]] = {}
        for key, verdict in (entry.get("verdicts") or {}).items():
            if isinstance(key, str) and "/" in key:
                by_rack.setdefault(key.split("/", 1)[1], []).append(str(verdict))
        when = timestamp_seconds(entry.get("finished")) or timestamp_seconds(entry.get("started"))
        for rack, verdicts in by_rack.items():
            if when is not None and rack_passed(verdicts):
                found[rack] = max(found.get(rack, when), when)
    return found


def history_last_passes(history_dir: str, warnings: Optional[List[str]] = None) -> Dict[str, float]:
    """``last_passes`` of the history in ``history_dir``; empty without one. An index that cannot be read is
    rebuilt from the run directories (``history.read_index``, a line in ``warnings``); HistoryError when those
    cannot be read either."""
    if not history_dir or not os.path.isdir(history_dir):
        return {}
    return last_passes(read_index(history_dir, warnings))


def current_passes(report: Mapping[str, Any]) -> Dict[str, float]:
    """rack -> the end of this run, for each rack that passed in it (every record's verdict ``passed``)."""
    when = timestamp_seconds(report.get("generated"))
    if when is None:
        return {}
    by_rack: Dict[str, List[str]] = {}
    for record in report.get("checks") or []:
        by_rack.setdefault(record["rack"], []).append(record["verdict"])
    return {rack: when for rack, verdicts in by_rack.items() if rack_passed(verdicts)}


# ----------------------------------------------------------------------------------------- the last known verdict

# record.FLEET's name: the rack of the records of a run whose API server answered for no rack (a test ties the two;
# a reader does not import the runner). It names no rack, so it is never a rack's last known verdict.
NO_RACK_REACHED = "fleet"
CHECK_VERDICTS = (PASSED, FAILED)  # what a check's last verdict can be: an error said nothing of the fabric
UNVERIFIED = "unverified"  # a rack whose required checks have not all given a verdict
LAST_VERDICTS = (PASSED, FAILED, UNVERIFIED)


def newest_verdicts(*sources: Mapping[str, Tuple[str, float]]) -> Dict[str, Tuple[str, float]]:
    """key -> (verdict, Unix time): per key the newest of ``sources`` (the later source wins a tie)."""
    found: Dict[str, Tuple[str, float]] = {}
    for source in sources:
        for key, (verdict, when) in source.items():
            if key not in found or when >= found[key][1]:
                found[key] = (verdict, when)
    return found


def latest_passes(*sources: Mapping[str, float]) -> Dict[str, float]:
    """rack -> the latest of its last-pass times in ``sources``."""
    found: Dict[str, float] = {}
    for source in sources:
        for rack, when in source.items():
            found[rack] = max(found.get(rack, when), when)
    return found


def _judged_checks(verdicts: Any, when: float) -> Dict[str, Tuple[str, float]]:
    """``{"<check>/<rack>": verdict}`` -> the same keys with (verdict, ``when``) for each check that gave a verdict
    (``CHECK_VERDICTS``) on a rack (not ``NO_RACK_REACHED``)."""
    return {
        key: (str(verdict), when)
        for key, verdict in (verdicts if isinstance(verdicts, dict) else {}).items()
        if isinstance(key, str) and "/" in key
        and key.split("/", 1)[1] != NO_RACK_REACHED
        and verdict in CHECK_VERDICTS
    }  # fmt: skip


def last_check_verdicts(index: Mapping[str, Any]) -> Dict[str, Tuple[str, float]]:
    """``<check>/<rack>`` -> (verdict, Unix time) of the newest kept run in which that check gave a verdict on that
    rack (a check that could not run does not count), the time being the run's end, else its start."""
    found: Dict[str, Tuple[str, float]] = {}
    for entry in valid_runs(index):
        when = timestamp_seconds(entry.get("finished"))
        when = timestamp_seconds(entry.get("started")) if when is None else when
        if when is not None:
            found = newest_verdicts(found, _judged_checks(entry.get("verdicts"), when))
    return found


def history_last_check_verdicts(history_dir: str, warnings: Optional[List[str]] = None) -> Dict[str, Tuple[str, float]]:
    """``last_check_verdicts`` of the history in ``history_dir``; empty without one. An index that had to be rebuilt
    from the run directories adds a line to ``warnings``; HistoryError when it cannot be (``history.read_index``)."""
    if not history_dir or not os.path.isdir(history_dir):
        return {}
    return last_check_verdicts(read_index(history_dir, warnings))


def current_check_verdicts(report: Mapping[str, Any]) -> Dict[str, Tuple[str, float]]:
    """``<check>/<rack>`` -> (verdict, the end of this run), for each check that gave a verdict on a rack here."""
    when = timestamp_seconds(report.get("generated"))
    if when is None:
        return {}
    return _judged_checks({f"{r['check']}/{r['rack']}": r["verdict"] for r in report.get("checks") or []}, when)


@dataclass(frozen=True)
class RackLastVerdict:
    """A rack's last verdict over its checks' last verdicts: ``verdict`` (``LAST_VERDICTS``), when the newest of
    the verdicts it stands on was given, and the required checks without a verdict (``missing``)."""

    verdict: str
    time: Optional[float]
    missing: Tuple[str, ...] = ()


def rack_last_verdicts(
    check_verdicts: Mapping[str, Tuple[str, float]], required: Sequence[str] = (), racks: Iterable[str] = ()
) -> Dict[str, RackLastVerdict]:
    """rack -> its last verdict from each check's last verdict on it (``last_check_verdicts``): ``failed`` when a
    check's last verdict on it failed; ``passed`` only when every check of ``required`` (the site's
    ``gpu_fabric_verify_required_checks``; empty: every check that judged the rack) passed in the newest run that
    judged it; else ``unverified``, naming the required checks that gave no verdict. A run of some checks only
    (``--tags cliques``) cannot pass a rack whose nvbandwidth never ran. ``racks``: racks to account for though no
    check judged them (the declared racks): ``unverified`` with every required check missing."""
    by_rack: Dict[str, Dict[str, Tuple[str, float]]] = {rack: {} for rack in racks}
    for key, found in check_verdicts.items():
        if "/" in key:
            check, rack = key.split("/", 1)
            by_rack.setdefault(rack, {})[check] = found
    result: Dict[str, RackLastVerdict] = {}
    for rack, checks in by_rack.items():
        needed = list(required) or sorted(checks)
        if not needed:
            continue
        failed = [when for verdict, when in checks.values() if verdict == FAILED]
        if failed:
            result[rack] = RackLastVerdict(FAILED, max(failed))
            continue
        missing = tuple(check for check in needed if check not in checks)
        times = [checks[check][1] for check in needed if check in checks]
        if missing:
            result[rack] = RackLastVerdict(UNVERIFIED, max(times) if times else None, missing)
        else:
            result[rack] = RackLastVerdict(PASSED, max(times))
    return result


RACK_VERDICT_ORDER = (PASSED, INCOMPLETE, ERROR, FAILED)  # report_model.rack_verdict: the later one wins


def worse_verdict(first: str, second: str) -> str:
    """The rack verdict of two sets of records together, as ``report_model.rack_verdict`` ranks them."""
    rank = {verdict: position for position, verdict in enumerate(RACK_VERDICT_ORDER)}
    return first if rank.get(first, len(rank)) >= rank.get(second, len(rank)) else second


def racks_in(report: Mapping[str, Any], declared: Sequence[str], known: Iterable[str]) -> List[str]:
    """The racks a record of the rack ``NO_RACK_REACHED`` speaks for: the declared racks (``gpu_fabric_racks``),
    else the racks the kept history and this run know; empty when none is known (the record stays the fleet's)."""
    if declared:
        return sorted({str(rack) for rack in declared}, key=natural_key)
    reached = set(report.get("racks") or {}) | set(known)
    return sorted(reached - {NO_RACK_REACHED}, key=natural_key)


# ----------------------------------------------------------------------------------------- the families


def _name(suffix: str) -> str:
    return PREFIX + suffix


def _gauge(suffix: str, help_text: str, *labels: str) -> Family:
    return Family(_name(suffix), "gauge", help_text, labels)


def metric_families(
    report: Mapping[str, Any],
    last_pass: Optional[Mapping[str, float]] = None,
    check_verdict: Optional[Mapping[str, Tuple[str, float]]] = None,
    declared: Sequence[str] = (),
    required: Sequence[str] = (),
) -> List[Family]:
    """The report's metrics, in a fixed order (see docs/metrics.md for each).

    ``last_pass``: rack -> Unix time of its newest passing run in the kept history (``history_last_passes``);
    ``check_verdict``: ``<check>/<rack>`` -> (verdict, Unix time) of the newest run in which the check judged the
    rack (``history_last_check_verdicts``); the report's own run counts in both. ``declared``: the site's racks
    (``gpu_fabric_racks``): a record of a run that reached no rack (``NO_RACK_REACHED``) gives its error to each of
    them (without any: to each rack the history knows), so the racks' samples stay, and the last-known families show
    the declared racks and this run's only. ``required``: the checks a rack's last verdict needs passed
    (``rack_last_verdicts``).
    """
    passes = latest_passes(last_pass or {}, current_passes(report))
    checks_known = newest_verdicts(check_verdict or {}, current_check_verdicts(report))
    verdicts = rack_last_verdicts(checks_known, required, [str(rack) for rack in declared])
    fanned = racks_in(report, declared, set(passes) | set(verdicts))
    records = _record_families()
    for record in report.get("checks") or []:
        rack = record["rack"]
        _add_record(records, record, fanned if rack == NO_RACK_REACHED and fanned else [rack])
    shown = set(passes) | set(verdicts)
    if declared:  # a rack the site no longer declares leaves no stale sample behind
        shown &= {str(rack) for rack in declared} | set(report.get("racks") or {})
    return [
        *_run_families(report),
        *_rack_families(report, fanned),
        _last_pass_family(passes, shown),
        *_last_verdict_families(verdicts, shown),
        *_check_last_families(checks_known, shown),
        *(records[name] for name in ("passed", "check_verdict", "duration", "rack_min", "rack_median")),
        records["nccl_average"],
        records["nccl_max"],
        _tray_verified_family(report),
        *(records[name] for name in ("tray_min", "tray_median", "tray_weakest")),
    ]


def _run_families(report: Mapping[str, Any]) -> List[Family]:
    """The run's own: its verdict, its id, when it finished and how long it ran."""
    run_verdict = _gauge(
        "verification_verdict", "The run's verdict (passed, failed, error: a check could not run), one-hot", "verdict"
    )
    for verdict in VERDICTS:
        run_verdict.add(int(report["verdict"] == verdict), verdict=verdict)
    run_info = _gauge("verification_run_info", "The verification run the metrics are of", "run_id")
    run_info.add(1, run_id=report.get("run_id") or "")
    finished = _gauge("verification_finished_timestamp_seconds", "When the run's last check finished (Unix time)")
    finished.add(timestamp_seconds(report.get("generated")))
    started = timestamp_seconds(report.get("started"))
    ended = timestamp_seconds(report.get("generated"))
    run_duration = _gauge(
        "verification_duration_seconds", "From the start of the run's first check to the end of its last"
    )
    run_duration.add(round(ended - started, 3) if started is not None and ended is not None else None)
    return [run_verdict, run_info, finished, run_duration]


def _record_families() -> Dict[str, Family]:
    """The families of the checks' records, by a short name: verdicts, durations and the measured figures."""
    bandwidth = ("rack", "check", "testcase")
    tray = ("node", "rack", "check", "testcase")
    nccl = ("rack", "check", "benchmark")
    return {
        "passed": _gauge(
            "verification_passed",
            "Whether the check passed on the rack (1) or not (0); an allowed incomplete check passes",
            "rack",
            "check",
        ),
        "check_verdict": _gauge(
            "check_verdict",
            "The verdict of a check on a rack (passed, failed, error), one-hot",
            "rack",
            "check",
            "verdict",
        ),
        "duration": _gauge("check_duration_seconds", "How long the check ran on the rack", "rack", "check"),
        "rack_min": _gauge(
            "rack_bandwidth_min_bytes_per_second",
            "The lowest GPU pair bandwidth the check measured on the rack",
            *bandwidth,
        ),
        "rack_median": _gauge(
            "rack_bandwidth_median_bytes_per_second",
            "The median GPU pair bandwidth the check measured on the rack",
            *bandwidth,
        ),
        "tray_min": _gauge(
            "tray_bandwidth_min_bytes_per_second",
            "The lowest bandwidth of the measured GPU pairs with a GPU on the tray",
            *tray,
        ),
        "tray_median": _gauge(
            "tray_bandwidth_median_bytes_per_second",
            "The median bandwidth of the measured GPU pairs with a GPU on the tray",
            *tray,
        ),
        "tray_weakest": _gauge(
            "tray_weakest_gpu_bandwidth_bytes_per_second",
            "The tray's weakest GPU: the lowest of its GPUs' median pair bandwidth",
            *tray,
        ),
        "nccl_average": _gauge(
            "nccl_bus_bandwidth_average_bytes_per_second",
            "NCCL bus bandwidth averaged over the message sizes of the run (nccl-tests' Avg bus bandwidth)",
            *nccl,
        ),
        "nccl_max": _gauge(
            "nccl_bus_bandwidth_max_bytes_per_second", "NCCL bus bandwidth at the best message size of the run", *nccl
        ),
    }


def _add_record(families: Mapping[str, Family], record: Mapping[str, Any], racks: List[str]) -> None:
    """One check's record: its verdict on each of ``racks`` (the racks a record that reached no rack speaks for),
    and, on its own rack, its duration and what it measured."""
    rack, check, details = record["rack"], record["check"], record.get("details") or {}
    for each in racks:
        families["passed"].add(int(bool(record["passed"])), rack=each, check=check)
        for verdict in VERDICTS:
            families["check_verdict"].add(int(record["verdict"] == verdict), rack=each, check=check, verdict=verdict)
    if racks != [rack]:
        return  # a check that reached no rack: its verdict is each rack's, no duration or figure is
    families["duration"].add(record.get("duration_seconds"), rack=rack, check=check)
    if record["verdict"] == ERROR:
        return  # a check that could not run measured nothing
    testcase = str(details.get("testcase") or "")
    if is_bandwidth(details):
        families["rack_min"].add(bytes_per_second(details.get("min")), rack=rack, check=check, testcase=testcase)
        median = bytes_per_second(details.get("median_gbps"))
        families["rack_median"].add(median, rack=rack, check=check, testcase=testcase)
        for node, figures in tray_bandwidth(record).items():
            labels = {"node": node, "rack": rack, "check": check, "testcase": testcase}
            families["tray_min"].add(bytes_per_second(figures["min"]), **labels)
            families["tray_median"].add(bytes_per_second(figures["median"]), **labels)
            families["tray_weakest"].add(bytes_per_second(figures["weakest_gpu"]), **labels)
    benchmark = str(details.get("benchmark") or "")
    average, best = bytes_per_second(details.get("avg_busbw_gbps")), bytes_per_second(details.get("max_busbw_gbps"))
    families["nccl_average"].add(average, rack=rack, check=check, benchmark=benchmark)
    families["nccl_max"].add(best, rack=rack, check=check, benchmark=benchmark)


def _rack_families(report: Mapping[str, Any], fanned: List[str]) -> List[Family]:
    """Each rack's verdict over the run's checks (a run that reached no rack: each rack it speaks for) and trays."""
    rack_verdict = _gauge(
        "rack_verdict",
        "The rack's verdict over the run's checks (passed, incomplete, failed, error), one-hot",
        "rack",
        "verdict",
    )
    rack_trays = _gauge(
        "rack_trays",
        "The rack's GPU trays: the report's coverage counts (trays, declared, expected, found, verified, failed, "
        "skipped, unverified, unmeasured, missing)",
        "rack",
        "state",
    )
    views = report.get("racks") or {}
    unreached = views.get(NO_RACK_REACHED) if fanned else None
    judged = {rack: view["verdict"] for rack, view in views.items() if unreached is None or rack != NO_RACK_REACHED}
    for rack in fanned if unreached is not None else []:
        judged[rack] = worse_verdict(judged.get(rack, unreached["verdict"]), unreached["verdict"])
    for rack, found in judged.items():
        for verdict in RACK_VERDICTS:
            rack_verdict.add(int(found == verdict), rack=rack, verdict=verdict)
    for rack, view in views.items():
        if rack in judged:
            for state, count in (view.get("trays") or {}).items():
                rack_trays.add(count, rack=rack, state=state)
    return [rack_verdict, rack_trays]


def _tray_verified_family(report: Mapping[str, Any]) -> Family:
    tray_verified = _gauge(
        "tray_verified",
        "The tray's verdict over the run's checks (passed, failed, skipped), one-hot",
        "node",
        "rack",
        "verdict",
    )
    for node, tray in (report.get("trays") or {}).items():
        for verdict in TRAY_VERDICTS:
            tray_verified.add(int(tray["verdict"] == verdict), node=node, rack=tray["rack"], verdict=verdict)
    return tray_verified


def _last_pass_family(passes: Mapping[str, float], shown: Set[str]) -> Family:
    last = _gauge(
        "last_pass_timestamp_seconds",
        "When the rack last passed every check of a run (Unix time; the kept history and this run)",
        "rack",
    )
    for rack, when in passes.items():
        if rack in shown:
            last.add(when, rack=rack)
    return last


def _last_verdict_families(verdicts: Mapping[str, RackLastVerdict], shown: Set[str]) -> List[Family]:
    """Each shown rack's last verdict over its checks' last verdicts, when it was given, and what it lacks."""
    last_known = _gauge(
        "rack_last_verdict",
        "The rack's last verdict over each check's verdict in the newest run that judged it (passed, failed, "
        "unverified), one-hot: passed only when every required check passed; a check that could not run does not count",
        "rack",
        "verdict",
    )
    last_known_time = _gauge(
        "rack_last_verdict_timestamp_seconds",
        "When the newest of the check verdicts the rack's last verdict stands on was given (Unix time)",
        "rack",
    )
    last_missing = _gauge(
        "rack_last_verdict_missing_check",
        "A required check that has given no verdict on the rack, which keeps its last verdict unverified",
        "rack",
        "check",
    )
    for rack, found in verdicts.items():
        if rack in shown:
            for verdict in LAST_VERDICTS:
                last_known.add(int(found.verdict == verdict), rack=rack, verdict=verdict)
            last_known_time.add(found.time, rack=rack)
            for check in found.missing:
                last_missing.add(1, rack=rack, check=check)
    return [last_known, last_known_time, last_missing]


def _check_last_families(checks_known: Mapping[str, Tuple[str, float]], shown: Set[str]) -> List[Family]:
    """Each check's last verdict on each shown rack, and when it was given."""
    check_last = _gauge(
        "rack_check_last_verdict",
        "The check's verdict on the rack in the newest run in which it judged the rack (passed, failed), one-hot",
        "rack",
        "check",
        "verdict",
    )
    check_last_time = _gauge(
        "rack_check_last_verdict_timestamp_seconds",
        "When the run that gave the check's last verdict on the rack finished (Unix time)",
        "rack",
        "check",
    )
    for key, (found_verdict, when) in checks_known.items():
        check, rack = key.split("/", 1)
        if rack in shown:
            for verdict in CHECK_VERDICTS:
                check_last.add(int(found_verdict == verdict), rack=rack, check=check, verdict=verdict)
            check_last_time.add(when, rack=rack, check=check)
    return [check_last, check_last_time]


def label_names(families: Sequence[Family]) -> List[str]:
    """Every label name the families use, sorted: a Pushgateway grouping label must be none of them."""
    return sorted({name for family in families for name in family.labels})
