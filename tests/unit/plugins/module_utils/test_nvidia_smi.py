# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

from pathlib import Path

import pytest
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.nvidia_smi import (
    Fabric,
    Gpu,
    clique_label,
    fabric_health_faults,
    fabric_problems,
    fabric_verdict,
    parse_driver_params,
    parse_driver_version_file,
    parse_nvlink_status,
    parse_proc_devices,
    parse_query_xml,
)

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"
SMI = FIXTURES / "nvidia-smi"
PROC = FIXTURES / "proc"

H200X2_UUIDS = ["GPU-6f4c9d12-3e8b-4a70-b5d2-9e1a7c4b3f02", "GPU-1b0e2f50-7c2a-4d9e-9a61-0c3f5e8d2a01"]
GB200_LABEL = "69a19a31-f41c-45a5-8245-579b6bce5bdd.32766"


def smi(name: str) -> str:
    return (SMI / name).read_text()


def proc(name: str) -> str:
    return (PROC / name).read_text()


# --------------------------------------------------------------------------- nvidia-smi -q -x


def test_parse_h200x2_xml():
    report = parse_query_xml(smi("h200x2-nvidia-smi-q.xml"))
    assert report.driver_version == "580.159.04"
    assert report.cuda_version == "13.0"
    assert [gpu.index for gpu in report.gpus] == [0, 1]
    assert [gpu.name for gpu in report.gpus] == ["NVIDIA H200", "NVIDIA H200"]
    assert [gpu.uuid for gpu in report.gpus] == H200X2_UUIDS
    assert [gpu.pci_bus_id for gpu in report.gpus] == ["00000000:00:06.0", "00000000:00:07.0"]
    assert [gpu.memory_total_mib for gpu in report.gpus] == [143771, 143771]
    for gpu in report.gpus:
        assert gpu.fabric == Fabric("Completed", "Success", 0, "00000000-0000-0000-0000-000000000000")
        # A single-node NVSwitch system: registered, but not in a multi-node domain.
        assert gpu.fabric.attached is False


def test_h200x2_xml_agrees_with_the_csv_query_of_the_same_host():
    report = parse_query_xml(smi("h200x2-nvidia-smi-q.xml"))
    rows = [line.split(", ") for line in smi("h200x2-nvidia-smi-query-gpu-header.csv").splitlines()[1:]]
    assert [(gpu.index, gpu.name, gpu.pci_bus_id, f"{gpu.memory_total_mib} MiB", gpu.uuid) for gpu in report.gpus] == [
        (int(row[0]), row[1], row[3], row[4], row[5]) for row in rows
    ]
    assert {row[2] for row in rows} == {report.driver_version}


def test_parse_h200_device_xml_without_fabric():
    # The real capture of a one-GPU H200 virtual machine: NVLink disabled, fabric N/A.
    report = parse_query_xml(smi("h200-device-nvidia-smi-q.xml"))
    assert report.driver_version == "580.159.04"
    assert report.cuda_version == "13.0"
    assert len(report.gpus) == 1
    gpu = report.gpus[0]
    assert (gpu.index, gpu.name, gpu.pci_bus_id, gpu.memory_total_mib) == (0, "NVIDIA H200", "00000000:00:06.0", 143771)
    assert gpu.uuid == "GPU-4d2a8c61-0b7e-4f13-a9c5-3e6f1d8b7a10"
    assert gpu.fabric == Fabric(None, None, None, None)


def test_parse_synthesized_gb200_xml():
    report = parse_query_xml(smi("synth-gb200-nvidia-smi-q.xml"))
    assert report.driver_version == "580.95.05"
    assert [gpu.pci_bus_id for gpu in report.gpus] == [
        "00000008:01:00.0",
        "00000009:01:00.0",
        "00000018:01:00.0",
        "00000019:01:00.0",
    ]
    assert {gpu.memory_total_mib for gpu in report.gpus} == {189471}
    assert {gpu.fabric.clique_id for gpu in report.gpus} == {32766}
    assert all(gpu.fabric.attached for gpu in report.gpus)
    assert clique_label(report.gpus) == GB200_LABEL


def test_gb200_label_matches_the_label_seen_on_the_real_nodes():
    real = (FIXTURES / "k8s" / "gb200-clique-labels.txt").read_text().splitlines()[1:]
    assert {line.split()[2] for line in real} == {GB200_LABEL}


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("No devices were found\n", "not XML"),
        ("", "not XML"),
        ("<?xml version='1.0'?><other/>", "expected <nvidia_smi_log>"),
    ],
)
def test_parse_query_xml_refuses_other_text(text, error):
    with pytest.raises(ValueError, match=error):
        parse_query_xml(text)


