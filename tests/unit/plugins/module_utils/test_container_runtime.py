# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The containerd role's rule for CRI-O nodes (OpenShift)."""

from __future__ import annotations

import pytest
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import container_runtime
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


PACKAGED = {"/usr/bin/containerd", "/lib/systemd/system/containerd.service"}  # Debian's containerd package


def test_the_tarball_next_to_the_distributions_containerd_fails_naming_it_and_the_choices():
    found = container_runtime.existing_containerd("tarball", "/usr/local", exists=PACKAGED.__contains__)
    assert (found.action, found.install_method) == ("fail", "tarball")
    assert found.found == ["/usr/bin/containerd", "/lib/systemd/system/containerd.service"]
    assert found.message == (
        "containerd from the distribution's package is installed (/usr/bin/containerd, "
        "/lib/systemd/system/containerd.service); the release tarball would install a second one in /usr/local/bin "
        "next to it; set containerd_on_existing to adopt (configure the package's containerd instead), skip (leave "
        "containerd alone on this host) or fail, set containerd_install_method to package, or remove the package "
        "first. Nothing was changed."
    )


def test_adopting_the_distributions_containerd_configures_it_and_skip_leaves_it():
    adopted = container_runtime.existing_containerd("tarball", "/usr/local", "adopt", PACKAGED.__contains__)
    assert (adopted.action, adopted.install_method) == ("adopt", "none")
    skipped = container_runtime.existing_containerd("tarball", "/usr/local", "skip", PACKAGED.__contains__)
    assert (skipped.action, skipped.install_method) == ("skip", "")


def test_no_package_another_method_or_the_tarball_over_usr_is_no_conflict():
    tarball_only = {"/usr/local/bin/containerd", "/etc/systemd/system/containerd.service"}
    assert container_runtime.existing_containerd("tarball", "/usr/local", exists=tarball_only.__contains__).action == (
        "install"
    )
    assert container_runtime.existing_containerd("package", "/usr/local", exists=PACKAGED.__contains__).action == (
        "install"
    )
    assert container_runtime.existing_containerd("tarball", "/usr/", exists=PACKAGED.__contains__).action == "install"
    with pytest.raises(ValueError, match="containerd_on_existing must be one of fail, adopt, skip"):
        container_runtime.existing_containerd("tarball", "/usr/local", "replace", PACKAGED.__contains__)
