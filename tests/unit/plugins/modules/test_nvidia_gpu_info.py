# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""nvidia_gpu_info end to end: the module runs a stand-in nvidia-smi executable.

The stand-in is a shell script that prints real nvidia-smi outputs from tests/fixtures (or the
real error text and exit code of nvidia-smi without a driver or a GPU), the way the real tool does
from outside. /proc and /dev are fixture trees.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from ansible.module_utils.testing import patch_module_args
from ansible_collections.gpu_fabric.mnnvl.plugins.modules import nvidia_gpu_info

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"
SMI = FIXTURES / "nvidia-smi"
PROC = FIXTURES / "proc"
H200X2_XML = SMI / "h200x2-nvidia-smi-q.xml"
H200X2_NVLINK = SMI / "h200x2-nvidia-smi-nvlink-s.txt"

GB200_LABEL = "69a19a31-f41c-45a5-8245-579b6bce5bdd.32766"
# Exit codes and first lines of the real nvidia-smi.
NO_DRIVER = (
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest"
    " NVIDIA driver is installed and running.\n"
)
NO_DEVICES = "No devices were found\n"


def fake_smi(
    path: Path,
    xml: str | Path,
    nvlink: str | Path = "",
    xml_rc: int = 0,
    require_library_path: str | None = None,
) -> Path:
    """Write an executable nvidia-smi stand-in answering ``-q -x`` and ``nvlink -s``."""
    work = path.parent
    work.mkdir(parents=True, exist_ok=True)
    xml_file = xml if isinstance(xml, Path) else work / "q.xml"
    if not isinstance(xml, Path):
        xml_file.write_text(xml)
    nvlink_file = nvlink if isinstance(nvlink, Path) else work / "nvlink.txt"
    if not isinstance(nvlink, Path):
        nvlink_file.write_text(nvlink)
    guard = ""
    if require_library_path:
        guard = (
            f'case "$LD_LIBRARY_PATH" in *{shlex.quote(require_library_path)}*) ;; '
            '*) echo "error while loading shared libraries: libnvidia-ml.so.1" >&2; exit 127;; esac\n'
        )
    path.write_text(
        "#!/bin/sh\n"
        + guard
        + 'case "$1 $2" in\n'
        + f'  "-q -x") cat {shlex.quote(str(xml_file))}; exit {xml_rc};;\n'
        + f'  "nvlink -s") cat {shlex.quote(str(nvlink_file))}; exit 0;;\n'
        + "esac\n"
        + 'echo "unexpected arguments: $*" >&2; exit 2\n'
    )
    path.chmod(0o755)
    return path


def proc_tree(tmp_path: Path, prefix: str) -> Path:
    root = tmp_path / "proc"
    (root / "driver" / "nvidia").mkdir(parents=True)
    (root / "driver" / "nvidia" / "version").write_text((PROC / f"{prefix}-driver-nvidia-version.txt").read_text())
    (root / "driver" / "nvidia" / "params").write_text((PROC / f"{prefix}-driver-nvidia-params.txt").read_text())
    (root / "devices").write_text((PROC / f"{prefix}-proc-devices.txt").read_text())
    return root


def run_module(capsys, args: dict) -> tuple[bool, dict]:
    """Run the module's main() with ``args``; return (failed, result)."""
    with patch_module_args(args), pytest.raises(SystemExit) as exit_info:
        nvidia_gpu_info.main()
    result = json.loads(capsys.readouterr().out)
    failed = exit_info.value.code != 0
    assert failed is bool(result.get("failed", False))
    return failed, result


@pytest.fixture
def h200x2(tmp_path):
    smi = fake_smi(
        tmp_path / "bin" / "nvidia-smi", SMI / "h200x2-nvidia-smi-q.xml", SMI / "h200x2-nvidia-smi-nvlink-s.txt"
    )
    return {
        "nvidia_smi_path": str(smi),
        "proc_root": str(proc_tree(tmp_path, "h200x2")),
        "dev_root": str(tmp_path / "dev"),
    }


