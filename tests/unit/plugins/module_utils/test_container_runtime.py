# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The containerd role's rule for CRI-O nodes (OpenShift)."""

from __future__ import annotations

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.container_runtime import decide


def files(*paths):
    return lambda path: path in paths


def test_a_crio_node_without_containerd_is_skipped_with_one_line():
    decision = decide(None, files("/etc/crio/crio.conf", "/usr/lib/systemd/system/crio.service"))
    assert (decision.runtime, decision.manage_containerd) == ("crio", False)
    assert decision.message == (
        "containerd is not managed on this node: it runs CRI-O (/etc/crio/crio.conf present, no containerd), whose "
        "CDI support is on by default since CRI-O 1.23; nothing to configure for the IMEX channels"
    )


def test_containerd_beside_crio_is_still_managed():
    decision = decide(None, files("/etc/crio/crio.conf", "/usr/bin/containerd"))
    assert (decision.runtime, decision.manage_containerd) == ("containerd", True)
    assert decision.crio_found == ["/etc/crio/crio.conf"]


def test_the_host_variable_decides_first():
    assert decide(True, files("/usr/bin/containerd")).manage_containerd is False
    assert "gpu_fabric_openshift is true" in decide(True, files()).message
    assert decide(False, files("/etc/crio/crio.conf")).manage_containerd is True


def test_a_host_without_either_is_left_to_the_role():
    decision = decide(None, files())
    assert (decision.runtime, decision.manage_containerd) == ("unknown", True)