def test_parse_query_xml_without_fabric_element():
    # Drivers before the fabric API have no <fabric> element at all.
    text = "<nvidia_smi_log><driver_version>535.183.01</driver_version><gpu id='0000:01:00.0'>"
    text += "<product_name>NVIDIA A100</product_name><fb_memory_usage><total>81920 MiB</total></fb_memory_usage>"
    text += "</gpu></nvidia_smi_log>"
    report = parse_query_xml(text)
    assert report.cuda_version is None
    assert report.gpus[0].pci_bus_id == "0000:01:00.0"
    assert report.gpus[0].memory_total_mib == 81920
    assert report.gpus[0].fabric == Fabric()


# --------------------------------------------------------------------------- nvidia-smi nvlink -s


def test_parse_h200x2_nvlink():
    links = parse_nvlink_status(smi("h200x2-nvidia-smi-nvlink-s.txt"))
    assert sorted(links) == sorted(H200X2_UUIDS)
    for status in links.values():
        assert status.active_links == 18
        assert status.inactive_links == 0
        assert status.gbps_per_link == 26.562
        assert status.total_gbps == 478.116


def test_parse_device_nvlink_prints_nothing_when_nvlink_is_disabled():
    assert smi("h200-device-nvidia-smi-nvlink-s.txt") == ""
    assert parse_nvlink_status("") == {}


def test_parse_degraded_nvlink_reports_the_missing_links():
    links = parse_nvlink_status(smi("synth-gb200-degraded-nvidia-smi-nvlink-s.txt"))
    statuses = list(links.values())
    assert [s.active_links for s in statuses] == [18, 18, 18, 16]
    assert [s.inactive_links for s in statuses] == [0, 0, 0, 2]
    assert statuses[3].total_gbps == 800.0
    assert statuses[0].total_gbps == 900.0


def test_parse_nvlink_slowest_link_and_all_inactive():
    text = "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-a)\n\t Link 0: 26.562 GB/s\n\t Link 1: 13.281 GB/s\n"
    text += "GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-b)\n\t Link 0: <inactive>\n\t Link 1: <inactive>\n"
    links = parse_nvlink_status(text)
    assert (links["GPU-a"].active_links, links["GPU-a"].gbps_per_link, links["GPU-a"].total_gbps) == (2, 13.281, 39.843)
    assert (links["GPU-b"].active_links, links["GPU-b"].inactive_links, links["GPU-b"].gbps_per_link) == (0, 2, None)


# --------------------------------------------------------------------------- /proc


@pytest.mark.parametrize("name", ["h200x2-driver-nvidia-version.txt", "h200-device-driver-nvidia-version.txt"])
def test_parse_open_kernel_module(name):
    module = parse_driver_version_file(proc(name))
    assert module.flavour == "open"
    assert module.version == "580.159.04"


def test_parse_proprietary_kernel_module():
    text = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.183.01  Sun May 12 19:39:15 UTC 2024\n"
    module = parse_driver_version_file(text)
    assert (module.flavour, module.version) == ("proprietary", "535.183.01")


def test_parse_driver_version_file_without_nvrm_line():
    with pytest.raises(ValueError, match="NVRM version"):
        parse_driver_version_file("GCC version: gcc 12\n")


def test_parse_driver_params():
    params = parse_driver_params(proc("h200x2-driver-nvidia-params.txt"))
    assert params["CreateImexChannel0"] == "0"
    assert params["ImexChannelCount"] == "2048"
    assert params["NvLinkDisable"] == "0"
    assert params["RegistryDwords"] == ""
    # The one-GPU virtual machine runs with NVLink disabled.
    assert parse_driver_params(proc("h200-device-driver-nvidia-params.txt"))["NvLinkDisable"] == "1"


def test_parse_proc_devices():
    majors = parse_proc_devices(proc("h200x2-proc-devices.txt"))
    assert majors["nvidia-caps-imex-channels"] == 242
    assert majors["nvidia-caps"] == 241
    assert majors["nvidia"] == 195
    # Block devices are not character devices: 253 is dimmctl here, zram only among block devices.
    assert majors["dimmctl"] == 253
    assert "zram" not in majors
    assert "blkext" not in majors
    assert parse_proc_devices(proc("h200-device-proc-devices.txt"))["nvidia-caps-imex-channels"] == 242


def gpus_from(name: str):
    return parse_query_xml(smi(name)).gpus


def test_fabric_problems_none_on_gb200():
    assert fabric_problems(gpus_from("synth-gb200-nvidia-smi-q.xml")) == []


def test_fabric_problems_names_the_gpu_in_progress():
    problems = fabric_problems(gpus_from("synth-gb200-fabric-in-progress-nvidia-smi-q.xml"))
    assert problems == ["GPU 2 (00000018:01:00.0): fabric state In Progress, status N/A (expected Completed/Success)"]