def gb200(tmp_path, xml_name: str) -> dict:
    smi = fake_smi(tmp_path / "bin" / "nvidia-smi", SMI / xml_name, SMI / "synth-gb200-nvidia-smi-nvlink-s.txt")
    return {
        "nvidia_smi_path": str(smi),
        "proc_root": str(proc_tree(tmp_path, "h200x2")),
        "dev_root": str(tmp_path / "dev"),
    }


def test_build_module_argument_spec():
    with patch_module_args({"min_driver_version": "570.158.01"}):
        module = nvidia_gpu_info.build_module()
    assert module.check_mode is False
    assert module.params == {
        "nvidia_smi_path": None,
        "driver_root": "/",
        "min_driver_version": "570.158.01",
        "require_fabric": False,
        "expected_gpus": 0,
        "min_active_nvlinks": 0,
        "require_open_kernel_module": False,
        "proc_root": "/proc",
        "dev_root": "/dev",
    }


def test_h200x2_facts(capsys, h200x2):
    failed, result = run_module(capsys, {**h200x2, "min_driver_version": "570.158.01"})
    assert failed is False
    assert result["changed"] is False
    facts = result["nvidia_gpu"]
    assert facts["driver_version"] == "580.159.04"
    assert facts["cuda_version"] == "13.0"
    assert facts["kernel_module"] == "open"
    assert facts["nvidia_smi_path"] == h200x2["nvidia_smi_path"]
    assert facts["gpu_count"] == 2
    assert [(g["index"], g["name"], g["pci_bus_id"], g["memory_total_mib"]) for g in facts["gpus"]] == [
        (0, "NVIDIA H200", "00000000:00:06.0", 143771),
        (1, "NVIDIA H200", "00000000:00:07.0", 143771),
    ]
    assert [g["nvlink"] for g in facts["gpus"]] == [
        {"active_links": 18, "inactive_links": 0, "gbps_per_link": 26.562, "total_gbps": 478.116}
    ] * 2
    assert {(g["fabric"]["state"], g["fabric"]["status"], g["fabric"]["clique_id"]) for g in facts["gpus"]} == {
        ("Completed", "Success", 0)
    }
    assert facts["clique_label"] is None
    assert facts["imex"] == {
        "channel_devices": [],
        "create_imex_channel0": False,
        "channel_count": 2048,
        "channel_major": 242,
    }


def test_check_mode_reports_the_same_facts(capsys, h200x2):
    _failed, normal = run_module(capsys, dict(h200x2))
    failed, checked = run_module(capsys, {**h200x2, "_ansible_check_mode": True})
    assert failed is False
    assert checked["nvidia_gpu"] == normal["nvidia_gpu"]
    assert checked["changed"] is False


def recorded_result(name: str) -> dict:
    """A result recorded on the real H200, with the fabric keys added since (its XML: health summary N/A)."""
    recorded = json.loads((SMI / name).read_text())
    for gpu in recorded["nvidia_gpu"]["gpus"]:
        gpu["fabric"].setdefault("health_summary", None)
        gpu["fabric"].setdefault("pending", False)
    return recorded


def test_real_device_result_is_reproduced(capsys, tmp_path):
    # Replaying the raw outputs captured on the real H200 gives the result the module returned there.
    recorded = recorded_result("h200-device-nvidia_gpu_info.json")
    smi = fake_smi(
        tmp_path / "bin" / "nvidia-smi",
        SMI / "h200-device-nvidia-smi-q.xml",
        SMI / "h200-device-nvidia-smi-nvlink-s.txt",
    )
    failed, result = run_module(
        capsys,
        {
            "nvidia_smi_path": str(smi),
            "proc_root": str(proc_tree(tmp_path, "h200-device")),
            "dev_root": str(tmp_path / "dev"),
            "min_driver_version": "570.158.01",
        },
    )
    assert failed is False
    recorded["nvidia_gpu"]["nvidia_smi_path"] = str(smi)
    assert result["nvidia_gpu"] == recorded["nvidia_gpu"]
    assert result["nvidia_gpu"]["gpus"][0]["nvlink"]["active_links"] == 0


