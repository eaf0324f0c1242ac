#!/usr/bin/python
# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: apply_plan
short_description: Keep of a manifest only the objects whose server-side apply would change something
version_added: 0.4.0
description:
  - Reads each object of O(definitions) from the API server and compares it with its definition, so that the
    apply task that follows sends only what would change. An unchanged cluster then receives reads alone, not
    a PATCH per object on every run (each authorized, admitted and written to the audit log).
  - An apply is left out only when the live object has every value the definition sets, O(field_manager) has
    applied it before, and every map field that manager owns is still in the definition (a field dropped from
    a newer manifest is pruned by an apply). In every other case the object is kept.
  - A kind the API server does not serve yet (its CRD is in the same manifest) counts as absent.
  - Changes nothing.
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - gpu_fabric.mnnvl.attributes
  - gpu_fabric.mnnvl.attributes.INFO_MODULE
options:
  definitions:
    description:
      - Named groups of object definitions (each a list of manifests with C(apiVersion), C(kind) and
        C(metadata.name)); RV(apply) keeps the same names and order.
    type: dict
    required: true
  field_manager:
    description: The field manager of the server-side apply that follows.
    type: str
    required: true
  api_patience:
    description:
      - Seconds the connection and each read are retried while the API server does not answer (connection refused,
        429, 5xx); then the module fails with one line saying where and why.
    type: int
    default: 90
requirements:
  - kubernetes >= 24.2.0
author:
  - gpu_fabric.mnnvl contributors (@gpu-fabric)
"""

EXAMPLES = r"""
- name: Compare the manifest with the cluster
  gpu_fabric.mnnvl.apply_plan:
    definitions:
      objects: "{{ lookup('ansible.builtin.file', 'manifest.yaml') | from_yaml_all | list }}"
    field_manager: gpu-fabric
  register: plan

- name: Apply what would change
  kubernetes.core.k8s:
    definition: "{{ plan.apply.objects }}"
    apply: true
    server_side_apply:
      field_manager: gpu-fabric
  when: plan.apply.objects | length > 0
"""

RETURN = r"""
apply:
  description: Each group of O(definitions) with only the objects whose apply is needed, in their order.
  returned: always
  type: dict
  sample: {"namespaces": [], "objects": [{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {}}]}
objects:
  description: Every object compared, C(Kind namespace/name), with why its apply is needed or C(unchanged).
  returned: always
  type: dict
  sample: {"Deployment mpi-operator/mpi-operator": "differs", "Namespace mpi-operator": "unchanged"}
"""

import os

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.api_unreachable import ADVICE
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.k8s import (
    ApiUnreachable,
    ResourceNotFoundError,
    auth_argument_spec,
    connect,
    get_object,
    is_transient,
    resource_api,
    retry,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.kubeconfig import kubeconfig_problems, load_kubeconfig
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.server_side_apply import (
    apply_reason,
    object_key,
    split_needed,
)
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.client import get_api_client
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.core import AnsibleK8SModule
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.exceptions import CoreException


def build_module() -> AnsibleK8SModule:
    argument_spec = auth_argument_spec()
    argument_spec.update(
        definitions=dict(type="dict", required=True),
        field_manager=dict(type="str", required=True),
        api_patience=dict(type="int", default=90),
    )
    return AnsibleK8SModule(argument_spec=argument_spec, supports_check_mode=True)


def definition_problem(group: str, obj) -> str:
    if not isinstance(obj, dict):
        return f"definitions.{group}: an item is not a mapping"
    if not obj.get("apiVersion") or not obj.get("kind") or not (obj.get("metadata") or {}).get("name"):
        return f"definitions.{group}: an object lacks apiVersion, kind or metadata.name: {object_key(obj)!r}"
    return ""


def read_live(client, obj):
    """The object as the API server has it, or None (absent, or its kind not served yet)."""
    try:
        resource = resource_api(client, obj["apiVersion"], obj["kind"])
    except ResourceNotFoundError:
        return None
    namespace = obj["metadata"].get("namespace") if resource.namespaced else None
    return get_object(client, resource, obj["metadata"]["name"], namespace)


def main() -> None:
    module = build_module()
    params = module.params
    groups = {}
    for name, objects in params["definitions"].items():
        objects = [obj for obj in (objects or []) if obj]
        for obj in objects:
            problem = definition_problem(name, obj)
            if problem:
                module.fail_json(msg=problem)
        groups[name] = objects
    patience = params["api_patience"]
    reasons = {}
    try:
        client = connect(lambda: get_api_client(module=module), patience)
        for objects in groups.values():
            for obj in objects:
                live = retry(lambda obj=obj: read_live(client, obj), patience, f"cannot read {object_key(obj)}")
                reasons[object_key(obj)] = apply_reason(live, obj, params["field_manager"])
    except CoreException as exc:  # no client: a kubeconfig that is missing or does not load is named with its path
        problems = kubeconfig_problems(
            params.get("kubeconfig") or "", params.get("context") or "", os.environ, load_kubeconfig
        )
        if problems:
            module.fail_json(msg=problems[0])
        module.fail_from_exception(exc)
    except ApiUnreachable as exc:
        module.fail_json(msg=f"{exc}; nothing was changed" + (f"; {ADVICE}" if is_transient(exc) else ""))
    module.exit_json(
        changed=False,
        apply=split_needed(groups, reasons),
        objects={key: reason or "unchanged" for key, reason in reasons.items()},
    )


if __name__ == "__main__":
    main()
