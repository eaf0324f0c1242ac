# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""gpu_facts: finding and running nvidia-smi, reading /proc and /dev, the tray and driver checks, the module's run."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.gpu_facts import (
    GpuFactsError,
    collect_gpu_facts,
    driver_floor_message,
    find_nvidia_smi,
    gpu_info,
    is_root_filesystem,
    library_path_for,
    list_imex_channels,
    read_imex_info,
    smi_failure_message,
    smi_launch,
    tray_problems,
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


# --------------------------------------------------------------------------- /proc and /dev


def test_list_imex_channels_counts_character_devices_only(tmp_path):
    channels = tmp_path / "nvidia-caps-imex-channels"
    channels.mkdir()
    # /dev/null stands in for a channel node: a character device that an unprivileged test can link to.
    os.symlink("/dev/null", channels / "channel10")
    os.symlink("/dev/null", channels / "channel2")
    (channels / "channel3").write_text("a regular file is not a channel\n")
    os.symlink("/dev/null", channels / "not-a-channel")
    assert list_imex_channels(str(channels)) == [str(channels / "channel2"), str(channels / "channel10")]
    assert list_imex_channels(str(tmp_path / "missing")) == []


def proc_tree(tmp_path: Path, prefix: str = "h200x2") -> Path:
    root = tmp_path / "proc"
    (root / "driver" / "nvidia").mkdir(parents=True)
    (root / "driver" / "nvidia" / "version").write_text(proc(f"{prefix}-driver-nvidia-version.txt"))
    (root / "driver" / "nvidia" / "params").write_text(proc(f"{prefix}-driver-nvidia-params.txt"))
    (root / "devices").write_text(proc(f"{prefix}-proc-devices.txt"))
    return root


def test_read_imex_info(tmp_path):
    root = proc_tree(tmp_path)
    dev = tmp_path / "dev"
    (dev / "nvidia-caps-imex-channels").mkdir(parents=True)
    os.symlink("/dev/null", dev / "nvidia-caps-imex-channels" / "channel0")
    info = read_imex_info(str(root), str(dev))
    assert info.create_imex_channel0 is False
    assert info.channel_count == 2048
    assert info.channel_major == 242
    assert info.channel_devices == [str(dev / "nvidia-caps-imex-channels" / "channel0")]


def test_read_imex_info_without_driver(tmp_path):
    info = read_imex_info(str(tmp_path / "proc"), str(tmp_path / "dev"))
    assert (info.create_imex_channel0, info.channel_count, info.channel_major, info.channel_devices) == (
        None,
        None,
        None,
        [],
    )


# --------------------------------------------------------------------------- checks


def gb200_facts(tmp_path, nvlink: str = "synth-gb200-nvidia-smi-nvlink-s.txt", version_file: str | None = None):
    root = proc_tree(tmp_path)
    if version_file is not None:
        (root / "driver" / "nvidia" / "version").write_text(version_file)
    run = FakeSmi(smi("synth-gb200-nvidia-smi-q.xml"), smi(nvlink))
    return collect_gpu_facts(run, "/run/nvidia/driver/usr/bin/nvidia-smi", str(root), str(tmp_path / "dev"))


def test_tray_problems_none_on_a_complete_gb200_tray(tmp_path):
    facts = gb200_facts(tmp_path)
    assert tray_problems(facts, expected_gpus=4, min_active_nvlinks=18, require_open_kernel_module=True) == []


def test_tray_problems_names_the_gpu_with_fewer_links(tmp_path):
    facts = gb200_facts(tmp_path, nvlink="synth-gb200-degraded-nvidia-smi-nvlink-s.txt")
    assert tray_problems(facts, min_active_nvlinks=18) == [
        "GPU 3 (00000019:01:00.0): 16 active NVLinks (2 inactive), expected 18"
    ]
    assert tray_problems(facts, min_active_nvlinks=16) == []


