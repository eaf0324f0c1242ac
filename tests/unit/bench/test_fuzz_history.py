# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""bench/fuzz_history.py: a short seeded run finds nothing, and its counters do count."""

from __future__ import annotations

import importlib.util
import random
import sys
from pathlib import Path

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import history_retention, history_trends

BENCH = Path(__file__).resolve().parents[3] / "bench" / "fuzz_history.py"
sys.path.insert(0, str(BENCH.parent))  # as when the script runs: its helpers beside it
_SPEC = importlib.util.spec_from_file_location("fuzz_history", BENCH)
fuzz_history = sys.modules.setdefault("fuzz_history", importlib.util.module_from_spec(_SPEC))
_SPEC.loader.exec_module(fuzz_history)
history = fuzz_history.history


def test_a_short_run_loses_nothing_misorders_nothing_and_has_no_traceback():
    tallies = fuzz_history.run_fuzz(cases=40, seed=1)
    assert sum(t.cases for t in tallies.values()) == 40
    for name, tally in tallies.items():
        assert tally.cases > 0, name
        assert (tally.crashes, tally.lost, tally.misordered, tally.silent) == (0, 0, 0, 0), (name, tally.examples[:3])


def test_the_run_is_deterministic():
    first = fuzz_history.table(fuzz_history.run_fuzz(cases=12, seed=7))
    assert fuzz_history.table(fuzz_history.run_fuzz(cases=12, seed=7)) == first


def problems_of(family, cases=16):
    with fuzz_history.without_fsync():
        return [fuzz_history.run_case(family, random.Random(n))[1] or "" for n in range(cases)]


def test_runs_ordered_by_the_text_of_their_start_are_caught(monkeypatch):
    monkeypatch.setattr(history, "_started_key", lambda e: (str(e.get("started") or ""), str(e.get("run_id") or "")))
    assert any("misordered" in problem for problem in problems_of("reordered"))


def test_a_retention_that_keeps_no_last_pass_is_caught(monkeypatch):
    monkeypatch.setattr(history_retention, "last_passing_runs", lambda runs: {})
    assert any("lost the last pass of" in problem for problem in problems_of("reordered"))


def test_a_corrupt_index_refused_is_a_crash(monkeypatch):
    load_index = history._load_index

    def refuse(history_dir):
        index, warnings = load_index(history_dir)
        if warnings and "rebuilt it from the" in warnings[0]:
            raise history.HistoryError("refused")
        return index, warnings

    monkeypatch.setattr(history, "_load_index", refuse)
    assert any(problem.startswith("traceback: HistoryError: refused") for problem in problems_of("index"))


def test_a_bad_record_kept_unsaid_is_silent(monkeypatch):
    kept_record = history.kept_record

    def unsaid(d, r, c, k, warnings=None):
        return kept_record(d, r, c, k)

    # both readers of a kept record: the rebuilt index and the trend
    monkeypatch.setattr(history, "kept_record", unsaid)
    monkeypatch.setattr(history_trends, "kept_record", unsaid)
    assert any(problem.startswith("silent: no reader named") for problem in problems_of("record"))


def test_main_prints_the_table_and_exits_0(capsys):
    assert fuzz_history.main(["--cases", "8", "--seed", "2"]) == 0
    out = capsys.readouterr().out
    assert "| family | cases | crashes | lost what matters | misordered | silent |" in out