def test_fabric_problems_two_cliques():
    gpus = gpus_from("synth-gb200-two-cliques-nvidia-smi-q.xml")
    assert clique_label(gpus) is None
    assert fabric_problems(gpus) == [
        "GPUs are in 2 cliques, expected one: "
        "69a19a31-f41c-45a5-8245-579b6bce5bdd.32766: GPU 0 (00000008:01:00.0), GPU 1 (00000009:01:00.0); "
        "69a19a31-f41c-45a5-8245-579b6bce5bdd.32767: GPU 2 (00000018:01:00.0), GPU 3 (00000019:01:00.0)"
    ]


def test_fabric_problems_single_node_nvswitch_is_not_a_multinode_domain():
    gpus = gpus_from("h200x2-nvidia-smi-q.xml")
    assert clique_label(gpus) is None
    problems = fabric_problems(gpus)
    assert len(problems) == 2
    assert problems[0] == (
        "GPU 0 (00000000:00:06.0): fabric Completed/Success but cluster UUID"
        " 00000000-0000-0000-0000-000000000000: the GPU is not in a multi-node NVLink domain"
    )


def test_fabric_problems_without_fabric():
    assert fabric_problems(gpus_from("h200-device-nvidia-smi-q.xml")) == [
        "GPU 0 (00000000:00:06.0): no fabric state (N/A): the GPU is not registered with an NVLink fabric"
        " (expected Completed/Success)"
    ]


def test_fabric_verdict_ready_on_a_healthy_gb200():
    gpus = gpus_from("synth-gb200-nvidia-smi-q.xml")
    assert [gpu.fabric.health_summary for gpu in gpus] == ["Healthy"] * 4
    verdict = fabric_verdict(gpus)
    assert (verdict.ready, verdict.problems, verdict.pending, verdict.warnings) == (True, [], [], [])


def test_fabric_verdict_in_progress_is_pending_not_a_problem():
    verdict = fabric_verdict(gpus_from("synth-gb200-fabric-in-progress-nvidia-smi-q.xml"))
    assert verdict.problems == []
    assert verdict.pending == [
        "GPU 2 (00000018:01:00.0): fabric state In Progress, status N/A (expected Completed/Success)"
    ]
    assert verdict.ready is False


def test_fabric_verdict_failure_status_is_a_problem_at_once():
    verdict = fabric_verdict(gpus_from("synth-gb200-fabric-failure-nvidia-smi-q.xml"))
    assert verdict.pending == []
    assert verdict.problems == [
        "GPU 1 (00000009:01:00.0): fabric state Completed, status Failure (expected Completed/Success)"
    ]


def test_fabric_verdict_unhealthy_summary_is_a_problem():
    gpus = gpus_from("synth-gb200-unhealthy-nvidia-smi-q.xml")
    # GFD would still label this tray: the GPU is attached.
    assert clique_label(gpus) == GB200_LABEL
    assert fabric_verdict(gpus).problems == [
        "GPU 3 (00000019:01:00.0): fabric Completed/Success but health summary Unhealthy"
        " (see the Fabric Health rows of 'nvidia-smi -q')"
    ]


def test_fabric_verdict_limited_capacity_is_a_warning():
    gpus = gpus_from("synth-gb200-nvidia-smi-q.xml")
    gpus[0].fabric.health_summary = "Limited Capacity"
    verdict = fabric_verdict(gpus)
    assert verdict.ready is True
    assert verdict.warnings == [
        "GPU 0 (00000008:01:00.0): fabric health summary Limited Capacity: NVLink bandwidth is degraded"
    ]


def test_fabric_verdict_names_the_gpu_out_of_the_fabric():
    gpus = gpus_from("synth-gb200-gpu-out-of-fabric-nvidia-smi-q.xml")
    # The three attached GPUs agree, so GFD labels the tray anyway.
    assert clique_label(gpus) == GB200_LABEL
    assert fabric_verdict(gpus).problems == [
        "GPU 1 (00000009:01:00.0): no fabric state (N/A): the GPU is not registered with an NVLink fabric"
        " (expected Completed/Success)"
    ]


@pytest.mark.parametrize("clique", ["N/A", "", "\u00b2"])
def test_fabric_verdict_gpus_without_a_clique_id_fail(clique):
    text = smi("synth-gb200-nvidia-smi-q.xml").replace("<cliqueId>32766</cliqueId>", f"<cliqueId>{clique}</cliqueId>")
    gpus = parse_query_xml(text).gpus
    assert clique_label(gpus) is None
    verdict = fabric_verdict(gpus)
    assert verdict.ready is False
    assert len(verdict.problems) == 4
    assert verdict.problems[0] == (
        "GPU 0 (00000008:01:00.0): fabric Completed/Success, cluster UUID 69a19a31-f41c-45a5-8245-579b6bce5bdd,"
        " but no clique ID (N/A or empty): the GPU is in no NVLink partition (check the partition that holds this"
        " tray on the NVLink switch trays, NMX)"
    )


