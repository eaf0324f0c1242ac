# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one judge of a kept record: what the history's readers leave out and what cannot be a baseline."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import bandwidth_thresholds, history
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.history import HistoryError
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.history_baseline import baseline_for
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.history_runs import record_run
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.record_validation import (
    baseline_problems,
    figure_problem,
    number_problem,
    record_problems,
)

PRODUCT = [{"kind": "product", "gbps": 821.41, "source": "GB200 NVL72, driver 580.95.05"}]


def kept(median=820.0, **details):
    return {
        "check": "nvbandwidth",
        "rack": "rack0",
        "verdict": "passed",
        "started": "2026-12-01T10:00:00Z",
        "details": {"median_gbps": median, "min": median, "matrix": [[None, median], [median, None]], **details},
    }


@pytest.mark.parametrize(
    "record, problems",
    [
        ([820.0], ["it holds a list, not an object"]),
        ({"details": ["median_gbps"]}, ["details ['median_gbps'] is not an object"]),
        ({"details": {"median_gbps": float("nan")}}, ["details.median_gbps nan is not a finite number"]),
        ({"details": {"matrix": [[None, float("inf")]]}}, ["details.matrix.0.1 inf is not a finite number"]),
        ({"details": {"median_gbps": "fast"}}, ["details.median_gbps 'fast' is not a number"]),
        ({"details": {"median_gbps": "NaN"}}, ["details.median_gbps 'NaN' is not a finite number"]),
        (
            {"details": {"min": True, "sum": "x" * 80}},
            [
                "details.min True is a boolean, not a number",
                "details.sum 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx... is not a number",
            ],
        ),
    ],
)
def test_a_record_no_reader_can_use_is_named_by_its_entry(record, problems):
    assert record_problems(record) == problems


def test_a_reader_takes_a_numeric_string_and_a_measured_zero_a_baseline_only_a_figure_above_0():
    assert record_problems(kept(median="810.5")) == []
    assert record_problems(kept(min=0)) == []
    assert record_problems(kept(median=0)) == []
    assert record_problems(kept(median=0, matrix=None), baseline=True) == ["median_gbps 0 is not above 0"]
    assert record_problems({"details": {}}, baseline=True) == ["median_gbps is missing"]


def test_a_baseline_names_its_median_and_cells_before_anything_else():
    record = kept(median=float("nan"))
    assert record_problems(record, baseline=True) == [
        "median_gbps nan is not a finite number",
        "matrix row 0 column 1 nan is not a finite number",
        "matrix row 1 column 0 nan is not a finite number",
    ]


def test_a_baseline_record_a_reader_refuses_is_refused_as_a_baseline():
    # its median and matrix are figures, but details.min is none: the trend leaves it out, so it sets no bar
    assert baseline_problems(kept(min="n/a")["details"]) == []
    assert record_problems(kept(min="n/a"), baseline=True) == ["details.min 'n/a' is not a number"]


def test_the_history_refuses_as_baseline_a_record_its_readers_leave_out(tmp_path):
    record_run(str(tmp_path), "r1", [dict(kept(), references=PRODUCT)], keep_runs=0, keep_days=0)
    path = tmp_path / "r1" / "nvbandwidth" / "rack0.json"
    written = json.loads(path.read_text())
    written["details"]["references"] = PRODUCT
    path.write_text(json.dumps(written))
    assert baseline_for(str(tmp_path), "nvbandwidth", "rack0")["median_gbps"] == 820.0
    written["details"]["min"] = "n/a"
    path.write_text(json.dumps(written))
    warnings = []
    assert history.kept_record(str(tmp_path), "r1", "nvbandwidth", "rack0", warnings) is None
    assert warnings[0].startswith(f"the kept record {path}: details.min 'n/a' is not a number; left out")
    with pytest.raises(HistoryError) as refused:
        baseline_for(str(tmp_path), "nvbandwidth", "rack0")
    assert str(refused.value).startswith(
        f"the kept record {path} (last passing run r1) cannot be the baseline of nvbandwidth/rack0: "
        "details.min 'n/a' is not a number; remove that run"
    )


@pytest.mark.parametrize(
    "value, why",
    [
        (True, "True is a boolean, not a number"),
        ("n/a", "'n/a' is not a number"),
        (None, "None is not a number"),
        (float("inf"), "inf is not a finite number"),
        ("-inf", "'-inf' is not a finite number"),
    ],
)
def test_a_figure_and_a_number_refuse_what_is_no_number_alike(value, why):
    assert (number_problem(value), figure_problem(value)) == (why, why)


def test_a_figure_is_above_0_and_a_number_any_finite_one():
    assert (number_problem(-1.5), figure_problem(-1.5)) == (None, "-1.5 is not above 0")
    assert (number_problem("821.41"), figure_problem("821.41")) == (None, None)


def test_the_bandwidth_rule_judges_a_baseline_by_the_same_function():
    assert bandwidth_thresholds.baseline_problems is baseline_problems
    assert bandwidth_thresholds.figure_problem is figure_problem


def test_the_validator_is_a_leaf_that_loads_nothing_of_the_collection():
    from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import record_validation

    root = Path(record_validation.__file__).parents[5]  # the directory that holds ansible_collections
    code = (
        "import sys; import ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.record_validation; "
        "print(sorted(m for m in sys.modules if m.startswith(('kubernetes', 'ansible_collections.gpu_fabric.mnnvl.'))"
        " and not m.endswith(('.plugins', '.module_utils', '.record_validation'))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env={"PYTHONPATH": str(root)}, capture_output=True, text=True, check=False
    )
    assert (out.returncode, out.stdout.strip()) == (0, "[]"), out.stderr
