# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

import dataclasses

import pytest
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.host_preflight import (
    HostState,
    Policy,
    failure_message,
    kernel_older_than,
    kubelet_version,
    problems,
    running_units,
)

HEALTHY = HostState(
    distribution="Ubuntu",
    distribution_version="24.04",
    architecture="aarch64",
    kernel="6.8.0-1012-nvidia-64k",
    running_time_sync=("chrony.service",),
)
POLICY = Policy(
    supported_distributions=("Ubuntu", "Debian"),
    supported_architectures=("aarch64", "x86_64"),
    min_kernel_version="5.14",
    require_time_sync=True,
    time_sync_services=("chrony.service", "systemd-timesyncd.service"),
    driver_owner="operator",
    refused_kubelet_versions=("1.34.0", "1.34.1"),
)
# What systemd 252 (Debian bookworm) prints for a running, a stopped and an unknown unit.
SYSTEMCTL_SHOW = """Id=chrony.service
SubState=dead

Id=systemd-timesyncd.service
SubState=running

Id=ntp.service
SubState=dead
"""


def test_a_healthy_host_has_no_problem():
    assert problems(HEALTHY, POLICY) == []


def test_every_problem_is_reported_in_order():
    state = HostState(
        distribution="Gentoo",
        distribution_version="2.17",
        architecture="ppc64le",
        kernel="5.4.0-200-generic",
        missing_commands=("modprobe", "ip"),
        host_nvidia_smi=True,
        kubelet_version="1.34.1",
    )
    found = problems(state, dataclasses.replace(POLICY, driver_install=True, imex_mode="host"))
    assert [line.split(" ", 3)[:3] for line in found] == [
        ["the", "operating", "system"],
        ["the", "CPU", "architecture"],
        ["the", "kernel", "is"],
        ["required", "commands", "are"],
        ["no", "time", "synchronisation"],
        ["gpu_fabric_driver_owner", "is", "operator"],
        ["gpu_fabric_driver_owner", "is", "operator"],
        ["nvidia_imex_mode", "is", "host"],
        ["kubelet", "is", "1.34.1:"],
    ]
    assert found[0] == (
        "the operating system is Gentoo 2.17, expected one of Ubuntu, Debian (preflight_supported_distributions)"
    )
    assert found[3] == "required commands are missing: modprobe, ip; install the packages that provide them"
    assert "nvidia_driver_install is true" in found[5]
    assert "(/usr/bin/nvidia-smi)" in found[6]
    assert "deadlock on 1.34.0 and 1.34.1" in found[8]


def test_time_sync_is_not_required_when_turned_off():
    state = dataclasses.replace(HEALTHY, running_time_sync=())
    assert problems(state, POLICY)[0].startswith("no time synchronisation service is running (looked for chrony")
    assert problems(state, dataclasses.replace(POLICY, require_time_sync=False)) == []


@pytest.mark.parametrize(
    ("owner", "smi", "install", "root", "expected"),
    [
        ("operator", False, False, None, []),
        ("operator", False, False, "/run/nvidia/driver", []),
        ("operator", False, False, "/", ["nvidia_driver_root is / but gpu_fabric_driver_owner is operator"]),
        ("host", True, False, None, []),
        ("host", False, True, None, []),
        ("host", True, False, "/run/nvidia/driver", ["nvidia_driver_root is /run/nvidia/driver but"]),
        ("host", False, False, None, ["gpu_fabric_driver_owner is host but no driver is installed"]),
        ("both", False, False, None, ["gpu_fabric_driver_owner is 'both', expected operator"]),
    ],
)
def test_driver_owner_consistency(owner, smi, install, root, expected):
    state = dataclasses.replace(HEALTHY, host_nvidia_smi=smi)
    policy = dataclasses.replace(POLICY, driver_owner=owner, driver_install=install, driver_root=root)
    found = problems(state, policy)
    assert len(found) == len(expected)
    for line, start in zip(found, expected):
        assert line.startswith(start), line


@pytest.mark.parametrize(
    ("version", "expected"),
    [
        ("", None),
        ("1.34.2", None),
        ("1.37.0", None),
        ("1.34.0", "kubelet is 1.34.0: DRA plugins deadlock"),
        ("1.31.9", "kubelet is 1.31.9: DRA ComputeDomains need 1.32.0 or later"),
    ],
)
def test_kubelet_versions(version, expected):
    found = problems(dataclasses.replace(HEALTHY, kubelet_version=version), POLICY)
    if expected is None:
        assert found == []
    else:
        assert len(found) == 1
        assert found[0].startswith(expected)
        assert found[0].endswith("; upgrade the kubelet")


@pytest.mark.parametrize(
    ("kernel", "older"),
    [("5.14.0-503.el9.aarch64", False), ("5.13.19", True), ("6.8.0-1012-nvidia", False), ("4.19", True), ("", True)],
)
def test_kernel_compares_major_minor_as_numbers(kernel, older):
    assert kernel_older_than(kernel, "5.14") is older


def test_readers():
    assert running_units(SYSTEMCTL_SHOW) == ["systemd-timesyncd.service"]
    assert running_units("") == []
    assert kubelet_version("Kubernetes v1.34.2\n") == "1.34.2"
    assert kubelet_version("kubelet: command not found") == ""


def test_failure_message_is_one_numbered_line():
    assert failure_message("gb200-r01-t05", ["first problem ", "second"]) == (
        "preflight found 2 problems on gb200-r01-t05: (1) first problem; (2) second."
    )
    assert failure_message("t1", ["only"]) == "preflight found 1 problem on t1: (1) only."


def test_a_missing_python_module_names_the_package_and_the_pip_requirement():
    state = dataclasses.replace(HEALTHY, missing_python_modules=("tomlkit",), python="/usr/bin/python3")
    assert problems(state, POLICY) == [
        "the Python module tomlkit is missing from /usr/bin/python3, the interpreter Ansible runs on this host"
        " (containerd_config edits containerd's config.toml with it); install python3-tomlkit (Debian/Ubuntu) or run"
        " `/usr/bin/python3 -m pip install 'tomlkit>=0.12.0'` (requirements-host.txt of the collection)"
    ]
