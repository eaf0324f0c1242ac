#!/usr/bin/python
# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: fabric_verify
short_description: Run one verification check on every tray of every NVLink rack, racks in parallel
version_added: 0.2.0
description:
  - Reads the nodes and the pods once, groups the GPU trays into racks (one rack = one C(nvidia.com/gpu.clique)),
    and decides per rack which trays the check uses and which it skips, with the reason (cordoned, NotReady,
    tainted, GPUs held by other pods, fewer allocatable GPUs than the rack's trays, not selected).
  - Runs the check on every rack concurrently (at most O(parallel_racks) at a time), each rack in a namespace
    of its own, or in an existing one the site gives (O(namespace), O(namespaces)), with object names of its
    own. V(cliques) reads labels only; V(imex_channel) creates one ComputeDomain per rack and one pod per tray
    that claims its IMEX channel; V(nvbandwidth) and V(nccl) run one MPIJob per rack over all its usable trays
    (18 trays x 4 GPUs = 72 ranks on a full GB200 NVL72).
  - Every rack's objects are deleted afterwards, also when the check failed, and what is left is counted.
    Transient API errors (connection refused, 429, 5xx) are retried; a call that still fails ends that rack's
    check with a one-line message, never a verdict about the fabric.
  - Making the client (which reads C(/version) and the API groups) is retried the same way. When the API server
    does not answer for O(api_patience) before the racks are read, the check writes one C(error) record for rack
    C(fleet) (one per rack when the racks were read) that says where and why in one line, and does not fail, so
    that the report is still written.
  - Writes one record per rack, C(<records_dir>/<check>/<rack>.json), after removing the records of that check
    from an earlier run. A rack with fewer than 2 usable trays is recorded as C(incomplete).
  - In check mode nothing is created or written; RV(racks) shows what would run where.
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - gpu_fabric.mnnvl.attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
options:
  check:
    description: The check to run.
    type: str
    required: true
    choices: [cliques, imex_channel, nvbandwidth, nccl]
  racks:
    description:
      - Rack name -> node names, for sites whose inventory names the racks. Nodes not listed are named by
        O(rack_label) or by their clique.
      - A name matches a node by its name, else by the short host name (C(gb200-r0-t1.example.com) in the
        inventory is node C(gb200-r0-t1), and the other way).
    type: dict
    default: {}
  rack_label:
    description: Node label whose value names a tray's rack (empty - racks are named after their clique).
    type: str
    default: ""
  cliques:
    description: Only these racks (clique values or rack names); empty - every rack.
    type: list
    elements: str
    default: []
  nodes_per_clique:
    description: V(all), or how many usable trays of each rack take part (the first ones by name).
    type: str
    default: all
  node_names:
    description: Only these trays (and only the racks they are in).
    type: list
    elements: str
    default: []
  trays_per_clique:
    description: Trays every rack must have (V(cliques) check; 18 on a GB200 NVL72; 0 - not checked).
    type: int
    default: 0
  gpus_per_tray:
    description:
      - Allocatable C(nvidia.com/gpu) every tray must have (4 on GB200). V(cliques) fails a tray with fewer;
        the other checks skip it. 0 - the most any tray of the rack has.
    type: int
    default: 0
  allow_incomplete:
    description: A rack with fewer than 2 usable trays passes as C(incomplete) instead of failing.
    type: bool
    default: false
  parallel_racks:
    description: Racks measured at the same time.
    type: int
    default: 8
  namespace_prefix:
    description: Prefix of the namespaces, C(<prefix>-<check>-<rack>), that the checks create and delete.
    type: str
    default: gpu-fabric-verify
  namespace:
    description:
      - An existing namespace in which every rack's check runs (racks not named by O(namespaces)); empty - each
        check creates and deletes a namespace of its own per rack (C(<prefix>-<check>-<rack>)).
      - In a given namespace the checks create only namespaced objects (ComputeDomain, pods, MPIJob), named after
        the check and the rack and labelled C(gpu-fabric.nvidia.com/check) and C(gpu-fabric.nvidia.com/rack);
        they delete and count only those, and never create nor delete the namespace.
      - Before creating anything each rack asks (SelfSubjectAccessReview) for every right it needs there and
        fails with one line naming the missing ones; C(docs/rbac/verify-stage-namespaced.yaml) grants them.
    type: str
    default: ""
  namespaces:
    description:
      - Rack name -> an existing namespace for that rack's checks (see O(namespace)). A rack that is neither
        listed here nor covered by O(namespace) fails the run before anything is created.
    type: dict
    default: {}
  pod_security_level:
    description:
      - Pod Security Admission level enforced on the MPIJob namespaces.
      - The IMEX pods' namespaces are always C(restricted).
    type: str
    default: baseline
  timeout:
    description:
      - Seconds a rack's check may take from namespace to verdict.
      - V(0) - the check's own wait; for V(nvbandwidth), a start allowance (900 s) plus the modelled run time
        of the rack (its GPUs, the testcase, buffer and samples; C(plugins/module_utils/nvbandwidth_runtime.py),
        C(docs/verification.md) "Modelled rack times") times a safety factor (2); for the other checks 900.
      - Each cleanup step has a third of it again (of 900 when V(0)).
    type: int
    default: 900
  openshift:
    description:
      - Whether the cluster is OpenShift (then the checks read the SCC user range the namespace controller
        writes on their namespace, and leave the IMEX pods' user to it). Unset - detected (the cluster serves
        C(security.openshift.io) and C(config.openshift.io)).
    type: bool
  poll_delay:
    description: Seconds between two reads while waiting.
    type: float
    default: 3
  api_patience:
    description: Seconds the connection and each API call are retried while the API server is unreachable or overloaded.
    type: int
    default: 90
  driver_namespace:
    description: Namespace of the NVIDIA DRA driver (its state is quoted when a ComputeDomain does not become ready).
    type: str
    default: nvidia-dra-driver-gpu
  records_dir:
    description: Directory of the records (C(<records_dir>/<check>/<rack>.json)); empty - no records are written.
    type: path
    default: ""
  run_id:
    description: Identifier of the verification run, written into every record (the report keeps only this run's).
    type: str
    default: ""
  history_dir:
    description:
      - Directory of the kept runs (C(<history_dir>/index.json), written by M(gpu_fabric.mnnvl.verify_history)). The
        V(nvbandwidth) check holds each rack against its baseline from there - the pinned run's record of the rack,
        else its last passing run's; empty - no baseline from the history.
    type: path
    default: ""
    version_added: 0.4.0
  registry:
    description: >-
      Registry prefix of the site's mirror: the checks' images are pulled from C(<registry>/<path>) (the public
      registry host replaced, C(ubuntu:22.04) becomes C(<registry>/library/ubuntu:22.04)); empty - as given.
    type: str
    default: ""
  image_overrides:
    description: Public image without tag -> mirrored image without tag; wins over O(registry) for that image.
    type: dict
    default: {}
  image_pull_secrets:
    description: >-
      Image pull Secrets named by every pod of the checks (and the MPIJobs' pod templates). Each is copied from
      O(image_pull_secrets_namespace) into every namespace the checks create, before any pod (type, data and the
      check's labels only; it goes with the namespace). A namespace the site gives (O(namespace), O(namespaces))
      must hold them already. A Secret that does not exist is an V(error) verdict of the rack, naming it.
    type: list
    elements: str
    default: []
  image_pull_secrets_namespace:
    description: >-
      Namespace of the Secrets of O(image_pull_secrets) (of type C(kubernetes.io/dockerconfigjson) or
      C(kubernetes.io/dockercfg)); the default is the GPU Operator's namespace, which holds the cluster stage's
      pull Secrets.
    type: str
    default: gpu-operator
  imex_channel:
    description: Settings of the V(imex_channel) check.
    type: dict
    default: {}
    suboptions:
      image:
        description: Any image with C(ls).
        type: str
        default: ubuntu:22.04
      run_as_user:
        description: Unprivileged user (and group) of the pod.
        type: int
        default: 65534
  mnnvl_products:
    description:
      - GPU products with multi-node NVLink (substrings of C(nvidia.com/gpu.product), any case). A GPU node of
        another product without a clique label (an H100 node in the same cluster) is in no rack and no
        violation; a node with a clique label, or without a product label, always counts.
    type: list
    elements: str
    default: [GB200, GB300, GH200]
  tolerations:
    description:
      - Tolerations of every pod of the checks (IMEX channel pods, MPI launcher and workers) for the GPU nodes'
        taints, beside the collection's own C(gpu-fabric.nvidia.com/unverified).
      - A tray with a C(NoSchedule) or C(NoExecute) taint that none of them tolerates is skipped, naming the taint.
    type: list
    elements: dict
    default: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
  mpi:
    description: The MPIJob of the V(nvbandwidth) and V(nccl) checks.
    type: dict
    default: {}
    suboptions:
      run_as_user:
        description: User of the launcher and the workers (the image's MPI user).
        type: int
        default: 1000
      ssh_auth_mount_path:
        description: Where the MPI operator mounts the SSH keys.
        type: str
        default: /home/mpiuser/.ssh
      worker_command:
        description: Command of the workers (an SSH daemon in the foreground).
        type: list
        elements: str
        default: [/usr/sbin/sshd, -De, -f, /home/mpiuser/.sshd_config]
      launcher_affinity:
        description: Affinity of the launcher pod (empty - preferably on a control-plane node).
        type: dict
        default: {}
      backoff_limit:
        description: Launcher retries before the MPIJob fails (0 - the first failed run fails the check).
        type: int
        default: 0
  nvbandwidth:
    description: Settings and thresholds of the V(nvbandwidth) check (see M(gpu_fabric.mnnvl.nvbandwidth_check)).
    type: dict
    default: {}
    suboptions:
      image:
        description: Image with nvbandwidth built with C(-DMULTINODE), Open MPI and sshd.
        type: str
        default: ghcr.io/nvidia/k8s-samples:nvbandwidth-v0.7-8d103163
      testcase:
        description:
          - The nvbandwidth test case; the default measures every ordered GPU pair.
          - V(multinode_bisect_write_ce) is the fast mode - each row of its N x 1 output is judged as its GPU pair
            (GPU i writing to GPU (i + N/2) mod N), and a low pair names both GPUs and both trays.
        type: str
        default: multinode_device_to_device_memcpy_read_ce
      extra_args:
        description: More nvbandwidth arguments.
        type: list
        elements: str
        default: []
      min_gbps:
        description: Absolute per-pair floor in GB/s (> 0 replaces the fraction of the peak).
        type: float
        default: 0
      min_fraction_of_peak:
        description: Per-pair floor as a fraction of the GPU product's NVLink peak per direction.
        type: float
        default: 0.85
      peak_gbps:
        description: NVLink peak per direction in GB/s (> 0 replaces the one known for the GPU product).
        type: float
        default: 0
      peak_gbps_by_product:
        description:
          - C(nvidia.com/gpu.product) regular expressions (C(match)) -> C(peak_gbps), tried before the built-in table.
        type: list
        elements: dict
        default: []
      product_references:
        description:
          - The site's healthy per-pair figures (C(match), C(testcase), C(driver_branch), C(gbps), C(source)), tried
            before the built-in ones; see M(gpu_fabric.mnnvl.nvbandwidth_check).
        type: list
        elements: dict
        default: []
        version_added: 0.4.0
      min_fraction_of_median:
        description:
          - Every pair must also reach this fraction of the strictest reference - the GPU product's figure for the
            testcase and driver branch, the rack's baseline from the kept history, the median pair of its own run.
        type: float
  nccl:
    description: Settings and threshold of the V(nccl) check.
    type: dict
    default: {}
    suboptions:
      image:
        description: Image with nccl-tests built with C(MPI=1), Open MPI and sshd.
        type: str
        default: ""
      binary:
        description: The nccl-tests benchmark.
        type: str
        default: all_reduce_perf
      args:
        description: Its arguments.
        type: list
        elements: str
        default: [-b, 1G, -e, 8G, -f, "2", -g, "1"]
      mpirun_args:
        description:
          - More mpirun arguments. The default forces multi-node NVLink (C(NCCL_MNNVL_ENABLE=1), which needs
            C(NCCL_CUMEM_ENABLE=1)) so that NCCL fails instead of silently falling back to another transport, and
            prints each communicator's MNNVL state (C(NCCL_DEBUG=INFO), subsystem C(INIT)).
        type: list
        elements: str
        default: [-x, NCCL_DEBUG=INFO, -x, NCCL_DEBUG_SUBSYS=INIT, -x, NCCL_MNNVL_ENABLE=1, -x, NCCL_CUMEM_ENABLE=1]
      require_mnnvl:
        description:
          - Fail unless the log shows every rank's communicator running over multi-node NVLink (its
            C(NCCL INFO comm ... MNNVL 1) line).
        type: bool
        default: true
      min_busbw_gbps:
        description:
          - Absolute minimum bus bandwidth in GB/s of every row of 4 GiB and more, out-of-place and in-place (> 0
            replaces the fractions below).
        type: float
        default: 0
      min_fraction_of_reference:
        description:
          - Minimum bus bandwidth of every row at the sizes of the GPU product's published figure for the benchmark,
            as a fraction of it. GB200 C(all_reduce_perf) - 834.57 GB/s at 4 GiB and more over the 72 GPUs of an
            NVL72 rack (coreweave/nccl-tests pull request 43), so 751.11 GB/s by default. 0 turns it off.
        type: float
        default: 0.9
      min_fraction_of_peak:
        description:
          - Minimum bus bandwidth of every row of 4 GiB and more as a fraction of the GPU product's NVLink peak, for a
            product or benchmark without a published figure.
        type: float
        default: 0.6
      min_fraction_of_fleet_median:
        description:
          - Every rack's average bus bandwidth must also reach this fraction of the median over the racks of the
            run (with 3 racks or more); a rack far below its peers fails, named. 0 turns the rule off.
        type: float
        default: 0.9
      peak_gbps:
        description: NVLink peak per direction in GB/s (> 0 replaces the one known for the GPU product).
        type: float
        default: 0
      peak_gbps_by_product:
        description:
          - C(nvidia.com/gpu.product) regular expressions (C(match)) -> C(peak_gbps), tried before the built-in table.
        type: list
        elements: dict
        default: []
author:
  - gpu_fabric.mnnvl contributors (@gpu-fabric)
"""

EXAMPLES = r"""
- name: Measure NVLink bandwidth on every tray of every rack
  gpu_fabric.mnnvl.fabric_verify:
    check: nvbandwidth
    records_dir: /var/lib/gpu-fabric/report/records
    parallel_racks: 8
  register: nvbandwidth

- name: Inject an IMEX channel on every tray of two racks
  gpu_fabric.mnnvl.fabric_verify:
    check: imex_channel
    cliques: [rack0, rack1]
    rack_label: topology.example.com/rack

- name: Check the clique labels of a fleet of NVL72 racks
  gpu_fabric.mnnvl.fabric_verify:
    check: cliques
    trays_per_clique: 18
    gpus_per_tray: 4
"""

RETURN = r"""
passed:
  description: Whether every rack's record passed.
  returned: always
  type: bool
summary:
  description: One line for the whole run (the failing racks' summaries when any failed).
  returned: always
  type: str
  sample: "nvbandwidth: 3 of 3 racks passed (rack0, rack1, rack2)"
records:
  description: One record per rack, as written to O(records_dir) (check, rack, clique, outcome, passed, summary, nodes,
    failed_nodes, node_problems, trays, details, started, finished, objects_left).
  returned: always
  type: list
  elements: dict
racks:
  description: The plan, per rack - clique, trays used, trays skipped with their reason, incomplete; in check mode also
    the objects that would be created.
  returned: always
  type: list
  elements: dict
failed_racks:
  description: Names of the racks whose record did not pass.
  returned: always
  type: list
  elements: str
files:
  description: Paths of the records written.
  returned: always
  type: list
  elements: str
"""

import json
import os

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import (
    fleet,
    history,
    mirror,
    nvbandwidth_runtime,
    openshift,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.bandwidth_rule import (
    peak_table_problems,
    reference_table_problems,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.files import (
    FileChange,
    FileEditError,
    read_text,
    write_change,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.judges import (
    judge_fleet_busbw,
    judge_nccl_log,
    judge_nvbandwidth_log,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.k8s import (
    ApiUnreachable,
    api_endpoint,
    auth_argument_spec,
    connect,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.verification import (
    GPU_NODE_TOLERATIONS,
    MNNVL_PRODUCTS,
    OUTCOME_ERROR,
    OUTCOME_FAILED,
    OUTCOME_PASSED,
    RackPlan,
    Scope,
    given_namespaces,
    group_racks,
    judge_cliques,
    parse_nodes_per_clique,
    plan_fleet,
    record_for,
    superseded,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.verification_objects import pod_tolerations
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.client import get_api_client
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.core import AnsibleK8SModule
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.exceptions import CoreException

ARGUMENT_SPEC = dict(
    check=dict(type="str", required=True, choices=["cliques", "imex_channel", "nvbandwidth", "nccl"]),
    racks=dict(type="dict", default={}),
    rack_label=dict(type="str", default=""),
    cliques=dict(type="list", elements="str", default=[]),
    nodes_per_clique=dict(type="str", default="all"),
    node_names=dict(type="list", elements="str", default=[]),
    trays_per_clique=dict(type="int", default=0),
    gpus_per_tray=dict(type="int", default=0),
    allow_incomplete=dict(type="bool", default=False),
    parallel_racks=dict(type="int", default=8),
    namespace_prefix=dict(type="str", default="gpu-fabric-verify"),
    namespace=dict(type="str", default=""),
    namespaces=dict(type="dict", default={}),
    pod_security_level=dict(type="str", default="baseline"),
    timeout=dict(type="int", default=900),
    openshift=dict(type="bool"),
    poll_delay=dict(type="float", default=3),
    api_patience=dict(type="int", default=90),
    driver_namespace=dict(type="str", default="nvidia-dra-driver-gpu"),
    records_dir=dict(type="path", default=""),
    run_id=dict(type="str", default=""),
    history_dir=dict(type="path", default=""),
    registry=dict(type="str", default=""),
    image_overrides=dict(type="dict", default={}),
    image_pull_secrets=dict(type="list", elements="str", default=[], no_log=False),
    tolerations=dict(type="list", elements="dict", default=[dict(t) for t in GPU_NODE_TOLERATIONS]),
    mnnvl_products=dict(type="list", elements="str", default=list(MNNVL_PRODUCTS)),
    image_pull_secrets_namespace=dict(type="str", default="gpu-operator", no_log=False),
    imex_channel=dict(
        type="dict",
        default={},
        options=dict(
            image=dict(type="str", default="ubuntu:22.04"),
            run_as_user=dict(type="int", default=65534),
        ),
    ),
    mpi=dict(
        type="dict",
        default={},
        options=dict(
            run_as_user=dict(type="int", default=1000),
            ssh_auth_mount_path=dict(type="str", default="/home/mpiuser/.ssh"),
            worker_command=dict(
                type="list", elements="str", default=["/usr/sbin/sshd", "-De", "-f", "/home/mpiuser/.sshd_config"]
            ),
            launcher_affinity=dict(type="dict", default={}),
            backoff_limit=dict(type="int", default=0),
        ),
    ),
    nvbandwidth=dict(
        type="dict",
        default={},
        options=dict(
            image=dict(type="str", default="ghcr.io/nvidia/k8s-samples:nvbandwidth-v0.7-8d103163"),
            testcase=dict(type="str", default="multinode_device_to_device_memcpy_read_ce"),
            extra_args=dict(type="list", elements="str", default=[]),
            min_gbps=dict(type="float", default=0),
            min_fraction_of_peak=dict(type="float", default=0.85),
            peak_gbps=dict(type="float", default=0),
            peak_gbps_by_product=dict(type="list", elements="dict", default=[]),
            product_references=dict(type="list", elements="dict", default=[]),
            min_fraction_of_median=dict(type="float"),
        ),
    ),
    nccl=dict(
        type="dict",
        default={},
        options=dict(
            image=dict(type="str", default=""),
            binary=dict(type="str", default="all_reduce_perf"),
            args=dict(type="list", elements="str", default=["-b", "1G", "-e", "8G", "-f", "2", "-g", "1"]),
            mpirun_args=dict(
                type="list",
                elements="str",
                default=[
                    "-x",
                    "NCCL_DEBUG=INFO",
                    "-x",
                    "NCCL_DEBUG_SUBSYS=INIT",
                    "-x",
                    "NCCL_MNNVL_ENABLE=1",
                    "-x",
                    "NCCL_CUMEM_ENABLE=1",
                ],
            ),
            require_mnnvl=dict(type="bool", default=True),
            min_busbw_gbps=dict(type="float", default=0),
            min_fraction_of_reference=dict(type="float", default=0.9),
            min_fraction_of_peak=dict(type="float", default=0.6),
            min_fraction_of_fleet_median=dict(type="float", default=0.9),
            peak_gbps=dict(type="float", default=0),
            peak_gbps_by_product=dict(type="list", elements="dict", default=[]),
        ),
    ),
)


def build_module() -> AnsibleK8SModule:
    argument_spec = auth_argument_spec()
    argument_spec.update(ARGUMENT_SPEC)
    return AnsibleK8SModule(argument_spec=argument_spec, supports_check_mode=True)


def scope_of(params: dict) -> Scope:
    return Scope(
        racks={str(rack): [str(n) for n in nodes or []] for rack, nodes in (params["racks"] or {}).items()},
        rack_label=params["rack_label"],
        cliques=[str(c) for c in params["cliques"]],
        nodes_per_clique=parse_nodes_per_clique(params["nodes_per_clique"]),
        node_names=[str(n) for n in params["node_names"]],
        gpus_per_tray=params["gpus_per_tray"],
        trays_per_clique=params["trays_per_clique"],
        allow_incomplete=params["allow_incomplete"],
        tolerations=pod_tolerations(params["tolerations"]),
        mnnvl_products=list(params["mnnvl_products"]),
    )


def mirrored(params: dict) -> dict:
    """``params`` with the image of each check at the site's mirror (``registry``, ``image_overrides``)."""
    moved = dict(params)
    for check in ("imex_channel", "nvbandwidth", "nccl"):
        if isinstance(params.get(check), dict) and params[check].get("image"):
            image = mirror.mirror_image(params[check]["image"], params["registry"], params["image_overrides"])
            moved[check] = dict(params[check], image=image)
    return moved


def check_mode_summary(check: str, racks: list) -> str:
    """The plan in one line: the racks, and per rack the expected run time where the check models one."""
    expected = [
        f"rack {r['rack']}: {r['would_create']['expected']}" for r in racks if r["would_create"].get("expected")
    ]
    return f"check mode: {check} would run on {len(racks)} rack(s); nothing created" + "".join(
        f"; {line}" for line in expected
    )


def make_check(params: dict) -> fleet.Check:
    params = mirrored(params)
    name = params["check"]
    if name == "imex_channel":
        return fleet.ImexChannelCheck(params["imex_channel"]["image"], params["imex_channel"]["run_as_user"])
    if name == "nvbandwidth":
        nvb = params["nvbandwidth"]
        problems = peak_table_problems(nvb.get("peak_gbps_by_product")) + reference_table_problems(
            nvb.get("product_references")
        )
        if problems:
            raise ValueError("nvbandwidth: " + "; ".join(problems))
        nvbandwidth_runtime.run_options(nvb["extra_args"])  # a buffer or sample count that is no number: refused
        return fleet.NvbandwidthCheck(
            nvb["image"],
            params["mpi"],
            nvb["testcase"],
            nvb["extra_args"],
            lambda log, plan, nodes: judge_nvbandwidth_log(
                log,
                plan,
                history.options_with_baseline(nvb, params["history_dir"], "nvbandwidth", plan.name, params["run_id"]),
                nodes,
            ),
        )
    nccl = params["nccl"]
    if not nccl["image"]:
        raise ValueError(
            "nccl.image is empty: there is no official NVIDIA nccl-tests image; build one with nccl-tests (MPI=1), "
            "Open MPI and sshd and set verify_nccl_image"
        )
    return fleet.NcclCheck(
        nccl["image"],
        params["mpi"],
        nccl["binary"],
        nccl["args"],
        nccl["mpirun_args"],
        lambda log, plan, nodes: judge_nccl_log(log, plan, nccl, nodes),
    )


def cliques_records(nodes: list, plans: list, scope: Scope, params: dict) -> list:
    grouped = group_racks(nodes, scope)
    records = []
    for plan in plans:
        passed, summary, problems, details = judge_cliques(
            grouped.get(plan.name, []), plan, params["gpus_per_tray"], params["trays_per_clique"]
        )
        record = record_for(
            "cliques",
            plan,
            OUTCOME_PASSED if passed else OUTCOME_FAILED,
            summary,
            details,
            failed_nodes=list(problems),
            node_problems=problems,
            run_id=params["run_id"],
        )
        # the labels of every tray were read: cordoned, busy or NotReady trays are not skipped here
        record["nodes"] = list(plan.found)
        record["trays"]["skipped"] = []
        records.append(record)
    return records


def write_records(module, check: str, records_dir: str, records: list) -> list:
    """Replace this check's records of an earlier run with this run's; returns the paths written.

    Each record goes through the collection's file writer (temporary file, atomic move); a record of a rack
    this run did not cover is removed when an earlier run wrote it (``verification.superseded``: a run that
    overlaps this one keeps its own), and the flat record of 0.1.0 is removed.
    """
    directory = os.path.join(records_dir, check)
    wanted = {
        os.path.join(directory, f"{r['rack']}.json"): json.dumps(r, indent=2, sort_keys=True) + "\n" for r in records
    }
    stale = [os.path.join(directory, n) for n in os.listdir(directory)] if os.path.isdir(directory) else []
    stale.append(os.path.join(records_dir, f"{check}.json"))  # the layout of 0.1.0
    for path in stale:
        if path.endswith(".json") and path not in wanted and os.path.exists(path):
            try:
                old = json.loads(read_text(path) or "null")
            except ValueError:
                old = None
            if superseded(old if isinstance(old, dict) else None, records):
                os.unlink(path)
    for path, text in wanted.items():
        write_change(
            module, FileChange(path=path, before=read_text(path), after=text), backup=False, create_parents=True
        )
    return list(wanted)


def fleet_summary(check: str, records: list) -> str:
    failed = [r for r in records if not r["passed"]]
    if not records:
        return f"{check}: no rack to verify"
    if not failed:
        return f"{check}: {len(records)} of {len(records)} racks passed ({', '.join(r['rack'] for r in records)})"
    return f"{check}: {len(failed)} of {len(records)} racks failed: " + " | ".join(r["summary"] for r in failed)


def cluster_facts(client) -> dict:
    try:
        version = client.client.version.get("kubernetes", {}).get("gitVersion", "unknown")
    except Exception:  # version discovery failing must not stop the check; the record says unknown
        version = "unknown"
    return {"server_version": version, "host": str(getattr(client.configuration, "host", "unknown"))}


def detect_openshift(api: fleet.Api) -> bool:
    """GET /apis through the run's API (retried like every call)."""
    groups = api.call("list the served API groups", lambda: api.client.client.request("get", "/apis"))
    return openshift.is_openshift(groups.to_dict() if hasattr(groups, "to_dict") else groups)


# The record of a check that did not get as far as the racks (no GPU node, or no answer from the API server).
FLEET = RackPlan(name="fleet", cliques=[], found=[], nodes=[], skipped=[], gpus_per_tray=0, gpu_product="")


def error_records(check: str, plans: list, message: str, run_id: str) -> list:
    """An ``error`` record (the check could not run; nothing said of the fabric) for each of ``plans``."""
    return [
        record_for(
            check,
            plan,
            OUTCOME_ERROR,
            message if plan is FLEET else f"rack {plan.name}: {message}",
            {"violations": [message]},
            run_id=run_id,
        )
        for plan in plans
    ]


def unreachable_message(text: str) -> str:
    """``text`` (what could not be done, one line) and what to do about it."""
    return (
        f"{text}; the check did not run, which says nothing of the fabric: check that the API server runs and "
        "that the kubeconfig (gpu_fabric_kubeconfig, K8S_AUTH_KUBECONFIG) or the host options point at it, "
        "then run it again"
    )


def finish(module, params: dict, records: list, racks: list, started: str, cluster: dict) -> None:
    """Complete the records, write them and exit with the run's result."""
    finished = fleet.now_rfc3339()
    for record in records:  # the records of a check that created nothing: the read is the whole check
        record.setdefault("started", started)
        record.setdefault("finished", finished)
        record.setdefault("cluster", cluster)
        record.setdefault("objects_left", 0)
        record.setdefault("objects_uncounted", [])
        record.setdefault("cleanup_error", "")
    files = []
    if params["records_dir"] and not module.check_mode:
        try:
            # the file writer needs AnsibleModule itself (atomic_move), which kubernetes.core wraps
            files = write_records(module._module, params["check"], params["records_dir"], records)
        except (FileEditError, OSError) as exc:
            module.fail_json(msg=f"could not write the records under {params['records_dir']}: {exc}", records=records)
    module.exit_json(
        changed=bool(files),
        passed=all(r["passed"] for r in records),
        summary=fleet_summary(params["check"], records),
        records=records,
        racks=racks,
        failed_racks=[r["rack"] for r in records if not r["passed"]],
        files=files,
    )


def main() -> None:
    module = build_module()
    params = module.params
    started = fleet.now_rfc3339()
    try:
        scope = scope_of(params)
    except ValueError as exc:
        module.fail_json(msg=str(exc))
    try:
        check = None if params["check"] == "cliques" else make_check(params)
        unusable = ""
    except ValueError as exc:  # the check cannot run as configured: every rack's record says why
        check, unusable = None, str(exc)
    unknown = {"server_version": "unknown", "host": "unknown"}
    try:
        # the client reads /version and the API groups: an API server that does not answer yet is waited for
        client = connect(lambda: get_api_client(module=module), params["api_patience"])
    except CoreException as exc:
        module.fail_from_exception(exc)
    except ApiUnreachable as exc:
        message = unreachable_message(str(exc))
        cluster = dict(unknown, host=api_endpoint(exc.__cause__) or "unknown")
        finish(module, params, error_records(params["check"], [FLEET], message, params["run_id"]), [], started, cluster)
    api = fleet.Api(client, patience=params["api_patience"])
    try:
        nodes = api.list("Node", "v1")
        pods = api.list("Pod", "v1") if check is not None and check.uses_gpus else []
    except fleet.ApiUnavailable as exc:
        message = unreachable_message(f"could not {exc}")
        cluster = dict(unknown, host=str(getattr(client.configuration, "host", "unknown")))
        finish(module, params, error_records(params["check"], [FLEET], message, params["run_id"]), [], started, cluster)
    plan = plan_fleet(nodes, pods, scope, uses_gpus=check.uses_gpus if check else False)
    if plan.unknown_selections:
        known = ", ".join(r.name for r in plan.racks) or "none"
        module.fail_json(
            msg=f"{', '.join(plan.unknown_selections)} matches no rack, clique or GPU tray of the cluster "
            f"(racks selected: {known}); check gpu_fabric_verify_cliques and the node lists",
            racks=[r.to_dict() for r in plan.racks],
        )
    try:
        given = given_namespaces([r.name for r in plan.racks], params["namespaces"], params["namespace"])
    except ValueError as exc:
        module.fail_json(msg=str(exc), racks=[r.to_dict() for r in plan.racks])
    settings = fleet.Settings(
        namespace_prefix=params["namespace_prefix"],
        timeout=float(params["timeout"]),
        poll=float(params["poll_delay"]),
        driver_namespace=params["driver_namespace"],
        run_id=params["run_id"],
        allow_incomplete=params["allow_incomplete"],
        pod_security_level=params["pod_security_level"],
        cluster=cluster_facts(client),
        namespaces=given,
        image_pull_secrets=list(params["image_pull_secrets"]),
        tolerations=[dict(t) for t in params["tolerations"]],
        image_pull_secrets_namespace=params["image_pull_secrets_namespace"],
    )
    racks = [r.to_dict() for r in plan.racks]
    try:
        settings.openshift = detect_openshift(api) if params["openshift"] is None else params["openshift"]
    except fleet.ApiUnavailable as exc:
        message = unreachable_message(f"could not {exc}")
        records = error_records(params["check"], plan.racks or [FLEET], message, params["run_id"])
        finish(module, params, records, racks, started, settings.cluster)
    settings.cluster["openshift"] = str(settings.openshift).lower()
    if not plan.racks:
        message = "no GPU node found: check that GPU Feature Discovery labels the nodes (nvidia.com/gpu.present=true)"
        records = error_records(params["check"], [FLEET], message, params["run_id"])
    elif unusable:
        records = error_records(params["check"], plan.racks, unusable, params["run_id"])
    elif module.check_mode and check is not None:
        for view, rack in zip(racks, plan.racks):
            view["would_create"] = check.plan_view(fleet.RackRun(check, api, rack, settings))
        module.exit_json(
            changed=False,
            passed=True,
            records=[],
            racks=racks,
            failed_racks=[],
            files=[],
            summary=check_mode_summary(params["check"], racks),
        )
    elif check is None:
        records = cliques_records(nodes, plan.racks, scope, params)
    else:
        try:
            records = fleet.run_racks(check, api, plan.racks, settings, params["parallel_racks"])
        except fleet.ApiUnavailable as exc:  # the kinds are looked up before the racks start
            records = error_records(
                params["check"], plan.racks, unreachable_message(f"could not {exc}"), params["run_id"]
            )
        if params["check"] == "nccl":
            judge_fleet_busbw(records, params["nccl"]["min_fraction_of_fleet_median"])
    finish(module, params, records, racks, started, settings.cluster)


if __name__ == "__main__":
    main()
