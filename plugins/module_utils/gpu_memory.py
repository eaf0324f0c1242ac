# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The memory faults ``nvidia-smi -q -x`` reports per GPU, as records (standard library only).

Read per ``<gpu>`` (index = its place in the report, as ``nvidia_smi.parse_query_xml`` numbers them), from the
elements the driver prints (the captures of ``tests/fixtures/nvidia-smi/*-nvidia-smi-q.xml``, driver 580):

* ``ecc_errors/volatile``: uncorrectable DRAM and SRAM errors since the driver loaded (``dram_uncorrectable``,
  ``sram_uncorrectable``, ``sram_uncorrectable_parity``, ``sram_uncorrectable_secded``; Hopper's older
  ``double_bit/total``);
* ``ecc_errors/aggregate/sram_threshold_exceeded``: the SRAM's uncorrectable errors passed the driver's limit;
* ``ecc_errors/channel_repair_pending``, ``tpc_repair_pending``: a repair that waits for a GPU reset;
* ``ecc_errors/unrepairable_memory``: memory the GPU can no longer repair;
* ``remapped_rows/remapped_row_pending`` and ``remapped_row_failure``; ``retired_pages/pending_retirement``.

``N/A`` (a GPU without the feature) reads as no fault. The parser imports nothing of the Kubernetes client.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from typing import Dict, List, Optional

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.nvidia_smi import query_xml_root

VOLATILE_UNCORRECTABLE = (
    "dram_uncorrectable",
    "sram_uncorrectable",
    "sram_uncorrectable_parity",
    "sram_uncorrectable_secded",
    "double_bit/total",
)
# element (below <gpu>) whose "Yes" is a fault -> what it means and what to do
YES_FAULTS = (
    ("remapped_rows/remapped_row_pending", "a row remapping is pending: reset the GPU to apply it"),
    ("remapped_rows/remapped_row_failure", "row remapping failed: the GPU has no spare rows left; replace it"),
    ("retired_pages/pending_retirement", "a page retirement is pending: reset the GPU to apply it"),
    ("ecc_errors/channel_repair_pending", "a memory channel repair is pending: reset the GPU to apply it"),
    ("ecc_errors/tpc_repair_pending", "a TPC repair is pending: reset the GPU to apply it"),
    ("ecc_errors/unrepairable_memory", "its memory has a fault it cannot repair: replace the GPU"),
    (
        "ecc_errors/aggregate/sram_threshold_exceeded",
        "its SRAM's uncorrectable errors exceeded the driver's threshold: replace the GPU",
    ),
)


@dataclass
class GpuMemory:
    """One GPU's memory faults: its volatile uncorrectable counts and the pending or failed repairs."""

    index: int
    pci_bus_id: Optional[str] = None
    uncorrectable: Dict[str, int] = field(default_factory=dict)  # counter -> count (> 0 only)
    faults: List[str] = field(default_factory=list)  # the meaning of each "Yes" of YES_FAULTS

    @property
    def problems(self) -> List[str]:
        counts = [
            f"{count} volatile uncorrectable ECC error(s) ({name.replace('/', ' ')})"
            for name, count in self.uncorrectable.items()
        ]
        return counts + self.faults


def _count(element: Optional[ET.Element]) -> int:
    text = (element.text or "").strip() if element is not None else ""
    return int(text) if text.isdigit() else 0


def parse_memory_xml(text: str) -> List[GpuMemory]:
    """Every GPU of ``nvidia-smi -q -x`` with its memory faults; ValueError (one line) when it is not that XML."""
    root = query_xml_root(text)
    found = []
    for index, gpu in enumerate(root.findall("gpu")):
        memory = GpuMemory(index, (gpu.findtext("pci/pci_bus_id") or gpu.get("id") or "").strip() or None)
        for name in VOLATILE_UNCORRECTABLE:
            count = _count(gpu.find(f"ecc_errors/volatile/{name}"))
            if count:
                memory.uncorrectable[name] = count
        for path, meaning in YES_FAULTS:
            if (gpu.findtext(path) or "").strip() == "Yes":
                memory.faults.append(meaning)
        found.append(memory)
    return found


def memory_problems(text: str) -> Dict[int, List[str]]:
    """Per GPU index with a fault, one line per fault; ValueError when ``text`` is not ``nvidia-smi -q -x``."""
    return {gpu.index: gpu.problems for gpu in parse_memory_xml(text) if gpu.problems}
