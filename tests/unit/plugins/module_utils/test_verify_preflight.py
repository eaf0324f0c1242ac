# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a verify run needs, held before its first check: each mistake one line naming the variable."""

from __future__ import annotations

from typing import List, Optional

import pytest
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import verify_preflight as vp
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.k8s import ApiException
from fake_clock import Clock

CHECKS = "cliques, imex_channel, nvbandwidth, nccl, gpu_health, dcgm_diag"


def never_loaded(path: str, context: Optional[str]) -> None:
    raise AssertionError(f"{path} was loaded")


def test_a_misspelled_check_is_named_with_the_nearest_check():
    assert vp.unknown_check_problems(["gpu_health", "gpu_helth", "zzz"]) == [
        f"gpu_fabric_verify_checks names 'gpu_helth', which is no check (did you mean gpu_health?); the checks are "
        f"{CHECKS}",
        f"gpu_fabric_verify_checks names 'zzz', which is no check; the checks are {CHECKS}",
    ]


def test_a_settings_group_no_check_has_is_said_of_the_variable():
    [line] = vp.settings_problems({"gpu_helth": {}}, ["gpu_health"])
    assert line.startswith("gpu_fabric_verify_settings: no check has an option group called gpu_helth; the groups ")


def test_a_wrong_type_in_the_settings_is_said_of_the_variable_and_its_group():
    [line] = vp.settings_problems({"gpu_health": {"xid_window_hours": "day"}}, ["gpu_health"])
    assert line.startswith("gpu_fabric_verify_settings.gpu_health: ")
    assert "xid_window_hours" in line


def test_what_a_selected_check_refuses_when_it_is_made_is_refused_first():
    settings = {"gpu_health": {"xid_window_hours": -1}, "dcgm_diag": {"level": 4}}
    gpu_health, dcgm_diag = vp.settings_problems(settings, ["gpu_health", "dcgm_diag"])
    assert gpu_health == "gpu_fabric_verify_settings: gpu_health.xid_window_hours is -1: 0 (since boot) or more"
    assert dcgm_diag.startswith("gpu_fabric_verify_settings: dcgm_diag.level is 4: 1 (")
    # a check the run does not select is not made: its settings are only typed
    assert vp.settings_problems(settings, []) == []


def test_settings_that_are_no_mapping_are_refused():
    assert vp.settings_problems("gpu_health", []) == [
        "gpu_fabric_verify_settings is 'gpu_health': give a mapping of the checks' option groups by name, e.g. "
        "{gpu_health: {xid_window_hours: 48}}"
    ]


def test_a_textfile_not_ending_in_prom_is_refused(tmp_path):
    path = tmp_path / "gpu.txt"
    assert vp.textfile_problems(str(path)) == [
        f"gpu_fabric_verify_metrics_textfile: textfile {path} does not end in .prom; node-exporter's textfile "
        "collector reads only *.prom files in its --collector.textfile.directory"
    ]


def test_a_textfile_in_a_missing_directory_is_refused(tmp_path):
    path = tmp_path / "absent" / "gpu.prom"
    assert vp.textfile_problems(str(path)) == [
        f"gpu_fabric_verify_metrics_textfile: textfile {path} cannot be written: its directory {path.parent} does "
        "not exist; create it (node-exporter's --collector.textfile.directory) or set textfile "
        "(report_metrics_textfile) to a file in that directory"
    ]
    assert vp.textfile_problems(str(tmp_path / "gpu.prom")) == []
    assert vp.textfile_problems("") == []


def test_a_textfile_that_is_a_link_is_refused_as_the_writer_refuses_it(tmp_path):
    (tmp_path / "elsewhere").write_text("")
    (tmp_path / "gpu.prom").symlink_to(tmp_path / "elsewhere")
    [line] = vp.textfile_problems(str(tmp_path / "gpu.prom"))
    assert line.startswith(f"gpu_fabric_verify_metrics_textfile: textfile {tmp_path / 'gpu.prom'} is a symbolic link")


def test_a_pushgateway_url_without_a_scheme_is_refused():
    assert vp.pushgateway_problems("pushgateway.monitoring:9091") == [
        "gpu_fabric_verify_pushgateway_url: pushgateway_url 'pushgateway.monitoring:9091' is not an http(s) URL; "
        "expected e.g. http://pushgateway.monitoring:9091"
    ]
    assert vp.pushgateway_problems("http://pushgateway.monitoring:9091") == []


def test_the_preflight_gives_every_problem_and_the_checks_the_run_selects(tmp_path):
    params = {
        "checks": "gpu_health,dcgm_diagg",
        "settings": {"gpu_health": {"xid_window_hours": -2}},
        "run_tags": [],
        "skip_tags": [],
        "own_roles": ["cliques", "imex_channel", "nvbandwidth", "nccl"],
        "metrics_textfile": str(tmp_path / "metrics.txt"),
        "pushgateway_url": "",
        "kubeconfig": str(tmp_path / "absent"),
        "kube_context": "",
    }
    result = vp.preflight(params, {}, never_loaded)
    assert result["checks"] == ["gpu_health", "dcgm_diagg"]
    assert result["selected"] == ["gpu_health"]
    assert [line.split(" ", 1)[0] for line in result["problems"]] == [
        "gpu_fabric_verify_checks",
        "gpu_fabric_verify_settings:",
        "gpu_fabric_verify_metrics_textfile:",
        "the",
    ]
    assert "(did you mean dcgm_diag?)" in result["problems"][0]
    assert "gpu_health.xid_window_hours is -2" in result["problems"][1]


