# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Write the reports of a directory of verification records: what the module ``verification_report`` runs.

The records are read (``report_records``), the trend of the kept runs added (``history_trends.trends``), the
report built (``report_model``) and rendered (``report_render``); each file is written only when its
content differs. The writer is injected, so check mode and tests write nothing.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Callable, List, Optional

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.files import FileChange, FileEditError, read_text
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.history import HistoryError
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.history_trends import trends
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.report_model import build_report
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.report_records import load_records
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.report_render import ReportError, render_report
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.tray_state import DEFAULT_VALID_HOURS

# The keys of a record that the module returns for each check.
CHECK_KEYS = ("check", "rack", "clique", "outcome", "verdict", "passed", "summary")


@dataclass(frozen=True)
class ReportRequest:
    records_dir: str
    dest: str
    formats: tuple[str, ...]
    title: str
    run_id: str = ""
    history_dir: str = ""
    trend_runs: int = 10
    trend_tolerance: float = 0.03
    valid_hours: float = DEFAULT_VALID_HOURS


def request_from_params(params: dict[str, Any]) -> ReportRequest:
    """The module's parameters as a request; a format named twice is written once."""
    return ReportRequest(
        records_dir=params["records_dir"],
        dest=params["dest"],
        formats=tuple(dict.fromkeys(params["formats"])),
        title=params["title"],
        run_id=params["run_id"],
        history_dir=params["history_dir"] or "",
        trend_runs=params["trend_runs"],
        trend_tolerance=params["trend_tolerance"],
        valid_hours=params["valid_hours"],
    )


def read_report(request: ReportRequest, warnings: Optional[List[str]] = None) -> dict[str, Any]:
    """The report of the records of ``request.records_dir``, with the trend of the kept runs; what of the history
    the trend left out (a corrupt index rebuilt, a bad kept record) is a line in ``warnings``."""
    if not os.path.isdir(request.records_dir):
        raise ReportError(
            f"the records directory {request.records_dir} does not exist; run the verify roles first "
            "(playbooks/verify.yml), or point records_dir at the directory they wrote to"
        )
    records = load_records(request.records_dir)
    if not records:
        raise ReportError(
            f"no verification record (<check>/<rack>.json) found in {request.records_dir}; run the verify roles "
            "first (playbooks/verify.yml) with the same report directory"
        )
    try:
        trend = trends(
            request.history_dir, request.trend_runs, request.trend_tolerance, current=request.run_id, warnings=warnings
        )
    except HistoryError as exc:
        raise ReportError(str(exc)) from exc
    return build_report(records, request.title, request.run_id, trends=trend, valid_hours=request.valid_hours)


def write_reports(request: ReportRequest, write: Callable[[FileChange], Optional[str]]) -> dict[str, Any]:
    """Render the report in every format of ``request`` and ``write`` each file whose content changed.

    Returns the module's result: ``changed``, ``files`` (format -> path), ``diff`` (one per file changed) and
    the report's verdict, summary, totals, checks, racks, trends, coverage, trays, the trays due next and
    ``warnings`` (what the trend left out of the history, for the module to warn). Raises ReportError, with the
    files named so far in its ``result`` when a file cannot be read or written.
    """
    warnings: List[str] = []
    report = read_report(request, warnings)
    files: dict[str, str] = {}
    diffs = []
    for item in render_report(report, list(request.formats)):
        path = os.path.join(request.dest, item.name)
        files[item.format] = path
        try:
            change = FileChange(path=path, before=read_text(path), after=item.content)
            if change.changed:
                diffs.append(change.diff())
                write(change)
        except FileEditError as exc:
            raise ReportError(str(exc), {"files": files}) from exc
    return {
        "changed": bool(diffs),
        "diff": diffs,
        "files": files,
        "passed": report["passed"],
        "verdict": report["verdict"],
        "summary": report["summary"],
        "totals": report["totals"],
        "checks": [{key: record[key] for key in CHECK_KEYS} for record in report["checks"]],
        "racks": report["racks"],
        "trends": report["trends"],
        "coverage": report["coverage"],
        "trays": report["trays"],
        "due": report["due"],
        "warnings": list(dict.fromkeys(warnings)),
    }
