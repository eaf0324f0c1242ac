# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""nvlink_counters: ``nvidia-smi nvlink -e`` as the driver prints it (Hopper's and Blackwell's counter names)."""

from __future__ import annotations

from pathlib import Path

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.nvlink_counters import count, parse_nvlink_errors

SMI = Path(__file__).resolve().parents[4] / "tests" / "fixtures" / "nvidia-smi"


def test_a_real_machine_with_nvlink_off_prints_no_counter():
    assert (SMI / "h100-device-nvidia-smi-nvlink-e.txt").read_text() == ""
    assert parse_nvlink_errors("") == {}


def test_counters_are_read_per_gpu_and_link_as_printed():
    text = (
        "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1)\n\t Link 0: Replay Errors: 0\n\t Link 0: Recovery Errors: 2\n"
        "GPU 1: NVIDIA GB200 (UUID: GPU-2)\n\t Link 17: Effective BER: 1.5e-15\n"
    )
    assert parse_nvlink_errors(text) == {
        0: {0: {"Replay Errors": "0", "Recovery Errors": "2"}},
        1: {17: {"Effective BER": "1.5e-15"}},
    }
    assert [count(v) for v in ("2", "1.5e-15", "N/A", None)] == [2, 0, 0, 0]
