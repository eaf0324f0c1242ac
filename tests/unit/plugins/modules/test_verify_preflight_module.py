# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""verify_preflight as Ansible runs it: every problem one line of its message, and the checks as a list."""

from __future__ import annotations

from ansible_collections.gpu_fabric.mnnvl.plugins.modules import verify_preflight

from tests.unit.plugins.modules.runner import run_module


def test_one_string_names_one_check_and_a_loadable_kubeconfig_passes(closed_port_kubeconfig):
    result = run_module(
        verify_preflight.main, {"checks": "gpu_health", "kubeconfig": str(closed_port_kubeconfig)}, check_mode=True
    )
    assert result["failed"] is False
    assert (result["checks"], result["selected"], result["problems"]) == (["gpu_health"], ["gpu_health"], [])


def test_every_problem_is_one_line_of_the_message(tmp_path, closed_port_kubeconfig):
    result = run_module(
        verify_preflight.main,
        {
            "checks": "gpu_health,dcgm",
            "settings": {"gpu_health": {"xid_window_hours": -1}},
            "metrics_textfile": str(tmp_path / "metrics.txt"),
            "kubeconfig": str(closed_port_kubeconfig),
        },
    )
    assert result["failed"] is True
    assert result["msg"].splitlines() == result["problems"]
    assert [line.split(" ", 1)[0] for line in result["problems"]] == [
        "gpu_fabric_verify_checks",
        "gpu_fabric_verify_settings:",
        "gpu_fabric_verify_metrics_textfile:",
    ]


def test_an_unreachable_api_server_is_a_note_not_a_problem_and_can_be_left_unasked(closed_port_kubeconfig):
    args = {"checks": "gpu_health", "kubeconfig": str(closed_port_kubeconfig)}
    asked = run_module(verify_preflight.main, args, check_mode=True)
    assert asked["failed"] is False and asked["problems"] == []
    (note,) = asked["notes"]
    assert note.startswith("could not ask the API server whether it serves ValidatingAdmissionPolicy")
    unasked = run_module(verify_preflight.main, dict(args, admission_policy=False), check_mode=True)
    assert unasked["notes"] == []
