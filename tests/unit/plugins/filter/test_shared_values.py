# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The filters the gpu_fabric role's shared values and the roles' own connection and driver root go through."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.gpu_fabric.mnnvl.plugins.filter.shared_values import FilterModule

FILTERS = FilterModule().filters()


def test_filters_are_exported():
    assert sorted(FILTERS) == ["driver_root", "k8s_auth_environment"]


def test_the_connection_becomes_the_environment_of_what_is_set():
    k8s_auth_environment = FILTERS["k8s_auth_environment"]
    assert k8s_auth_environment("", "") == {}
    assert k8s_auth_environment("/etc/kubernetes/admin.conf") == {"K8S_AUTH_KUBECONFIG": "/etc/kubernetes/admin.conf"}
    assert k8s_auth_environment("/srv/kubeconfig", "rack0") == {
        "K8S_AUTH_KUBECONFIG": "/srv/kubeconfig",
        "K8S_AUTH_CONTEXT": "rack0",
    }


def test_the_driver_root_follows_the_owner():
    assert FILTERS["driver_root"]("operator") == "/run/nvidia/driver"
    assert FILTERS["driver_root"]("host") == "/"
    refused = r"^driver_root: gpu_fabric_driver_owner is 'hots'; use operator or host$"
    with pytest.raises(AnsibleFilterError, match=refused):
        FILTERS["driver_root"]("hots")
