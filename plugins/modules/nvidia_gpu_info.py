#!/usr/bin/python
# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: nvidia_gpu_info
short_description: Read NVIDIA driver, GPU, NVLink fabric and IMEX facts from a GPU host
version_added: 0.1.0
description:
  - Reads the NVIDIA driver and CUDA version, the kernel module flavour, every GPU (name, UUID,
    PCI bus id, memory, NVLink links, fabric state, status, clique id and cluster UUID) and the
    IMEX channel setup of the host, and returns them under C(nvidia_gpu).
  - Sources are C(nvidia-smi -q -x), C(nvidia-smi nvlink -s), C(/proc/driver/nvidia/version),
    C(/proc/driver/nvidia/params), C(/proc/devices) and C(/dev/nvidia-caps-imex-channels/).
  - Computes the C(nvidia.com/gpu.clique) value that GPU Feature Discovery would set on the node.
  - Fails with a message that says what to do when there is no driver, no GPU, a driver below
    O(min_driver_version), a tray that is not complete (O(expected_gpus), O(min_active_nvlinks),
    O(require_open_kernel_module)), or, with O(require_fabric=true), a fabric that is not ready.
  - A GPU whose fabric is still C(Not Started) or C(In Progress) (right after a boot) fails with
    RV(fabric_pending=true), so that a task can retry it with C(until); any other fabric problem
    fails with RV(fabric_pending=false), at once.
  - Needs only the Python standard library on the host.
author:
  - gpu_fabric.mnnvl contributors (@gpu-fabric)
extends_documentation_fragment:
  - gpu_fabric.mnnvl.attributes
  - gpu_fabric.mnnvl.attributes.INFO_MODULE
