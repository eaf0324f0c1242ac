# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A rack's GPUs as nvbandwidth numbers them across its ranks: GPU ``g`` of a run over ``nodes`` (the trays of its
workers, in rank order) with ``gpus_per_node`` GPUs each is on ``nodes[g // gpus_per_node]``. The bandwidth rule
names the trays of a failing pair with it, and the history the tray of each figure it keeps. A leaf."""

from __future__ import annotations

from typing import Optional, Sequence


def node_of(gpu: int, nodes: Optional[Sequence[str]], gpus_per_node: Optional[int]) -> Optional[str]:
    """The tray of GPU ``gpu``; None when the run named no trays or the index is past them."""
    if not nodes or not gpus_per_node or gpus_per_node < 1:
        return None
    index = gpu // gpus_per_node
    return str(nodes[index]) if 0 <= index < len(nodes) else None
