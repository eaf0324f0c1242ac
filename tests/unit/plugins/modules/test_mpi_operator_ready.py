# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""mpi_operator_ready: the wait for the Deployment and the MPIJob API, with the API behind it faked or absent."""

from __future__ import annotations

import copy

from ansible_collections.gpu_fabric.mnnvl.plugins.modules import mpi_operator_ready
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic.exceptions import api_exception

from tests.unit.plugins.modules.runner import run_module

IMAGE = "mpioperator/mpi-operator:0.6.0"


def deployment(available):
    """The MPI operator's Deployment, its status as kube-controller-manager writes it."""
    condition = {"type": "Available", "status": "True" if available else "False", "reason": "MinimumReplicasAvailable"}
    return {
        "metadata": {"name": "mpi-operator", "namespace": "mpi-operator"},
        "spec": {"template": {"spec": {"containers": [{"name": "mpi-operator", "image": IMAGE}]}}},
        "status": {
            "replicas": 1,
            "availableReplicas": 1 if available else 0,
            "conditions": [condition, {"type": "Progressing", "status": "True"}],
        },
    }


def crd(*served):
    versions = [{"name": v, "served": True} for v in served] + [{"name": "v1", "served": False}]
    return {"metadata": {"name": "mpijobs.kubeflow.org"}, "spec": {"versions": versions}}


class FakeClient:
    """Answers the Deployment (``deployments``, one per read; None: absent) and the CRD by name."""

    def __init__(self, deployments, definition):
        self.deployments = list(deployments)
        self.definition = definition
        self.reads = []

    def resource(self, kind, api_version):
        return kind

    def get(self, resource, name=None, namespace=None):
        self.reads.append((resource, name, namespace))
        if resource == "Deployment":  # one answer per read, the last one for every read after it
            found = self.deployments.pop(0) if len(self.deployments) > 1 else self.deployments[0]
        else:
            found = self.definition
        if found is None:
            raise api_exception(ApiException(status=404, reason="Not Found"))
        return copy.deepcopy(found)


def run(monkeypatch, client, **args):
    monkeypatch.setattr(mpi_operator_ready, "get_api_client", lambda module: client)
    monkeypatch.setattr("time.sleep", lambda seconds: None)
    return run_module(mpi_operator_ready.main, dict({"wait_sleep": 0}, **args))


def test_waits_for_available_then_checks_the_api(monkeypatch):
    client = FakeClient([None, deployment(False), deployment(True)], crd("v2beta1"))
    result = run(monkeypatch, client)
    assert result["failed"] is False and result["changed"] is False
    assert result["msg"] == (
        "MPI operator mpi-operator/mpi-operator Available (1/1 replicas, mpioperator/mpi-operator:0.6.0); "
        "mpijobs.kubeflow.org serves v2beta1."
    )
    assert result["served_versions"] == ["v2beta1"]
    assert [read[0] for read in client.reads] == ["Deployment"] * 3 + ["CustomResourceDefinition"]


def test_a_deployment_never_available_names_its_status_and_image(monkeypatch):
    result = run(monkeypatch, FakeClient([deployment(False)], crd("v2beta1")), wait_timeout=0)
    assert result["failed"] is True
    assert result["msg"].startswith("Deployment mpi-operator/mpi-operator is not Available after 0s ({")
    assert '"availableReplicas": 0' in result["msg"] and '"status": "False"' in result["msg"]
    assert result["msg"].endswith(f"`kubectl -n mpi-operator get pods` (image pull of {IMAGE}?).")
    assert result["images"] == [IMAGE]


def test_an_absent_deployment_is_not_found(monkeypatch):
    result = run(monkeypatch, FakeClient([None], crd("v2beta1")), wait_timeout=0, namespace="kubeflow")
    assert result["failed"] is True
    assert result["msg"] == (
        "Deployment kubeflow/mpi-operator is not Available after 0s (not found). Check its pods: "
        "`kubectl -n kubeflow get pods` (image pull of its image?)."
    )


def test_an_api_that_does_not_serve_v2beta1_fails_naming_what_it_serves(monkeypatch):
    result = run(monkeypatch, FakeClient([deployment(True)], crd("v1alpha2")))
    assert result["failed"] is True
    assert result["msg"].startswith(
        "The mpijobs.kubeflow.org CustomResourceDefinition does not serve v2beta1 (served: v1alpha2); "
    )
    missing = run(monkeypatch, FakeClient([deployment(True)], None))
    assert missing["msg"] == (
        "The mpijobs.kubeflow.org CustomResourceDefinition is missing; the manifest applied did not create it."
    )


def test_an_api_server_that_refuses_is_one_line(monkeypatch):
    class Refusing(FakeClient):
        def get(self, resource, name=None, namespace=None):
            raise api_exception(ApiException(status=403, reason="Forbidden"))

    result = run(monkeypatch, Refusing([], None))
    assert result["failed"] is True
    assert result["msg"] == "cannot read the MPI operator's rollout: 403 Forbidden"
