# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""bench/fuzz_host_outputs.py: a short seeded run finds nothing, its seeds judge as their fixtures say, and its
counters do count (a parser that passes everything, or raises on a null, is caught)."""

from __future__ import annotations

import importlib.util
import json
import random
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[3] / "bench" / "fuzz_host_outputs.py"
sys.path.insert(0, str(BENCH.parent))  # as when the script runs: its helpers beside it
_SPEC = importlib.util.spec_from_file_location("fuzz_host_outputs", BENCH)
fuzz = sys.modules.setdefault("fuzz_host_outputs", importlib.util.module_from_spec(_SPEC))
_SPEC.loader.exec_module(fuzz)


def test_a_short_run_has_no_false_verdict_and_no_traceback():
    tallies = fuzz.run_fuzz(cases=400, seed=1)
    assert sorted(tallies) == ["dcgm_diag", "fabric_health", "gpu_memory", "kernel_log", "nvlink_status"]
    assert sum(t.cases for t in tallies.values()) == 400
    for name, tally in tallies.items():
        assert tally.cases > 0 and tally.expected_fail > 0, name
        assert (tally.false_passes, tally.false_failures, tally.tracebacks) == (0, 0, 0), (name, tally.examples[:3])


def test_the_run_is_deterministic():
    first = fuzz.table(fuzz.run_fuzz(cases=60, seed=7))
    assert fuzz.table(fuzz.run_fuzz(cases=60, seed=7)) == first


def test_the_seeds_judge_as_their_fixtures_say():
    targets = {t.name: t for t in fuzz.targets()}
    passing = {name: sorted(s.name for s in t.seeds if s.baseline.passed) for name, t in targets.items()}
    assert passing["dcgm_diag"] == ["dcgm-4.6.0-r1-gb200-pass.json", "dcgm-r1-imex-unhealthy-hypothetical.json"]
    assert passing["kernel_log"] == ["h100-device-dmesg-T-nvrm-boot.txt", "h100-device-dmesg-nvrm-boot.txt"]
    assert len(passing["gpu_memory"]) == 4 and len(passing["fabric_health"]) == 4
    assert passing["nvlink_status"] == ["h200x2-nvidia-smi-nvlink-s.txt", "synth-gb200-nvidia-smi-nvlink-s.txt"]
    skipped = next(s for s in targets["dcgm_diag"].seeds if s.name == "dcgm-4.6.0-r3-gb200-pass-nccl-skip.json")
    assert skipped.baseline.reason.startswith("GPU 0, 1, 2, 3: nccl_tests skipped, so not proven")


def test_a_parser_that_passes_everything_is_caught():
    target = fuzz.kernel_target()
    for seed in target.seeds:
        seed.baseline = target.run(seed.content)
    target.observe = lambda content: fuzz.Observation(True, "same", "")
    outcomes = [fuzz.run_case(target, random.Random(n)) for n in range(200)]
    assert any(problem == "false pass" for kind, _seed, _name, problem in outcomes if kind == "damaging")
    assert any(str(problem).startswith("false failure") for kind, _s, _n, problem in outcomes if kind == "cosmetic")


def test_a_parser_that_raises_on_a_null_is_counted_as_a_traceback():
    target = fuzz.dcgm_target()
    for seed in target.seeds:
        seed.baseline = target.run(seed.content)

    def strict(content):  # the shape of a parser that indexes every value it expects
        for _test, results in fuzz.results_of(json.loads(content["text"])):
            assert all(r["status"] is not None for r in results)
        return fuzz.dcgm_observe(content)

    target.observe = strict
    target.mutations = {
        kind: [m for m in found if m[0] == "null or junk anywhere"] or found for kind, found in target.mutations.items()
    }
    outcomes = [fuzz.run_case(target, random.Random(n)) for n in range(300)]
    assert any(str(problem).startswith("traceback: TypeError") for _k, _s, _n, problem in outcomes)


def test_main_prints_the_table_and_exits_0(capsys):
    assert fuzz.main(["--cases", "50", "--seed", "2"]) == 0
    assert "| parser | cases | expected-fail | false passes | false failures (cosmetic) | tracebacks |" in (
        capsys.readouterr().out
    )
