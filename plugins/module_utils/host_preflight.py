# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The host stage's preflight: what a GPU host must have before any role changes it.

``problems(state, policy)`` is the whole judgement, one line per problem, in a fixed order (so the
message reads the same on every host); ``failure_message`` folds them into the one-line error the
role fails with. What the host is made of (``HostState``) is read by the ``host_preflight`` module
in one process; the parsers of what it runs are here:

>>> kubelet_version("Kubernetes v1.34.2")
'1.34.2'
>>> running_units("Id=chrony.service\\nSubState=running\\n\\nId=ntp.service\\nSubState=dead\\n")
['chrony.service']
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.driver_owner import DRIVER_ROOT
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.versions import compare_versions

_KUBELET_VERSION_RE = re.compile(r"v(\d+\.\d+\.\d+)")
_KERNEL_RE = re.compile(r"^(\d+)\.(\d+)")

# Python modules the collection's modules import on a GPU host: (Debian/Ubuntu package, pip requirement, needed by).
PYTHON_MODULES = {
    "tomlkit": ("python3-tomlkit", "tomlkit>=0.12.0", "containerd_config edits containerd's config.toml with it"),
}


@dataclass(frozen=True)
class HostState:
    """What the preflight reads on the host (facts are Ansible's; the rest the module reads)."""

    distribution: str
    distribution_version: str
    architecture: str
    kernel: str
    missing_commands: Tuple[str, ...] = ()
    running_time_sync: Tuple[str, ...] = ()
    host_nvidia_smi: bool = False
    kubelet_version: str = ""
    missing_python_modules: Tuple[str, ...] = ()
    python: str = "python3"


@dataclass(frozen=True)
class Policy:
    """What the role's variables accept."""

    supported_distributions: Tuple[str, ...]
    supported_architectures: Tuple[str, ...]
    min_kernel_version: str
    require_time_sync: bool
    time_sync_services: Tuple[str, ...]
    driver_owner: str
    driver_install: bool = False
    driver_root: Optional[str] = None
    imex_mode: str = "dra"
    min_kubelet_version: str = "1.32.0"
    refused_kubelet_versions: Tuple[str, ...] = ()


def kubelet_version(text: str) -> str:
    """The first ``vX.Y.Z`` in ``kubelet --version`` output, without the ``v``; '' when there is none."""
    match = _KUBELET_VERSION_RE.search(text or "")
    return match.group(1) if match else ""


def running_units(systemctl_show: str) -> List[str]:
    """The units of ``systemctl show --property=Id,SubState UNIT...`` output whose SubState is running.

    ``systemctl show`` prints one block per unit, blank-line separated; a unit that does not exist is
    printed too (SubState=dead), so an absent service is simply not running.
    """
    running = []
    for block in (systemctl_show or "").split("\n\n"):
        fields = dict(line.split("=", 1) for line in block.splitlines() if "=" in line)
        if fields.get("SubState") == "running" and fields.get("Id"):
            running.append(fields["Id"])
    return running


def kernel_older_than(kernel: str, minimum: str) -> bool:
    """Whether the kernel's major.minor (``6.8.0-1012-nvidia`` -> 6.8) is below ``minimum`` (``5.14``)."""
    match = _KERNEL_RE.match(kernel or "")
    if match is None:
        return True
    return compare_versions(f"{match.group(1)}.{match.group(2)}", minimum) < 0


