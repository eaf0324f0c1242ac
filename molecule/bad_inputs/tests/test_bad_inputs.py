# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""After every wrong input was refused, the files it concerned are as they were."""

from __future__ import annotations

from tray import containerd_dump, cri_section, unit_property


def test_unparseable_config_toml_is_byte_for_byte_unchanged(host):
    broken = host.file("/etc/containerd/broken.toml")
    assert broken.content_string == 'version = 2\n[plugins."io.containerd.grpc.v1.cri"\n  enable_cdi = true\n'
    assert host.check_output("ls /etc/containerd/ | grep -c '^broken.toml\\..*~$' || true") == "0"


def test_imex_files_keep_the_package_content_and_the_service_was_not_touched(host):
    assert host.file("/etc/nvidia-imex/nodes_config.cfg").content_string == (
        "# One address of each node of the IMEX domain per line.\n"
    )
    config = host.file("/etc/nvidia-imex/config.cfg").content_string
    assert "SERVER_PORT=50000\n" in config
    assert "IMEX_NODE_CONFIG_FILE=/etc/nvidia-imex/nodes_config.cfg\n" in config
    assert host.check_output("ls /etc/nvidia-imex") == "config.cfg\nnodes_config.cfg"
    assert host.check_output("systemctl is-enabled nvidia-imex") == "enabled"


def test_refused_driver_left_no_record(host):
    assert not host.file("/etc/ansible/facts.d/gpu_fabric_driver.fact").exists


def test_masking_drop_in_is_what_containerd_really_runs_with(host):
    # The role refused this state; it is still the effective one, which is why the role checks it.
    assert host.file("/etc/containerd/config.toml").contains("^enable_cdi = true$")
    assert cri_section(containerd_dump(host))["enable_cdi"] is False
    assert unit_property(host, "containerd", "ActiveState") == "active"
