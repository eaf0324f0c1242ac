# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Helpers shared by the Molecule scenarios' testinfra verifiers (imported through conftest.py)."""

from __future__ import annotations

from typing import Any

import tomllib

CRI_V2 = "io.containerd.grpc.v1.cri"
SERVED_RELEASES = "/srv/gpu-fabric-sim/containerd/containerd/releases/download"


def containerd_dump(host: Any, binary: str = "/usr/local/bin/containerd") -> dict:
    """The effective configuration of the installed containerd, parsed from `containerd config dump`."""
    return tomllib.loads(host.check_output(f"{binary} config dump"))


def cri_section(dump: dict) -> dict:
    return dump["plugins"][CRI_V2]


def runc_options(dump: dict) -> dict:
    return cri_section(dump)["containerd"]["runtimes"]["runc"]["options"]


def unit_property(host: Any, unit: str, prop: str) -> str:
    return host.check_output(f"systemctl show -p {prop} --value {unit}").strip()


def sha256(host: Any, path: str) -> str:
    return host.check_output(f"sha256sum {path}").split()[0]
