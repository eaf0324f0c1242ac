# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""chart_release's secret_values: Helm gets them, nothing the module prints shows them.

The module runs in-process up to its real ``exit_json``, which prints the JSON result that Ansible's callback
shows (``-vvv`` adds its ``invocation.module_args``); Helm is a real process that records the values file it
was handed and answers ``history`` and ``get values`` from what it recorded. The API steps (namespace, CRDs)
are the other tests' concern and are left out here.
"""

from __future__ import annotations

import json
import stat

import pytest
from ansible.module_utils.testing import patch_module_args
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import chart_release_runner
from ansible_collections.gpu_fabric.mnnvl.plugins.modules import chart_release

PASSWORD = "s3cr3t-registry-p4ss"
TOKEN = "tok-0f9e8d7c6b5a"
STUB = """#!/usr/bin/env python3
import json, os, shutil, sys
state = {state!r}
args = sys.argv[1:]
if args[0] == "history":
    if not os.path.exists(state):
        sys.stderr.write("Error: release: not found\\n")
        sys.exit(1)
    print(json.dumps([{{"revision": 1, "updated": "2026-12-06T00:00:00Z", "status": "deployed",
                        "chart": "gpu-operator-v25.10.0", "app_version": "v25.10.0",
                        "description": "Install complete"}}]))
elif args[:2] == ["get", "values"]:
    print(open(state).read())
elif args[0] == "upgrade":
    shutil.copy(args[args.index("--values") + 1], state)
elif args[:2] == ["repo", "add"]:
    pass
else:
    sys.exit(2)
