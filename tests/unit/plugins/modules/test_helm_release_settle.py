# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""helm_release_settle runs a real process for Helm: what that process is handed, read from inside it."""

from __future__ import annotations

import json
import stat

from ansible_collections.gpu_fabric.mnnvl.plugins.modules import helm_release_settle

from tests.unit.plugins.modules.runner import run_module


def recording_helm(tmp_path):
    """A ``helm`` that writes its argv and the environment it was given, then answers 'no release'."""
    record = tmp_path / "seen.json"
    helm = tmp_path / "helm"
    helm.write_text(
        "#!/usr/bin/env python3\n"
        "import json, os, sys\n"
        f"json.dump({{'argv': sys.argv, 'env': dict(os.environ)}}, open({str(record)!r}, 'w'))\n"
        "sys.stderr.write('Error: release: not found\\n')\n"
        "sys.exit(1)\n"
    )
    helm.chmod(helm.stat().st_mode | stat.S_IXUSR)
    return helm, record


def test_the_bearer_token_is_in_helms_environment_and_not_on_its_command_line(tmp_path, monkeypatch):
    monkeypatch.delenv("K8S_AUTH_API_KEY", raising=False)
    helm, record = recording_helm(tmp_path)
    result = run_module(
        helm_release_settle.main,
        {
            "name": "gpu-operator",
            "namespace": "gpu-operator",
            "binary_path": str(helm),
            "host": "https://10.0.0.1:6443",
            "api_key": "s3cret-bearer-token",
        },
    )
    assert (result["failed"], result["changed"]) == (False, False)
    seen = json.loads(record.read_text())
    assert "s3cret-bearer-token" not in " ".join(seen["argv"])  # /proc/<pid>/cmdline is world-readable
    assert "--kube-apiserver" in seen["argv"]
    assert seen["env"]["HELM_KUBETOKEN"] == "s3cret-bearer-token"


def test_the_token_from_k8s_auth_api_key_goes_the_same_way(tmp_path, monkeypatch):
    monkeypatch.setenv("K8S_AUTH_API_KEY", "env-bearer-token")
    helm, record = recording_helm(tmp_path)
    result = run_module(
        helm_release_settle.main, {"name": "dra", "namespace": "nvidia-dra-driver-gpu", "binary_path": str(helm)}
    )
    assert result["failed"] is False
    seen = json.loads(record.read_text())
    assert "env-bearer-token" not in " ".join(seen["argv"])
    assert seen["env"]["HELM_KUBETOKEN"] == "env-bearer-token"
