#!/usr/bin/python
# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: uninstall_plan
short_description: Find what an uninstall of the GPU stack removes, and the users' workloads that stop it
version_added: 0.2.0
description:
  - Reads the ComputeDomains (C(resource.nvidia.com/v1beta1)), the MPIJobs (C(kubeflow.org/v2beta1)) and the
    Namespaces; a kind the cluster does not serve counts as none.
  - Objects labelled C(app.kubernetes.io/part-of=gpu-fabric-verify) are the verification stage's leftovers; any
    other ComputeDomain or MPIJob is a user's, and makes RV(blocked) true unless O(force).
  - Splits the MPI operator's install manifest (O(mpi_operator_manifest)) into the objects to delete, in deletion
    order, and its CRDs (returned only with O(include_crds)).
  - Changes nothing.
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - gpu_fabric.mnnvl.attributes
  - gpu_fabric.mnnvl.attributes.INFO_MODULE
options:
  force:
    description: Users' workloads do not block; the caller deletes them first (RV(user_workloads)).
    type: bool
    default: false
  include_crds:
    description: Return the manifest's CustomResourceDefinitions in RV(mpi_operator_crds).
    type: bool
    default: false
  mpi_operator_manifest:
    description: Text of the MPI operator's install manifest (multi-document YAML); empty - none.
    type: str
    default: ""
  api_patience:
    description:
      - Seconds the connection and each read are retried while the API server does not answer (connection refused,
        429, 5xx); then the module fails with one line saying where and why.
    type: int
    default: 90
    version_added: 0.4.0
requirements:
  - kubernetes >= 24.2.0
  - PyYAML >= 3.11
author:
  - gpu_fabric.mnnvl contributors (@gpu-fabric)
"""

EXAMPLES = r"""
- name: Find what the uninstall removes
  gpu_fabric.mnnvl.uninstall_plan:
    mpi_operator_manifest: "{{ lookup('ansible.builtin.file', 'mpi-operator.yaml') }}"
  register: plan

- name: Refuse while users' workloads exist
  ansible.builtin.fail:
    msg: "{{ plan.message }}"
  when: plan.blocked
"""

RETURN = r"""
blocked:
  description: Whether users' workloads exist and O(force) is false.
  returned: always
  type: bool
message:
  description: One line; when RV(blocked), it names the users' workloads and the ways on.
  returned: always
  type: str
  sample: "1 workload(s) of users still use the GPU stack: ComputeDomain team-a/train. Delete them (or wait for the
    jobs to end) and run the uninstall again, or set gpu_fabric_uninstall_force: true to delete them first. Nothing
    was removed."
user_workloads:
  description: The users' ComputeDomains and MPIJobs (api_version, kind, namespace, name), sorted.
  returned: always
  type: list
  elements: dict
verification_workloads:
  description: The verification stage's ComputeDomains and MPIJobs, as definitions for kubernetes.core.k8s.
  returned: always
  type: list
  elements: dict
verification_namespaces:
  description: Names of the namespaces the verification stage created.
  returned: always
  type: list
  elements: str
mpi_operator_objects:
  description: The manifest's objects other than CRDs, as definitions, in deletion order (Namespaces last).
  returned: always
  type: list
  elements: dict
mpi_operator_aggregating_roles:
  description:
    - The manifest's ClusterRoles with an C(aggregationRule), as definitions, to delete after RV(mpi_operator_objects)
      (kube-controller-manager creates again an aggregating role deleted while the roles it aggregates remain).
  returned: always
  type: list
  elements: dict
  version_added: 0.3.0
mpi_operator_crds:
  description: The manifest's CRDs as definitions when O(include_crds), else empty.
  returned: always
  type: list
  elements: dict
verification_schedule:
  description:
    - The scheduled verification's objects (role C(gpu_fabric.mnnvl.verify_schedule)) and the checks' PriorityClass,
      as definitions in deletion order (the CronJobs first, verify and refresh; the PriorityClass last).
  returned: always
  type: list
  elements: dict
  version_added: 0.4.0
