# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Driver owner host: pinned package installed; owner operator: nothing on the host; both checked."""

from __future__ import annotations

import json

import pytest

CLIQUE = "7b968a6d-c8aa-45e1-9e07-e1e51be99c31.32766"


def recorded(host) -> dict:
    fact = host.file("/etc/ansible/facts.d/gpu_fabric_driver.fact")
    assert fact.mode == 0o644
    return json.loads(fact.content_string)


def test_host_owner_installs_the_pinned_driver_package(host):
    if host.backend.hostname != "drv-host":
        pytest.skip("host driver tray only")
    package = host.package("nvidia-driver-580-server-open")
    assert package.is_installed
    assert package.version == "580.159.04-0gpufabric1"
    assert host.file("/usr/bin/nvidia-smi").is_symlink
    assert recorded(host) == {
        "owner": "host",
        "driver_root": "/",
        "driver_version": "580.159.04",
        "min_driver_version": "570.158.01",
        "gpu_count": 4,
        "clique_label": CLIQUE,
        "fabric_checked": True,
    }


def test_operator_owner_installs_nothing_and_checks_the_operator_driver(host):
    if host.backend.hostname != "drv-operator":
        pytest.skip("operator driver tray only")
    assert not host.file("/usr/bin/nvidia-smi").exists
    assert not host.package("nvidia-driver-580-server-open").is_installed
    assert host.run("dpkg-query -W 'nvidia-driver-*'").rc != 0
    assert recorded(host) == {
        "owner": "operator",
        "driver_root": "/run/nvidia/driver",
        "driver_version": "580.159.04",
        "min_driver_version": "570.158.01",
        "gpu_count": 4,
        "clique_label": CLIQUE,
        "fabric_checked": True,
    }


def test_host_owner_rebooted_once_for_the_new_driver(host):
    if host.backend.hostname != "drv-host":
        pytest.skip("host driver tray only")
    # One reboot in converge (the package was installed), none in the idempotence run.
    assert host.file("/etc/gpu-fabric-sim/reboots").content_string == "reboot\n"
    assert host.file("/etc/gpu-fabric-sim/boot-id").content_string.strip() != "first-boot"


def test_the_checks_waited_for_the_fabric(host):
    # The stand-in shows the fabric In Progress for the first 2 reads; the checks passed after more reads.
    assert int(host.file("/run/gpu-fabric-sim/fabric-reads").content_string) > 2


def test_host_owner_writes_the_gb200_kernel_settings(host):
    if host.backend.hostname != "drv-host":
        pytest.skip("host driver tray only")
    dropin = host.file("/etc/default/grub.d/90-gpu-fabric-gb200.cfg")
    assert dropin.mode == 0o644
    assert dropin.content_string.endswith(
        'GRUB_CMDLINE_LINUX="$GRUB_CMDLINE_LINUX'
        ' init_on_alloc=0 acpi_power_meter.force_cap_on=y numa_balancing=disable"\n'
    )
    blacklist = host.file("/etc/modprobe.d/blacklist-nouveau-gpu-fabric.conf").content_string
    assert "blacklist nouveau\noptions nouveau modeset=0\n" in blacklist


def test_operator_owner_leaves_the_kernel_settings_alone(host):
    if host.backend.hostname != "drv-operator":
        pytest.skip("operator driver tray only")
    assert not host.file("/etc/default/grub.d/90-gpu-fabric-gb200.cfg").exists
