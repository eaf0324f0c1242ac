# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Who owns the NVIDIA driver (``gpu_fabric_driver_owner``), and where that owner's driver lives.

The one home of both facts: the roles' driver roots (``nvidia_driver_root``, ``nvidia_imex_driver_root``, through
the ``driver_root`` filter), the DRA driver chart's ``nvidiaDriverRoot`` (``chart_values``) and the host preflight
read them here. Only the standard library: this file runs on GPU hosts as well as on the controller.

>>> driver_root("operator")
'/run/nvidia/driver'
"""

from __future__ import annotations

from typing import Dict, Tuple

# operator: the GPU Operator's driver container, which mounts its root filesystem at /run/nvidia/driver;
# host: a driver installed from the distribution's packages, under /.
OWNERS: Tuple[str, ...] = ("operator", "host")
DRIVER_ROOT: Dict[str, str] = {"operator": "/run/nvidia/driver", "host": "/"}


def driver_root(owner: str) -> str:
    """The root of the driver that ``owner`` installs; an unknown owner raises ValueError in one line."""
    if owner not in DRIVER_ROOT:
        raise ValueError(f"gpu_fabric_driver_owner is {owner!r}; use operator or host")
    return DRIVER_ROOT[owner]
