# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Write the verification metrics: what the module ``verification_metrics`` runs.

The report is built from the records as ``verification_report`` builds it (``report_run.read_report``), the
last passing run and the last verdict of each rack read from the kept history and from the metrics' own state file
beside it (``STATE_FILE``), and the metrics rendered (``metrics``); then the textfile is written when its content
differs (the writer is injected: check mode and tests write nothing), the state file when it moved forward, and,
when asked, the metrics are pushed to a Pushgateway (``pushgateway``; the HTTP call is injected too).
"""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import metrics
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.files import (
    FileChange,
    FileEditError,
    read_text,
    replace_file,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.history import HistoryError, locked, write_json
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.metrics_textfile import MetricsError, textfile_change
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.pushgateway import (
    PushError,
    PushTarget,
    group_url,
    push,
    target_problems,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.report_render import ReportError
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.report_run import ReportRequest, read_report

PUSH_FAILURE = ("fail", "warn")
# What the metrics last published of each rack (its last-pass time, each check's last verdict on it and when), kept in
# the history directory. Why a file of its own rather than the kept records alone: retention removes runs by count and
# age (and is another module's rule), so a rack that has not passed in the kept runs would lose its last-pass sample,
# and the alert on it would go quiet; the Pushgateway's PUT replaces what was pushed, so nothing published can be read
# back. The file only moves forward (per rack and per check the later time wins), so two runs that write it merge; it
# is written to a temporary file moved into place, under the history's lock.
STATE_FILE = "metrics-state.json"
STATE_VERSION = 2  # 2: each check's last verdict per rack (check_last_verdict); 1 kept one verdict per rack
MAX_STATE_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class MetricsRequest:
    records_dir: str
    run_id: str = ""
    history_dir: str = ""
    textfile: str = ""
    target: Optional[PushTarget] = None
    push_failure: str = "fail"
    racks: Tuple[str, ...] = ()  # the site's declared racks (gpu_fabric_racks)
    required_checks: Tuple[
        str, ...
    ] = ()  # the checks a rack's last verdict needs passed (gpu_fabric_verify_required_checks)


@dataclass(frozen=True)
class KnownState:
    """What is known of each rack beyond this run: its last-pass time, and each check's last verdict on it with its
    time (``<check>/<rack>``: ``metrics.last_check_verdicts``), from which its last verdict follows."""

    last_pass: Dict[str, float] = field(default_factory=dict)
    check_verdict: Dict[str, Tuple[str, float]] = field(default_factory=dict)

    def merged(self, other: KnownState) -> KnownState:
        return KnownState(
            metrics.latest_passes(self.last_pass, other.last_pass),
            metrics.newest_verdicts(self.check_verdict, other.check_verdict),
        )

    def to_data(self) -> Dict[str, Any]:
        return {
            "version": STATE_VERSION,
            "last_pass": dict(sorted(self.last_pass.items())),
            "check_last_verdict": {
                key: {"verdict": v, "time": t} for key, (v, t) in sorted(self.check_verdict.items())
            },
        }


def _seconds(value: Any) -> Optional[float]:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def state_of(data: Any) -> KnownState:
    """The state file's content as a KnownState; an entry that is not a rack (a ``<check>/<rack>``) with a finite time
    (and a verdict ``passed`` or ``failed``) is left out, so a hand-edited file costs only its bad entries. A version
    1 file's one verdict per rack names no check: it is left out, and the kept history and this run give the checks'."""
    data = data if isinstance(data, dict) else {}
    passes = data.get("last_pass") if isinstance(data.get("last_pass"), dict) else {}
    verdicts = data.get("check_last_verdict") if isinstance(data.get("check_last_verdict"), dict) else {}
    last_pass = {str(r): t for r, t in ((r, _seconds(t)) for r, t in passes.items()) if t is not None}
    check_verdict = {}
    for key, entry in verdicts.items():
        if "/" in str(key) and isinstance(entry, dict) and entry.get("verdict") in metrics.CHECK_VERDICTS:
            when = _seconds(entry.get("time"))
            if when is not None:
                check_verdict[str(key)] = (str(entry["verdict"]), when)
    return KnownState(last_pass, check_verdict)


def read_state(history_dir: str) -> Tuple[KnownState, List[str]]:
    """(the state kept in ``history_dir``, warnings); empty without one. A file that cannot be read is a warning:
    the kept history and this run rebuild what they can, and the file is written again."""
    path = os.path.join(history_dir, STATE_FILE) if history_dir else ""
    if not path or not os.path.exists(path):
        return KnownState(), []
    try:
        text = read_text(path, "metrics state", MAX_STATE_BYTES) or ""
        return state_of(json.loads(text)), []
    except (FileEditError, OSError, ValueError) as exc:
        problem = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return KnownState(), [
            f"the metrics state {path} cannot be read ({problem}); the last-pass times and verdicts come from the "
            "kept history and this run only, and the file is written again"
        ]


def keep_state(history_dir: str, state: KnownState, check_mode: bool) -> bool:
    """Merge ``state`` into the state file of ``history_dir`` (which must exist: the state lives beside the history
    it outlives); whether the file changed (or would, in check mode)."""
    if not history_dir or not os.path.isdir(history_dir):
        return False
    path = os.path.join(history_dir, STATE_FILE)
    if check_mode:
        before, _warnings = read_state(history_dir)
        return before.merged(state).to_data() != before.to_data() or not os.path.exists(path)
    with locked(history_dir):
        before, _warnings = read_state(history_dir)
        after = before.merged(state)
        if os.path.exists(path) and after.to_data() == before.to_data():
            return False
        write_json(path, after.to_data())
    return True


def request_from_params(params: Mapping[str, Any]) -> MetricsRequest:
    """The module's parameters as a request; no Pushgateway without ``pushgateway_url``."""
    target = None
    if params.get("pushgateway_url"):
        target = PushTarget(
            url=params["pushgateway_url"],
            job=params["job"],
            grouping={str(k): str(v) for k, v in (params.get("grouping") or {}).items()},
            headers={str(k): str(v) for k, v in (params.get("headers") or {}).items()},
            username=params.get("username") or None,
            password=params.get("password") or None,
            bearer_token=params.get("bearer_token") or None,
            validate_certs=params["validate_certs"],
            timeout=params["timeout"],
            attempts=params["push_attempts"],
        )
    return MetricsRequest(
        records_dir=params["records_dir"],
        run_id=params.get("run_id") or "",
        history_dir=params.get("history_dir") or "",
        textfile=params.get("textfile") or "",
        target=target,
        push_failure=params.get("push_failure") or "fail",
        racks=tuple(str(rack) for rack in params.get("racks") or ()),
        required_checks=tuple(str(check) for check in params.get("required_checks") or ()),
    )


