# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""``nvidia-smi nvlink -e``: each GPU's NVLink error and recovery counters, per link (standard library only).

The driver prints ``GPU 0: NVIDIA GB200 (UUID: GPU-...)`` and then one line per link and counter,
``\\t Link 0: Malformed packet Errors: 0`` (Blackwell's names; Hopper prints ``Replay Errors``, ``Recovery
Errors``, ...). A value is kept as printed: a count, or a bit error rate. No Kubernetes client here.
"""

from __future__ import annotations

import re
from typing import Dict, Optional

_GPU = re.compile(r"^GPU (\d+): ")
_COUNTER = re.compile(r"^\s*Link (\d+): (.+?): (\S+)\s*$")

NvlinkCounters = Dict[int, Dict[int, Dict[str, str]]]  # GPU index -> link -> counter -> value


def parse_nvlink_errors(text: str) -> NvlinkCounters:
    """``nvidia-smi nvlink -e``: GPU index -> link -> counter -> value (as printed)."""
    counters: NvlinkCounters = {}
    gpu: Optional[int] = None
    for line in text.splitlines():
        head = _GPU.match(line)
        if head:
            gpu = int(head.group(1))
            counters.setdefault(gpu, {})
            continue
        counter = _COUNTER.match(line)
        if counter and gpu is not None:
            counters[gpu].setdefault(int(counter.group(1)), {})[counter.group(2)] = counter.group(3)
    return counters


def count(value: object) -> int:
    """A counter's value as a count; a rate or ``N/A`` is 0."""
    return int(value) if isinstance(value, str) and value.isdigit() else 0
