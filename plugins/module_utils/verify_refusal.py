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

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.check_catalog import (
    CHECK_NAMES,
    OWN_ROLE_CHECKS,
    check_names,
    selected,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.record import FLEET, OUTCOME_ERROR, Record, error_records
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.text import one_line

# The checks playbooks/verify.yml runs through roles of their own, each under its own tag and the role's name.
OWN_ROLES = OWN_ROLE_CHECKS
# The tags that select every check of the verify stage (the whole run).
WHOLE_RUN_TAGS = ("all", "verify")


def own_role_checks(run_tags: Sequence[str], skip_tags: Sequence[str], nccl: bool) -> List[str]:
    """The checks of ``OWN_ROLES`` that a verify run with these tags runs (nccl only when the site enables it)."""
    whole = not run_tags or bool(set(WHOLE_RUN_TAGS) & set(run_tags))
    chosen = []
    for name in OWN_ROLES:
        tags = {name, f"verify_{name}"}
        if name == "nccl" and not nccl:
            continue
        if tags & set(skip_tags) or not (whole or tags & set(run_tags)):
            continue
        chosen.append(name)
    return chosen


def refused_checks(run_tags: Sequence[str], skip_tags: Sequence[str], enabled: Any, nccl: bool) -> List[str]:
    """Every check the refused run would have run, in the verify stage's order: its own roles', then the checks of
    the registry that ``enabled`` (gpu_fabric_verify_checks, the names that are checks) or the tags select."""
    known = [name for name in check_names(enabled) if name in CHECK_NAMES]
    others = selected(list(run_tags), list(skip_tags), known, OWN_ROLES)
    return own_role_checks(run_tags, skip_tags, nccl) + others


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
    names = refused_checks(
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
