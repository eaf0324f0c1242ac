#!/usr/bin/python
# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: clique_info
short_description: Group Kubernetes nodes by NVLink clique and check them against the racks
version_added: 0.1.0
description:
  - Lists the nodes once (in pages of O(page_size)) and groups them by their C(nvidia.com/gpu.clique)
    label, which GPU Feature Discovery sets to C(<clusterUUID>.<cliqueId>) on fabric-attached GPU nodes.
  - Checks that every GPU node is labelled, and optionally the number of cliques, the number of nodes per
    clique, and that the nodes of each rack share one clique.
  - Fails listing B(all) violations unless O(fail_on_violation=false).
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - gpu_fabric.mnnvl.attributes
  - gpu_fabric.mnnvl.attributes.INFO_MODULE
options:
  label_selector:
    description: Only consider nodes matching this label selector (for example V(nvidia.com/gpu.present=true)).
    type: str
  page_size:
    description: Nodes read per API call (C(limit)); large clusters are listed in pages.
    type: int
    default: 500
  expected_cliques:
    description: Number of cliques expected (one per NVL72 rack).
    type: int
  nodes_per_clique:
    description: Number of nodes expected in every clique (18 compute trays for a full GB200 NVL72 rack).
    type: int
  racks:
    description:
      - Rack name -> list of node names that must share one clique.
      - Each listed node must exist, be a GPU node and be labelled.
    type: dict
  fail_on_violation:
    description: Fail when a violation is found; with V(false) the violations are only returned.
    type: bool
    default: true
requirements:
  - kubernetes >= 24.2.0
  - PyYAML >= 3.11
seealso:
  - module: gpu_fabric.mnnvl.compute_domain
author:
  - gpu_fabric.mnnvl contributors (@gpu-fabric)
"""

EXAMPLES = r"""
- name: Check that each rack is one clique of 18 trays
  gpu_fabric.mnnvl.clique_info:
    expected_cliques: 2
    nodes_per_clique: 18
    racks:
      rack-a: "{{ groups['rack_a'] }}"
      rack-b: "{{ groups['rack_b'] }}"
  register: cliques

- name: Read the cliques without failing
  gpu_fabric.mnnvl.clique_info:
    label_selector: nvidia.com/gpu.present=true
    fail_on_violation: false
  register: cliques

- name: Show the nodes of each clique
  ansible.builtin.debug:
    var: cliques.cliques
"""

RETURN = r"""
cliques:
  description: Clique value -> sorted names of the nodes carrying it.
  returned: always
  type: dict
  sample: {"6a4e8f55-62b0-5f8e-9a5f-2f3c0b1d4e7a.32766": ["gb200-r0-t0", "gb200-r0-t1"]}
unlabelled_nodes:
  description: GPU nodes without a C(nvidia.com/gpu.clique) label.
  returned: always
  type: list
  elements: str
  sample: ["gb200-r0-t3"]
gpu_nodes:
  description: Number of GPU nodes seen (labelled or not).
  returned: always
  type: int
  sample: 4
violations:
  description: One line per unmet expectation, naming the node, rack or clique.
  returned: always
  type: list
  elements: str
  sample: ["GPU node gb200-r0-t3 has no nvidia.com/gpu.clique label: ..."]
passed:
  description: Whether no violation was found.
  returned: always
  type: bool
  sample: true
"""

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.cliques import (
    CLIQUE_LABEL,
    check_clique_expectations,
    group_nodes_by_clique,
    read_nodes_for_grouping,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.k8s import (
    DynamicApiError,
    api_error_text,
    auth_argument_spec,
    list_all,
)
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.client import get_api_client
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.core import AnsibleK8SModule
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.exceptions import CoreException

ARGUMENT_SPEC = dict(
    label_selector=dict(type="str"),
    page_size=dict(type="int", default=500),
    expected_cliques=dict(type="int"),
    nodes_per_clique=dict(type="int"),
    racks=dict(type="dict"),
    fail_on_violation=dict(type="bool", default=True),
)


def build_module() -> AnsibleK8SModule:
    argument_spec = auth_argument_spec()
    argument_spec.update(ARGUMENT_SPEC)
    return AnsibleK8SModule(argument_spec=argument_spec, supports_check_mode=True)


def evaluate(nodes: list, params: dict) -> dict:
    """The module's result for a node list: the grouping, the violations and the verdict."""
    racks = {str(rack): [str(n) for n in members] for rack, members in (params.get("racks") or {}).items()}
    grouping = group_nodes_by_clique(nodes)
    violations = check_clique_expectations(
        grouping,
        expected_cliques=params.get("expected_cliques"),
        nodes_per_clique=params.get("nodes_per_clique"),
        racks=racks or None,
    )
    gpu_nodes = sum(len(members) for members in grouping.groups.values()) + len(grouping.unlabelled_gpu_nodes)
    return {
        "changed": False,
        "cliques": grouping.groups,
        "unlabelled_nodes": grouping.unlabelled_gpu_nodes,
        "gpu_nodes": gpu_nodes,
        "violations": violations,
        "passed": not violations,
    }


def main() -> None:
    module = build_module()
    params = module.params
    try:
        client = get_api_client(module=module)
        nodes = read_nodes_for_grouping(
            lambda selector, metadata_only: list_all(
                client, "v1", "Node", label_selector=selector, limit=params["page_size"], metadata_only=metadata_only
            ),
            params["label_selector"],
        )
    except CoreException as exc:
        module.fail_from_exception(exc)
    except DynamicApiError as exc:
        module.fail_json(msg=f"cannot list nodes: {api_error_text(exc)}")
    except Exception as exc:  # connection refused, TLS, DNS: the client raises urllib3 errors
        module.fail_json(
            msg=f"cannot reach the Kubernetes API to list nodes ({type(exc).__name__}: {exc}); "
            "check the kubeconfig/host options or K8S_AUTH_KUBECONFIG"
        )
    result = evaluate(nodes, params)
    if result["violations"] and params["fail_on_violation"]:
        module.fail_json(
            msg=f"{len(result['violations'])} {CLIQUE_LABEL} violation(s): " + " | ".join(result["violations"]),
            **result,
        )
    module.exit_json(**result)


if __name__ == "__main__":
    main()
