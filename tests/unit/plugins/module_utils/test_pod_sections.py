# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A tray pod's log sections, written by a real shell from the script the checks give their pods, read back."""

from __future__ import annotations

import subprocess

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.pod_sections import MARK, section_script, sections


def shell(script: str) -> subprocess.CompletedProcess:
    return subprocess.run(["sh", "-c", script], capture_output=True, text=True, check=False, timeout=30)


def test_each_section_is_read_with_its_output_and_exit_status():
    run = shell(
        "; ".join([section_script("clock", "echo 1700000000"), section_script("dmesg", "echo refused >&2; false")])
    )
    found = sections(run.stdout)
    assert found == {"clock": ("1700000000\n", 0), "dmesg": ("", 1)}


def test_a_kept_status_is_the_pods_exit_status():
    run = shell(section_script("dcgmi diag", "sh -c 'echo {}; exit 226'", keep_status=True) + "; exit $rc")
    assert run.returncode == 226
    assert sections(run.stdout) == {"dcgmi diag": ("{}\n", 226)}


def test_a_section_that_never_ended_or_ended_without_its_status_proves_nothing():
    cut = f"{MARK} begin nvidia-smi -q -x\n<nvidia_smi_log>\n"
    assert sections(cut) == {"nvidia-smi -q -x": ("<nvidia_smi_log>\n", None)}
    no_status = f"{MARK} begin dmesg\nline\n{MARK} end dmesg\n"
    assert sections(no_status)["dmesg"][1] is None
    assert sections("no marker at all\n") == {}
