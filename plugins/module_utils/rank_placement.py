# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Which tray holds which GPU ranks of a bandwidth matrix, from a record's details (a leaf: imports nothing).

The nvbandwidth check's view names the trays of a failing pair with it, the report's heatmap its rows and
columns.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple


def gpu_placement(details: Dict[str, Any], nodes: Optional[List[str]] = None) -> List[Tuple[str, str]]:
    """Which tray holds which GPU ranks of the matrix: [("0-3", "gb200-r0-t0"), ...].

    ``details.rank_nodes`` (the tray of each MPI worker in rank order, as the check saw them placed) wins
    over ``nodes`` (the record's trays in name order), which the scheduler need not have followed.
    """
    nodes = details.get("rank_nodes") or nodes or details.get("nodes")
    per_node, matrix = details.get("gpus_per_node"), details.get("matrix")
    if not (isinstance(nodes, list) and isinstance(per_node, int) and per_node > 0 and isinstance(matrix, list)):
        return []
    if not nodes or len(nodes) * per_node != len(matrix):
        return []
    return [(f"{i * per_node}-{(i + 1) * per_node - 1}", str(node)) for i, node in enumerate(nodes)]


def node_of_gpu(details: Dict[str, Any], gpu: int, nodes: Optional[List[str]] = None) -> Optional[str]:
    placement = gpu_placement(details, nodes)
    if not placement or not 0 <= gpu < len(details["matrix"]):
        return None
    return placement[gpu // details["gpus_per_node"]][1]
