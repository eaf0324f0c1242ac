#!/usr/bin/python
# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: mpi_operator_ready
short_description: Wait until the Kubeflow MPI operator runs and its MPIJob API is served
version_added: 0.3.0
description:
  - Waits until the operator's Deployment has the condition C(Available=True), then checks that the MPIJob
    CustomResourceDefinition serves O(api_version), in one module process.
  - Each failure names what is missing (the Deployment's replicas and conditions, or that it does not exist; the
    versions the CustomResourceDefinition serves) and where to look.
  - A read that fails for a transient reason (429, a 5xx, no answer) is read again until the wait's deadline.
  - Changes nothing; runs the same in check mode.
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - gpu_fabric.mnnvl.attributes
  - gpu_fabric.mnnvl.attributes.INFO_MODULE
options:
  namespace:
    description: The operator's namespace.
    type: str
    default: mpi-operator
  deployment_name:
    description: The operator's Deployment.
    type: str
    default: mpi-operator
  crd_name:
    description: The MPIJob CustomResourceDefinition.
    type: str
    default: mpijobs.kubeflow.org
  api_version:
    description: The MPIJob version the CustomResourceDefinition must serve (the verify stage's MPIJobs use it).
    type: str
    default: v2beta1
  wait_timeout:
    description: Seconds to wait for the Deployment to be Available.
    type: int
    default: 300
  wait_sleep:
    description: Seconds between two reads.
    type: int
    default: 2
requirements:
  - kubernetes >= 24.2.0
author:
  - gpu_fabric.mnnvl contributors (@gpu-fabric)
"""

EXAMPLES = r"""
- name: Wait for the MPI operator
  gpu_fabric.mnnvl.mpi_operator_ready:
    namespace: mpi-operator
    wait_timeout: 300
"""

RETURN = r"""
images:
  description: The images of the Deployment's containers.
  returned: when the Deployment exists
  type: list
  elements: str
  sample: [mpioperator/mpi-operator:0.6.0]
served_versions:
  description: The versions the CustomResourceDefinition serves.
  returned: when the Deployment is Available
  type: list
  elements: str
  sample: [v2beta1]
msg:
  description: One line with what is ready.
  returned: success
  type: str
"""

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.k8s import (
    DynamicApiError,
    Urllib3Error,
    api_poll,
    api_retry,
    auth_argument_spec,
    get_object,
    resource_api,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.node_verdict import error_line
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.retry import WaitTimeout
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.rollout import (
    crd_message,
    deployment_available,
    deployment_images,
    deployment_message,
    mpi_operator_summary,
    served_versions,
)
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.client import get_api_client
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.core import AnsibleK8SModule
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.exceptions import CoreException


def build_module() -> AnsibleK8SModule:
    argument_spec = auth_argument_spec()
    argument_spec.update(
        namespace=dict(type="str", default="mpi-operator"),
        deployment_name=dict(type="str", default="mpi-operator"),
        crd_name=dict(type="str", default="mpijobs.kubeflow.org"),
        api_version=dict(type="str", default="v2beta1"),
        wait_timeout=dict(type="int", default=300),
        wait_sleep=dict(type="int", default=2),
    )
    return AnsibleK8SModule(argument_spec=argument_spec, supports_check_mode=True)


def main() -> None:
    module = build_module()
    p = module.params
    namespace, name, timeout = p["namespace"], p["deployment_name"], p["wait_timeout"]
    try:
        client = get_api_client(module=module)
        deployments = resource_api(client, "apps/v1", "Deployment")
        try:
            deployment = api_poll(
                lambda: get_object(client, deployments, name, namespace), deployment_available, timeout, p["wait_sleep"]
            )
        except WaitTimeout as exc:
            module.fail_json(
                msg=deployment_message(namespace, name, timeout, exc.last), images=deployment_images(exc.last)
            )
        crds = resource_api(client, "apiextensions.k8s.io/v1", "CustomResourceDefinition")
        crd = api_retry(lambda: get_object(client, crds, p["crd_name"]), timeout, p["wait_sleep"])
    except CoreException as exc:
        module.fail_from_exception(exc)
    except (DynamicApiError, Urllib3Error, ConnectionError, TimeoutError) as exc:  # refused, or no answer in time
        module.fail_json(msg=f"cannot read the MPI operator's rollout: {error_line(exc)}")
    served = served_versions(crd)
    if p["api_version"] not in served:
        module.fail_json(
            msg=crd_message(p["crd_name"], p["api_version"], crd),
            images=deployment_images(deployment),
            served_versions=served,
        )
    module.exit_json(
        changed=False,
        images=deployment_images(deployment),
        served_versions=served,
        msg=mpi_operator_summary(namespace, name, deployment, p["crd_name"], p["api_version"]),
    )


if __name__ == "__main__":
    main()