"""

import os

from ansible.module_utils.basic import missing_required_lib
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.api_unreachable import ADVICE
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.k8s import (
    ApiUnreachable,
    auth_argument_spec,
    connect,
    is_transient,
    list_served,
    retry,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.kubeconfig import kubeconfig_problems, load_kubeconfig
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.uninstall import (
    COMPUTE_DOMAIN_API_VERSION,
    MPIJOB_API_VERSION,
    PART_OF,
    PART_OF_LABEL,
    PRIORITY_CLASS_SELECTOR,
    SCHEDULE_KINDS,
    SCHEDULE_SELECTOR,
    manifest_removal,
    partition_workloads,
    plan_summary,
    schedule_removal,
    verification_namespaces,
)
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.client import get_api_client
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.core import AnsibleK8SModule
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.exceptions import CoreException

try:
    import yaml
except ImportError:  # reported when a manifest is given
    yaml = None


def build_module() -> AnsibleK8SModule:
    argument_spec = auth_argument_spec()
    argument_spec.update(
        force=dict(type="bool", default=False),
        include_crds=dict(type="bool", default=False),
        mpi_operator_manifest=dict(type="str", default=""),
        api_patience=dict(type="int", default=90),
    )
    return AnsibleK8SModule(argument_spec=argument_spec, supports_check_mode=True)


def main() -> None:
    module = build_module()
    params = module.params
    documents = []
    if params["mpi_operator_manifest"]:
        if yaml is None:
            module.fail_json(msg=missing_required_lib("PyYAML"))
        try:
            documents = list(yaml.safe_load_all(params["mpi_operator_manifest"]))
        except yaml.YAMLError as exc:
            module.fail_json(msg=f"the MPI operator manifest is not YAML: {str(exc).splitlines()[0]}")
    patience = params["api_patience"]
    try:
        client = connect(lambda: get_api_client(module=module), patience)
        domains, mpijobs, namespaces = retry(
            lambda: (
                list_served(client, COMPUTE_DOMAIN_API_VERSION, "ComputeDomain"),
                list_served(client, MPIJOB_API_VERSION, "MPIJob"),
                list_served(client, "v1", "Namespace", label_selector=f"{PART_OF_LABEL}={PART_OF}"),
            ),
            patience,
            "cannot list ComputeDomains, MPIJobs and Namespaces",
        )
        schedule = retry(
            lambda: [
                dict(obj, apiVersion=version, kind=kind)  # a list's items carry neither
                for version, kind, selector in [
                    *((version, kind, SCHEDULE_SELECTOR) for version, kind in SCHEDULE_KINDS),
                    (SCHEDULE_KINDS[-1][0], SCHEDULE_KINDS[-1][1], PRIORITY_CLASS_SELECTOR),
                ]
                for obj in list_served(client, version, kind, label_selector=selector)
            ],
            patience,
            "cannot list the scheduled verification's objects and the checks' PriorityClass",
        )
    except CoreException as exc:  # no client: a kubeconfig that is missing or does not load is named with its path
        problems = kubeconfig_problems(
            params.get("kubeconfig") or "", params.get("context") or "", os.environ, load_kubeconfig
        )
        if problems:
            module.fail_json(msg=problems[0])
        module.fail_from_exception(exc)
    except ApiUnreachable as exc:
        module.fail_json(msg=f"{exc}; nothing was removed" + (f"; {ADVICE}" if is_transient(exc) else ""))
    users, ours = partition_workloads(domains, mpijobs)
    our_namespaces = verification_namespaces(namespaces)
    objects, aggregating, crds = manifest_removal(documents, params["include_crds"])
    module.exit_json(
        changed=False,
        blocked=bool(users) and not params["force"],
        message=plan_summary(users, ours, our_namespaces, params["force"]),
        user_workloads=[r.to_dict() for r in users],
        verification_workloads=[r.definition() for r in ours],
        verification_namespaces=our_namespaces,
        mpi_operator_objects=objects,
        mpi_operator_aggregating_roles=aggregating,
        mpi_operator_crds=crds,
        verification_schedule=schedule_removal(schedule),
    )


if __name__ == "__main__":
    main()
