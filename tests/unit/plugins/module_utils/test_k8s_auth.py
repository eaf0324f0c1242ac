# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A role's connection as kubernetes.core's K8S_AUTH_* environment: only what is set."""

from __future__ import annotations

import pytest
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.k8s_auth import auth_environment


@pytest.mark.parametrize(
    "kubeconfig,context,environment",
    [
        ("", "", {}),
        (None, None, {}),
        ("/etc/kubernetes/admin.conf", "", {"K8S_AUTH_KUBECONFIG": "/etc/kubernetes/admin.conf"}),
        ("", "gb200-prod", {"K8S_AUTH_CONTEXT": "gb200-prod"}),
        (
            "~/.kube/rack",
            "gb200-prod",
            {"K8S_AUTH_KUBECONFIG": "~/.kube/rack", "K8S_AUTH_CONTEXT": "gb200-prod"},
        ),
    ],
)
def test_only_the_settings_given_become_environment_variables(kubeconfig, context, environment):
    assert auth_environment(kubeconfig, context) == environment
