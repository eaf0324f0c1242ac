# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""playbooks/hosts.yml: containerd with CDI (tarball on t1, package on t2), IMEX masked, driver checked."""

from __future__ import annotations

import json

import pytest
from tray import containerd_dump, cri_section, runc_options, unit_property

BINARY = {"hosts-t1": "/usr/local/bin/containerd", "hosts-t2": "/usr/bin/containerd"}


def test_containerd_comes_from_the_chosen_install_method(host):
    name = host.backend.hostname
    version = host.check_output(f"{BINARY[name]} --version")
    assert " 1.7.24" in version
    if name == "hosts-t1":
        assert not host.package("containerd").is_installed
        assert unit_property(host, "containerd", "FragmentPath") == "/etc/systemd/system/containerd.service"
    else:
        assert host.package("containerd").version == "1.7.24~ds1-6+deb13u1"
        assert not host.file("/usr/local/bin/containerd").exists
        assert unit_property(host, "containerd", "FragmentPath") == "/lib/systemd/system/containerd.service"


def test_containerd_runs_with_cdi_and_systemd_cgroup(host):
    assert host.service("containerd").is_running
    assert host.service("containerd").is_enabled
    dump = containerd_dump(host, BINARY[host.backend.hostname])
    assert cri_section(dump)["enable_cdi"] is True
    assert cri_section(dump)["cdi_spec_dirs"] == ["/etc/cdi", "/var/run/cdi"]
    assert runc_options(dump)["SystemdCgroup"] is True
    assert dump["imports"] == ["/etc/containerd/config.toml"]


def test_created_config_toml_is_version_2_with_the_toolkit_import(host):
    config = host.file("/etc/containerd/config.toml")
    assert config.mode == 0o644
    assert "version = 2" in config.content_string
    assert 'imports = ["/etc/containerd/conf.d/*.toml"]' in config.content_string


def test_host_imex_service_is_masked_and_inactive(host):
    assert host.check_output("systemctl is-enabled nvidia-imex || true") == "masked"
    assert unit_property(host, "nvidia-imex", "ActiveState") == "inactive"


def test_driver_record_only_where_the_operator_driver_is_up(host):
    fact = host.file("/etc/ansible/facts.d/gpu_fabric_driver.fact")
    if host.backend.hostname == "hosts-t1":
        assert not fact.exists
        return
    record = json.loads(fact.content_string)
    assert record["owner"] == "operator"
    assert record["driver_root"] == "/run/nvidia/driver"
    assert record["driver_version"] == "580.95.05"
    assert record["gpu_count"] == 4
    assert record["clique_label"] == "7b968a6d-c8aa-45e1-9e07-e1e51be99c31.1"


@pytest.mark.parametrize("path", ["/usr/bin/nvidia-smi", "/etc/apt/sources.list.d/nvidia.list"])
def test_operator_owner_leaves_no_driver_on_the_host(host, path):
    assert not host.file(path).exists