def test_tray_problems_gpu_count_and_unknown_links(tmp_path):
    facts = gb200_facts(tmp_path)
    facts.gpus = facts.gpus[:3]
    facts.gpus[0].nvlink = None
    assert tray_problems(facts, expected_gpus=4, min_active_nvlinks=18) == [
        "3 GPUs (00000008:01:00.0, 00000009:01:00.0, 00000018:01:00.0), expected 4: a GPU fell off the bus or is"
        " not bound to the driver (look at dmesg and 'nvidia-smi -q')",
        "GPU 0 (00000008:01:00.0): NVLink state unknown ('nvidia-smi nvlink -s' failed), expected 18 active links",
    ]


def test_tray_problems_refuses_the_proprietary_module(tmp_path):
    text = "NVRM version: NVIDIA UNIX aarch64 Kernel Module  580.95.05  Tue Sep 23 10:00:00 UTC 2025\n"
    facts = gb200_facts(tmp_path, version_file=text)
    assert facts.kernel_module == "proprietary"
    problems = tray_problems(facts, require_open_kernel_module=True)
    assert problems == [
        "the proprietary kernel module is loaded, expected the open kernel module: Blackwell GPUs run only with it"
        " (the -open driver packages, or the GPU Operator's driver.kernelModuleType=open)"
    ]
    assert tray_problems(facts) == []


def test_driver_floor_message():
    assert driver_floor_message("535.183.01", "570.158.01") == (
        "driver 535.183.01 is below the floor 570.158.01 required by ComputeDomains;"
        " upgrade the driver or set nvidia_driver_min_version"
    )
    assert driver_floor_message("570.158.01", "570.86.15") is None
    assert driver_floor_message("570.86.15", "570.158.01").startswith("driver 570.86.15 is below")


# --------------------------------------------------------------------------- locating and running nvidia-smi


