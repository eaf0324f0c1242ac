# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""bench/parser_throughput.py: the outputs it times are healthy, distinct, and judged as the module judges."""

from __future__ import annotations

import importlib.util
import random
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[3] / "bench" / "parser_throughput.py"
sys.path.insert(0, str(BENCH.parent))  # as when the script runs: its helpers beside it
_SPEC = importlib.util.spec_from_file_location("parser_throughput", BENCH)
parser_throughput = sys.modules.setdefault("parser_throughput", importlib.util.module_from_spec(_SPEC))
_SPEC.loader.exec_module(parser_throughput)


def test_the_variants_are_distinct_healthy_72_gpu_outputs():
    text = parser_throughput.FIXTURE.read_text()
    rng = random.Random(3)
    variants = [parser_throughput.variant(text, rng) for _index in range(5)]
    assert len(set(variants)) == 5 and text not in variants
    for variant in variants:
        result = parser_throughput.judge(variant)
        assert result["passed"], result
        assert result["gpus"] == 72


def test_a_variant_with_a_wrong_sum_is_judged_by_the_same_call():
    text = parser_throughput.variant(parser_throughput.FIXTURE.read_text(), random.Random(1))
    broken = parser_throughput._SUM.sub(lambda m: f"SUM {m.group(1)} 1.00", text, count=1)
    assert not parser_throughput.judge(broken)["passed"]
