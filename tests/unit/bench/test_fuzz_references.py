# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""bench/fuzz_references.py: a short seeded run finds no crash and no wrong pass, and its tallies do count."""

from __future__ import annotations

import importlib.util
import random
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[3] / "bench" / "fuzz_references.py"
sys.path.insert(0, str(BENCH.parent))  # as when the script runs: its helpers beside it
_SPEC = importlib.util.spec_from_file_location("fuzz_references", BENCH)
fuzz_references = sys.modules.setdefault("fuzz_references", importlib.util.module_from_spec(_SPEC))
_SPEC.loader.exec_module(fuzz_references)


def test_a_short_run_refuses_every_bad_figure_and_fails_every_degraded_rack():
    tallies = fuzz_references.run_fuzz(cases=160, seed=1)
    assert sum(t.cases for t in tallies.values()) == 160
    for name, tally in tallies.items():
        assert tally.cases > 0, name
        assert (tally.outcomes["crashed"], tally.outcomes["wrongly passed"]) == (0, 0), (name, tally.examples[:3])
        if name == fuzz_references.MIN_GBPS_ROUTE:
            assert tally.outcomes["failed"] == tally.cases  # every figure valid: judged, and the rack fails
        else:
            assert tally.outcomes["refused"] > 0, name


def test_the_run_is_deterministic():
    first = fuzz_references.table(fuzz_references.run_fuzz(cases=40, seed=7))
    assert fuzz_references.table(fuzz_references.run_fuzz(cases=40, seed=7)) == first


def test_the_degraded_rack_is_the_real_capture_with_its_lost_links():
    rack = fuzz_references.load_rack(fuzz_references.SEEDS[0])
    assert (rack.gpus, rack.trays, rack.rows[0][3]) == (8, ["tray0", "tray1"], 821.92)
    content = rack.degraded([3])
    degraded = fuzz_references.load_rack(fuzz_references.SEEDS[0])
    degraded.lines = content.split("\n")
    row = degraded.lines[degraded.first_row].split()
    assert (row[4], row[3]) == (f"{round(821.92 * 17 / 18, 2):.2f}", "821.69")  # 0->3 lowered, 0->2 kept
    assert any(line.startswith("SUM multinode_device_to_device_memcpy_read_ce ") for line in degraded.lines)


def test_a_judge_that_passes_or_refuses_badly_is_caught():
    names = ("product reference entry", "gbps")
    ok = fuzz_references.Verdict(False, "36 of 56 GPU pairs below the threshold")

    def raising(message):
        def run():
            raise ValueError(message)

        return run

    outcome = fuzz_references._outcome
    assert outcome(lambda: ok, (ValueError,), names)[0] == "failed"
    assert outcome(lambda: fuzz_references.Verdict(True, "ok"), (ValueError,), names)[0] == "wrongly passed"
    assert outcome(raising("product reference entry 0: gbps nan"), (ValueError,), names)[0] == "refused"
    assert outcome(raising("two\nlines"), (ValueError,), names)[0] == "crashed"
    assert outcome(raising("gbps nan is no number"), (ValueError,), names) == (
        "crashed",
        "a refusal that does not name product reference entry: gbps nan is no number",
    )
    assert outcome(raising("product reference entry 0: gbps"), (KeyError,), names)[0] == "crashed"
    case = fuzz_references.run_case([fuzz_references.load_rack(fuzz_references.SEEDS[0])], random.Random(3))
    assert case[2] in ("refused", "failed")


def test_main_prints_the_table_and_exits_0(capsys):
    assert fuzz_references.main(["--cases", "30", "--seed", "2"]) == 0
    out = capsys.readouterr().out
    assert "| where | cases | refused with a line | failed | crashed | wrongly passed |" in out
