# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The answer of a verify run that was refused: an ``error`` record for every check that could not run.

Most sites run the verify stage from AWX, a CI job or the scheduled CronJob, where the job's exit status, its
``set_stats`` and the report are all anyone sees. When the run stops before its checks (the variable check, the
preflight, a role's arguments, a check module that refuses its selection), ``playbooks/verify.yml`` rescues the
failure and calls the module ``verify_refusal``: every check the run would have run that wrote no record of this
run gets an ``error`` record (the check did not run; nothing is said of the fabric) naming the task that refused
the run and its message, so that the report, JUnit and ``gpu_fabric_verdict`` say why; the play still fails.
"""

from __future__ import annotations

import json
import os
from typing import Any, Callable, Dict, List, Mapping, Sequence

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.check_catalog import run_checks
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.record import FLEET, OUTCOME_ERROR, Record, error_records
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.text import one_line


def refusal_message(task: str, message: Any) -> str:
    """Why the run stopped, in one line: the task that refused it and what it said."""
    said = one_line(message, 600) if message else "(no message)"
    where = f" at the task {task!r}" if task else ""
    return f"the run was refused{where}: {said}"


def check_message(check: str, message: str) -> str:
    """The summary of the error record of ``check``, which did not run."""
    return f"{check} did not run, which says nothing of the fabric; {message}"


def has_record(records_dir: str, check: str, run_id: str, read: Callable[[str], str]) -> bool:
    """Whether ``check`` wrote a record of the run ``run_id`` under ``records_dir`` (one of its racks is enough)."""
    directory = os.path.join(records_dir, check)
    if not records_dir or not os.path.isdir(directory):
        return False
    for name in sorted(os.listdir(directory)):
        if not name.endswith(".json"):
            continue
        try:
            record = json.loads(read(os.path.join(directory, name)) or "null")
        except (OSError, ValueError):
            continue
        if isinstance(record, dict) and run_id and record.get("run_id") == run_id:
            return True
    return False


def refusal_records(
    names: Sequence[str], message: str, run_id: str, records_dir: str, read: Callable[[str], str]
) -> Dict[str, List[Record]]:
    """Per check of ``names`` that wrote no record of this run, its ``error`` record of the whole fleet (the run
    stopped before it read the racks); a check that wrote its records keeps them."""
    return {
        name: error_records(name, [FLEET], check_message(name, message), run_id)
        for name in dict.fromkeys(names)
        if not has_record(records_dir, name, run_id, read)
    }


def refusal(params: Mapping[str, Any], read: Callable[[str], str]) -> Dict[str, Any]:
    """The module's result before writing: the message, the checks refused and their records, the verdict."""
    message = refusal_message(params.get("task") or "", params.get("reason"))
    names = run_checks(
        [str(t) for t in params.get("run_tags") or []],
        [str(t) for t in params.get("skip_tags") or []],
        params.get("checks"),
        bool(params.get("nccl")),
    )
    records = refusal_records(names, message, params.get("run_id") or "", params.get("records_dir") or "", read)
    return {
        "message": message,
        "checks": names,
        "records": records,
        "verdict": OUTCOME_ERROR,
        "summary": f"ERROR: {message}",
    }
