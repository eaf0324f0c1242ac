# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""In a pod (the scheduled verification's CronJob) no kubeconfig is given: the connection the roles set up is empty,
and kubernetes.core's client then takes the pod's in-cluster ServiceAccount, as the job relies on."""

from __future__ import annotations

import kubernetes
import pytest
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.k8s_auth import auth_environment
from ansible_collections.kubernetes.core.plugins.module_utils.k8s import client as core_client
from kubernetes.config import incluster_config


@pytest.fixture
def in_a_pod(tmp_path, monkeypatch):
    """The pod's environment and its projected ServiceAccount token and CA, as the kubelet mounts them."""
    token, ca = tmp_path / "token", tmp_path / "ca.crt"
    token.write_text("the-service-accounts-token")
    ca.write_text("-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n")
    monkeypatch.setattr(incluster_config, "SERVICE_TOKEN_FILENAME", str(token))
    monkeypatch.setattr(incluster_config, "SERVICE_CERT_FILENAME", str(ca))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    for name in ("K8S_AUTH_KUBECONFIG", "K8S_AUTH_CONTEXT", "K8S_AUTH_HOST", "K8S_AUTH_API_KEY", "KUBECONFIG"):
        monkeypatch.delenv(name, raising=False)
    saved = kubernetes.client.Configuration.get_default_copy()
    yield ca
    kubernetes.client.Configuration.set_default(saved)


def test_without_a_kubeconfig_the_client_uses_the_pods_service_account(in_a_pod):
    # the roles' connection environment (gpu_fabric_k8s_auth_environment) when gpu_fabric_kubeconfig is unset
    assert auth_environment("", "") == {}
    configuration = core_client._create_configuration(core_client._create_auth_spec())
    assert configuration.host == "https://10.96.0.1:443"
    assert configuration.api_key == {"BearerToken": "bearer the-service-accounts-token"}
    assert configuration.ssl_ca_cert == str(in_a_pod)
