#!/usr/bin/python
# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: host_preflight
short_description: Check a GPU host before the host roles change it, and report every problem at once
version_added: 0.3.0
description:
  - Reads, in one module process, what the host roles need of a GPU host - the commands they run, a running time
    synchronisation service (C(systemctl show)), a host driver's C(nvidia-smi), the installed kubelet's version - and
    judges them with the operating system, CPU architecture and kernel of Ansible's facts against the options.
  - Every problem is reported at once, in one line, with what to do about it; problems found elsewhere (the variable
    check of M(gpu_fabric.mnnvl.variable_check)) are passed in O(extra_problems) and reported with them.
  - Changes nothing; runs the same in check mode.
  - The C(gpu_fabric.mnnvl.preflight) role calls it with its variables.
extends_documentation_fragment:
  - gpu_fabric.mnnvl.attributes
  - gpu_fabric.mnnvl.attributes.INFO_MODULE
options:
  host:
    description: The host's name in the failure message (the role passes C(inventory_hostname)).
    type: str
    required: true
  distribution:
    description: The operating system, as Ansible's C(ansible_facts.distribution) names it (V(Ubuntu), V(Debian)).
    type: str
    required: true
  distribution_version:
    description: Its version (C(ansible_facts.distribution_version)), for the message.
    type: str
    default: ""
  architecture:
    description: The CPU architecture (C(ansible_facts.architecture)).
    type: str
    required: true
  kernel:
    description: The kernel release (C(ansible_facts.kernel)).
    type: str
    required: true
  supported_distributions:
    description: Operating systems accepted.
    type: list
    elements: str
    default: [Ubuntu, Debian, RedHat, Rocky, AlmaLinux]
  supported_architectures:
    description: CPU architectures accepted.
    type: list
    elements: str
    default: [aarch64, x86_64]
  min_kernel_version:
    description: Oldest kernel accepted (major.minor).
    type: str
    default: "5.14"
  required_commands:
    description: Commands that must be found on the host (in C(PATH) or the C(sbin) directories).
    type: list
    elements: str
    default: [systemctl, journalctl, tar, gzip, modprobe, ip]
  require_time_sync:
    description: Require one of O(time_sync_services) to be running.
    type: bool
    default: true
  time_sync_services:
    description: Time synchronisation units, one of which must be running.
    type: list
    elements: str
    default: [chrony.service, chronyd.service, systemd-timesyncd.service, ntp.service, ntpsec.service]
  driver_owner:
    description: Who installs the NVIDIA driver - V(operator) (the GPU Operator's driver container) or V(host).
    type: str
    required: true
  driver_install:
    description: Whether the C(nvidia_driver) role is to install the driver (C(nvidia_driver_install)).
    type: bool
    default: false
  driver_root:
    description: C(nvidia_driver_root) when the inventory sets it; it must be the owner's driver root.
    type: str
  imex_mode:
    description: C(nvidia_imex_mode) (V(dra) or V(host)).
    type: str
    default: dra
  host_nvidia_smi_path:
    description: Where a host driver's C(nvidia-smi) is.
    type: path
    default: /usr/bin/nvidia-smi
  kubelet_path:
    description: The kubelet whose version is checked when it is installed.
    type: path
    default: /usr/bin/kubelet
  min_kubelet_version:
    description: Oldest kubelet accepted when one is installed.
    type: str
    default: 1.32.0
  refused_kubelet_versions:
    description: Kubelet versions refused (1.34.0 and 1.34.1 deadlock DRA plugins).
    type: list
    elements: str
    default: [1.34.0, 1.34.1]
  python_modules:
    description:
      - Python modules that the collection's modules import on this host; each one that the interpreter running this
        module cannot import is a problem naming the package to install (V(tomlkit) - C(python3-tomlkit) on
        Debian/Ubuntu, or pip).
    type: list
    elements: str
    default: []
    version_added: 0.4.0
  extra_problems:
    description: Problems found before this check, reported after its own.
    type: list
    elements: str
    default: []
  fail_on_problems:
    description: Fail when a problem is found; with V(false) the problems are only returned.
    type: bool
    default: true
author:
  - gpu_fabric.mnnvl contributors (@gpu-fabric)
"""

EXAMPLES = r"""
- name: Check the host before anything is changed
  gpu_fabric.mnnvl.host_preflight:
    host: "{{ inventory_hostname }}"
    distribution: "{{ ansible_facts['distribution'] }}"
    distribution_version: "{{ ansible_facts['distribution_version'] }}"
    architecture: "{{ ansible_facts['architecture'] }}"
    kernel: "{{ ansible_facts['kernel'] }}"
    driver_owner: operator
    python_modules: [tomlkit]
"""

RETURN = r"""
problems:
  description: Every problem found, one line each (O(extra_problems) last).
  returned: always
  type: list
  elements: str
missing_commands:
  description: The O(required_commands) not found on the host.
  returned: always
  type: list
  elements: str
running_time_sync:
  description: The O(time_sync_services) that are running.
  returned: always
  type: list
  elements: str
  sample: [systemd-timesyncd.service]
host_nvidia_smi:
  description: Whether O(host_nvidia_smi_path) exists (a driver installed on the host).
  returned: always
  type: bool
missing_python_modules:
  description: The O(python_modules) that the host's interpreter cannot import.
  returned: always
  type: list
  elements: str
  sample: [tomlkit]
  version_added: 0.4.0
kubelet_version:
  description: The installed kubelet's version; empty when there is no kubelet at O(kubelet_path).
  returned: always
  type: str
  sample: 1.34.2
"""

import importlib.util
import os
import sys

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.host_preflight import (
    HostState,
    Policy,
    failure_message,
    kubelet_version,
    problems,
    running_units,
)


def build_module() -> AnsibleModule:
    return AnsibleModule(
        argument_spec=dict(
            host=dict(type="str", required=True),
            distribution=dict(type="str", required=True),
            distribution_version=dict(type="str", default=""),
            architecture=dict(type="str", required=True),
            kernel=dict(type="str", required=True),
            supported_distributions=dict(
                type="list", elements="str", default=["Ubuntu", "Debian", "RedHat", "Rocky", "AlmaLinux"]
            ),
            supported_architectures=dict(type="list", elements="str", default=["aarch64", "x86_64"]),
            min_kernel_version=dict(type="str", default="5.14"),
            required_commands=dict(
                type="list", elements="str", default=["systemctl", "journalctl", "tar", "gzip", "modprobe", "ip"]
            ),
            require_time_sync=dict(type="bool", default=True),
            time_sync_services=dict(
                type="list",
                elements="str",
                default=[
                    "chrony.service",
                    "chronyd.service",
                    "systemd-timesyncd.service",
                    "ntp.service",
                    "ntpsec.service",
                ],
            ),
            driver_owner=dict(type="str", required=True),
            driver_install=dict(type="bool", default=False),
            driver_root=dict(type="str"),
            imex_mode=dict(type="str", default="dra"),
            host_nvidia_smi_path=dict(type="path", default="/usr/bin/nvidia-smi"),
            kubelet_path=dict(type="path", default="/usr/bin/kubelet"),
            min_kubelet_version=dict(type="str", default="1.32.0"),
            refused_kubelet_versions=dict(type="list", elements="str", default=["1.34.0", "1.34.1"]),
            python_modules=dict(type="list", elements="str", default=[]),
            extra_problems=dict(type="list", elements="str", default=[]),
            fail_on_problems=dict(type="bool", default=True),
        ),
        supports_check_mode=True,
    )


def read_running_time_sync(module: AnsibleModule, units: list) -> list:
    systemctl = module.get_bin_path("systemctl")
    if systemctl is None or not units:
        return []
    rc, out, _err = module.run_command([systemctl, "show", "--property=Id,SubState", "--", *units])
    return running_units(out) if rc == 0 else []


def read_kubelet_version(module: AnsibleModule, path: str) -> str:
    if not os.access(path, os.X_OK):
        return ""
    rc, out, _err = module.run_command([path, "--version"])
    return kubelet_version(out) if rc == 0 else ""


def missing_python_modules(names: list) -> tuple:
    return tuple(name for name in names if importlib.util.find_spec(name) is None)


def main() -> None:
    module = build_module()
    params = module.params
    state = HostState(
        distribution=params["distribution"],
        distribution_version=params["distribution_version"],
        architecture=params["architecture"],
        kernel=params["kernel"],
        missing_commands=tuple(name for name in params["required_commands"] if module.get_bin_path(name) is None),
        running_time_sync=tuple(read_running_time_sync(module, params["time_sync_services"])),
        host_nvidia_smi=os.path.exists(params["host_nvidia_smi_path"]),
        kubelet_version=read_kubelet_version(module, params["kubelet_path"]),
        missing_python_modules=missing_python_modules(params["python_modules"]),
        python=sys.executable,
    )
    policy = Policy(
        supported_distributions=tuple(params["supported_distributions"]),
        supported_architectures=tuple(params["supported_architectures"]),
        min_kernel_version=params["min_kernel_version"],
        require_time_sync=params["require_time_sync"],
        time_sync_services=tuple(params["time_sync_services"]),
        driver_owner=params["driver_owner"],
        driver_install=params["driver_install"],
        driver_root=params["driver_root"],
        imex_mode=params["imex_mode"],
        min_kubelet_version=params["min_kubelet_version"],
        refused_kubelet_versions=tuple(params["refused_kubelet_versions"]),
    )
    try:
        found = problems(state, policy) + list(params["extra_problems"])
    except ValueError as exc:  # a version option that is not a version
        module.fail_json(msg=f"host_preflight: {exc}")
    result = dict(
        changed=False,
        problems=found,
        missing_commands=list(state.missing_commands),
        running_time_sync=list(state.running_time_sync),
        host_nvidia_smi=state.host_nvidia_smi,
        kubelet_version=state.kubelet_version,
        missing_python_modules=list(state.missing_python_modules),
    )
    if found and params["fail_on_problems"]:
        module.fail_json(msg=failure_message(params["host"], found), **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