def render_metrics(
    request: MetricsRequest,
) -> Tuple[Dict[str, Any], List[metrics.Family], str, KnownState, List[str]]:
    """(the report, its metric families, their text, what is known of each rack with this run, warnings) of the
    records of ``request``."""
    warnings: List[str] = []
    try:
        report = read_report(ReportRequest(request.records_dir, "", (), "", request.run_id))
        history = KnownState(
            metrics.history_last_passes(request.history_dir),
            metrics.history_last_check_verdicts(request.history_dir, warnings),
        )
    except (ReportError, HistoryError) as exc:
        raise MetricsError(str(exc)) from exc
    kept, unreadable = read_state(request.history_dir)
    warnings.extend(unreadable)
    this_run = KnownState(metrics.current_passes(report), metrics.current_check_verdicts(report))
    known = kept.merged(history).merged(this_run)
    families = metrics.metric_families(
        report, known.last_pass, known.check_verdict, request.racks, request.required_checks
    )
    return report, families, metrics.render(families), known, warnings


def textfile_writer(module: Any = None) -> Callable[[FileChange], None]:
    """How the module writes the textfile: ``files.replace_file`` on the path itself, a temporary file in the same
    directory renamed over it, which replaces a link planted there after the check rather than writing where it
    points (``files.write_change`` would follow it). ``module`` supplies the SELinux context."""
    return lambda change: replace_file(change.path, change.after.encode("utf-8"), module)


def write_metrics(
    request: MetricsRequest,
    write: Callable[[FileChange], Any],
    opener: Callable[..., Any],
    check_mode: bool,
    sleep: Callable[[float], None] = time.sleep,
) -> Dict[str, Any]:
    """Render the metrics, write the textfile when it differs and push them when a Pushgateway is named.

    Returns the module's result: ``changed`` (the textfile or the state file differs, or a push replaced the group),
    ``diff``, ``metrics`` (the text), ``families``, ``samples``, ``textfile``, ``state_file``, ``pushed``,
    ``push_url``, ``warnings``, ``verdict`` and ``summary``. Raises MetricsError; a failed push only warns with
    ``push_failure: warn``. The state file is kept before the push, so a push that fails loses nothing of it.
    """
    report, families, text, known, warnings = render_metrics(request)
    if request.target is not None:  # refused before anything is written or sent
        problem = target_problems(request.target, metrics.label_names(families))
        if problem:
            raise MetricsError(problem)
    result: Dict[str, Any] = {
        "changed": False,
        "diff": [],
        "metrics": text,
        "families": [family.name for family in families if family.samples],
        "samples": sum(len(family.samples) for family in families),
        "textfile": request.textfile or None,
        "state_file": None,
        "pushed": False,
        "push_url": None,
        "warnings": warnings,
        "verdict": report["verdict"],
        "summary": report["summary"],
    }
    if request.textfile:
        path = os.path.abspath(request.textfile)
        change = textfile_change(path, text)
        if change.changed:
            result["changed"] = True
            result["diff"].append(change.diff())
            try:
                if not check_mode:
                    write(change)
            except FileEditError as exc:
                raise MetricsError(str(exc)) from exc
    state_changed = False
    if request.history_dir and os.path.isdir(request.history_dir):
        result["state_file"] = os.path.join(os.path.abspath(request.history_dir), STATE_FILE)
        try:
            state_changed = keep_state(request.history_dir, known, check_mode)
        except OSError as exc:
            raise MetricsError(
                f"cannot write the metrics state {result['state_file']}: {exc}; check that the history directory "
                "(history_dir) is writable"
            ) from exc
        result["changed"] = result["changed"] or state_changed
    if request.target is not None:
        result["push_url"] = group_url(request.target)
        result["changed"] = True  # a PUT replaces the group; check mode says that it would
        if not check_mode:
            try:
                push(request.target, text, metrics.CONTENT_TYPE, opener, sleep=sleep)
                result["pushed"] = True
            except PushError as exc:
                if request.push_failure == "fail":
                    raise MetricsError(str(exc)) from exc
                result["warnings"].append(str(exc))
                result["changed"] = result["diff"] != [] or state_changed
    return result
