# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Host IMEX policy: masked and inactive for ComputeDomains, configured and READY when host-managed."""

from __future__ import annotations

import pytest
from tray import unit_property

DOMAIN = ("imex-host1", "imex-host2")


def eth0_address(host) -> str:
    return host.check_output("ip -o -4 addr show eth0").split()[3].split("/")[0]


def test_dra_tray_has_the_host_daemon_masked_and_stopped(host):
    if host.backend.hostname != "imex-dra":
        pytest.skip("dra tray only")
    assert host.check_output("systemctl is-enabled nvidia-imex || true") == "masked"
    assert unit_property(host, "nvidia-imex", "ActiveState") == "inactive"
    assert host.file("/etc/systemd/system/nvidia-imex.service").linked_to == "/dev/null"
    assert not host.socket("tcp://0.0.0.0:50000").is_listening
    assert not host.run("systemctl start nvidia-imex").succeeded
    # The package stays: the DRA driver takes nvidia-imex from the host driver root.
    assert host.package("nvidia-imex-580").is_installed
    # Its files are as the package left them (the dra mode writes nothing).
    assert host.file("/etc/nvidia-imex/config.cfg").contains("^SERVER_PORT=50000$")


@pytest.fixture()
def domain_addresses():
    import testinfra

    # in the group's order, which the role keeps (sorting the strings would put 10.88.0.10 before 10.88.0.9);
    # imex-dra is in gpu_nodes too, but in rack r2: not a peer
    return [eth0_address(testinfra.get_host(f"podman://{name}")) for name in DOMAIN]


def test_host_mode_nodes_file_lists_the_trays_of_its_rack_only(host, domain_addresses):
    if host.backend.hostname not in DOMAIN:
        pytest.skip("host-mode trays only")
    nodes = host.file("/etc/nvidia-imex/nodes_config.cfg")
    assert nodes.content_string.split() == domain_addresses
    assert nodes.mode == 0o644


def test_host_mode_config_keeps_comments_and_sets_the_requested_keys(host):
    if host.backend.hostname not in DOMAIN:
        pytest.skip("host-mode trays only")
    config = host.file("/etc/nvidia-imex/config.cfg").content_string
    assert "SERVER_PORT=50010\n" in config
    assert "IMEX_CMD_PORT=50015\n" in config
    assert "IMEX_NODE_CONFIG_FILE=/etc/nvidia-imex/nodes_config.cfg\n" in config
    assert "# TCP port for IMEX peer communication.\n" in config
    assert "LOG_FILE_NAME=/var/log/nvidia-imex.log\n" in config


def test_host_mode_daemon_runs_ready_and_listens_on_its_address(host):
    if host.backend.hostname not in DOMAIN:
        pytest.skip("host-mode trays only")
    service = host.service("nvidia-imex")
    assert service.is_enabled
    assert service.is_running
    assert host.check_output("nvidia-imex-ctl -c /etc/nvidia-imex/config.cfg -q") == "READY"
    assert host.socket(f"tcp://{eth0_address(host)}:50010").is_listening


def test_host_mode_creates_imex_channel0_now_and_at_every_driver_load(host):
    if host.backend.hostname not in DOMAIN:
        pytest.skip("host-mode trays only")
    # a character device: the major of nvidia-caps-imex-channels in the real machine's /proc/devices,
    # the minor the channel number
    assert host.check_output("stat -c '%F %t %T %a' /dev/nvidia-caps-imex-channels/channel0") == (
        f"character special file {242:x} 0 666"
    )
    modprobe = host.file("/etc/modprobe.d/nvidia-imex-channel0.conf").content_string
    assert "options nvidia NVreg_CreateImexChannel0=1\n" in modprobe


def test_dra_tray_creates_no_channel(host):
    if host.backend.hostname != "imex-dra":
        pytest.skip("dra tray only")
    assert not host.file("/dev/nvidia-caps-imex-channels").exists
    assert not host.file("/etc/modprobe.d/nvidia-imex-channel0.conf").exists