def test_real_device_require_fabric_failure_is_reproduced(capsys, tmp_path):
    recorded = recorded_result("h200-device-nvidia_gpu_info-require-fabric.json")
    smi = fake_smi(tmp_path / "bin" / "nvidia-smi", SMI / "h200-device-nvidia-smi-q.xml")
    failed, result = run_module(
        capsys,
        {
            "nvidia_smi_path": str(smi),
            "proc_root": str(proc_tree(tmp_path, "h200-device")),
            "dev_root": str(tmp_path / "dev"),
            "min_driver_version": "570.158.01",
            "require_fabric": True,
        },
    )
    assert failed is True
    recorded["nvidia_gpu"]["nvidia_smi_path"] = str(smi)
    assert result["nvidia_gpu"] == recorded["nvidia_gpu"]
    # The recorded message names the same GPU; its wording was sharpened after the capture.
    assert recorded["msg"].startswith("GPU fabric is not ready for multi-node NVLink: GPU 0 (00000000:00:06.0): ")
    assert result["msg"].startswith(
        "GPU fabric is not ready for multi-node NVLink: GPU 0 (00000000:00:06.0): no fabric state (N/A):"
        " the GPU is not registered with an NVLink fabric"
    )


def test_below_the_floor_fails_with_the_actionable_message(capsys, tmp_path):
    failed, result = run_module(
        capsys, {**gb200(tmp_path, "synth-gb200-driver-535-nvidia-smi-q.xml"), "min_driver_version": "570.158.01"}
    )
    assert failed is True
    assert result["msg"] == (
        "driver 535.183.01 is below the floor 570.158.01 required by ComputeDomains;"
        " upgrade the driver or set nvidia_driver_min_version"
    )
    # The facts still come back, for the report.
    assert result["nvidia_gpu"]["driver_version"] == "535.183.01"


def test_floor_compares_numerically(capsys, h200x2):
    # 580.159.04 passes 580.95.05 although "159" < "95" as text.
    failed, _result = run_module(capsys, {**h200x2, "min_driver_version": "580.95.05"})
    assert failed is False
    failed, result = run_module(capsys, {**h200x2, "min_driver_version": "580.159.10"})
    assert failed is True
    assert result["msg"].startswith("driver 580.159.04 is below the floor 580.159.10")


def test_invalid_floor_is_refused(capsys, h200x2):
    failed, result = run_module(capsys, {**h200x2, "min_driver_version": "latest"})
    assert failed is True
    assert (
        result["msg"]
        == "min_driver_version: 'latest' is not a version: expected dot-separated numbers such as 570.158.01"
    )


def test_gb200_require_fabric_passes_with_the_clique_label(capsys, tmp_path):
    failed, result = run_module(
        capsys,
        {**gb200(tmp_path, "synth-gb200-nvidia-smi-q.xml"), "require_fabric": True, "min_driver_version": "570.158.01"},
    )
    assert failed is False
    facts = result["nvidia_gpu"]
    assert facts["clique_label"] == GB200_LABEL
    assert [g["fabric"]["attached"] for g in facts["gpus"]] == [True] * 4
    assert {g["nvlink"]["total_gbps"] for g in facts["gpus"]} == {900.0}


def test_fabric_in_progress_fails_require_fabric_naming_the_gpu(capsys, tmp_path):
    args = gb200(tmp_path, "synth-gb200-fabric-in-progress-nvidia-smi-q.xml")
    failed, _result = run_module(capsys, dict(args))
    assert failed is False
    failed, result = run_module(capsys, {**args, "require_fabric": True})
    assert failed is True
    assert result["msg"].startswith(
        "GPU fabric registration is still under way: GPU 2 (00000018:01:00.0): fabric state In Progress,"
        " status N/A (expected Completed/Success)."
    )
    for other in ("GPU 0", "GPU 1", "GPU 3"):
        assert other not in result["msg"]


