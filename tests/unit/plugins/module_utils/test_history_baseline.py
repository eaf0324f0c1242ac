# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""history_baseline: a rack's baseline among its kept runs, as the nvbandwidth rule reads it."""

from __future__ import annotations

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.bandwidth_thresholds import Baseline
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.history_baseline import (
    baseline_for,
    options_with_baseline,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.history_runs import pin_run
from kept_runs import TESTCASE, keep


def test_baseline_is_the_last_passing_run_skipping_failed_ones(tmp_path):
    keep(tmp_path, "r1", 1, median=810.0)
    keep(tmp_path, "r2", 2, median=821.5)
    keep(tmp_path, "r3", 3, median=600.0, verdict="failed")
    baseline = baseline_for(str(tmp_path), "nvbandwidth", "rack0", "device_to_device_memcpy_read_ce")
    assert baseline == {
        "run_id": "r2",
        "recorded_at": "2026-12-02T10:00:30Z",
        "median_gbps": 821.5,
        "matrix": [[None, 821.5], [821.5, None]],
        "rank_nodes": ["tray0", "tray1"],
        "driver_version": None,
        "source": "last passing run r2",
    }
    # the run being judged never is its own baseline; another testcase or rack has none
    assert baseline_for(str(tmp_path), "nvbandwidth", "rack0", exclude_run="r2")["run_id"] == "r1"
    assert baseline_for(str(tmp_path), "nvbandwidth", "rack0", "host_to_device_memcpy_ce") is None
    assert baseline_for(str(tmp_path), "nvbandwidth", "rack9") is None
    assert baseline_for(str(tmp_path / "none"), "nvbandwidth", "rack0") is None


def test_the_nvbandwidth_rule_reads_the_baseline_as_given(tmp_path):
    keep(tmp_path, "r1", 1, median=821.5)
    baseline = Baseline.from_record(baseline_for(str(tmp_path), "nvbandwidth", "rack0", TESTCASE))
    assert (baseline.median_gbps, baseline.source) == (821.5, "last passing run r1")
    assert (baseline.matrix, baseline.nodes) == ([[None, 821.5], [821.5, None]], ["tray0", "tray1"])


def test_baseline_prefers_the_pinned_run(tmp_path):
    keep(tmp_path, "r1", 1, median=815.0)
    keep(tmp_path, "r2", 2, median=821.5)
    pin_run(str(tmp_path), "r1")
    baseline = baseline_for(str(tmp_path), "nvbandwidth", "rack0")
    assert (baseline["run_id"], baseline["median_gbps"], baseline["source"]) == ("r1", 815.0, "pinned run r1")
    # a pinned run without that rack: the last passing run of the rack
    keep(tmp_path, "r3", 3, rack="rack1", median=700.0)
    pin_run(str(tmp_path), "r3")
    assert baseline_for(str(tmp_path), "nvbandwidth", "rack0")["source"] == "last passing run r2"


def test_options_with_baseline_sets_the_key_only_with_a_history(tmp_path):
    keep(tmp_path, "r1", 1)
    options = {"testcase": "device_to_device_memcpy_read_ce", "min_fraction_of_peak": 0.85}
    assert options_with_baseline(options, "", "nvbandwidth", "rack0") == options
    with_baseline = options_with_baseline(options, str(tmp_path), "nvbandwidth", "rack0", run_id="r2")
    assert with_baseline["baseline"]["source"] == "last passing run r1"
    assert options_with_baseline(options, str(tmp_path), "nvbandwidth", "rack0", run_id="r1")["baseline"] is None
    assert "baseline" not in options
