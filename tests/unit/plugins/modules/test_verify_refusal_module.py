# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""verify_refusal as Ansible runs it: the error records are written (not in check mode) where the report reads them."""

from __future__ import annotations

import json

from ansible_collections.gpu_fabric.mnnvl.plugins.modules import verify_refusal

from tests.unit.plugins.modules.runner import run_module

ARGS = {"task": "Refuse it", "reason": "a mistake", "checks": "gpu_health", "run_id": "run1"}


def test_each_check_gets_its_error_record_in_the_records_directory(tmp_path):
    result = run_module(verify_refusal.main, dict(ARGS, records_dir=str(tmp_path / "records")))
    assert (result["failed"], result["changed"], result["verdict"]) == (False, True, "error")
    names = ["cliques", "imex_channel", "nvbandwidth", "gpu_health"]
    assert result["files"] == [str(tmp_path / "records" / name / "fleet.json") for name in names]
    record = json.loads((tmp_path / "records" / "gpu_health" / "fleet.json").read_text())
    assert (record["check"], record["verdict"], record["run_id"]) == ("gpu_health", "error", "run1")
    assert record["summary"].endswith("the run was refused at the task 'Refuse it': a mistake")


def test_check_mode_writes_nothing(tmp_path):
    result = run_module(verify_refusal.main, dict(ARGS, records_dir=str(tmp_path / "records")), check_mode=True)
    assert (result["failed"], result["changed"], result["files"]) == (False, False, [])
    assert sorted(result["records"]) == ["cliques", "gpu_health", "imex_channel", "nvbandwidth"]
    assert not (tmp_path / "records").exists()
