# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""bench/fuzz_tray_times.py: a short seeded run finds no crash, and its counters do count."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import tray_state
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.times import parse_time

BENCH = Path(__file__).resolve().parents[3] / "bench" / "fuzz_tray_times.py"
sys.path.insert(0, str(BENCH.parent))  # as when the script runs: its helpers beside it
_SPEC = importlib.util.spec_from_file_location("fuzz_tray_times", BENCH)
fuzz_tray_times = sys.modules.setdefault("fuzz_tray_times", importlib.util.module_from_spec(_SPEC))
_SPEC.loader.exec_module(fuzz_tray_times)


def test_a_short_run_has_no_crash_and_refuses_the_times_it_cannot_write():
    tallies = fuzz_tray_times.run_fuzz(cases=300, seed=1)
    assert set(tallies) == {
        "read_state, due_reason, standing",
        "select_due",
        "node_verdict planning",
        "write_verdicts (check mode)",
    }
    for name, tally in tallies.items():
        assert (tally.cases, tally.crashes) == (300, 0), (name, tally.examples)
    # the writer refuses (one line, nothing patched) what the readers only treat as due
    assert tallies["read_state, due_reason, standing"].refusals == 0
    assert tallies["node_verdict planning"].refusals > 0
    assert tallies["write_verdicts (check mode)"].refusals > 0


def test_the_run_is_deterministic():
    first = fuzz_tray_times.table(fuzz_tray_times.run_fuzz(cases=50, seed=7))
    assert fuzz_tray_times.table(fuzz_tray_times.run_fuzz(cases=50, seed=7)) == first


def test_a_reader_that_trusts_every_parsed_time_is_caught(monkeypatch, capsys):
    # the reader as it was: whatever datetime.fromisoformat gives, out of range in UTC or not
    monkeypatch.setattr(tray_state, "read_time", lambda value: (parse_time(value), "" if parse_time(value) else "bad"))
    tallies = fuzz_tray_times.run_fuzz(cases=300, seed=1)
    assert tallies["read_state, due_reason, standing"].crashes > 0
    assert "OverflowError" in " ".join(tallies["read_state, due_reason, standing"].examples)
    assert fuzz_tray_times.main(["--cases", "300", "--seed", "1", "--show", "1"]) == 1
    assert "crashes" in capsys.readouterr().out


def test_main_exits_zero_without_a_crash(capsys):
    assert fuzz_tray_times.main(["--cases", "40", "--seed", "3"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split() == ["entry", "point", "cases", "refused", "crashes"]
