# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpu_memory: the memory faults of real ``nvidia-smi -q -x`` reports (tests/fixtures/nvidia-smi), clean, and each
fault the driver can report, set in a copy of the GB200 report (a bad case written from the real element names)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.gpu_memory import memory_problems, parse_memory_xml

SMI = Path(__file__).resolve().parents[4] / "tests" / "fixtures" / "nvidia-smi"
GB200 = (SMI / "synth-gb200-nvidia-smi-q.xml").read_text()


def with_on_gpu(gpu: int, old: str, new: str) -> str:
    """The GB200 report with ``old`` replaced by ``new`` in the ``gpu``-th <gpu> element only."""
    parts = GB200.split("<gpu id=")
    assert old in parts[gpu + 1]
    parts[gpu + 1] = parts[gpu + 1].replace(old, new, 1)
    return "<gpu id=".join(parts)


@pytest.mark.parametrize(
    "fixture", ["h100-device-nvidia-smi-q.xml", "h200-device-nvidia-smi-q.xml", "synth-gb200-nvidia-smi-q.xml"]
)
def test_the_real_reports_have_no_memory_fault(fixture):
    gpus = parse_memory_xml((SMI / fixture).read_text())
    assert gpus and all(g.problems == [] for g in gpus)


def test_each_gpu_is_read_with_its_bus_id_in_report_order():
    assert [(g.index, g.pci_bus_id) for g in parse_memory_xml(GB200)] == [
        (0, "00000008:01:00.0"),
        (1, "00000009:01:00.0"),
        (2, "00000018:01:00.0"),
        (3, "00000019:01:00.0"),
    ]


@pytest.mark.parametrize(
    "element, expected",
    [
        ("unrepairable_memory", "its memory has a fault it cannot repair: replace the GPU"),
        ("channel_repair_pending", "a memory channel repair is pending: reset the GPU to apply it"),
        ("tpc_repair_pending", "a TPC repair is pending: reset the GPU to apply it"),
        ("remapped_row_pending", "a row remapping is pending: reset the GPU to apply it"),
        ("remapped_row_failure", "row remapping failed: the GPU has no spare rows left; replace it"),
    ],
)
def test_each_memory_fault_is_named_on_its_gpu(element, expected):
    report = with_on_gpu(2, f"<{element}>No</{element}>", f"<{element}>Yes</{element}>")
    assert memory_problems(report) == {2: [expected]}


def test_uncorrectable_errors_are_counted_and_na_is_no_fault():
    report = with_on_gpu(1, "<dram_uncorrectable>0</dram_uncorrectable>", "<dram_uncorrectable>3</dram_uncorrectable>")
    report = report.replace(
        "<pending_retirement>N/A</pending_retirement>", "<pending_retirement>Yes</pending_retirement>", 1
    )
    assert memory_problems(report) == {
        0: ["a page retirement is pending: reset the GPU to apply it"],
        1: ["3 volatile uncorrectable ECC error(s) (dram_uncorrectable)"],
    }


def test_text_that_is_not_the_report_is_one_line_error():
    with pytest.raises(ValueError, match=r"^not XML: "):
        memory_problems("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.")
    with pytest.raises(ValueError, match=r"^root element is <gpu>, expected <nvidia_smi_log>$"):
        memory_problems("<gpu/>")


def test_the_parser_loads_no_kubernetes_client_and_no_check():
    from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import gpu_memory

    root = Path(gpu_memory.__file__).parents[5]  # the directory that holds ansible_collections
    code = (
        "import sys; import ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.gpu_memory; "
        "print(sorted(m for m in sys.modules if m.startswith(('kubernetes', 'ansible_collections')) "
        "and ('kube' in m or '.checks' in m or m.startswith('kubernetes'))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env={"PYTHONPATH": str(root)}, capture_output=True, text=True, check=False
    )
    assert (out.returncode, out.stdout.strip()) == (0, "[]"), out.stderr