def test_fabric_in_progress_is_reported_as_pending_for_a_retry(capsys, tmp_path):
    args = gb200(tmp_path, "synth-gb200-fabric-in-progress-nvidia-smi-q.xml")
    failed, result = run_module(capsys, {**args, "require_fabric": True})
    assert failed is True
    assert result["fabric_pending"] is True
    assert result["msg"].startswith(
        "GPU fabric registration is still under way: GPU 2 (00000018:01:00.0): fabric state In Progress"
    )
    assert result["nvidia_gpu"]["gpus"][2]["fabric"]["pending"] is True


@pytest.mark.parametrize(
    "xml, named",
    [
        (
            "synth-gb200-fabric-failure-nvidia-smi-q.xml",
            "GPU 1 (00000009:01:00.0): fabric state Completed, status Failure",
        ),
        ("synth-gb200-unhealthy-nvidia-smi-q.xml", "GPU 3 (00000019:01:00.0): fabric Completed/Success but health"),
        ("synth-gb200-gpu-out-of-fabric-nvidia-smi-q.xml", "GPU 1 (00000009:01:00.0): no fabric state (N/A)"),
    ],
)
def test_fabric_failures_are_not_pending(capsys, tmp_path, xml, named):
    failed, result = run_module(capsys, {**gb200(tmp_path, xml), "require_fabric": True})
    assert failed is True
    assert result["fabric_pending"] is False
    assert result["msg"].startswith("GPU fabric is not ready for multi-node NVLink: " + named)


def test_tray_with_fewer_links_fails_naming_the_gpu(capsys, tmp_path):
    smi = fake_smi(
        tmp_path / "bin" / "nvidia-smi",
        SMI / "synth-gb200-nvidia-smi-q.xml",
        SMI / "synth-gb200-degraded-nvidia-smi-nvlink-s.txt",
    )
    args = {"nvidia_smi_path": str(smi), "proc_root": str(proc_tree(tmp_path, "h200x2")), "dev_root": str(tmp_path)}
    tray = {"expected_gpus": 4, "min_active_nvlinks": 18, "require_open_kernel_module": True, "require_fabric": True}
    failed, result = run_module(capsys, {**args, **tray})
    assert failed is True
    assert result["fabric_pending"] is False
    assert result["msg"] == (
        "The GPUs are not those of a complete tray: GPU 3 (00000019:01:00.0): 16 active NVLinks (2 inactive),"
        " expected 18. Fix the tray, or change expected_gpus, min_active_nvlinks or require_open_kernel_module."
    )
    failed, result = run_module(capsys, {**args, **tray, "min_active_nvlinks": 16})
    assert failed is False


def test_two_cliques_no_label_and_require_fabric_fails(capsys, tmp_path):
    args = gb200(tmp_path, "synth-gb200-two-cliques-nvidia-smi-q.xml")
    failed, result = run_module(capsys, dict(args))
    assert failed is False
    assert result["nvidia_gpu"]["clique_label"] is None
    assert [g["fabric"]["clique_id"] for g in result["nvidia_gpu"]["gpus"]] == [32766, 32766, 32767, 32767]
    failed, result = run_module(capsys, {**args, "require_fabric": True})
    assert failed is True
    assert "GPUs are in 2 cliques, expected one: 69a19a31-f41c-45a5-8245-579b6bce5bdd.32766: GPU 0" in result["msg"]


def test_single_node_nvswitch_fails_require_fabric(capsys, h200x2):
    failed, result = run_module(capsys, {**h200x2, "require_fabric": True})
    assert failed is True
    assert result["msg"].count("is not in a multi-node NVLink domain") == 2


def test_no_nvidia_smi_under_driver_root(capsys, tmp_path):
    failed, result = run_module(capsys, {"driver_root": str(tmp_path / "run" / "nvidia" / "driver")})
    assert failed is True
    assert result["msg"].startswith(f"nvidia-smi was not found at {tmp_path}/run/nvidia/driver/usr/bin/nvidia-smi")
    assert "nvidia_gpu" not in result


