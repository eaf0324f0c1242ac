# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""kernel_log: the driver's Xid and SXid lines on real kernel logs (tests/fixtures/nvidia-smi/h100-device-dmesg-*)
and in each form the driver prints (the MIG forms written from the driver's format strings)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.kernel_log import (
    SxidEvent,
    XidEvent,
    parse_kernel_log,
    pci_key,
)

SMI = Path(__file__).resolve().parents[4] / "tests" / "fixtures" / "nvidia-smi"


def test_real_xid_lines_are_read_with_their_gpu_and_seconds_since_boot():
    log = parse_kernel_log((SMI / "h100-device-dmesg-nvrm-xid.txt").read_text())
    assert [x.code for x in log.xids] == [31, 43, 13, 13, 13] and log.sxids == []
    first = log.xids[0]
    assert (first.pci, first.seconds, first.gpu_instance, first.compute_instance) == ((0, 0, 6), 25.000706, None, None)
    assert first.text.startswith("pid=688, name=python3, channel 0x0000000a")
    assert parse_kernel_log((SMI / "h100-device-dmesg-nvrm-boot.txt").read_text()).xids == []


def test_dmesg_t_lines_are_read_without_seconds_since_boot():
    log = parse_kernel_log((SMI / "h100-device-dmesg-T-nvrm-xid.txt").read_text())
    assert [x.code for x in log.xids] == [31, 43, 13, 13, 13]
    assert {x.seconds for x in log.xids} == {None} and log.xids[0].pci == (0, 0, 6)


@pytest.mark.parametrize(
    "line, expected",
    [
        (
            "[ 1.5] NVRM: Xid (PCI:0000:01:00 GPU-I:05): 94, pid=7194, Contained: CE User Channel (0x9). RST: No",
            XidEvent(94, (0, 1, 0), "pid=7194, Contained: CE User Channel (0x9). RST: No", 1.5, 5, None),
        ),
        (
            "NVRM: Xid (PCI:0000:3b:00 GPU-I:01 GPU-CI:02): 13, pid=9, name=a, Graphics Exception",
            XidEvent(13, (0, 0x3B, 0), "pid=9, name=a, Graphics Exception", None, 1, 2),
        ),
        (
            "[88.0] NVRM: Xid (PCI:0009:01:00 GPU-I:3 GPU-C:1): 79, pid=12, name=x, GPU has fallen off the bus.",
            XidEvent(79, (9, 1, 0), "pid=12, name=x, GPU has fallen off the bus.", 88.0, 3, 1),
        ),
        ("NVRM: Xid (0000:03:00): 14, Channel 00000001", XidEvent(14, (0, 3, 0), "Channel 00000001")),
    ],
)
def test_every_xid_form_the_driver_prints_mig_included(line, expected):
    assert parse_kernel_log(line).xids == [expected]


def test_a_mig_event_names_its_instances():
    (event,) = parse_kernel_log("NVRM: Xid (PCI:0009:01:00 GPU-I:05 GPU-CI:02): 94, pid=1, x").xids
    assert (event.where, event.instances) == ("0009:01:00 GPU-I 5 GPU-CI 2", " GPU-I 5 GPU-CI 2")
    (plain,) = parse_kernel_log("NVRM: Xid (PCI:10009:01:00): 79, pid=1, x").xids
    assert (plain.where, plain.instances) == ("10009:01:00", "")


def test_an_sxid_with_a_severity_is_an_event_and_its_data_line_is_not():
    text = (
        "[131453.740743] nvidia-nvswitch0: SXid (PCI:0000:00:00.0): 20034, Fatal, Link 30 LTSSM Fault Up\n"
        "[131453.740750] nvidia-nvswitch0: SXid (PCI:0000:00:00.0): 20034, Data {0x0000001e, 0x00000000}\n"
        "[131460.1] nvidia-nvswitch3: SXid (PCI:0000:c6:00.0): 12028, Non-fatal, Link 32 egress non-posted PRIV error"
    )
    assert parse_kernel_log(text).sxids == [
        SxidEvent("nvidia-nvswitch0", "0000:00:00.0", 20034, True, "Link 30 LTSSM Fault Up", 131453.740743),
        SxidEvent("nvidia-nvswitch3", "0000:c6:00.0", 12028, False, "Link 32 egress non-posted PRIV error", 131460.1),
    ]


def test_a_pci_address_of_nvidia_smi_and_of_an_xid_line_are_one_key():
    assert pci_key("00000009:01:00.0") == pci_key("0009:01:00") == (9, 1, 0)
    with pytest.raises(ValueError, match=r"^'01:00' is not a PCI address"):
        pci_key("01:00")


def test_the_parser_loads_no_kubernetes_client_and_no_check():
    from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import kernel_log

    root = Path(kernel_log.__file__).parents[5]  # the directory that holds ansible_collections
    code = (
        "import sys; import ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.kernel_log; "
        "print(sorted(m for m in sys.modules if m.startswith(('kubernetes', 'ansible_collections')) "
        "and ('kube' in m or '.checks' in m or m.startswith('kubernetes'))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env={"PYTHONPATH": str(root)}, capture_output=True, text=True, check=False
    )
    assert (out.returncode, out.stdout.strip()) == (0, "[]"), out.stderr
