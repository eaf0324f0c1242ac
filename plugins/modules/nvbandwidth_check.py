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
      - Every measured cell of the matrix must be at least this many GB/s.
      - With O(min_fraction_of_peak) as well, the stricter of the two floors applies.
    type: float
  min_fraction_of_peak:
    description:
      - Every measured cell must be at least this fraction (0 < value <= 1) of O(peak_gbps).
    type: float
  peak_gbps:
    description:
      - The peak bandwidth of one GPU's NVLink per direction in GB/s, for example V(900) for GB200 (18 NVLink 5 links)
        or V(450) for H100/H200 (NVLink 4). Required with O(min_fraction_of_peak).
    type: float
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

- name: Require 85 % of the GB200 NVLink peak on every GPU pair
  gpu_fabric.mnnvl.nvbandwidth_check:
    content: "{{ launcher_log.log }}"
    testcase: multinode_device_to_device_memcpy_read_ce
    min_fraction_of_peak: 0.85
    peak_gbps: 900
    expected_gpus: 8
  register: bandwidth

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
    - The per-cell floor applied, from O(min_gbps) and O(min_fraction_of_peak) x O(peak_gbps); V(null) when none.
  returned: always
  type: float
  sample: 765.0
failing_pairs:
  description:
    - The cells below the threshold, and the GPU pairs that were not measured (RV(failing_pairs[].gbps) V(null)).
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
  sample: [{src: 0, dst: 3, gbps: 410.5}]
violations:
  description: One line per threshold missed, naming the pair and the values.
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

import os

from ansible.module_utils.basic import AnsibleModule
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
            min_sum_gbps=dict(type="float"),
            expected_gpus=dict(type="int"),
            fail_on_violation=dict(type="bool", default=True),
        ),
        mutually_exclusive=[("content", "src")],
        required_one_of=[("content", "src")],
        required_together=[("min_fraction_of_peak", "peak_gbps")],
        supports_check_mode=True,
    )


def _read_src(module: AnsibleModule, path: str) -> str:
    if not os.path.exists(path):
        module.fail_json(msg=f"src {path} does not exist on the target; write the nvbandwidth output there first")
    if os.path.isdir(path):
        module.fail_json(msg=f"src {path} is a directory; give the file that holds the nvbandwidth output")
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError as exc:
        module.fail_json(msg=f"src {path} cannot be read: {exc}")
    return ""  # not reached: fail_json exits


def _summary(lines: list, what: str) -> str:
    shown = "; ".join(lines[:MAX_LINES_IN_MESSAGE])
    more = len(lines) - MAX_LINES_IN_MESSAGE
    return f"{what}: {shown}" + (f"; and {more} more (see violations)" if more > 0 else "")


def main() -> None:
    module = build_module()
    params = module.params
    fraction = params["min_fraction_of_peak"]
    if fraction is not None and not 0 < fraction <= 1:
        module.fail_json(msg=f"min_fraction_of_peak is {fraction}; it must be above 0 and at most 1 (e.g. 0.85)")
    if params["peak_gbps"] is not None and params["peak_gbps"] <= 0:
        module.fail_json(msg=f"peak_gbps is {params['peak_gbps']}; it must be a positive GB/s value (GB200: 900)")

    content = params["content"] if params["src"] is None else _read_src(module, params["src"])
    thresholds = Thresholds(
        min_gbps=params["min_gbps"],
        min_sum_gbps=params["min_sum_gbps"],
        min_fraction_of_peak=fraction,
        peak_gbps=params["peak_gbps"],
        expected_gpus=params["expected_gpus"],
    )
    verdict = check_nvbandwidth(
        content,
        testcase=params["testcase"],
        thresholds=thresholds,
        output_format=params["format"],
        part=params["matrix_part"],
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
