# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Stand-in controllers for the NVIDIA components and the MPI operator of the simulated rack."""

from __future__ import annotations