def test_fabric_verdict_without_gpus_is_a_problem():
    verdict = fabric_verdict([])
    assert verdict.ready is False
    assert verdict.problems == [
        "nvidia-smi reported no GPU: there is no fabric to check (is the driver bound to the GPUs? see dmesg)"
    ]


def test_clique_label_ignores_unattached_gpus_like_gfd():
    gpus = gpus_from("synth-gb200-fabric-in-progress-nvidia-smi-q.xml")
    # GFD labels from the attached GPUs alone; require_fabric is what catches GPU 2.
    assert clique_label(gpus) == GB200_LABEL
    assert clique_label([]) is None
    other_cluster = Gpu(
        0, "x", "u", "b", 1, Fabric("Completed", "Success", 32766, "7b968a6d-c8aa-45e1-9e07-e1e51be99c31")
    )
    assert clique_label([*gpus_from("synth-gb200-nvidia-smi-q.xml"), other_cluster]) is None


def test_report_that_lost_a_gpu_element_is_refused():
    text = smi("synth-gb200-nvidia-smi-q.xml")
    assert len(parse_query_xml(text).gpus) == 4
    first = text.index("\t<gpu id=")
    second = text.index("\t<gpu id=", first + 1)
    with pytest.raises(ValueError, match=r"the XML lists 3 <gpu> element\(s\) but <attached_gpus> says 4"):
        parse_query_xml(text[:first] + text[second:])


def test_clique_id_of_other_digits_is_no_clique_id():
    text = smi("synth-gb200-nvidia-smi-q.xml").replace("<cliqueId>32766</cliqueId>", "<cliqueId>\u00b2</cliqueId>", 1)
    gpus = parse_query_xml(text).gpus
    assert [gpu.fabric.clique_id for gpu in gpus] == [None, 32766, 32766, 32766]
    assert clique_label(gpus) is None


def test_unreadable_link_speed_counts_as_inactive():
    text = smi("h200x2-nvidia-smi-nvlink-s.txt").replace("Link 3: 26.562 GB/s", "Link 3: 26..62 GB/s", 1)
    status = parse_nvlink_status(text)[H200X2_UUIDS[0]]
    assert (status.active_links, status.inactive_links, status.gbps_per_link) == (17, 1, 26.562)


def test_fabric_health_rows_are_read_per_gpu_and_only_a_fault_is_kept():
    assert fabric_health_faults(smi("synth-gb200-nvidia-smi-q.xml")) == {}
    assert fabric_health_faults(smi("h200x2-nvidia-smi-q.xml")) == {}  # real rows, N/A on a single-node machine
    assert fabric_health_faults(smi("h100-device-nvidia-smi-q.xml")) == {}
    assert fabric_health_faults(smi("synth-gb200-unhealthy-nvidia-smi-q.xml")) == {
        3: ["fabric route unhealthy: traffic to some GPUs of the domain has no healthy route"]
    }


def test_each_fabric_health_row_that_shows_a_fault_is_named():
    xml = smi("synth-gb200-nvidia-smi-q.xml")
    parts = xml.split("<gpu id=")
    for old, new in (
        ("<bandwidth>Full</bandwidth>", "<bandwidth>Degraded</bandwidth>"),
        ("<route_recovery_in_progress>False<", "<route_recovery_in_progress>True<"),
        ("<access_timeout_recovery>False<", "<access_timeout_recovery>True<"),
        ("<incorrect_configuration>N/A<", "<incorrect_configuration>Insufficient NVLinks<"),
    ):
        assert old in parts[2]
        parts[2] = parts[2].replace(old, new, 1)
    assert fabric_health_faults("<gpu id=".join(parts)) == {
        1: [
            "fabric bandwidth Degraded (expected Full): NVLink bandwidth is lost",
            "fabric route recovery in progress: the fabric is not settled",
            "fabric access timeout recovery: the GPU recovered from an NVLink access timeout",
            "fabric configuration incorrect (Insufficient NVLinks): the GPU's fabric is misconfigured",
        ]
    }


def test_nvlink_summary_reads_the_layout_as_gpu_health_does_nvml_messages_included():
    text = (
        "GPU 0: NVIDIA GB200 (UUID: GPU-a)\n\t Link 0: 53.125 GB/s\n\t Link 1: N/A\n\t Link 2: <inactive>\n"
        "GPU 1: NVIDIA GB200 (UUID: GPU-b) NVML: Unable to retrieve Nvlink information as all links are inActive\n"
    )
    links = parse_nvlink_status(text)
    assert (links["GPU-a"].active_links, links["GPU-a"].inactive_links, links["GPU-a"].gbps_per_link) == (1, 2, 53.125)
    assert (links["GPU-b"].active_links, links["GPU-b"].total_gbps) == (0, 0.0)
