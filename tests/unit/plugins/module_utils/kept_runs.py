# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Kept nvbandwidth runs as the history tests build them: a rack's record as the check writes it, kept by
``history_runs.record_run``; a GPU peer matrix of two trays."""

from __future__ import annotations

from datetime import datetime, timezone

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.history import read_index
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.history_runs import record_run

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=timezone.utc)
TESTCASE = "device_to_device_memcpy_read_ce"


def nvb_record(run_id, rack="rack0", median=820.0, verdict="passed", started="2026-12-01T10:00:00Z", low=None):
    matrix = [[None, median], [median, None]]
    return {
        "check": "nvbandwidth",
        "rack": rack,
        "run_id": run_id,
        "verdict": verdict,
        "passed": verdict == "passed",
        "outcome": verdict,
        "started": started,
        "finished": started.replace(":00Z", ":30Z"),
        "nodes": ["tray0", "tray1"],
        "details": {
            "testcase": "device_to_device_memcpy_read_ce",
            "median_gbps": median,
            "min": low if low is not None else median,
            "matrix": matrix,
            "rank_nodes": ["tray0", "tray1"],
            # held against a product reference: a passing run of it is a baseline (history_baseline.baseline_for)
            "references": [{"kind": "product", "gbps": 821.41, "source": "GB200 NVL72, driver 580.95.05"}],
        },
    }


def keep(tmp_path, run_id, day, **kwargs):
    started = f"2026-12-{day:02d}T10:00:00Z"
    return record_run(str(tmp_path), run_id, [nvb_record(run_id, started=started, **kwargs)], now=NOW)


def run_ids(tmp_path):
    return [e["run_id"] for e in read_index(str(tmp_path))["runs"]]


def square(values):
    """A 4-GPU peer matrix (2 trays x 2 GPUs) with every pair at 820 but those given as {(src, dst): gbps}."""
    return [[None if r == c else values.get((r, c), 820.0) for c in range(4)] for r in range(4)]
