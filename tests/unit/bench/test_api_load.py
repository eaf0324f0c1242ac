# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""bench/api_load.py: a run's requests counted from a real API server's audit log, and the table of them."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[3]
BENCH = REPO_ROOT / "bench" / "api_load.py"
sys.path.insert(0, str(BENCH.parent))  # as when the script runs: its helpers beside it
_SPEC = importlib.util.spec_from_file_location("api_load", BENCH)
api_load = sys.modules.setdefault("api_load", importlib.util.module_from_spec(_SPEC))
_SPEC.loader.exec_module(api_load)

LOG = REPO_ROOT / "tests" / "fixtures" / "k8s" / "audit-serviceaccount.jsonl"


def test_a_run_is_counted_by_verb_with_its_stored_writes_apart():
    summary = api_load.summarize(api_load.audit.requests(LOG), trays=3)

    assert summary["requests"] == 15
    assert summary["per_tray"] == 5.0
    assert (summary["get"], summary["list"], summary["watch"]) == (6, 2, 1)
    # the create, the label patch and the delete; not the dry runs nor the access review
    assert (summary["writes"], summary["dry_runs"]) == (3, 2)
    assert summary["top"][0] == ("get configmaps", 4)


def test_the_table_has_a_row_per_run_and_size():
    counted = api_load.summarize(api_load.audit.requests(LOG), trays=3)
    result = {"size": "1x3", "racks": 1, "trays": 3, **{name: dict(counted, wall_s=1.0) for name in api_load.RUNS}}

    lines = api_load.table([result]).splitlines()

    assert len(lines) == 2 + len(api_load.RUNS)
    assert lines[2].startswith("| 1x3 | 3 | cluster.yml again | 1.0 | 15 | 5.0 | 6 | 2 | 1 | 3 | get configmaps 4")
