# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""docs/verification.md's fault matrix is the one the integration test proves: both read sim/simrack/hardware.py's
CATCHES (tests/integration/test_fault_matrix.py asserts each faulted tray against it)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "sim"))
from simrack import hardware  # noqa: E402

DOC = REPO / "docs" / "verification.md"
BLOCK = re.compile(r"<!-- fault-matrix: [^>]*-->\n(.*?)<!-- /fault-matrix -->", re.S)


def test_the_documented_fault_matrix_is_rendered_from_catches():
    (table,) = BLOCK.findall(DOC.read_text(encoding="utf-8"))
    assert table == hardware.catches_table()


def test_every_hardware_fault_has_a_row_and_every_cell_is_a_refusal_of_a_known_check():
    assert set(hardware.CATCHES) == set(hardware.HARDWARE_FAULTS)
    for fault, refused in hardware.CATCHES.items():
        assert refused, f"{fault}: no check refuses it"
        assert set(refused) <= set(hardware.CHECK_ORDER), fault
        assert set(refused.values()) <= {"failed", "error"}, fault


def test_a_row_shows_each_refusal_in_its_check_column():
    rows = {line.split(" | ")[0].strip("| `"): line for line in hardware.catches_table().splitlines()[2:]}
    cells = [cell.strip() for cell in rows["row-remap-pending"].strip("|").split("|")][1:]
    assert dict(zip(hardware.CHECK_ORDER, cells)) == {
        "cliques": "-",
        "imex_channel": "-",
        "nvbandwidth": "-",
        "nccl": "-",
        "gpu_health": "**failed**",
        "dcgm_diag": "**failed**",
    }
