# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Write the verification metrics: what the module ``verification_metrics`` runs.

The report is built from the records as ``verification_report`` builds it (``report_run.read_report``), the
last passing run of each rack read from the kept history, and the metrics rendered (``metrics``); then the
textfile is written when its content differs (the writer is injected: check mode and tests write nothing) and,
when asked, the metrics are pushed to a Pushgateway (``pushgateway``; the HTTP call is injected too).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import metrics
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.files import FileChange, FileEditError, read_text
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.history import HistoryError
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.pushgateway import (
    PushError,
    PushTarget,
    group_url,
    push,
    target_problems,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.report_render import ReportError
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.report_run import ReportRequest, read_report

TEXTFILE_SUFFIX = ".prom"  # the only files node-exporter's textfile collector reads
PUSH_FAILURE = ("fail", "warn")
# The textfile is small (a 54-tray fleet: about 60 KiB); a larger file at the path is not ours.
MAX_TEXTFILE_BYTES = 16 * 1024 * 1024


class MetricsError(Exception):
    """The metrics could not be made, written or pushed; one line saying what to do."""


@dataclass(frozen=True)
class MetricsRequest:
    records_dir: str
    run_id: str = ""
    history_dir: str = ""
    textfile: str = ""
    target: Optional[PushTarget] = None
    push_failure: str = "fail"


def request_from_params(params: Mapping[str, Any]) -> MetricsRequest:
    """The module's parameters as a request; no Pushgateway without ``pushgateway_url``."""
    target = None
    if params.get("pushgateway_url"):
        target = PushTarget(
            url=params["pushgateway_url"],
            job=params["job"],
            grouping={str(k): str(v) for k, v in (params.get("grouping") or {}).items()},
            headers={str(k): str(v) for k, v in (params.get("headers") or {}).items()},
            username=params.get("url_username") or None,
            password=params.get("url_password") or None,
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
    )


def render_metrics(request: MetricsRequest) -> tuple[dict[str, Any], List[metrics.Family], str]:
    """(the report, its metric families, their text) of the records of ``request``."""
    try:
        report = read_report(ReportRequest(request.records_dir, "", (), "", request.run_id))
        passes = metrics.history_last_passes(request.history_dir)
    except (ReportError, HistoryError) as exc:
        raise MetricsError(str(exc)) from exc
    families = metrics.metric_families(report, passes)
    return report, families, metrics.render(families)


def _textfile_change(path: str, text: str) -> FileChange:
    if not path.endswith(TEXTFILE_SUFFIX):
        raise MetricsError(
            f"textfile {path} does not end in {TEXTFILE_SUFFIX}; node-exporter's textfile collector reads only "
            f"*{TEXTFILE_SUFFIX} files in its --collector.textfile.directory"
        )
    try:
        return FileChange(path=path, before=read_text(path, "textfile", MAX_TEXTFILE_BYTES), after=text)
    except FileEditError as exc:
        raise MetricsError(str(exc)) from exc


def write_metrics(
    request: MetricsRequest,
    write: Callable[[FileChange], Any],
    opener: Callable[..., Any],
    check_mode: bool,
    sleep: Callable[[float], None] = time.sleep,
) -> Dict[str, Any]:
    """Render the metrics, write the textfile when it differs and push them when a Pushgateway is named.

    Returns the module's result: ``changed`` (the textfile differs, or a push replaced the group), ``diff``,
    ``metrics`` (the text), ``families``, ``samples``, ``textfile``, ``pushed``, ``push_url``, ``warnings``,
    ``verdict`` and ``summary``. Raises MetricsError; a failed push only warns with ``push_failure: warn``.
    """
    report, families, text = render_metrics(request)
    result: Dict[str, Any] = {
        "changed": False,
        "diff": [],
        "metrics": text,
        "families": [family.name for family in families if family.samples],
        "samples": sum(len(family.samples) for family in families),
        "textfile": request.textfile or None,
        "pushed": False,
        "push_url": None,
        "warnings": [],
        "verdict": report["verdict"],
        "summary": report["summary"],
    }
    if request.textfile:
        path = os.path.abspath(request.textfile)
        change = _textfile_change(path, text)
        if change.changed:
            result["changed"] = True
            result["diff"].append(change.diff())
            try:
                if not check_mode:
                    write(change)
            except FileEditError as exc:
                raise MetricsError(str(exc)) from exc
    if request.target is not None:
        problem = target_problems(request.target, metrics.label_names(families))
        if problem:
            raise MetricsError(problem)
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
                result["changed"] = result["diff"] != []
    return result
