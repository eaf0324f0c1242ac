# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""host_preflight end to end on this machine: real commands looked up, a stand-in kubelet and systemctl."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from ansible_collections.gpu_fabric.mnnvl.plugins.modules import host_preflight

from tests.unit.plugins.modules.runner import run_module

FACTS = dict(host="t1", distribution="Debian", distribution_version="12", architecture="x86_64", kernel="6.1.0-28")


def script(path: Path, text: str) -> Path:
    path.write_text("#!/bin/sh\n" + text)
    path.chmod(0o755)
    return path


def stand_ins(tmp_path: Path, monkeypatch, timesyncd: str = "running") -> None:
    """A PATH of stand-ins: systemctl prints what systemd 252 prints for ``show --property=Id,SubState``."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script(
        bin_dir / "systemctl",
        f'printf "Id=chrony.service\\nSubState=dead\\n\\nId=systemd-timesyncd.service\\nSubState={timesyncd}\\n"\n',
    )
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")


def test_a_host_with_everything_passes(tmp_path, monkeypatch):
    stand_ins(tmp_path, monkeypatch)
    kubelet = script(tmp_path / "kubelet", 'echo "Kubernetes v1.34.2"\n')
    result = run_module(
        host_preflight.main,
        dict(
            FACTS,
            driver_owner="operator",
            required_commands=["sh", "systemctl"],
            time_sync_services=["chrony.service", "systemd-timesyncd.service"],
            host_nvidia_smi_path=str(tmp_path / "no-nvidia-smi"),
            kubelet_path=str(kubelet),
        ),
        check_mode=True,
    )
    assert result["failed"] is False, result
    assert result["changed"] is False
    assert result["running_time_sync"] == ["systemd-timesyncd.service"]
    assert result["kubelet_version"] == "1.34.2"
    assert result["missing_commands"] == []
    assert result["host_nvidia_smi"] is False
    assert result["missing_python_modules"] == []


def test_a_python_module_the_interpreter_cannot_import_is_a_problem(tmp_path, monkeypatch):
    stand_ins(tmp_path, monkeypatch)
    result = run_module(
        host_preflight.main,
        dict(
            FACTS,
            driver_owner="operator",
            required_commands=["sh"],
            time_sync_services=["systemd-timesyncd.service"],
            host_nvidia_smi_path=str(tmp_path / "none"),
            kubelet_path=str(tmp_path / "none"),
            python_modules=["json", "gpu_fabric_no_such_module"],
        ),
        check_mode=True,
    )
    assert result["failed"] is True
    assert result["missing_python_modules"] == ["gpu_fabric_no_such_module"]
    assert result["msg"] == (
        f"preflight found 1 problem on t1: (1) the Python module gpu_fabric_no_such_module is missing from"
        f" {sys.executable}, the interpreter Ansible runs on this host (a module of the collection); install"
        f" python3-gpu_fabric_no_such_module (Debian/Ubuntu) or run `{sys.executable} -m pip install"
        " 'gpu_fabric_no_such_module'` (requirements-host.txt of the collection)."
    )


def test_every_problem_fails_at_once_with_the_variable_problems_last(tmp_path, monkeypatch):
    stand_ins(tmp_path, monkeypatch, timesyncd="dead")
    smi = script(tmp_path / "nvidia-smi", "exit 0\n")
    kubelet = script(tmp_path / "kubelet", 'echo "Kubernetes v1.34.0"\n')
    result = run_module(
        host_preflight.main,
        dict(
            FACTS,
            driver_owner="operator",
            required_commands=["sh", "gpu-fabric-no-such-command"],
            time_sync_services=["chrony.service", "systemd-timesyncd.service"],
            host_nvidia_smi_path=str(smi),
            kubelet_path=str(kubelet),
            extra_problems=["containerd_verison (did you mean containerd_version?) is not a variable"],
        ),
    )
    assert result["failed"] is True
    assert result["msg"].startswith("preflight found 5 problems on t1: (1) required commands are missing: gpu-fabric-")
    assert "(2) no time synchronisation service is running" in result["msg"]
    assert "(3) gpu_fabric_driver_owner is operator but a driver is installed on the host" in result["msg"]
    assert "(4) kubelet is 1.34.0" in result["msg"]
    assert result["msg"].endswith("(5) containerd_verison (did you mean containerd_version?) is not a variable.")
    assert len(result["problems"]) == 5


def test_problems_only_returned_when_asked(tmp_path, monkeypatch):
    stand_ins(tmp_path, monkeypatch, timesyncd="dead")
    result = run_module(
        host_preflight.main,
        dict(FACTS, driver_owner="host", required_commands=[], fail_on_problems=False,
             host_nvidia_smi_path=str(tmp_path / "none"), kubelet_path=str(tmp_path / "none")),
    )  # fmt: skip
    assert result["failed"] is False
    assert [p.split(" ")[0] for p in result["problems"]] == ["no", "gpu_fabric_driver_owner"]
    assert result["kubelet_version"] == ""


def test_a_version_option_that_is_not_a_version_is_one_line(tmp_path, monkeypatch):
    stand_ins(tmp_path, monkeypatch)
    kubelet = script(tmp_path / "kubelet", 'echo "Kubernetes v1.33.1"\n')
    result = run_module(
        host_preflight.main,
        dict(FACTS, driver_owner="operator", required_commands=[], min_kubelet_version="latest",
             host_nvidia_smi_path=str(tmp_path / "none"), kubelet_path=str(kubelet)),
    )  # fmt: skip
    assert result["failed"] is True
    assert (
        result["msg"] == "host_preflight: 'latest' is not a version: expected dot-separated numbers such as 570.158.01"
    )
