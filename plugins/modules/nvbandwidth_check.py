#!/usr/bin/python
# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: nvbandwidth_check
short_description: Judge nvbandwidth output against bandwidth thresholds
version_added: 0.1.0
description:
  - Reads the output of NVIDIA nvbandwidth (text, or JSON from C(nvbandwidth -j)), from a string such as an MPI
    launcher log or from a file on the target, and returns the bandwidth matrix of one testcase with its sum, minimum,
    maximum, mean, the pairs below a threshold and a verdict.
  - "Every GPU pair is judged by one bandwidth rule, the same one the verification roles use (module_utils
    C(bandwidth_rule)): B(the floor) - at least O(min_gbps) when that is above 0, else O(min_fraction_of_peak) x
    the NVLink peak per GPU and direction (O(peak_gbps), or the peak of O(gpu_product): GB200/GB300/B200/B300
    900 GB/s, H100/H200/GH200 450 GB/s); and B(the median rule) - at least O(min_fraction_of_median) x the median
    of all measured pairs of the same matrix. One lost NVLink of a GB200 GPU's 18 leaves its pairs at 17/18 of the
    run's level (about 776 of 821 GB/s): above the floor of 765 GB/s, below 0.97 x the median (797 GB/s)."
  - A GPU whose every pair, as source and as destination, is below the median rule is reported once, as a GPU with
    lost NVLinks (RV(low_gpus)), instead of pair by pair.
  - nvbandwidth exits 0 when a testcase is waived, when a testcase hit a caught C(Error:) and when a testcase name is
    unknown, so the verdict never relies on its exit code. The module B(always) fails, whatever O(fail_on_violation)
    says, when the output shows that the test did not really run - an C(ERROR:) or C(Error:) line, a waived
    testcase, a CUDA, NVML or C(ASSERT) error, a missing matrix or C(SUM) line, cells that do not add up to the
    C(SUM) line, a latency testcase (nanoseconds) where bandwidth is judged, or a testcase name that is not in the
    output.
  - Reads text matrices of any size (2 to 72 GPUs and more; nvbandwidth never wraps columns), the multinode
    C(Process N) header lines, host<->device matrices of one row, bidirectional testcases (three matrices in text, one
    3N-row matrix in JSON) and outputs with several testcases.
  - Per-line prefixes added by C(kubectl logs --prefix), C(kubectl logs --timestamps) and C(mpirun --tag-output) are
    removed before parsing; other log lines around the output are ignored.
author:
  - gpu_fabric.mnnvl contributors (@gpu-fabric)
extends_documentation_fragment:
  - gpu_fabric.mnnvl.attributes
  - gpu_fabric.mnnvl.attributes.EVALUATION_MODULE