"""


@pytest.fixture
def helm(tmp_path, monkeypatch):
    """The recording helm, and the file holding the values it was handed (None until an upgrade)."""
    state = tmp_path / "installed-values.json"
    binary = tmp_path / "helm"
    binary.write_text(STUB.format(state=str(state)))
    binary.chmod(binary.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setattr(chart_release, "get_api_client", lambda module: None)
    monkeypatch.setattr(chart_release_runner, "ensure_namespace", lambda *args, **kwargs: "unchanged")
    monkeypatch.delenv("K8S_AUTH_API_KEY", raising=False)
    return binary, state


def printed(capsys, args: dict, check_mode: bool = False) -> tuple[str, dict]:
    """What the module prints for Ansible (its whole result, arguments included), and that result."""
    with patch_module_args(dict(args, _ansible_check_mode=check_mode, _ansible_diff=True)), pytest.raises(SystemExit):
        chart_release.main()
    out = capsys.readouterr().out
    return out, json.loads(out)


def arguments(binary) -> dict:
    return {
        "name": "gpu-operator",
        "namespace": "gpu-operator",
        "chart_ref": "gpu-operator",
        "chart_repo_url": "https://helm.ngc.nvidia.com/nvidia",
        "chart_name": "gpu-operator",
        "chart_version": "v25.10.0",
        "binary_path": str(binary),
        "upgrade_crds": False,
        "values": {"driver": {"enabled": False, "repository": "registry.example.internal/nvidia"}},
        "secret_values": {"driver": {"licensingConfig": {"nlsToken": TOKEN}}, "registry": {"login": PASSWORD}},
    }


def test_helm_gets_the_secret_values_and_nothing_printed_shows_them(helm, capsys):
    binary, state = helm
    out, result = printed(capsys, arguments(binary))
    assert result["changed"] is True and result["action"] == "install"
    # Helm was handed every value, the secret ones merged over the others
    assert json.loads(state.read_text()) == {
        "driver": {
            "enabled": False,
            "repository": "registry.example.internal/nvidia",
            "licensingConfig": {"nlsToken": TOKEN},
        },
        "registry": {"login": PASSWORD},
    }
    # what Ansible shows, -vvv included: the arguments, the values wanted, the diff
    assert PASSWORD not in out and TOKEN not in out
    hidden = "VALUE_SPECIFIED_IN_NO_LOG_PARAMETER"
    assert result["invocation"]["module_args"]["secret_values"] == {
        "driver": {"licensingConfig": {"nlsToken": hidden}},
        "registry": {"login": hidden},
    }
    assert result["values_wanted"]["registry"] == {"login": "********"}  # "login" reads as no credential
    assert result["values_wanted"]["driver"]["repository"] == "registry.example.internal/nvidia"
    assert "login: '********'" in result["diff"]["after"]


def test_a_second_run_with_the_same_secrets_changes_nothing_and_shows_none(helm, capsys):
    binary, _state = helm
    printed(capsys, arguments(binary))
    out, result = printed(capsys, arguments(binary))
    assert (result["changed"], result["action"]) == (False, "none")
    assert result["values_now"]["registry"] == {"login": "********"}
    assert PASSWORD not in out and TOKEN not in out


def test_a_changed_secret_upgrades_and_names_its_path_not_its_value(helm, capsys):
    binary, state = helm
    printed(capsys, arguments(binary))
    changed = arguments(binary)
    changed["secret_values"] = {"registry": {"login": "n3w-p4ss-2027"}}
    out, result = printed(capsys, changed, check_mode=True)
    assert result["action"] == "upgrade"
    assert any("registry.login" in reason for reason in result["reasons"])
    # check mode: Helm was not called again, and the new and the old secret are shown nowhere
    assert json.loads(state.read_text())["registry"] == {"login": PASSWORD}
    assert "n3w-p4ss-2027" not in out and PASSWORD not in out and TOKEN not in out


REPO_PASSWORD = "r3po-p4ss-9f8e"


def test_a_repository_password_goes_on_helms_standard_input_not_its_command_line(helm, capsys, tmp_path):
    binary, _state = helm
    calls = tmp_path / "calls.jsonl"
    recording = tmp_path / "helm-recording"
    recording.write_text(
        "#!/usr/bin/env python3\n"
        "import json, os, sys\n"
        "stdin = sys.stdin.read() if '--password-stdin' in sys.argv else ''\n"
        f"open({str(calls)!r}, 'a').write(json.dumps({{'argv': sys.argv[1:], 'stdin': stdin}}) + '\\n')\n"
        f"os.execv({str(binary)!r}, [{str(binary)!r}, *sys.argv[1:]])\n"
    )
    recording.chmod(0o755)
    args = dict(
        arguments(recording),
        chart_ref="site-charts/gpu-operator",
        chart_repo_url="",
        repo_name="site-charts",
        repo_url="https://charts.example.internal/nvidia",
        repo_username="robot",
        repo_password=REPO_PASSWORD,
    )
    out, result = printed(capsys, args)
    assert not result.get("failed"), result.get("msg")
    seen = [json.loads(line) for line in calls.read_text().splitlines()]
    (added,) = [call for call in seen if call["argv"][:2] == ["repo", "add"]]
    assert added["argv"] == [
        "repo",
        "add",
        "site-charts",
        "https://charts.example.internal/nvidia",
        "--force-update",
        "--username",
        "robot",
        "--password-stdin",
    ]
    assert added["stdin"] == REPO_PASSWORD
    assert all(REPO_PASSWORD not in " ".join(call["argv"]) for call in seen)  # /proc/<pid>/cmdline is world-readable
    assert REPO_PASSWORD not in out
    assert any(call["argv"][0] == "upgrade" and "site-charts/gpu-operator" in call["argv"] for call in seen)


def test_a_repository_url_with_credentials_in_it_is_refused_in_one_line(helm, capsys):
    binary, state = helm
    args = dict(arguments(binary), chart_repo_url="https://robot:hunter2@charts.example.internal/nvidia")
    _out, result = printed(capsys, args)
    assert result["failed"] is True
    assert result["msg"] == (
        "release gpu-operator/gpu-operator: chart_repo_url https://***@charts.example.internal/nvidia carries "
        "credentials: they would be on Helm's command line, readable by any local user; give the URL without them "
        "and the user name and password as the repository's username and password"
    )
    assert "hunter2" not in result["msg"]
    assert not state.exists()  # nothing was installed
