# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""verify_preflight as Ansible runs it: every problem one line of its message, and the checks as a list."""

from __future__ import annotations

from ansible_collections.gpu_fabric.mnnvl.plugins.modules import verify_preflight

from tests.unit.plugins.modules.runner import run_module

# The one line for an API server nothing listens on, asked once (api_patience 0), through the real client.
UNREACHABLE = (
    "cannot reach the Kubernetes API at https://127.0.0.1:1: connection refused; check that the API server runs and "
    "that the kubeconfig (gpu_fabric_kubeconfig, K8S_AUTH_KUBECONFIG) or the host options point at it, then run it "
    "again"
)


def test_one_string_names_one_check_and_an_api_server_nothing_listens_on_is_one_problem(closed_port_kubeconfig):
    result = run_module(
        verify_preflight.main,
        {"checks": "gpu_health", "kubeconfig": str(closed_port_kubeconfig), "api_patience": 0},
        check_mode=True,
    )
    assert result["failed"] is True and result["msg"] == UNREACHABLE
    assert (result["checks"], result["selected"], result["problems"], result["notes"]) == (
        ["gpu_health"],
        ["gpu_health"],
        [UNREACHABLE],
        [],
    )
    assert result["runs"] == ["cliques", "imex_channel", "nvbandwidth", "gpu_health"]


def test_every_problem_is_one_line_of_the_message(tmp_path, closed_port_kubeconfig):
    result = run_module(
        verify_preflight.main,
        {
            "checks": "gpu_health,dcgm",
            "settings": {"gpu_health": {"xid_window_hours": -1}},
            "metrics_textfile": str(tmp_path / "metrics.txt"),
            "kubeconfig": str(closed_port_kubeconfig),
            "api_patience": 0,
        },
    )
    assert result["failed"] is True
    assert result["msg"].splitlines() == result["problems"]
    assert [line.split(" ", 1)[0] for line in result["problems"]] == [
        "gpu_fabric_verify_checks",
        "gpu_fabric_verify_settings:",
        "gpu_fabric_verify_metrics_textfile:",
    ]  # and the cluster is not asked: a run refused for its settings answers at once