# The discovery answers of /apis/admissionregistration.k8s.io/v1: 1.30+ serves the policies, 1.29 not in v1.
SERVED_130 = ["mutatingwebhookconfigurations", "validatingadmissionpolicies", "validatingadmissionpolicies/status"]
SERVED_129 = ["mutatingwebhookconfigurations", "validatingwebhookconfigurations"]


def loaded(path: str, context: Optional[str]) -> None:
    return None


def test_a_cluster_that_serves_validating_admission_policy_gets_no_note(tmp_path):
    kubeconfig = tmp_path / "kc"
    kubeconfig.write_text("apiVersion: v1\n")
    asked: List[str] = []

    def discover(group_version: str):
        asked.append(group_version)
        return SERVED_130

    result = vp.preflight({"kubeconfig": str(kubeconfig)}, {}, loaded, discover)
    assert asked == ["admissionregistration.k8s.io/v1"]
    assert (result["problems"], result["notes"]) == ([], [])


@pytest.mark.parametrize("served", [SERVED_129, None], ids=["v1-without-the-policies", "group-version-not-served"])
def test_a_cluster_without_validating_admission_policy_is_said_in_one_line(tmp_path, served):
    kubeconfig = tmp_path / "kc"
    kubeconfig.write_text("apiVersion: v1\n")
    result = vp.preflight({"kubeconfig": str(kubeconfig)}, {}, loaded, lambda group_version: served)
    assert result["problems"] == []
    (note,) = result["notes"]
    assert "\n" not in note
    assert note.startswith(
        "the API server does not serve ValidatingAdmissionPolicy (admissionregistration.k8s.io/v1, Kubernetes 1.30 "
        "or later): the admission policies of docs/rbac/verify-stage.yaml do not apply on this cluster"
    )


def test_an_api_server_that_does_not_answer_for_the_patience_is_one_problem_said_once(tmp_path):
    kubeconfig = tmp_path / "kc"
    kubeconfig.write_text("apiVersion: v1\n")
    asked: List[str] = []
    clock = Clock()

    def refused(group_version: str):
        asked.append(group_version)
        raise ConnectionRefusedError("[Errno 111] Connection refused")

    result = vp.preflight(
        {"kubeconfig": str(kubeconfig), "api_patience": 20}, {}, loaded, refused, sleep=clock.sleep, clock=clock
    )
    assert result["problems"] == [
        "cannot reach the Kubernetes API for 20 s: connection refused; check that the API server runs and that the "
        "kubeconfig (gpu_fabric_kubeconfig, K8S_AUTH_KUBECONFIG) or the host options point at it, then run it again"
    ]
    assert result["notes"] == []
    # asked again every 2 s for the whole patience, and no longer
    assert len(asked) == 11 and clock.slept == [2.0] * 10 and clock.now == 20
    missing = vp.preflight({"kubeconfig": str(tmp_path / "absent")}, {}, loaded, refused)
    assert len(missing["problems"]) == 1 and missing["notes"] == [] and len(asked) == 11


def test_an_api_server_that_answers_late_within_the_patience_is_no_problem(tmp_path):
    kubeconfig = tmp_path / "kc"
    kubeconfig.write_text("apiVersion: v1\n")
    answers = [ConnectionResetError("[Errno 104] Connection reset by peer"), SERVED_130]
    clock = Clock()

    def restarting(group_version: str):
        answer = answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return answer

    result = vp.preflight(
        {"kubeconfig": str(kubeconfig), "api_patience": 90}, {}, loaded, restarting, sleep=clock.sleep, clock=clock
    )
    assert (result["problems"], result["notes"], clock.slept) == ([], [], [2.0])


def test_an_answer_that_is_an_error_is_a_note_never_taken_for_the_policies(tmp_path):
    kubeconfig = tmp_path / "kc"
    kubeconfig.write_text("apiVersion: v1\n")

    def forbidden(group_version: str):
        raise ApiException(status=403, reason="Forbidden")

    clock = Clock()
    result = vp.preflight(
        {"kubeconfig": str(kubeconfig), "api_patience": 90}, {}, loaded, forbidden, clock.sleep, clock
    )
    assert result["problems"] == [] and clock.slept == []
    [note] = result["notes"]
    assert note.startswith(
        "could not ask the API server whether it serves ValidatingAdmissionPolicy (admissionregistration.k8s.io/v1), "
        "which the admission policies of docs/rbac/verify-stage.yaml need: 403"
    )
    quiet = vp.preflight({"kubeconfig": str(kubeconfig), "admission_policy": False}, {}, loaded, lambda gv: None)
    assert (quiet["problems"], quiet["notes"]) == ([], [])


@pytest.mark.parametrize(
    ("tags", "nccl", "runs"),
    [
        ([], False, ["cliques", "imex_channel", "nvbandwidth", "gpu_health"]),
        (["cluster"], True, []),
        (["verify_checks"], False, ["gpu_health"]),
        (["nccl"], True, ["nccl"]),
    ],
)
def test_the_checks_the_run_runs_are_returned_so_a_run_of_none_writes_no_report(tags, nccl, runs):
    params = {"checks": ["gpu_health"], "run_tags": tags, "nccl": nccl, "kubeconfig": "/nonexistent"}
    result = vp.preflight(params, {}, never_loaded)
    assert result["runs"] == runs
    # a run of another stage (site.yml --tags cluster, --tags hosts on a site with no cluster yet) needs no kubeconfig
    kubeconfig = [line for line in result["problems"] if "kubeconfig" in line]
    assert len(kubeconfig) == (1 if runs else 0)
