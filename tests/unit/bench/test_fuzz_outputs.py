# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""bench/fuzz_outputs.py: a short seeded run finds nothing, and its counters do count."""

from __future__ import annotations

import importlib.util
import random
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[3] / "bench" / "fuzz_outputs.py"
sys.path.insert(0, str(BENCH.parent))  # as when the script runs: its helpers beside it
_SPEC = importlib.util.spec_from_file_location("fuzz_outputs", BENCH)
fuzz_outputs = sys.modules.setdefault("fuzz_outputs", importlib.util.module_from_spec(_SPEC))
_SPEC.loader.exec_module(fuzz_outputs)


def test_a_short_run_has_no_false_verdict_and_no_traceback():
    tallies = fuzz_outputs.run_fuzz(cases=400, seed=1)
    assert sum(t.cases for t in tallies.values()) == 400
    for name, tally in tallies.items():
        assert tally.cases > 0, name
        assert tally.expected_fail > 0, name
        assert (tally.false_passes, tally.false_failures, tally.tracebacks) == (0, 0, 0), (name, tally.examples[:3])


def test_the_run_is_deterministic():
    first = fuzz_outputs.table(fuzz_outputs.run_fuzz(cases=60, seed=7))
    assert fuzz_outputs.table(fuzz_outputs.run_fuzz(cases=60, seed=7)) == first


def test_the_seeds_judge_as_their_fixtures_say():
    targets = {t.name: t for t in fuzz_outputs.targets()}
    passing = {t: sorted(s.name for s in targets[t].seeds if s.baseline.passed) for t in targets}
    assert passing["nvbandwidth"] == [
        "gb200-2node-multinode_device_to_device_memcpy_read_ce.txt",
        "generated-gb200-18node-multinode_device_to_device_memcpy_read_ce.txt",
        "h200x2-device_to_device_memcpy_read_ce.json",
        "h200x2-device_to_device_memcpy_read_ce.txt",
        "h200x2-device_to_device_memcpy_write_ce.json",
        "h200x2-device_to_device_memcpy_write_ce.txt",
        "invented-h200x2-bidirectional_read_ce.json",
        "invented-h200x2-bidirectional_read_ce.txt",
    ]
    assert passing["nccl"] == ["gb200-2node-all_reduce_perf-mnnvl.txt"]
    assert passing["nvidia-smi -q -x"] == ["synth-gb200-driver-535-nvidia-smi-q.xml", "synth-gb200-nvidia-smi-q.xml"]


def test_a_parser_that_passes_everything_is_caught():
    # Damaged outputs that pass are false passes; cosmetic changes of the failing seeds that pass are false failures.
    target = fuzz_outputs.nccl_target()
    for seed in target.seeds:
        seed.baseline = target.run(seed.content, seed)
    target.observe = lambda content, options: fuzz_outputs.Observation(True, "same", "")
    outcomes = [fuzz_outputs.run_case(target, random.Random(n)) for n in range(200)]
    assert any(problem == "false pass" for kind, _seed, _name, problem in outcomes if kind == "damaging")
    assert any(
        str(problem).startswith("false failure") for kind, _seed, _name, problem in outcomes if kind == "cosmetic"
    )
    assert all(problem is None for kind, _seed, _name, problem in outcomes if kind == "neutral")


def test_main_prints_the_table_and_exits_0(capsys):
    assert fuzz_outputs.main(["--cases", "50", "--seed", "2"]) == 0
    out = capsys.readouterr().out
    assert "| parser | cases | expected-fail | false passes | false failures (cosmetic) | tracebacks |" in out
