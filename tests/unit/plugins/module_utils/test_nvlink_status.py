# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""nvlink_status: ``nvidia-smi nvlink -s`` as real GPUs print it (public GB200 and V100 outputs, H200 captures) and
the forms NVML prints when it cannot tell; the judgement of a tray's links."""

from __future__ import annotations

from pathlib import Path

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.nvlink_status import (
    GpuLinks,
    link_problems,
    parse_nvlink_status,
)

SMI = Path(__file__).resolve().parents[4] / "tests" / "fixtures" / "nvidia-smi"


def test_a_real_gb200_prints_18_links_at_53_125_gb_per_second():
    status = parse_nvlink_status((SMI / "gb200-k8s-test-infra-371-nvidia-smi-nvlink-s.txt").read_text())
    gpu = status.gpus[0]
    assert (gpu.name, gpu.uuid) == ("NVIDIA GB200", "GPU-d1b93026-6d5b-03bd-3a71-f85b47a61bde")
    assert gpu.up == list(range(18)) and gpu.bandwidth(17) == 53.125 and gpu.inactive == [] and gpu.unread == {}
    # the post elides GPU 1 after its link 1: two of its 18 links are evidence, the rest are missing
    assert link_problems(status, 2, 18) == [
        "GPU 1: nvidia-smi nvlink -s lists 2 of its 18 NVLinks: link 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, "
        "16, 17 missing"
    ]


def test_a_real_h200_pair_passes_and_a_machine_with_nvlink_off_lists_no_gpu():
    status = parse_nvlink_status((SMI / "h200x2-nvidia-smi-nvlink-s.txt").read_text())
    assert sorted(status.gpus) == [0, 1] and status.gpus[1].bandwidth(0) == 26.562
    assert link_problems(status, 2, 18) == []
    empty = parse_nvlink_status((SMI / "h100-device-nvidia-smi-nvlink-s.txt").read_text())
    assert empty.gpus == {} and empty.stray == []


def test_inactive_links_of_a_real_v100_are_named():
    status = parse_nvlink_status((SMI / "v100-azhpc-diagnostics-73-nvidia-smi-nvlink-s.txt").read_text())
    assert status.gpus[3].inactive == [3, 5] and status.gpus[3].up == [0, 1, 2, 4]
    assert link_problems(status, 4, 6) == ["GPU 3: NVLink 3, 5 inactive (4 of 6 links up)"]


def test_nvml_messages_instead_of_links_are_read_on_the_gpu_line_and_the_next():
    text = (
        "GPU 0: NVIDIA GeForce RTX 4090 (UUID: GPU-a)\n"
        "\t NVML: Unable to retrieve NVLink information: Not Supported\n"
        "GPU 1: Quadro RTX 5000 (UUID: GPU-b) NVML: Unable to retrieve Nvlink information as all links are inActive\n"
        "GPU 2: NVIDIA GB200 NVML: Unable to retrieve Nvlink information as all links are inActive\n"
    )
    status = parse_nvlink_status(text)
    assert status.gpus[0].messages == ["NVML: Unable to retrieve NVLink information: Not Supported"]
    assert (status.gpus[1].name, status.gpus[1].uuid) == ("Quadro RTX 5000", "GPU-b")
    assert (status.gpus[2].name, status.gpus[2].uuid) == ("NVIDIA GB200", None)
    assert link_problems(status, 3, 18) == [
        "GPU 0: nvidia-smi nvlink -s lists no NVLink, so none is proven up: NVML: Unable to retrieve NVLink "
        "information: Not Supported",
        "GPU 1: every NVLink inactive (nvidia-smi nvlink -s: NVML: Unable to retrieve Nvlink information as all links "
        "are inActive)",
        "GPU 2: every NVLink inactive (nvidia-smi nvlink -s: NVML: Unable to retrieve Nvlink information as all links "
        "are inActive)",
    ]


def test_a_status_without_a_bandwidth_figure_is_not_a_link_up():
    gpu = GpuLinks(0, links={0: "53.125 GB/s", 1: "N/A", 2: "Not Supported", 3: "<inactive>"})
    assert gpu.up == [0] and gpu.inactive == [3] and gpu.unread == {1: "N/A", 2: "Not Supported"}
    status = parse_nvlink_status("GPU 0: NVIDIA GB200 (UUID: GPU-a)\n\t Link 0: 53.125 GB/s\n\t Link 1: N/A\n")
    assert link_problems(status, 1, 2) == ["GPU 0: NVLink 1 'N/A' without a bandwidth figure: not proven up"]


def test_lines_before_any_gpu_are_kept():
    status = parse_nvlink_status("No devices were found\n")
    assert status.gpus == {} and status.stray == ["No devices were found"]
    assert link_problems(status, 2, 18) == []


def test_links_beyond_what_the_gpu_has_are_named_and_gpus_beyond_the_tray_left_to_the_caller():
    text = (
        "GPU 0: G (UUID: GPU-a)\n\t Link 0: 50 GB/s\n\t Link 1: 50 GB/s\nGPU 1: G (UUID: GPU-b)\n\t Link 0: 50 GB/s\n"
    )
    assert link_problems(parse_nvlink_status(text), 1, 1) == [
        "GPU 0: nvidia-smi nvlink -s lists link 1, beyond the 1 NVLinks expected (gpu_health.nvlinks_per_gpu)"
    ]