@pytest.mark.skipif(Path("/usr/bin/nvidia-smi").exists(), reason="this machine has a real nvidia-smi")
def test_no_nvidia_smi_on_the_host(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    failed, result = run_module(capsys, {})
    assert failed is True
    assert result["msg"].startswith("nvidia-smi was not found in /usr/bin or on PATH: no NVIDIA driver is installed")


def test_nvidia_smi_from_path(capsys, tmp_path, monkeypatch):
    if Path("/usr/bin/nvidia-smi").exists():
        pytest.skip("this machine has a real nvidia-smi in /usr/bin, which comes first")
    smi = fake_smi(
        tmp_path / "bin" / "nvidia-smi", SMI / "h200x2-nvidia-smi-q.xml", SMI / "h200x2-nvidia-smi-nvlink-s.txt"
    )
    monkeypatch.setenv("PATH", f"{smi.parent}:/usr/bin:/bin")
    failed, result = run_module(capsys, {"proc_root": str(proc_tree(tmp_path, "h200x2"))})
    assert failed is False
    assert result["nvidia_gpu"]["nvidia_smi_path"] == str(smi)


def test_driver_root_runs_its_nvidia_smi_with_its_libraries(capsys, tmp_path):
    root = tmp_path / "run" / "nvidia" / "driver"
    (root / "usr" / "lib64").mkdir(parents=True)
    smi = fake_smi(
        root / "usr" / "bin" / "nvidia-smi",
        SMI / "h200x2-nvidia-smi-q.xml",
        SMI / "h200x2-nvidia-smi-nvlink-s.txt",
        require_library_path=f"{root}/usr/lib64",
    )
    failed, result = run_module(capsys, {"driver_root": str(root), "proc_root": str(proc_tree(tmp_path, "h200x2"))})
    assert failed is False, result.get("msg")
    assert result["nvidia_gpu"]["nvidia_smi_path"] == str(smi)
    assert result["nvidia_gpu"]["gpu_count"] == 2


def copy_with_libraries(program: str, root: Path) -> None:
    """Copy a host executable and the shared libraries ldd names for it into ``root``, at the same paths."""
    output = subprocess.run(["ldd", program], capture_output=True, text=True, check=True).stdout
    paths = [program, *re.findall(r"(/\S+) \(0x", output)]
    for path in paths:
        target = root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(os.path.realpath(path), target)


def chrootable_driver_root(tmp_path: Path) -> Path:
    """A driver container root filesystem: sh and cat with their libraries, and an nvidia-smi stand-in that
    answers only when it runs with that root as / and without LD_LIBRARY_PATH."""
    root = tmp_path / "run" / "nvidia" / "driver"
    for program in ("/bin/sh", shutil.which("cat")):
        copy_with_libraries(program, root)
    if not (root / "bin" / "cat").exists():
        (root / "bin").mkdir(exist_ok=True)
        shutil.copy2(root / shutil.which("cat").lstrip("/"), root / "bin" / "cat")
    (root / "usr" / "share" / "nvidia").mkdir(parents=True)
    shutil.copy2(SMI / "h200x2-nvidia-smi-q.xml", root / "usr" / "share" / "nvidia" / "q.xml")
    shutil.copy2(SMI / "h200x2-nvidia-smi-nvlink-s.txt", root / "usr" / "share" / "nvidia" / "nvlink.txt")
    (root / "driver-container-root").write_text("")
    smi = root / "usr" / "bin" / "nvidia-smi"
    smi.parent.mkdir(parents=True, exist_ok=True)
    smi.write_text(
        "#!/bin/sh\n"
        '[ -e /driver-container-root ] || { echo "not run in the driver root" >&2; exit 126; }\n'
        '[ -z "$LD_LIBRARY_PATH" ] || { echo "LD_LIBRARY_PATH is set: $LD_LIBRARY_PATH" >&2; exit 125; }\n'
        'case "$1 $2" in\n'
        '  "-q -x") exec /bin/cat /usr/share/nvidia/q.xml;;\n'
        '  "nvlink -s") exec /bin/cat /usr/share/nvidia/nvlink.txt;;\n'
        "esac\n"
        'echo "unexpected arguments: $*" >&2; exit 2\n'
    )
    smi.chmod(0o755)
    return root


@pytest.mark.skipif(os.geteuid() != 0, reason="chroot needs root; the module falls back to LD_LIBRARY_PATH")
@pytest.mark.skipif(shutil.which("chroot") is None or shutil.which("ldd") is None, reason="no chroot or ldd here")
def test_driver_container_root_runs_its_nvidia_smi_in_a_chroot(capsys, tmp_path):
    root = chrootable_driver_root(tmp_path)
    # The stand-in refuses to run from the host: it is the chroot that makes it answer.
    outside = subprocess.run(
        [str(root / "usr" / "bin" / "nvidia-smi"), "-q", "-x"], capture_output=True, text=True, check=False
    )
    assert (outside.returncode, outside.stderr) == (126, "not run in the driver root\n")
    failed, result = run_module(capsys, {"driver_root": str(root), "proc_root": str(proc_tree(tmp_path, "h200x2"))})
    assert failed is False, result.get("msg")
    assert result["nvidia_gpu"]["nvidia_smi_path"] == str(root / "usr" / "bin" / "nvidia-smi")
    assert result["nvidia_gpu"]["gpu_count"] == 2
    assert result["nvidia_gpu"]["gpus"][0]["nvlink"]["active_links"] == 18


def test_driver_root_with_driver_files_only_keeps_the_library_path(capsys, tmp_path):
    # No bin/sh, no usr/lib: not a root filesystem, so no chroot even as root.
    root = tmp_path / "run" / "nvidia" / "driver"
    (root / "usr" / "lib64").mkdir(parents=True)
    fake_smi(
        root / "usr" / "bin" / "nvidia-smi",
        SMI / "h200x2-nvidia-smi-q.xml",
        SMI / "h200x2-nvidia-smi-nvlink-s.txt",
        require_library_path=f"{root}/usr/lib64",
    )
    failed, result = run_module(capsys, {"driver_root": str(root), "proc_root": str(proc_tree(tmp_path, "h200x2"))})
    assert failed is False, result.get("msg")
    assert result["nvidia_gpu"]["gpu_count"] == 2


def test_no_devices_found(capsys, tmp_path):
    smi = fake_smi(tmp_path / "bin" / "nvidia-smi", NO_DEVICES, xml_rc=6)
    failed, result = run_module(capsys, {"nvidia_smi_path": str(smi), "proc_root": str(tmp_path)})
    assert failed is True
    assert result["msg"].startswith(f"{smi} found no NVIDIA GPU ('No devices were found', rc 6)")
    assert "Traceback" not in json.dumps(result)


def test_driver_not_loaded(capsys, tmp_path):
    smi = fake_smi(tmp_path / "bin" / "nvidia-smi", NO_DRIVER, xml_rc=9)
    failed, result = run_module(capsys, {"nvidia_smi_path": str(smi), "proc_root": str(tmp_path)})
    assert failed is True
    assert result["msg"].startswith(f"{smi} could not communicate with the NVIDIA driver (rc 9)")
    assert "modprobe nvidia" in result["msg"]


def test_missing_proc_files_are_warnings_not_failures(capsys, tmp_path):
    smi = fake_smi(
        tmp_path / "bin" / "nvidia-smi", SMI / "h200x2-nvidia-smi-q.xml", SMI / "h200x2-nvidia-smi-nvlink-s.txt"
    )
    failed, result = run_module(capsys, {"nvidia_smi_path": str(smi), "proc_root": str(tmp_path / "noproc")})
    assert failed is False
    assert result["nvidia_gpu"]["kernel_module"] is None
    assert result["nvidia_gpu"]["imex"]["channel_count"] is None
    assert any("driver/nvidia/version is missing" in str(w) for w in result["warnings"])