options:
  nvidia_smi_path:
    description:
      - Path of the C(nvidia-smi) executable.
      - When unset, C(<driver_root>/usr/bin/nvidia-smi) is used; with O(driver_root=/) the
        C(PATH) is searched next.
    type: path
  driver_root:
    description:
      - Root of the NVIDIA driver installation.
      - V(/) for a driver installed on the host; V(/run/nvidia/driver) when the GPU Operator's
        driver container installs it (the container's root filesystem).
      - For a root other than V(/) that is a whole root filesystem (it has C(bin/sh) or C(usr/lib)),
        the module, when it runs as root, runs C(chroot <driver_root> /usr/bin/nvidia-smi), as NVIDIA
        documents for the GPU Operator's driver (C(chroot /run/nvidia/driver nvidia-smi)), so that
        C(nvidia-smi) uses the container's own libraries.
      - Otherwise (not root, no C(chroot) executable, a root that holds only the driver's files, or
        an O(nvidia_smi_path) outside it) C(nvidia-smi) runs with that root's library directories
        on C(LD_LIBRARY_PATH).
    type: path
    default: /
  min_driver_version:
    description:
      - Fail when the driver version is below this one. Versions are compared part by part as
        numbers, so V(570.158.01) is newer than V(570.86.15).
      - V(570.158.01) is the floor of the NVIDIA DRA driver's ComputeDomains (25.8.0 and 0.4.x).
    type: str
  require_fabric:
    description:
      - Fail unless every GPU's fabric is C(Completed)/C(Success) with a non-zero cluster UUID
        and all GPUs are in one clique; the message names each GPU that is not.
      - A single-node NVSwitch system (HGX H100/H200) reports C(Completed)/C(Success) with the
        all-zero cluster UUID; it is not in a multi-node NVLink domain and fails this check.
    type: bool
    default: false
  expected_gpus:
    description:
      - Fail unless the host shows this many GPUs (4 on a GB200 compute tray); V(0) accepts any number.
    type: int
    default: 0
  min_active_nvlinks:
    description:
      - Fail when a GPU has fewer active NVLinks than this (18 on a GB200), or when C(nvidia-smi nvlink -s)
        cannot tell; V(0) does not check the links.
    type: int
    default: 0
  require_open_kernel_module:
    description:
      - Fail unless C(/proc/driver/nvidia/version) shows the open kernel module, which Blackwell GPUs need.
    type: bool
    default: false
  proc_root:
    description:
      - Where the host's C(/proc) is mounted, for example V(/host/proc) inside a container.
    type: path
    default: /proc
  dev_root:
    description:
      - Where the host's C(/dev) is mounted.
    type: path
    default: /dev
notes:
  - The clique label follows GPU Feature Discovery (C(internal/lm/imex.go)) - only GPUs whose fabric
    is attached (C(Completed), C(Success), non-zero cluster UUID) count, and there is no label
    when none is attached or when they disagree.
seealso:
  - name: NVIDIA IMEX channels
    description: How IMEX channel devices are created.
    link: https://docs.nvidia.com/multi-node-nvlink-systems/imex-guide/imexchannels.html
  - name: NVML fabric definitions
    description: Fabric states and the health summary.
    link: https://docs.nvidia.com/deploy/nvml-api/group__nvmlFabricDefs.html
"""

EXAMPLES = r"""
- name: Read the GPU facts and require the ComputeDomain driver floor
  gpu_fabric.mnnvl.nvidia_gpu_info:
    min_driver_version: 570.158.01
  register: gpu_facts

- name: Show the clique this node will be labelled with
  ansible.builtin.debug:
    msg: "{{ gpu_facts.nvidia_gpu.clique_label }}"

- name: Require every GPU in one multi-node NVLink clique (GB200 NVL72 trays)
  gpu_fabric.mnnvl.nvidia_gpu_info:
    driver_root: /run/nvidia/driver
    min_driver_version: 570.158.01
    require_fabric: true
    expected_gpus: 4
    min_active_nvlinks: 18
    require_open_kernel_module: true

- name: Wait up to 10 minutes for the fabric after a boot, failing at once on any other problem
  gpu_fabric.mnnvl.nvidia_gpu_info:
    require_fabric: true
  register: gpu_facts
  until: gpu_facts is success or not gpu_facts.fabric_pending | default(false)
  retries: 60
  delay: 10
"""

RETURN = r"""
fabric_pending:
  description:
    - Whether the only thing that failed O(require_fabric) is a GPU whose fabric is still C(Not Started) or
      C(In Progress); retrying may pass.
  returned: always
  type: bool
  sample: false
nvidia_gpu:
  description: Facts about the GPU host.
  returned: success
  type: dict
  contains:
    driver_version:
      description: NVIDIA driver version.
      type: str
      returned: success
      sample: 580.159.04
    cuda_version:
      description: Highest CUDA version the driver supports.
      type: str
      returned: success
      sample: "13.0"
    kernel_module:
      description: Kernel module flavour from C(/proc/driver/nvidia/version); V(null) when the file is missing.
      type: str
      returned: success
      sample: open
      choices: [open, proprietary]
    nvidia_smi_path:
      description: The C(nvidia-smi) that was run.
      type: str
      returned: success
      sample: /usr/bin/nvidia-smi
    gpu_count:
      description: Number of GPUs.
      type: int
      returned: success
      sample: 2
    gpus:
      description: One entry per GPU, in C(nvidia-smi) index order.
      type: list
      elements: dict
      returned: success
      contains:
        index:
          description: nvidia-smi index of the GPU.
          type: int
          sample: 0
        name:
          description: Product name.
          type: str
          sample: NVIDIA H200
        uuid:
          description: GPU UUID.
          type: str
          sample: GPU-6f4c9d12-3e8b-4a70-b5d2-9e1a7c4b3f02
        pci_bus_id:
          description: PCI bus id.
          type: str
          sample: 00000000:00:06.0
        memory_total_mib:
          description: Total framebuffer memory in MiB.
          type: int
          sample: 143771
        fabric:
          description: NVLink fabric registration; keys are V(null) where nvidia-smi reports C(N/A).
          type: dict
          contains:
            state:
              description: Fabric state, for example C(Completed), C(In Progress), C(Not Started).
              type: str
              sample: Completed
            status:
              description: Fabric status, for example C(Success).
              type: str
              sample: Success
            clique_id:
              description: Clique id within the cluster.
              type: int
              sample: 32766
            cluster_uuid:
              description: Cluster UUID of the NVLink domain; all zeros outside a multi-node domain.
              type: str
              sample: 69a19a31-f41c-45a5-8245-579b6bce5bdd
            health_summary:
              description: Fabric health summary, for example C(Healthy), C(Unhealthy), C(Limited Capacity).
              type: str
              sample: Healthy
            pending:
              description: Whether the fabric state is C(Not Started) or C(In Progress).
              type: bool
              sample: false
            attached:
              description: Whether GPU Feature Discovery counts the GPU as fabric-attached.
              type: bool
              sample: true
        nvlink:
          description: NVLink links from C(nvidia-smi nvlink -s); V(null) when that command failed.
          type: dict
          contains:
            active_links:
              description: Links that report a speed.
              type: int
              sample: 18
            inactive_links:
              description: Links reported as inactive.
              type: int
              sample: 0
            gbps_per_link:
              description: Speed of the slowest active link in GB/s; V(null) without active links.
              type: float
              sample: 26.562
            total_gbps:
              description: Sum of the active links' speeds in GB/s.
              type: float
              sample: 478.116
    clique_label:
      description:
        - The C(nvidia.com/gpu.clique) value, C(<cluster_uuid>.<clique_id>), that GPU Feature Discovery would set.
        - V(null) when no GPU is fabric-attached or the attached GPUs disagree.
      type: str
      returned: success
      sample: 69a19a31-f41c-45a5-8245-579b6bce5bdd.32766
    imex:
      description: IMEX channel setup.
      type: dict
      returned: success
      contains:
        channel_devices:
          description: Character devices C(channelN) under C(/dev/nvidia-caps-imex-channels), by number.
          type: list
          elements: str
          sample: [/dev/nvidia-caps-imex-channels/channel0]
        create_imex_channel0:
          description: Driver parameter C(CreateImexChannel0); V(null) when the driver does not report it.
          type: bool
          sample: false
        channel_count:
          description: Driver parameter C(ImexChannelCount); V(null) when the driver does not report it.
          type: int
          sample: 2048
        channel_major:
          description: Major number of C(nvidia-caps-imex-channels) in C(/proc/devices).
          type: int
          sample: 242
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.gpu_facts import gpu_info


def build_module() -> AnsibleModule:
    return AnsibleModule(
        argument_spec=dict(
            nvidia_smi_path=dict(type="path"),
            driver_root=dict(type="path", default="/"),
            min_driver_version=dict(type="str"),
            require_fabric=dict(type="bool", default=False),
            expected_gpus=dict(type="int", default=0),
            min_active_nvlinks=dict(type="int", default=0),
            require_open_kernel_module=dict(type="bool", default=False),
            proc_root=dict(type="path", default="/proc"),
            dev_root=dict(type="path", default="/dev"),
        ),
        supports_check_mode=True,
    )


def main() -> None:
    module = build_module()

    def run(args, environ):
        return module.run_command(args, environ_update=environ)

    info = gpu_info(module.params, run, module.get_bin_path, is_root=os.geteuid() == 0)
    for warning in info.warnings:
        module.warn(warning)
    if info.failure:
        module.fail_json(msg=info.failure, **info.result)
    module.exit_json(**info.result)


if __name__ == "__main__":
    main()
