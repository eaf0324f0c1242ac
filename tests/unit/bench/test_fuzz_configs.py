# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

import importlib.util
import sys

from tests.conftest import REPO_ROOT

_SPEC = importlib.util.spec_from_file_location("fuzz_configs", REPO_ROOT / "bench" / "fuzz_configs.py")
fuzz_configs = importlib.util.module_from_spec(_SPEC)
sys.modules["fuzz_configs"] = fuzz_configs
_SPEC.loader.exec_module(fuzz_configs)


def test_the_fuzz_core_finds_nothing_lost_nothing_crashed_nothing_bad_touched():
    tallies = fuzz_configs.fuzz(count=40, seed=7)
    assert [tally.editor for tally in tallies] == ["containerd_config", "imex_config"]
    for tally in tallies:
        assert tally.counts["files tried"] == 40
        assert {column: tally.counts[column] for column in fuzz_configs.FAILING} == dict.fromkeys(
            fuzz_configs.FAILING, 0
        ), tally.examples
        # the generated requests are mostly valid files, and those are changed as asked
        assert tally.counts["changed as asked"] >= 25
    assert fuzz_configs.main(["--count", "3", "--seed", "7"]) == 0


def test_the_fuzz_is_deterministic_and_its_checks_can_fail():
    first = [t.counts for t in fuzz_configs.fuzz(count=12, seed=3)]
    assert [t.counts for t in fuzz_configs.fuzz(count=12, seed=3)] == first
    # the checks themselves: a dropped comment and a changed untargeted line are both reported as lost
    before = "a = 1  # one\nb = 2\n"
    assert fuzz_configs._lost_lines(before, "a = 5\nb = 2\n", lambda line: line.startswith("a")) == ["a = 1  # one\n"]
    assert fuzz_configs._lost_lines(before, "a = 1  # one\nb = 3\n", lambda line: line.startswith("a")) == ["b = 2\n"]
