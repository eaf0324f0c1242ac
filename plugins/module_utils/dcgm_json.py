# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""What ``dcgmi diag -j`` prints (DCGM 4.x), as typed results per test per entity (standard library only).

The shape, as DCGM's ``dcgmi/Diag.cpp`` builds it and ``testing/python3/dcgm_diag_schema.json`` describes it:
``"DCGM Diagnostic" -> test_categories[] -> tests[] -> results[]`` (one per entity: ``entity_group``,
``entity_id``, ``status``, ``warnings[]`` with DCGM's text and ``DCGM_FR`` code, ``info[]``) and each test's
``test_summary``; ``entity_groups[]`` lists the GPUs with their serials; ``metadata`` the versions. A diagnostic
that did not run prints ``runtime_error``; ``--iterations`` prints ``iterations[]`` with an ``"Overall Result"``.

A ``null`` where a list, object or text belongs reads as absent; a value of the wrong kind (an entity id that is
not a number, a test that is not an object) is a :class:`DcgmParseError` whose message is one line naming the
place. The parser imports nothing of the Kubernetes client; ``checks/dcgm_diag`` judges what it returns.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.text import one_line

DIAGNOSTIC = "DCGM Diagnostic"
STATUS_PASS = "Pass"
STATUS_FAIL = "Fail"
STATUS_SKIP = "Skip"
STATUS_NOT_RUN = "Not Run"  # DCGM leaves such results out of -j; read as no result where one is printed


class DcgmParseError(ValueError):
    """``dcgmi diag -j`` printed no diagnostic JSON, or one of the wrong shape (message: one line)."""


@dataclass
class DiagWarning:
    """One error DCGM attached to a result: its text (message and next steps) and its DCGM_FR code."""

    text: str
    error_id: int
    category: int = 0
    severity: int = 0


@dataclass
class DiagResult:
    """One test's result for one entity (``entity_id`` None: the test's summary)."""

    test: str
    status: str
    entity_group: str = "GPU"
    entity_id: Optional[int] = None
    warnings: List[DiagWarning] = field(default_factory=list)
    info: List[str] = field(default_factory=list)

    @property
    def entity(self) -> str:
        return f"{self.entity_group} {self.entity_id}"


@dataclass
class DiagRun:
    """One run of ``dcgmi diag -j``: the results per entity, each test's summary, the entities and versions."""

    results: List[DiagResult] = field(default_factory=list)
    summaries: Dict[str, DiagResult] = field(default_factory=dict)
    categories: Dict[str, str] = field(default_factory=dict)  # test -> category
    serials: Dict[int, str] = field(default_factory=dict)  # GPU entity id -> serial number
    device_ids: Dict[int, str] = field(default_factory=dict)
    dcgm_version: str = ""
    driver_version: str = ""
    runtime_error: str = ""

    def result(self, test: str, gpu: int) -> Optional[DiagResult]:
        """The result of ``test`` for GPU ``gpu`` (the last when DCGM printed two), None when it printed none."""
        found = [r for r in self.results if r.test == test and r.entity_group == "GPU" and r.entity_id == gpu]
        return found[-1] if found else None

    @property
    def found_errors(self) -> bool:
        """Whether DCGM reported an error anywhere in the run (what its exit status says too)."""
        return bool(
            self.runtime_error
            or any(r.status == STATUS_FAIL or r.warnings for r in self.results)
            or any(s.status == STATUS_FAIL or s.warnings for s in self.summaries.values())
        )


@dataclass
class DiagReport:
    """What ``dcgmi diag -j`` printed: one run, or several (``--iterations``) with DCGM's overall result."""

    runs: List[DiagRun]
    overall: str = ""
    warning: str = ""

    @property
    def found_errors(self) -> bool:
        return self.overall == STATUS_FAIL or any(run.found_errors for run in self.runs)


def json_documents(text: str) -> List[Any]:
    """Every JSON value printed at the start of a line of ``text`` (dcgmi prints one, or an error and one)."""
    decoder = json.JSONDecoder()
    found, index = [], 0
    while True:
        start = text.find("{", index)
        if start < 0:
            return found
        if start and text[start - 1] != "\n":
            index = start + 1
            continue
        try:
            value, end = decoder.raw_decode(text, start)
        except ValueError:
            index = start + 1
            continue
        found.append(value)
        index = end


def _object(value: Any, where: str) -> Dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise DcgmParseError(f"{where} is {type(value).__name__}, expected an object")
    return value


def _list(value: Any, where: str) -> List[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise DcgmParseError(f"{where} is {type(value).__name__}, expected a list")
    return value


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def _int(value: Any, where: str, default: Optional[int] = None) -> Optional[int]:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise DcgmParseError(f"{where} is {one_line(repr(value), 60, '...')}, expected a number")
    try:
        return int(value)
    except ValueError:
        raise DcgmParseError(f"{where} is {one_line(repr(value), 60, '...')}, expected a number") from None


def _warnings(entries: Any, where: str) -> List[DiagWarning]:
    found = []
    for number, entry in enumerate(_list(entries, f"{where} warnings")):
        entry = _object(entry, f"{where} warning {number}")
        if not entry:
            continue
        found.append(
            DiagWarning(
                _text(entry.get("warning")),
                _int(entry.get("error_id"), f"{where} warning {number} error_id", 0) or 0,
                _int(entry.get("error_category"), f"{where} warning {number} error_category", 0) or 0,
                _int(entry.get("error_severity"), f"{where} warning {number} error_severity", 0) or 0,
            )
        )
    return found


def _info(entries: Any, where: str) -> List[str]:
    return [str(i) for i in _list(entries, f"{where} info") if i is not None]


def parse_diag_run(document: Any) -> DiagRun:
    """One ``dcgmi diag -j`` object (DCGM 4.x); DcgmParseError when it is not one."""
    document = _object(document, "the document")
    if not isinstance(document.get(DIAGNOSTIC), dict):
        keys = one_line(", ".join(sorted(str(k) for k in document)), 120, "...") or "none"
        raise DcgmParseError(f"no '{DIAGNOSTIC}' object (keys: {keys})")
    body = document[DIAGNOSTIC]
    run = DiagRun(runtime_error=_text(body.get("runtime_error")))
    for c_number, category in enumerate(_list(body.get("test_categories"), "test_categories")):
        category = _object(category, f"test category {c_number}")
        for t_number, test in enumerate(_list(category.get("tests"), f"test category {c_number} tests")):
            test = _object(test, f"test {t_number} of category {c_number}")
            if not test:
                continue
            name = one_line(test.get("name"), 80, "...") or f"test {t_number} of category {c_number}"
            run.categories[name] = _text(category.get("category"))
            for r_number, entry in enumerate(_list(test.get("results"), f"test {name} results")):
                entry = _object(entry, f"test {name} result {r_number}")
                if not entry:
                    continue
                where = f"test {name} result {r_number}"
                entity = _int(entry.get("entity_id"), f"{where} entity_id")
                if entity is None:
                    raise DcgmParseError(f"{where} has no entity_id: DCGM names the entity of every result")
                run.results.append(
                    DiagResult(
                        name,
                        _text(entry.get("status")),
                        _text(entry.get("entity_group")) or "GPU",
                        entity,
                        _warnings(entry.get("warnings"), where),
                        _info(entry.get("info"), where),
                    )
                )
            summary = _object(test.get("test_summary"), f"test {name} test_summary")
            if summary:
                where = f"test {name} test_summary"
                run.summaries[name] = DiagResult(
                    name,
                    _text(summary.get("status")),
                    "",
                    None,
                    _warnings(summary.get("warnings"), where),
                    _info(summary.get("info"), where),
                )
    for g_number, group in enumerate(_list(document.get("entity_groups"), "entity_groups")):
        group = _object(group, f"entity group {g_number}")
        if group.get("entity_group") != "GPU":
            continue
        for e_number, entity in enumerate(_list(group.get("entities"), f"entity group {g_number} entities")):
            entity = _object(entity, f"GPU entity {e_number}")
            if not entity:
                continue
            gpu = _int(entity.get("entity_id"), f"GPU entity {e_number} entity_id")
            if gpu is None:
                raise DcgmParseError(f"GPU entity {e_number} has no entity_id")
            run.serials[gpu] = _text(entity.get("serial_num"))
            run.device_ids[gpu] = _text(entity.get("device_id"))
    metadata = _object(document.get("metadata"), "metadata")
    run.dcgm_version = _text(metadata.get("version") or body.get("version"))
    run.driver_version = _text(metadata.get("Driver Version Detected"))
    return run


def parse_diag_json(text: str) -> DiagReport:
    """What ``dcgmi diag -j`` printed: the iterations form when there is one, else the last diagnostic object;
    DcgmParseError (one line) when it printed no JSON of DCGM's diagnostic or one of the wrong shape."""
    documents = [d for d in json_documents(text) if isinstance(d, dict)]
    for document in documents:
        if "iterations" in document:
            iterations = _list(document["iterations"], "iterations")
            runs = [parse_diag_run(d) for d in iterations if d]
            if not runs:
                raise DcgmParseError("the iterations form lists no run")
            return DiagReport(runs, _text(document.get("Overall Result")), _text(document.get("warning")))
    diagnostic = [d for d in documents if DIAGNOSTIC in d]
    if not diagnostic:
        raise DcgmParseError("no JSON of DCGM's diagnostic")
    return DiagReport([parse_diag_run(diagnostic[-1])])