def problems(state: HostState, policy: Policy) -> List[str]:
    """Every problem of the host under the policy, one line each; [] for a host the roles can change."""
    found = []
    if state.distribution not in policy.supported_distributions:
        found.append(
            f"the operating system is {state.distribution} {state.distribution_version}, expected one of"
            f" {', '.join(policy.supported_distributions)} (preflight_supported_distributions)"
        )
    if state.architecture not in policy.supported_architectures:
        found.append(
            f"the CPU architecture is {state.architecture}, expected one of {', '.join(policy.supported_architectures)}"
        )
    if kernel_older_than(state.kernel, policy.min_kernel_version):
        found.append(f"the kernel is {state.kernel}, older than {policy.min_kernel_version}; upgrade the kernel")
    if state.missing_commands:
        found.append(
            f"required commands are missing: {', '.join(state.missing_commands)};"
            " install the packages that provide them"
        )
    if policy.require_time_sync and not state.running_time_sync:
        found.append(
            "no time synchronisation service is running (looked for"
            f" {', '.join(policy.time_sync_services)}); start one (IMEX peers and Kubernetes certificates need"
            " synchronised clocks) or set preflight_require_time_sync to false"
        )
    found.extend(python_module_problem(name, state.python) for name in state.missing_python_modules)
    found.extend(_driver_problems(state, policy))
    if state.kubelet_version:
        if state.kubelet_version in policy.refused_kubelet_versions:
            found.append(
                f"kubelet is {state.kubelet_version}: DRA plugins deadlock on 1.34.0 and 1.34.1 (fixed in 1.34.2);"
                " upgrade the kubelet"
            )
        elif compare_versions(state.kubelet_version, policy.min_kubelet_version) < 0:
            found.append(
                f"kubelet is {state.kubelet_version}: DRA ComputeDomains need {policy.min_kubelet_version} or later;"
                " upgrade the kubelet"
            )
    return found


def python_module_problem(name: str, python: str) -> str:
    """The line for a Python module the host's interpreter cannot import, with how to install it."""
    package, requirement, needed_by = PYTHON_MODULES.get(name, (f"python3-{name}", name, "a module of the collection"))
    return (
        f"the Python module {name} is missing from {python}, the interpreter Ansible runs on this host ({needed_by});"
        f" install {package} (Debian/Ubuntu) or run `{python} -m pip install '{requirement}'`"
        " (requirements-host.txt of the collection)"
    )


def _driver_problems(state: HostState, policy: Policy) -> List[str]:
    owner = policy.driver_owner
    if owner not in DRIVER_ROOT:
        return [
            f"gpu_fabric_driver_owner is '{owner}', expected operator (GPU Operator driver container)"
            " or host (driver packages on the host)"
        ]
    found = []
    if owner == "operator" and policy.driver_install:
        found.append(
            "gpu_fabric_driver_owner is operator but nvidia_driver_install is true: the GPU Operator installs the"
            " driver; set gpu_fabric_driver_owner to host or nvidia_driver_install to false"
        )
    if owner == "operator" and state.host_nvidia_smi:
        found.append(
            "gpu_fabric_driver_owner is operator but a driver is installed on the host (/usr/bin/nvidia-smi); the GPU"
            " Operator's driver container does not run next to a host driver: set gpu_fabric_driver_owner to host or"
            " remove the host driver"
        )
    if owner == "host" and not state.host_nvidia_smi and not policy.driver_install:
        found.append(
            "gpu_fabric_driver_owner is host but no driver is installed on the host (no /usr/bin/nvidia-smi) and"
            " nvidia_driver_install is false; install the driver, set nvidia_driver_install to true, or set"
            " gpu_fabric_driver_owner to operator"
        )
    if policy.driver_root is not None and policy.driver_root != DRIVER_ROOT[owner]:
        found.append(
            f"nvidia_driver_root is {policy.driver_root} but gpu_fabric_driver_owner is {owner}, whose driver root is"
            f" {DRIVER_ROOT[owner]}; remove nvidia_driver_root"
        )
    if policy.imex_mode == "host" and owner == "operator":
        found.append(
            "nvidia_imex_mode is host but gpu_fabric_driver_owner is operator: the host IMEX service needs the driver"
            " and the nvidia-imex package of the same version on the host; use nvidia_imex_mode dra with the"
            " operator's driver"
        )
    return found


def failure_message(host: str, found: Sequence[str]) -> str:
    """``preflight found 2 problems on HOST: (1) ...; (2) ....`` in one line."""
    numbered = "; ".join(f"({index}) {problem.strip()}" for index, problem in enumerate(found, 1))
    return f"preflight found {len(found)} problem{'s' if len(found) > 1 else ''} on {host}: {numbered}."
