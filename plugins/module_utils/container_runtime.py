# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Which container runtime a GPU host runs: the containerd role manages containerd, never CRI-O.

OpenShift nodes (RHCOS) run CRI-O, whose CDI support is on by default since CRI-O 1.23: the IMEX channel
and GPU devices are injected without any edit. Standard library only (runs on the GPU hosts).
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from typing import Any, Callable, Dict, Optional, Sequence

CRIO_MARKERS = (
    "/etc/crio/crio.conf",
    "/usr/lib/systemd/system/crio.service",
    "/lib/systemd/system/crio.service",
    "/etc/systemd/system/crio.service",
)
CONTAINERD_MARKERS = (
    "/usr/bin/containerd",
    "/usr/local/bin/containerd",
    "/usr/lib/systemd/system/containerd.service",
    "/lib/systemd/system/containerd.service",
    "/etc/systemd/system/containerd.service",
)
SKIP_MESSAGE = (
    "containerd is not managed on this node: it runs CRI-O ({why}), whose CDI support is on by default since "
    "CRI-O 1.23; nothing to configure for the IMEX channels"
)


@dataclass
class RuntimeDecision:
    runtime: str  # crio, containerd or unknown
    manage_containerd: bool
    crio_found: Sequence[str]
    containerd_found: Sequence[str]
    message: str

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)


def decide(
    openshift: Optional[bool] = None,
    exists: Callable[[str], bool] = os.path.exists,
) -> RuntimeDecision:
    """``openshift``: the host variable (True: an OpenShift node, CRI-O; False: manage containerd; None: look)."""
    crio = [path for path in CRIO_MARKERS if exists(path)]
    containerd = [path for path in CONTAINERD_MARKERS if exists(path)]
    if openshift is True:
        why = "gpu_fabric_openshift is true"
        return RuntimeDecision("crio", False, crio, containerd, SKIP_MESSAGE.format(why=why))
    if openshift is None and crio and not containerd:
        why = f"{crio[0]} present, no containerd"
        return RuntimeDecision("crio", False, crio, containerd, SKIP_MESSAGE.format(why=why))
    runtime = "containerd" if containerd else "unknown"
    return RuntimeDecision(runtime, True, crio, containerd, f"containerd is managed on this node ({runtime} found)")


# What a distribution's containerd package installs (Debian/Ubuntu containerd and containerd.io, RHEL containerd.io).
PACKAGE_BINARY = "/usr/bin/containerd"
PACKAGE_UNITS = ("/usr/lib/systemd/system/containerd.service", "/lib/systemd/system/containerd.service")
EXISTING_CHOICES = ("fail", "adopt", "skip")


@dataclass
class ExistingContainerd:
    action: str  # install (no conflict), adopt, skip or fail
    install_method: str  # the method to use from here: the one asked, 'none' when adopted, '' when skipped
    found: Sequence[str]
    message: str

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)


def existing_containerd(
    install_method: str,
    install_prefix: str,
    on_existing: str = "fail",
    exists: Callable[[str], bool] = os.path.exists,
    variable: str = "containerd_on_existing",
) -> ExistingContainerd:
    """What to do when the tarball would be installed next to the distribution's containerd package."""
    if on_existing not in EXISTING_CHOICES:
        raise ValueError(f"{variable} must be one of {', '.join(EXISTING_CHOICES)}, not {on_existing!r}")
    prefix = install_prefix.rstrip("/") or "/"
    if install_method != "tarball" or prefix == "/usr" or not exists(PACKAGE_BINARY):
        return ExistingContainerd("install", install_method, [], "no containerd package in the way of the install")
    found = [PACKAGE_BINARY, *(unit for unit in PACKAGE_UNITS if exists(unit))]
    what = (
        f"containerd from the distribution's package is installed ({', '.join(found)}); the release tarball would "
        f"install a second one in {prefix}/bin next to it"
    )
    if on_existing == "adopt":
        return ExistingContainerd(
            "adopt", "none", found, f"{what}: adopted, the package's containerd is configured and kept (method none)"
        )
    if on_existing == "skip":
        return ExistingContainerd("skip", "", found, f"{what}: left as it is ({variable}=skip), role skipped")
    return ExistingContainerd(
        "fail",
        install_method,
        found,
        f"{what}; set {variable} to adopt (configure the package's containerd instead), skip (leave containerd "
        "alone on this host) or fail, set containerd_install_method to package, or remove the package first. "
        "Nothing was changed.",
    )
