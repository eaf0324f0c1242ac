#!/usr/bin/python
# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: compute_domain
short_description: Create or delete an NVIDIA ComputeDomain and wait until its nodes are Ready
version_added: 0.1.0
description:
  - Creates or deletes a C(resource.nvidia.com/v1beta1) C(ComputeDomain) of the NVIDIA DRA driver
    (25.8.0) and waits for it.
  - Readiness is read per node from C(status.nodes[].status), with C(status.status) as the aggregate;
    C(kubernetes.core.k8s)'s O(kubernetes.core.k8s#module:wait_condition) cannot express this.
  - The spec of a ComputeDomain is immutable. An existing ComputeDomain with a different spec makes the
    module fail, unless O(force=true) deletes and recreates it.
  - On a timeout the failure message holds the ComputeDomain's status, the nodes that are not Ready, and
    the state of the DRA driver's Deployments and of this domain's daemon DaemonSet and pods.
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - gpu_fabric.mnnvl.attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
    details:
      - The diff shows the ComputeDomain's identity and spec before and after.
options:
  name:
    description: Name of the ComputeDomain.
    type: str
    required: true
  namespace:
    description:
      - Namespace of the ComputeDomain. Workload pods that claim its channel must run in the same namespace.
    type: str
    required: true
  state:
    description: Whether the ComputeDomain should exist.
    type: str
    choices: [present, absent]
    default: present
  num_nodes:
    description:
      - C(spec.numNodes). With the DRA driver 25.8.0 default feature gate C(IMEXDaemonsWithDNSNames=true),
        V(0) is recommended; a non-zero value only drives the aggregate C(status.status).
    type: int
    default: 0
  channel_template_name:
    description:
      - Name of the ResourceClaimTemplate the controller creates for workloads
        (C(spec.channel.resourceClaimTemplate.name)).
      - Defaults to C(<name>-channel).
    type: str
  channel_allocation_mode:
    description: C(spec.channel.allocationMode); V(All) injects every IMEX channel, V(Single) exactly one.
    type: str
    choices: [Single, All]
    default: Single
  force:
    description: Delete and recreate an existing ComputeDomain whose spec differs (its workloads lose the channel).
    type: bool
    default: false
  wait:
    description:
      - With O(state=present), wait until the ComputeDomain is ready (see O(wait_nodes)) and its
        ResourceClaimTemplate exists.
      - With O(state=absent), wait until the ComputeDomain is gone (the controller removes its finalizer).
    type: bool
    default: true
  wait_timeout:
    description: Seconds to wait before failing.
    type: int
    default: 300
  wait_sleep:
    description:
      - The module waits on the ComputeDomain with one read and one watch, judged at each change, not by
        reading it again and again.
      - Seconds between two reads of its channel ResourceClaimTemplate until the DRA controller created it
        (another object, which the domain's watch does not see); the identity needs C(watch) on
        computedomains.
    type: int
    default: 2
  wait_nodes:
    description:
      - Nodes that must appear in C(status.nodes[]) with status C(Ready).
      - When empty and O(num_nodes) is greater than 0, wait for O(num_nodes) Ready nodes and C(status.status=Ready).
      - When empty and O(num_nodes=0), wait only for the controller to acknowledge the domain (a status written,
        the ResourceClaimTemplate created); nodes join when a workload claiming the channel lands on them, so
        wait for them with O(wait_nodes) after the workload is scheduled.
    type: list
    elements: str
    default: []
  driver_namespace:
    description: Namespace of the NVIDIA DRA driver, read for the failure message when a wait times out.
    type: str
    default: nvidia-dra-driver-gpu
requirements:
  - kubernetes >= 24.2.0
  - PyYAML >= 3.11
seealso:
  - module: gpu_fabric.mnnvl.clique_info
  - module: kubernetes.core.k8s
author:
  - gpu_fabric.mnnvl contributors (@gpu-fabric)
"""

EXAMPLES = r"""
- name: Create a ComputeDomain for a two-node job and wait until the controller acknowledges it
  gpu_fabric.mnnvl.compute_domain:
    name: nvbandwidth-test-compute-domain
    namespace: gpu-fabric-verify
    channel_template_name: nvbandwidth-test-compute-domain-channel

- name: Wait until the daemons of both nodes are Ready (after the workload pods were scheduled)
  gpu_fabric.mnnvl.compute_domain:
    name: nvbandwidth-test-compute-domain
    namespace: gpu-fabric-verify
    channel_template_name: nvbandwidth-test-compute-domain-channel
    wait_nodes: [gb200-r0-t0, gb200-r0-t1]
    wait_timeout: 600

- name: Delete the ComputeDomain and wait until the controller has cleaned up
  gpu_fabric.mnnvl.compute_domain:
    name: nvbandwidth-test-compute-domain
    namespace: gpu-fabric-verify
    state: absent
"""

RETURN = r"""
compute_domain:
  description: The ComputeDomain as read from the API server (empty after a deletion).
  returned: always
  type: dict
  sample: {"apiVersion": "resource.nvidia.com/v1beta1", "kind": "ComputeDomain", "metadata": {"name": "cd"},
           "spec": {"numNodes": 0, "channel": {"resourceClaimTemplate": {"name": "cd-channel"},
           "allocationMode": "Single"}}, "status": {"status": "Ready", "nodes": []}}
status:
  description: C(status.status), the aggregate state (V(Ready) or V(NotReady)); empty when not written yet.
  returned: always
  type: str
  sample: Ready
nodes:
  description: The entries of C(status.nodes[]).
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: Node name.
      type: str
      sample: gb200-r0-t0
    status:
      description: Readiness of the node's IMEX daemon (V(Ready) or V(NotReady)).
      type: str
      sample: Ready
    clique_id:
      description: C(<ClusterUUID>.<CliqueId>) of the node, as in the C(nvidia.com/gpu.clique) label.
      type: str
      sample: 5d5e9fd8-0ab7-4b69-8a3c-c0e2cbf2c6d1.32766
    ip_address:
      description: IP address of the node's ComputeDomain daemon pod.
      type: str
      sample: 10.244.1.17
channel_template_name:
  description: Name of the ResourceClaimTemplate that workload pods reference to claim the IMEX channel.
  returned: always
  type: str
  sample: nvbandwidth-test-compute-domain-channel
"""

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.compute_domain import (
    ComputeDomainError,
    ComputeDomainSpec,
    Request,
    default_channel_template_name,
    ensure,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.k8s import auth_argument_spec
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.client import get_api_client
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.core import AnsibleK8SModule
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.exceptions import CoreException

ARGUMENT_SPEC = dict(
    name=dict(type="str", required=True),
    namespace=dict(type="str", required=True),
    state=dict(type="str", choices=["present", "absent"], default="present"),
    num_nodes=dict(type="int", default=0),
    channel_template_name=dict(type="str"),
    channel_allocation_mode=dict(type="str", choices=["Single", "All"], default="Single"),
    force=dict(type="bool", default=False),
    wait=dict(type="bool", default=True),
    wait_timeout=dict(type="int", default=300),
    wait_sleep=dict(type="int", default=2),
    wait_nodes=dict(type="list", elements="str", default=[]),
    driver_namespace=dict(type="str", default="nvidia-dra-driver-gpu"),
)


def build_module() -> AnsibleK8SModule:
    argument_spec = auth_argument_spec()
    argument_spec.update(ARGUMENT_SPEC)
    return AnsibleK8SModule(argument_spec=argument_spec, supports_check_mode=True)


def request_from_params(params: dict, check_mode: bool) -> Request:
    return Request(
        name=params["name"],
        namespace=params["namespace"],
        state=params["state"],
        spec=ComputeDomainSpec(
            num_nodes=params["num_nodes"],
            channel_template_name=params["channel_template_name"] or default_channel_template_name(params["name"]),
            allocation_mode=params["channel_allocation_mode"],
        ),
        wait=params["wait"],
        wait_timeout=params["wait_timeout"],
        wait_sleep=params["wait_sleep"],
        wait_nodes=params["wait_nodes"],
        force=params["force"],
        driver_namespace=params["driver_namespace"],
        check_mode=check_mode,
    )


def main() -> None:
    module = build_module()
    try:
        client = get_api_client(module=module)
        result = ensure(client, request_from_params(module.params, module.check_mode))
    except ComputeDomainError as exc:
        module.fail_json(msg=exc.message, **exc.result)
    except CoreException as exc:
        module.fail_from_exception(exc)
    except Exception as exc:  # connection refused, TLS, DNS: the client raises urllib3 errors
        module.fail_json(
            msg=f"cannot reach the Kubernetes API ({type(exc).__name__}: {exc}); "
            "check the kubeconfig/host options or K8S_AUTH_KUBECONFIG"
        )
    if not module._diff:
        result.pop("diff", None)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
