# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""preflight passed on a good tray and changed nothing on it."""

from __future__ import annotations


def test_preflight_left_the_services_as_they_were(host):
    # The image starts the host IMEX service enabled; only nvidia_imex may change that.
    assert host.check_output("systemctl is-enabled nvidia-imex") == "enabled"
    assert host.service("systemd-timesyncd").is_running


def test_preflight_wrote_nothing(host):
    assert not host.file("/etc/containerd").exists
    assert not host.file("/etc/ansible/facts.d").exists
    assert host.file("/etc/nvidia-imex/nodes_config.cfg").content_string == (
        "# One address of each node of the IMEX domain per line.\n"
    )
    assert host.file("/usr/bin/nvidia-smi").linked_to == "/usr/lib/gpu-fabric-sim/nvidia-smi/nvidia-smi"