options:
  content:
    description:
      - The nvbandwidth output, for example the C(log) of M(kubernetes.core.k8s_log) for the MPI launcher pod.
      - Exactly one of O(content) and O(src) is required.
    type: str
  src:
    description:
      - Path of a file on the target that holds the nvbandwidth output.
      - A missing or unreadable file fails the module.
    type: path
  format:
    description:
      - How to read the output. V(auto) uses JSON when the content holds an nvbandwidth C(-j) document (an object
        with the key C(nvbandwidth)), text otherwise.
    type: str
    choices: [auto, text, json]
    default: auto
  testcase:
    description:
      - The testcase to judge, for example V(multinode_device_to_device_memcpy_read_ce).
      - Required when the output holds several testcases (waived ones count). When set, the testcase must be in the
        output, or the module fails.
    type: str
  matrix_part:
    description:
      - For bidirectional testcases, which of the three matrices to judge. V(total) is the sum of both directions.
      - Ignored (must stay unset) for testcases with a single matrix.
    type: str
    choices: [total, read1, read2, write1, write2]
  min_gbps:
    description:
      - The per-pair floor in GB/s. Every measured cell of the matrix must be at least this many GB/s.
      - When above 0 it replaces O(min_fraction_of_peak) x the peak (the rule of the verification roles); V(0) or
        unset leaves the floor to the fraction of the peak.
    type: float
  min_fraction_of_peak:
    description:
      - Without O(min_gbps), every measured cell must be at least this fraction (0 < value <= 1) of the NVLink peak,
        O(peak_gbps) or the peak of O(gpu_product).
      - Defaults to V(0.85) when a peak is known (GB200 - 0.85 x 900 = 765 GB/s). Set alone, it needs O(peak_gbps)
        or O(gpu_product).
    type: float
  peak_gbps:
    description:
      - The peak bandwidth of one GPU's NVLink per direction in GB/s, for example V(900) for GB200 (18 NVLink 5 links)
        or V(450) for H100/H200 (NVLink 4).
      - When above 0 it replaces the peak of O(gpu_product).
    type: float
  gpu_product:
    description:
      - The GPU product, as the node label C(nvidia.com/gpu.product) names it (V(NVIDIA-GB200), V(NVIDIA-H200),
        V(NVIDIA-H100-80GB-HBM3)); picks the NVLink peak from O(peak_gbps_by_product).
      - When it is set and the floor needs a peak that is not known for it, that is a violation that names the options
        to set.
      - When it is not set (or empty), the product reference follows the product the output's own device lines name
        (the GPU name C(NVIDIA GB200) of a C(Process) or C(Device) line reads as V(NVIDIA-GB200)), also when
        O(min_gbps) sets the floor; device lines of several products give none, with a warning.
    type: str
  peak_gbps_by_product:
    description:
      - The NVLink peak per GPU and direction by GPU product, instead of the built-in table; the first entry whose
        C(match) regular expression is found in O(gpu_product) wins.
      - "The built-in table: V(GB200|GB300|B200|B300) - 900, V(H100|H200|GH200) - 450."
    type: list
    elements: dict
  product_references:
    description:
      - The site's healthy per-pair figures by GPU product, testcase and driver branch, tried before the built-in ones
        (GB200 read CE on driver 580 and 570, H200 SXM read and write CE on 580, each from a real run).
      - Each entry is C(match) (a regular expression found in O(gpu_product)), C(testcase) (a regular expression
        matched against the testcase name), C(driver_branch) (the driver's major version, optional), C(gbps) and
        C(source) (where the figure came from; the failure message names it).
    type: list
    elements: dict
    version_added: 0.4.0
  baseline:
    description:
      - The rack's own figures from an earlier passing run, a reference beside the product's and the run's median.
      - C(median_gbps) (required), C(source), and optionally C(matrix) (that run's rows, for per-pair figures),
        C(rank_nodes) (the tray of each rank then; per-pair figures are used only for the same trays) and
        C(driver_version) (a baseline of another driver branch is not used).
      - C(median_gbps) and each cell of C(matrix) must be a finite number above 0 (a cell may be V(null)); anything
        else (NaN, an infinity, a boolean) fails the module in one line naming the entry. The same holds for
        C(gbps) and C(driver_branch) of each O(product_references) entry and C(peak_gbps) of each
        O(peak_gbps_by_product) entry.
    type: dict
    version_added: 0.4.0
  min_fraction_of_median:
    description:
      - Every measured GPU pair must also be at least this fraction of the STRICTEST reference (the highest of the
        product reference for O(gpu_product), the testcase and the driver branch, the O(baseline), and the median of
        all measured pairs of the same matrix). V(0) turns the rule off. Not applied to host<->device matrices.
      - The median alone moves with many GPUs that lost a link at once; the product reference and the baseline do
        not. A run held against its median alone returns a warning that says so.
      - "The default 0.97 lies between a lost link and a healthy run: one NVLink of 18 lost puts a GPU's pairs at
        17/18 = 0.944 of the median; the real GB200 run's lowest pair is 0.9987 of its median (820.35 of 821.41 GB/s),
        the real H200 run's 0.9998."
    type: float
    default: 0.97
  nodes:
    description:
      - The nodes of the run in rank order; GPU i lives on C(nodes[i // gpus_per_node]). The findings, RV(failed_nodes)
        and RV(failing_pairs[].src_node) name them.
      - Without it, the hosts named by the output's C(Process N (host)) or C(Device N) header lines are used.
    type: list
    elements: str
  gpus_per_node:
    description:
      - GPUs (MPI ranks) per node in O(nodes). Without it, the GPU count divided by the number of O(nodes).
    type: int
  min_sum_gbps:
    description:
      - The C(SUM) line of the matrix must be at least this many GB/s.
    type: float
  expected_gpus:
    description:
      - The number of GPUs the matrix must cover (N for an N x N matrix, the columns of a host<->device matrix).
    type: int
  fail_on_violation:
    description:
      - Fail when a threshold or O(expected_gpus) is missed, or a GPU pair was not measured (V(N/A) off the diagonal).
      - With V(false) the module returns RV(passed=false) and the violations instead. Output that shows the test did
        not really run fails in every case.
    type: bool
    default: true
notes:
  - The module changes nothing; check mode returns the same verdict.
seealso:
  - name: nvbandwidth
    description: The NVIDIA tool whose output this module judges.
    link: https://github.com/NVIDIA/nvbandwidth
  - plugin: gpu_fabric.mnnvl.nvbandwidth_parse
    plugin_type: filter
"""

EXAMPLES = r"""
- name: Read the launcher's log
  kubernetes.core.k8s_log:
    namespace: mnnvl-verify
    label_selectors:
      - job-name=nvbandwidth-test-launcher
  register: launcher_log

- name: Require 85 % of the GB200 NVLink peak and 97 % of the run's median on every GPU pair
  gpu_fabric.mnnvl.nvbandwidth_check:
    content: "{{ launcher_log.log }}"
    testcase: multinode_device_to_device_memcpy_read_ce
    gpu_product: NVIDIA-GB200
    nodes: [gb200-r0-t0, gb200-r0-t1]
    gpus_per_node: 4
    expected_gpus: 8
  register: bandwidth

- name: Say what was found
  ansible.builtin.debug:
    msg: "{{ bandwidth.summary }}"

- name: Show the slowest pair
  ansible.builtin.debug:
    msg: "min {{ bandwidth.min }} GB/s over {{ bandwidth.gpus }} GPUs, sum {{ bandwidth.sum }}"

- name: Record the verdict without failing on a slow link (a run that did not happen still fails)
  gpu_fabric.mnnvl.nvbandwidth_check:
    src: /var/tmp/nvbandwidth.json
    testcase: device_to_device_memcpy_read_ce
    min_gbps: 380
    fail_on_violation: false
  register: bandwidth
"""

RETURN = r"""
testcase:
  description: The testcase judged.
  returned: always
  type: str
  sample: multinode_device_to_device_memcpy_read_ce
testcases:
  description: Every testcase named in the output, in order.
  returned: always
  type: list
  elements: str
  sample: [multinode_device_to_device_memcpy_read_ce]
format:
  description: How the output was read.
  returned: always
  type: str
  sample: text
version:
  description: The nvbandwidth version the output names.
  returned: always
  type: str
  sample: v0.7
driver_version:
  description: The NVIDIA driver version the output names.
  returned: always
  type: str
  sample: 580.95.05
description:
  description: nvbandwidth's description of the matrix judged.
  returned: always
  type: str
  sample: memcpy CE GPU(row) -> GPU(column) bandwidth (GB/s)
matrix_key:
  description: The key of the matrix judged (the testcase name, or with C(_total), C(_read1)... for bidirectional ones).
  returned: always
  type: str
  sample: multinode_device_to_device_memcpy_read_ce
unit:
  description: The unit of the cells.
  returned: always
  type: str
  sample: GB/s
matrix:
  description: The matrix, one list of floats per row; V(null) where nvbandwidth printed C(N/A).
  returned: always
  type: list
  elements: list
  sample: [[null, 393.76], [393.58, null]]
row_labels:
  description: The row labels as printed.
  returned: always
  type: list
  elements: str
  sample: ["0", "1"]
row_pairs:
  description:
    - The GPU pair [writer, target] of each row, for a matrix whose rows are GPU pairs
      (V(multinode_bisect_write_ce) - GPU i writes to GPU (i + N/2) mod N, all GPUs at once); V(null) otherwise.
    - Failing pairs of such a matrix name those two GPUs in RV(failing_pairs[].src) and RV(failing_pairs[].dst).
  returned: always
  type: list
  elements: list
  sample: [[0, 36], [1, 37]]
column_labels:
  description: The column labels as printed.
  returned: always
  type: list
  elements: str
  sample: ["0", "1"]
shape:
  description: Rows and columns of the matrix.
  returned: always
  type: list
  elements: int
  sample: [8, 8]
gpus:
  description: The number of GPUs the matrix covers.
  returned: always
  type: int
  sample: 8
devices:
  description: The GPUs listed in the output header (the C(Process N) lines for multinode runs).
  returned: always
  type: list
  elements: dict
  sample: [{index: 0, device: 0, name: NVIDIA GB200, pci_bus_id: "00000008:01:00", host: nvbandwidth-test-worker-0}]
sum:
  description: The C(SUM) value of the matrix as nvbandwidth printed it.
  returned: always
  type: float
  sample: 45997.93
min:
  description: The lowest measured cell.
  returned: always
  type: float
  sample: 820.35
max:
  description: The highest measured cell.
  returned: always
  type: float
  sample: 822.16
mean:
  description: The mean of the measured cells.
  returned: always
  type: float
  sample: 821.39125
measured_cells:
  description: How many cells hold a value (not C(N/A)).
  returned: always
  type: int
  sample: 56
threshold_gbps:
  description:
    - The per-pair floor applied - O(min_gbps) when above 0, else O(min_fraction_of_peak) x the peak; V(null) when
      none.
  returned: always
  type: float
  sample: 765.0
threshold_explanation:
  description: Where the floor comes from, in words.
  returned: always
  type: str
  sample: 0.85 x 900.00 GB/s NVLink peak of NVIDIA-GB200
gpu_product:
  description: The O(gpu_product) judged against.
  returned: always
  type: str
  sample: NVIDIA-GB200
peak_gbps:
  description: The NVLink peak the floor was worked out from (V(null) when none).
  returned: always
  type: float
  sample: 900.0
min_fraction_of_peak:
  description: The fraction of the peak applied (V(null) when O(min_gbps) set the floor or no peak is known).
  returned: always
  type: float
  sample: 0.85
min_fraction_of_median:
  description: The median rule's fraction applied (V(null) when off, or for a host<->device matrix).
  returned: always
  type: float
  sample: 0.97
median_gbps:
  description: The median of the measured GPU pairs (the off-diagonal cells).
  returned: always
  type: float
  sample: 821.41
median_threshold_gbps:
  description:
    - O(min_fraction_of_median) x the strictest reference (RV(reference)), the level every pair must reach (a pair
      of the O(baseline) matrix may have its own, see RV(failing_pairs[].threshold_gbps)).
  returned: always
  type: float
  sample: 796.7677
reference:
  description: The strictest rack-wide reference, V(null) when the rule is off or nothing was measured.
  returned: always
  type: dict
  contains:
    kind:
      description: V(product), V(baseline) or V(median).
      type: str
    gbps:
      description: Its per-pair figure.
      type: float
    source:
      description: Where the figure came from.
      type: str
  sample: {kind: product, gbps: 821.41, source: "GB200 NVL72, 2 trays x 4 GPUs, driver 580.95.05, the guide's run"}
  version_added: 0.4.0
references:
  description: Every reference the run was held against (product, baseline, median), as RV(reference).
  returned: always
  type: list
  elements: dict
  version_added: 0.4.0
failing_pairs:
  description:
    - Every cell that misses a rule, and the GPU pairs that were not measured (RV(failing_pairs[].gbps) V(null)),
      in row order - also the pairs of a GPU in RV(low_gpus).
  returned: always
  type: list
  elements: dict
  contains:
    src:
      description: Row index (source GPU, or the CPU row of a host<->device matrix).
      type: int
    dst:
      description: Column index.
      type: int
    gbps:
      description: The measured value, V(null) when not measured.
      type: float
    src_node:
      description: The node of the source GPU (V(null) when not known).
      type: str
    dst_node:
      description: The node of the destination GPU (V(null) when not known).
      type: str
    fraction_of_median:
      description: RV(failing_pairs[].gbps) / RV(median_gbps), 4 decimals.
      type: float
    rule:
      description:
        - The rule missed - V(floor), the reference that failed it (V(product), V(baseline) or V(median)), or
          V(not_measured) for an V(N/A) pair.
      type: str
    reference_gbps:
      description: The strictest reference's figure for this pair.
      type: float
    threshold_gbps:
      description: O(min_fraction_of_median) x RV(failing_pairs[].reference_gbps).
      type: float
    low_gpu:
      description: The GPU of RV(low_gpus) that explains this pair, V(null) when none does.
      type: int
  sample:
    - {src: 0, dst: 5, gbps: 775.0, src_node: gb200-r0-t0, dst_node: gb200-r0-t1, fraction_of_median: 0.9435,
       rule: product, reference_gbps: 821.41, threshold_gbps: 796.7677, low_gpu: null}
low_gpus:
  description:
    - GPUs whose every measured pair, as source and as destination, is below its reference - a GPU with lost
      NVLinks. Their pairs are named through the GPU in RV(violations) and RV(summary), not one by one.
  returned: always
  type: list
  elements: dict
  contains:
    gpu:
      description: The GPU (rank) index.
      type: int
    node:
      description: Its node (V(null) when not known).
      type: str
    pairs:
      description: How many measured pairs it takes part in (2(N-1) for N GPUs).
      type: int
    mean_gbps:
      description: The mean of those pairs.
      type: float
    median_gbps:
      description: The median of those pairs.
      type: float
    min_gbps:
      description: The lowest of those pairs.
      type: float
    fraction_of_median:
      description: RV(low_gpus[].mean_gbps) / RV(median_gbps).
      type: float
    fraction_of_reference:
      description: RV(low_gpus[].mean_gbps) / the figure of RV(reference).
      type: float
  sample:
    - {gpu: 5, node: gb200-r0-t1, pairs: 14, mean_gbps: 775.299, median_gbps: 775.27, min_gbps: 774.56,
       fraction_of_median: 0.9439, fraction_of_reference: 0.9439}
failed_nodes:
  description: The nodes blamed, sorted - those of RV(low_gpus) and both ends of every other failing pair.
  returned: always
  type: list
  elements: str
  sample: [gb200-r0-t1]
summary:
  description:
    - One line - the verdict with the numbers of both rules, or at most 5 findings (low GPUs first, then pairs) and
      how many more; or why the output shows no completed run.
  returned: always
  type: str
  sample: "1 of 56 GPU pairs below the threshold: 0->5 775.00 GB/s (gb200-r0-t0 -> gb200-r0-t1), 0.944 of the median
    821.41"
violations:
  description:
    - One line per threshold missed - per low GPU, per pair that no low GPU explains, per matrix-wide threshold.
  returned: always
  type: list
  elements: str
  sample: ["GPU 0 -> GPU 3: 410.5 GB/s is below the threshold 765"]
errors:
  description: Why the output does not show a real run (empty when it does).
  returned: always
  type: list
  elements: str
  sample: ["testcase no_such_test is unknown to this nvbandwidth (it printed: ERROR: Testcase no_such_test not found!)"]
passed:
  description: Whether the testcase ran and met every threshold.
  returned: always
  type: bool
  sample: true
"""


from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.bandwidth_thresholds import (
    DEFAULT_MIN_FRACTION_OF_MEDIAN,
    DEFAULT_MIN_FRACTION_OF_PEAK,
    Baseline,
    baseline_problems,
    peak_table_problems,
    reference_table_problems,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.files import (
    MAX_OUTPUT_BYTES,
    FileEditError,
    read_regular_file,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.nvbandwidth import Thresholds, check_nvbandwidth

MAX_LINES_IN_MESSAGE = 10


def build_module() -> AnsibleModule:
    return AnsibleModule(
        argument_spec=dict(
            content=dict(type="str"),
            src=dict(type="path"),
            format=dict(type="str", choices=["auto", "text", "json"], default="auto"),
            testcase=dict(type="str"),
            matrix_part=dict(type="str", choices=["total", "read1", "read2", "write1", "write2"]),
            min_gbps=dict(type="float"),
            min_fraction_of_peak=dict(type="float"),
            peak_gbps=dict(type="float"),
            gpu_product=dict(type="str"),
            peak_gbps_by_product=dict(type="list", elements="dict"),
            product_references=dict(type="list", elements="dict"),
            baseline=dict(type="dict"),
            min_fraction_of_median=dict(type="float", default=DEFAULT_MIN_FRACTION_OF_MEDIAN),
            min_sum_gbps=dict(type="float"),
            expected_gpus=dict(type="int"),
            nodes=dict(type="list", elements="str"),
            gpus_per_node=dict(type="int"),
            fail_on_violation=dict(type="bool", default=True),
        ),
        mutually_exclusive=[("content", "src")],
        required_one_of=[("content", "src")],
        supports_check_mode=True,
    )


def _read_src(module: AnsibleModule, path: str) -> str:
    try:
        data = read_regular_file(path, "src", MAX_OUTPUT_BYTES)  # a FIFO or a device is refused at once, never read
    except FileEditError as exc:
        module.fail_json(msg=str(exc))
    if data is None:
        module.fail_json(msg=f"src {path} does not exist on the target; write the nvbandwidth output there first")
    return data.decode("utf-8", errors="replace")


def _summary(lines: list, what: str) -> str:
    shown = "; ".join(lines[:MAX_LINES_IN_MESSAGE])
    more = len(lines) - MAX_LINES_IN_MESSAGE
    return f"{what}: {shown}" + (f"; and {more} more (see violations)" if more > 0 else "")


def _check_arguments(module: AnsibleModule) -> None:
    params = module.params
    for name in ("min_fraction_of_peak", "min_fraction_of_median"):
        value = params[name]
        if value is not None and not 0 <= value <= 1:
            module.fail_json(msg=f"{name} is {value}; it must be from 0 to 1 (e.g. 0.85; 0 turns the rule off)")
    if params["peak_gbps"] is not None and params["peak_gbps"] < 0:
        module.fail_json(msg=f"peak_gbps is {params['peak_gbps']}; it must be a positive GB/s value (GB200: 900)")
    if params["min_fraction_of_peak"] and not (params["peak_gbps"] or params["gpu_product"] is not None):
        module.fail_json(
            msg="min_fraction_of_peak needs the peak: set peak_gbps, or gpu_product (nvidia.com/gpu.product)"
        )
    if params["gpus_per_node"] is not None and params["gpus_per_node"] < 1:
        module.fail_json(msg=f"gpus_per_node is {params['gpus_per_node']}; it must be 1 or more")
    problems = peak_table_problems(params["peak_gbps_by_product"])
    if problems:
        module.fail_json(msg="peak_gbps_by_product: " + "; ".join(problems))
    problems = reference_table_problems(params["product_references"])
    if problems:
        module.fail_json(msg="product_references: " + "; ".join(problems))
    problems = baseline_problems(params["baseline"]) if params["baseline"] is not None else []
    if problems:
        module.fail_json(
            msg="baseline: "
            + "; ".join(problems)
            + "; it needs median_gbps, a finite GB/s above 0 (and optionally matrix, rank_nodes, source)"
        )


def main() -> None:
    module = build_module()
    params = module.params
    _check_arguments(module)
    fraction = params["min_fraction_of_peak"]
    if fraction is None:
        fraction = DEFAULT_MIN_FRACTION_OF_PEAK

    content = params["content"] if params["src"] is None else _read_src(module, params["src"])
    thresholds = Thresholds(
        min_gbps=params["min_gbps"],
        min_sum_gbps=params["min_sum_gbps"],
        min_fraction_of_peak=fraction,
        peak_gbps=params["peak_gbps"],
        min_fraction_of_median=params["min_fraction_of_median"],
        expected_gpus=params["expected_gpus"],
    )
    problems = thresholds.problems()
    if problems:  # NaN or an infinity passes Ansible's float type
        module.fail_json(msg="; ".join(problems))
    verdict = check_nvbandwidth(
        content,
        testcase=params["testcase"],
        thresholds=thresholds,
        output_format=params["format"],
        part=params["matrix_part"],
        gpu_product=params["gpu_product"],
        nodes=params["nodes"],
        gpus_per_node=params["gpus_per_node"],
        peak_table=params["peak_gbps_by_product"],
        product_references=params["product_references"],
        baseline=Baseline.from_record(params["baseline"]),
    )
    result = dict(changed=False, **verdict.to_result())
    # Problems of other testcases of the same run do not change the verdict; they become warnings.
    for warning in result.pop("warnings"):
        module.warn(warning)
    if verdict.errors:
        module.fail_json(msg=_summary(verdict.errors, "the nvbandwidth output does not show a completed run"), **result)
    if verdict.violations and params["fail_on_violation"]:
        name = verdict.testcase
        pairs = len(verdict.failing_pairs)
        module.fail_json(
            msg=_summary(
                verdict.violations, f"nvbandwidth testcase {name} missed its thresholds ({pairs} failing pairs)"
            ),
            **result,
        )
    module.exit_json(**result)


if __name__ == "__main__":
    main()