def executable(path: Path, text: str = "#!/bin/sh\nexit 0\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


def test_find_nvidia_smi_order(tmp_path):
    explicit = executable(tmp_path / "bin" / "nvidia-smi")
    root_smi = executable(tmp_path / "root" / "usr" / "bin" / "nvidia-smi")
    assert find_nvidia_smi(str(explicit), "/", lambda _: None) == str(explicit)
    assert find_nvidia_smi(None, str(tmp_path / "root"), lambda _: "/elsewhere") == str(root_smi)


def test_find_nvidia_smi_path_lookup_only_for_host_root(tmp_path):
    # With driver_root=/ the PATH is searched when /usr/bin has none (unless this machine has one).
    if not Path("/usr/bin/nvidia-smi").exists():
        assert find_nvidia_smi(None, "/", lambda name: f"/opt/bin/{name}") == "/opt/bin/nvidia-smi"
        with pytest.raises(GpuFactsError, match="nvidia-smi was not found in /usr/bin or on PATH"):
            find_nvidia_smi(None, "/", lambda _: None)
    # A driver container root is searched alone.
    with pytest.raises(GpuFactsError, match=r"not found at .*/run/nvidia/driver/usr/bin/nvidia-smi"):
        find_nvidia_smi(None, str(tmp_path / "run" / "nvidia" / "driver"), lambda _: "/usr/bin/nvidia-smi")


def test_find_nvidia_smi_refuses_a_wrong_explicit_path(tmp_path):
    (tmp_path / "nvidia-smi").write_text("not executable")
    with pytest.raises(GpuFactsError, match="is not an executable file"):
        find_nvidia_smi(str(tmp_path / "nvidia-smi"), "/", lambda _: "/usr/bin/nvidia-smi")


def test_library_path_for_driver_root(tmp_path):
    assert library_path_for("/") is None
    (tmp_path / "usr" / "lib64").mkdir(parents=True)
    (tmp_path / "usr" / "lib" / "x86_64-linux-gnu").mkdir(parents=True)
    assert (
        library_path_for(str(tmp_path))
        == f"{tmp_path}/usr/lib64:{tmp_path}/usr/lib/x86_64-linux-gnu:{tmp_path}/usr/lib"
    )


def driver_container_root(tmp_path: Path) -> Path:
    """The GPU Operator's driver container root as the host sees it: a whole root filesystem."""
    root = tmp_path / "run" / "nvidia" / "driver"
    for sub in ("bin", "usr/bin", "usr/lib/x86_64-linux-gnu", "usr/lib64"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    (root / "bin" / "sh").symlink_to("dash")
    executable(root / "usr" / "bin" / "nvidia-smi")
    return root


def test_is_root_filesystem(tmp_path):
    assert is_root_filesystem(str(driver_container_root(tmp_path))) is True
    files_only = tmp_path / "driver-files"
    (files_only / "usr" / "lib64").mkdir(parents=True)
    executable(files_only / "usr" / "bin" / "nvidia-smi")
    assert is_root_filesystem(str(files_only)) is False
    usr_lib = tmp_path / "usr-lib-only"
    (usr_lib / "usr" / "lib").mkdir(parents=True)
    assert is_root_filesystem(str(usr_lib)) is True
    assert is_root_filesystem(str(tmp_path / "missing")) is False


def test_smi_launch_chroots_into_a_driver_container_root_as_root(tmp_path):
    root = driver_container_root(tmp_path)
    smi = find_nvidia_smi(None, str(root), lambda _: None)
    launch = smi_launch(smi, str(root) + "/", is_root=True, chroot="/usr/sbin/chroot")
    assert launch.method == "chroot"
    assert launch.environ == {}
    assert launch.command([smi, "-q", "-x"]) == ["/usr/sbin/chroot", str(root), "/usr/bin/nvidia-smi", "-q", "-x"]
    # an explicit nvidia_smi_path inside the root is run by its path in the root
    other = executable(root / "opt" / "nvidia" / "nvidia-smi")
    assert smi_launch(str(other), str(root), True, "/usr/sbin/chroot").command([str(other), "nvlink", "-s"]) == [
        "/usr/sbin/chroot",
        str(root),
        "/opt/nvidia/nvidia-smi",
        "nvlink",
        "-s",
    ]


def test_smi_launch_falls_back_to_the_library_path(tmp_path):
    root = driver_container_root(tmp_path)
    smi = str(root / "usr" / "bin" / "nvidia-smi")
    libraries = f"{root}/usr/lib64:{root}/usr/lib/x86_64-linux-gnu:{root}/usr/lib"
    for launch in (
        smi_launch(smi, str(root), is_root=False, chroot="/usr/sbin/chroot"),  # chroot needs root
        smi_launch(smi, str(root), is_root=True, chroot=None),  # no chroot executable
        smi_launch(str(executable(tmp_path / "bin" / "nvidia-smi")), str(root), True, "/usr/sbin/chroot"),
    ):
        assert launch.method == "library_path"
        assert launch.environ == {"LD_LIBRARY_PATH": libraries}
        assert launch.command(["/x/nvidia-smi", "-q", "-x"]) == ["/x/nvidia-smi", "-q", "-x"]
    # a root that holds the driver's files only
    files_only = tmp_path / "driver-files"
    (files_only / "usr" / "lib64").mkdir(parents=True)
    smi = str(executable(files_only / "usr" / "bin" / "nvidia-smi"))
    launch = smi_launch(smi, str(files_only), True, "/usr/sbin/chroot")
    assert (launch.method, launch.environ) == ("library_path", {"LD_LIBRARY_PATH": f"{files_only}/usr/lib64"})
    # a sibling directory whose name starts like the root is not inside it
    sibling = executable(Path(f"{root}-old") / "usr" / "bin" / "nvidia-smi")
    assert smi_launch(str(sibling), str(root), True, "/usr/sbin/chroot").method == "library_path"


def test_smi_launch_host_driver_runs_as_it_is(tmp_path):
    launch = smi_launch("/usr/bin/nvidia-smi", "/", is_root=True, chroot="/usr/sbin/chroot")
    assert (launch.method, launch.environ) == ("host", {})
    assert launch.command(["/usr/bin/nvidia-smi", "-q", "-x"]) == ["/usr/bin/nvidia-smi", "-q", "-x"]


@pytest.mark.parametrize(
    ("rc", "stdout", "expected"),
    [
        (
            9,
            "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest"
            " NVIDIA driver is installed and running.\n",
            "/usr/bin/nvidia-smi could not communicate with the NVIDIA driver (rc 9): the kernel module is not loaded",
        ),
        (6, "No devices were found\n", "/usr/bin/nvidia-smi found no NVIDIA GPU ('No devices were found', rc 6)"),
        (
            18,
            "Failed to initialize NVML: Driver/library version mismatch\nNVML library version: 580.159\n",
            "/usr/bin/nvidia-smi reports a driver/library version mismatch (rc 18)",
        ),
        (4, "Insufficient Permissions\n", "/usr/bin/nvidia-smi -q -x failed (rc 4): Insufficient Permissions"),
    ],
)
def test_smi_failure_message(rc, stdout, expected):
    assert smi_failure_message("/usr/bin/nvidia-smi", rc, stdout, "").startswith(expected)


class FakeSmi:
    """Answers like nvidia-smi from fixture files; records what it was asked."""

    def __init__(self, xml: str, nvlink: str | None = None, xml_rc: int = 0, nvlink_rc: int = 0):
        self.xml, self.nvlink, self.xml_rc, self.nvlink_rc = xml, nvlink, xml_rc, nvlink_rc
        self.calls: list[list[str]] = []

    def __call__(self, args):
        self.calls.append(args)
        if args[1:] == ["-q", "-x"]:
            return self.xml_rc, self.xml, ""
        if args[1:] == ["nvlink", "-s"]:
            return self.nvlink_rc, self.nvlink or "", ""
        return 2, "", "unknown arguments"


def test_collect_gpu_facts_h200x2(tmp_path):
    run = FakeSmi(smi("h200x2-nvidia-smi-q.xml"), smi("h200x2-nvidia-smi-nvlink-s.txt"))
    facts = collect_gpu_facts(run, "/usr/bin/nvidia-smi", str(proc_tree(tmp_path)), str(tmp_path / "dev"))
    assert run.calls == [["/usr/bin/nvidia-smi", "-q", "-x"], ["/usr/bin/nvidia-smi", "nvlink", "-s"]]
    assert facts.warnings == []
    data = facts.as_dict()
    assert data["driver_version"] == "580.159.04"
    assert data["kernel_module"] == "open"
    assert data["gpu_count"] == 2
    assert data["clique_label"] is None
    assert data["gpus"][1] == {
        "index": 1,
        "name": "NVIDIA H200",
        "uuid": H200X2_UUIDS[1],
        "pci_bus_id": "00000000:00:07.0",
        "memory_total_mib": 143771,
        "fabric": {
            "state": "Completed",
            "status": "Success",
            "clique_id": 0,
            "cluster_uuid": "00000000-0000-0000-0000-000000000000",
            "health_summary": None,
            "attached": False,
            "pending": False,
        },
        "nvlink": {"active_links": 18, "inactive_links": 0, "gbps_per_link": 26.562, "total_gbps": 478.116},
    }
    assert data["imex"] == {
        "channel_devices": [],
        "create_imex_channel0": False,
        "channel_count": 2048,
        "channel_major": 242,
    }


def test_collect_gpu_facts_warns_when_nvlink_and_proc_are_missing(tmp_path):
    run = FakeSmi(smi("synth-gb200-nvidia-smi-q.xml"), "NVLink is not supported\n", nvlink_rc=3)
    facts = collect_gpu_facts(run, "smi", str(tmp_path / "proc"), str(tmp_path / "dev"))
    assert facts.clique_label == GB200_LABEL
    assert facts.kernel_module is None
    assert [gpu.nvlink for gpu in facts.gpus] == [None] * 4
    assert facts.warnings == [
        "smi nvlink -s failed (rc 3): NVLink is not supported; NVLink state is not reported",
        f"{tmp_path}/proc/driver/nvidia/version is missing: the kernel module flavour is not reported",
    ]


@pytest.mark.parametrize(
    ("xml", "rc", "expected"),
    [
        ("No devices were found\n", 6, "found no NVIDIA GPU"),
        ("<nvidia_smi_log><driver_version>580.159.04</driver_version></nvidia_smi_log>", 0, "found no NVIDIA GPU"),
        ("garbage", 0, "printed no usable XML"),
        ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.", 9, "could not communicate"),
    ],
)
def test_collect_gpu_facts_failures(tmp_path, xml, rc, expected):
    with pytest.raises(GpuFactsError, match=expected):
        collect_gpu_facts(FakeSmi(xml, xml_rc=rc), "smi", str(tmp_path), str(tmp_path))


# --------------------------------------------------------------------------- the module's run


def options(**given) -> dict:
    """The module's options with their defaults (nvidia_gpu_info's argument_spec), updated with ``given``."""
    defaults = {
        "nvidia_smi_path": None,
        "driver_root": "/",
        "min_driver_version": None,
        "require_fabric": False,
        "expected_gpus": 0,
        "min_active_nvlinks": 0,
        "require_open_kernel_module": False,
        "proc_root": "/proc",
        "dev_root": "/dev",
    }
    return {**defaults, **given}


class RecordingRunner:
    """``run_command(args, environ)`` answering from a FakeSmi, keeping each command and environment asked for.

    nvidia-smi's arguments are the last two of the command, whether it runs as it is or in a chroot.
    """

    def __init__(self, answer: FakeSmi):
        self.answer = answer
        self.calls: list[tuple[list[str], dict]] = []

    def __call__(self, args, environ):
        self.calls.append((list(args), dict(environ)))
        return self.answer([args[0], *args[-2:]])


def host(tmp_path: Path, xml: str = "h200x2-nvidia-smi-q.xml", nvlink: str = "h200x2-nvidia-smi-nvlink-s.txt"):
    """Options for a host whose nvidia-smi prints the fixtures, and the runner that stands in for it."""
    path = str(executable(tmp_path / "bin" / "nvidia-smi"))
    given = {"nvidia_smi_path": path, "proc_root": str(proc_tree(tmp_path)), "dev_root": str(tmp_path / "dev")}
    return given, RecordingRunner(FakeSmi(smi(xml), smi(nvlink)))


GB200_NVLINK = "synth-gb200-nvidia-smi-nvlink-s.txt"


def no_executables(name: str) -> None:
    return None


def test_gpu_info_h200x2_passes_with_the_facts(tmp_path):
    given, run = host(tmp_path)
    info = gpu_info(options(**given, min_driver_version="570.158.01"), run, no_executables, is_root=False)
    assert info.failure is None
    assert info.warnings == []
    assert sorted(info.result) == ["changed", "fabric_pending", "nvidia_gpu"]
    assert (info.result["changed"], info.result["fabric_pending"]) == (False, False)
    assert info.result["nvidia_gpu"]["driver_version"] == "580.159.04"
    assert [gpu["uuid"] for gpu in info.result["nvidia_gpu"]["gpus"]] == H200X2_UUIDS
    smi_path = given["nvidia_smi_path"]
    # A driver on the host runs as it is, with nothing added to its environment.
    assert run.calls == [([smi_path, "-q", "-x"], {}), ([smi_path, "nvlink", "-s"], {})]


def test_gpu_info_refuses_an_unreadable_floor_before_running_anything(tmp_path):
    given, run = host(tmp_path)
    info = gpu_info(options(**given, min_driver_version="latest"), run, no_executables, is_root=False)
    assert info.failure.startswith("min_driver_version: ")
    assert info.result == {}
    assert run.calls == []


def test_gpu_info_driver_below_the_floor(tmp_path):
    given, run = host(tmp_path)
    info = gpu_info(options(**given, min_driver_version="590.44.01"), run, no_executables, is_root=False)
    assert info.failure == (
        "driver 580.159.04 is below the floor 590.44.01 required by ComputeDomains;"
        " upgrade the driver or set nvidia_driver_min_version"
    )
    assert info.result["fabric_pending"] is False
    assert info.result["nvidia_gpu"]["gpu_count"] == 2


def test_gpu_info_without_nvidia_smi_fails_with_fabric_pending_false(tmp_path):
    root = tmp_path / "run" / "nvidia" / "driver"
    info = gpu_info(options(driver_root=str(root)), RecordingRunner(FakeSmi("")), no_executables, is_root=False)
    assert info.failure.startswith(f"nvidia-smi was not found at {root}/usr/bin/nvidia-smi (driver_root={root}):")
    assert info.result == {"fabric_pending": False}


def test_gpu_info_tray_fails_before_the_fabric(tmp_path):
    given, run = host(tmp_path, "synth-gb200-fabric-in-progress-nvidia-smi-q.xml", GB200_NVLINK)
    info = gpu_info(options(**given, expected_gpus=8, require_fabric=True), run, no_executables, is_root=False)
    assert info.failure.startswith("The GPUs are not those of a complete tray: 4 GPUs (")
    assert "expected 8" in info.failure
    assert info.result["fabric_pending"] is False


def test_gpu_info_fabric_in_progress_is_pending(tmp_path):
    given, run = host(tmp_path, "synth-gb200-fabric-in-progress-nvidia-smi-q.xml", GB200_NVLINK)
    info = gpu_info(options(**given, expected_gpus=4, require_fabric=True), run, no_executables, is_root=False)
    assert info.failure.startswith("GPU fabric registration is still under way: GPU 2 (")
    assert info.result["fabric_pending"] is True
    # Without require_fabric the same host passes: its facts say what the fabric is doing.
    assert gpu_info(options(**given, expected_gpus=4), run, no_executables, is_root=False).failure is None


def test_gpu_info_fabric_failure_is_not_pending(tmp_path):
    given, run = host(tmp_path, "synth-gb200-fabric-failure-nvidia-smi-q.xml", GB200_NVLINK)
    info = gpu_info(options(**given, require_fabric=True), run, no_executables, is_root=False)
    assert info.failure.startswith("GPU fabric is not ready for multi-node NVLink: ")
    assert info.result["fabric_pending"] is False


def test_gpu_info_runs_a_driver_container_nvidia_smi_in_a_chroot_as_root(tmp_path):
    root = driver_container_root(tmp_path)
    run = RecordingRunner(FakeSmi(smi("h200x2-nvidia-smi-q.xml"), smi("h200x2-nvidia-smi-nvlink-s.txt")))
    given = {"driver_root": str(root), "proc_root": str(proc_tree(tmp_path)), "dev_root": str(tmp_path / "dev")}
    found = {"chroot": "/usr/sbin/chroot"}
    info = gpu_info(options(**given), run, found.get, is_root=True)
    assert info.failure is None
    assert info.result["nvidia_gpu"]["nvidia_smi_path"] == str(root / "usr" / "bin" / "nvidia-smi")
    assert run.calls[0] == (["/usr/sbin/chroot", str(root), "/usr/bin/nvidia-smi", "-q", "-x"], {})
    # Not root: the container's nvidia-smi runs on the host with the container's libraries.
    run.calls.clear()
    gpu_info(options(**given), run, found.get, is_root=False)
    libraries = f"{root}/usr/lib64:{root}/usr/lib/x86_64-linux-gnu:{root}/usr/lib"
    assert run.calls[0] == ([str(root / "usr" / "bin" / "nvidia-smi"), "-q", "-x"], {"LD_LIBRARY_PATH": libraries})
