# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""fabric_verify writes each check's view into its records, run as Ansible runs it: one hardware fault of the sim's
model (a row remap pending on GPU 2 of one tray) shows as that tray's findings of gpu_health and dcgm_diag. The logs
are the sim's stand-in outputs (sim/simrack/programs); the API server is a stand-in (tray_pod_cluster.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.unit.plugins.modules.tray_pod_cluster import TRAYS, stand_in, tray, verify

REPO_ROOT = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(REPO_ROOT / "sim"))
from simrack.programs import dcgm_diag, gpu_health  # noqa: E402

SICK = "gb200-r0-t1"
FAULTS = {"row-remap-pending": {"node": SICK, "gpu": "2"}}
LOGS = {
    "gpu_health": ("gpu-health", lambda node: gpu_health.log({}, tray(node), FAULTS)),
    "dcgm_diag": ("dcgm-diag", lambda node: dcgm_diag.log({}, tray(node), FAULTS)[0]),
}


def records_of(monkeypatch, tmp_path, check: str) -> dict:
    """The record fabric_verify returns for the rack, and the one it wrote, of ``check`` on the sick rack."""
    prefix, log = LOGS[check]
    stand_in(monkeypatch, prefix, {node: log(node) for node in TRAYS})
    (record,) = verify(tmp_path, check)["records"]
    written = json.loads((tmp_path / check / f"{record['rack']}.json").read_text())
    return record, written


def test_each_tray_pod_check_writes_the_sick_trays_findings_into_its_record(monkeypatch, tmp_path):
    for check in LOGS:
        record, written = records_of(monkeypatch, tmp_path, check)
        assert record["failed_nodes"] == [SICK], record["summary"]
        (finding,) = record["view"]["findings"]
        assert finding["tray"] == SICK
        assert finding["problems"] and all(line.startswith("GPU 2") for line in finding["problems"]), finding
        assert written["view"] == record["view"]
