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
    C(fleet) (one per rack when the racks were read, or one per rack of O(racks) when the site declares them, each
    of its trays skipped as not read) that says where and why in one line, and does not fail, so that the report is
    still written.
  - The racks and trays of O(racks) are accounted for in every run. A declared rack none of whose trays is a GPU
    Node of the cluster (a wrong context, racks not joined, GPU Feature Discovery not running) gets an C(error)
    record naming it and each tray with its reason (a finding about the site, not a verdict on the fabric), which
    fails the run. A declared tray that is no GPU Node is listed in its rack's record (C(trays.missing), with its
    reason) and named in its summary; the V(cliques) check fails the rack for it. A tray of a declared rack's clique
    that O(racks) does not list joins that rack (C(trays.undeclared)) and is named, instead of making a rack of
    its own.
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
    description:
      - The check to run, one of the collection's registry of checks (C(plugins/module_utils/checks/)) - V(cliques),
        V(imex_channel), V(nvbandwidth), V(nccl), V(gpu_health), V(dcgm_diag) and any added since. An unknown name
        fails, naming the checks.
    type: str
    required: true
  racks:
    description:
      - Rack name -> node names, for sites whose inventory names the racks (C(gpu_fabric_racks)). Nodes not listed
        are named by O(rack_label), else join the declared rack whose clique they share, else are named by their
        clique.
      - Every rack and tray listed is accounted for - verified, skipped with its reason, or missing with its reason.
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
  only_due:
    description:
      - Verify only the trays that are due, as their Node says (the annotation C(gpu-fabric.nvidia.com/verification)
        that M(gpu_fabric.mnnvl.node_verdict) writes) - never verified, failed, expired (or expiring within
        O(due_within_hours)), skipped by the last run (busy, cordoned, not ready) or unreadable. The others are
        skipped as not due, naming until when their verdict holds; a verdict written to the Nodes leaves them alone.
      - A check that spans trays measures at least 2; a rack with fewer due trays gets the fewest not-due trays
        beside them as partners (the oldest verdict first, then by name), measured like any tray, so their verdicts
        are refreshed too. A rack with no usable due tray is not run - its record passes, says C(nothing due) and
        skips every tray with its reason.
      - The plan (RV(racks), and check mode's summary) lists each rack's due trays with their reason, its partners
        and its trays not due.
    type: bool
    default: false
    version_added: 0.4.0
  due_within_hours:
    description:
      - With O(only_due), a verdict that expires within these hours makes its tray due too (V(0) - only expired
        ones); for a run that should leave every tray verified for at least that long.
    type: float
    default: 0
    version_added: 0.4.0
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
      - Pod Security Admission level enforced on the MPIJob namespaces. The MPI operator creates their pods under
        its own identity, so this label is what refuses a privileged launcher or worker there; the shipped
        admission policy (C(docs/rbac/verify-stage.yaml)) refuses any other level from the verify account.
      - The IMEX pods' namespaces are always C(restricted); the host checks (gpu_health, dcgm_diag) set their own.
    type: str
    default: restricted
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
  priority_class:
    description:
      - PriorityClass of every pod of the checks (IMEX channel pods, MPI launchers and workers, the pods of
        V(gpu_health) and V(dcgm_diag)). The collection's own, V(gpu-fabric-verify), is the lowest
        (C(value) -1000000, C(preemptionPolicy) Never), so a tenant's pod preempts a check, which then ends
        V(incomplete) (the tray stays due), never V(failed). It is created when it does not exist (the verify
        RBAC files hold it for an identity that may only read it).
      - V('') runs the pods at the cluster's default priority.
    type: str
    default: gpu-fabric-verify
    version_added: 0.4.0
  settings:
    description:
      - Option groups of the checks by group name, each as the check declares it (its file under
        C(plugins/module_utils/checks/); docs/verification.md lists them), for instance C(dcgm_diag) or
        C(nvbandwidth). A group given here replaces the option of the same name below. A group no option below
        names (a check added since) is given here only; one neither gives is the check's defaults.
      - A group or option no check declares, or a value of the wrong type, makes every rack's record an
        V(error) naming it; nothing is created.
      - The roles pass every check's settings here (C(verify_common_settings)).
    type: dict
    default: {}
    version_added: 0.4.0
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
    failed_nodes, node_problems, trays, details, started, finished, objects_left). For a rack of O(racks),
    C(trays) also lists the trays declared (C(declared)), the declared ones that are no GPU Node with their reason
    (C(missing)) and the trays of its clique not declared (C(undeclared)).
  returned: always
  type: list
  elements: dict
racks:
  description: The plan, per rack - clique, trays used, trays skipped with their reason, incomplete, C(absent) (declared
    in O(racks) and not in the cluster); with O(only_due)
    the due trays with their reason (C(due)), the partners (C(partners)) and whether nothing is due (C(nothing_due));
    in check mode also the objects that would be created.
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

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import checks, fleet
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.k8s import auth_argument_spec
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.priority import PRIORITY_CLASS
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.verification import (
    GPU_NODE_TOLERATIONS,
    MNNVL_PRODUCTS,
)
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.client import get_api_client
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.core import AnsibleK8SModule
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.exceptions import CoreException

# The option groups that are options of their own (the checks of 0.4 and before); every group, these too, can be
# given in O(settings). Their specs come from the registry of checks, which also says which names O(check) takes.
NAMED_GROUPS = ("imex_channel", "mpi", "nvbandwidth", "nccl")
ARGUMENT_SPEC = dict(
    check=dict(type="str", required=True),  # one of checks.names(): refused by fleet.verify, naming them
    racks=dict(type="dict", default={}),
    rack_label=dict(type="str", default=""),
    cliques=dict(type="list", elements="str", default=[]),
    nodes_per_clique=dict(type="str", default="all"),
    node_names=dict(type="list", elements="str", default=[]),
    trays_per_clique=dict(type="int", default=0),
    gpus_per_tray=dict(type="int", default=0),
    allow_incomplete=dict(type="bool", default=False),
    only_due=dict(type="bool", default=False),
    due_within_hours=dict(type="float", default=0),
    parallel_racks=dict(type="int", default=8),
    namespace_prefix=dict(type="str", default="gpu-fabric-verify"),
    namespace=dict(type="str", default=""),
    namespaces=dict(type="dict", default={}),
    pod_security_level=dict(type="str", default="restricted"),
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
    priority_class=dict(type="str", default=PRIORITY_CLASS),
    settings=dict(type="dict", default={}),
    **{group: spec for group, spec in checks.option_specs().items() if group in NAMED_GROUPS},
)


def main() -> None:
    argument_spec = auth_argument_spec()
    argument_spec.update(ARGUMENT_SPEC)
    module = AnsibleK8SModule(argument_spec=argument_spec, supports_check_mode=True)
    params = module.params

    def write(records: list) -> list:
        # the file writer needs AnsibleModule itself (atomic_move), which kubernetes.core wraps
        return fleet.write_records(module._module, params["check"], params["records_dir"], records)

    try:
        result = fleet.verify(params, module.check_mode, lambda: get_api_client(module=module), write)
    except CoreException as exc:
        module.fail_from_exception(exc)
    except fleet.Refused as exc:
        module.fail_json(msg=str(exc), **exc.extra)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
