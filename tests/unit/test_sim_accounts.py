# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""simrack.accounts: the kubeconfig a stage runs with holds the sim's server and the account's token alone."""

from __future__ import annotations

import stat
import sys
from pathlib import Path

import pytest
import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT / "sim"))

from simrack import accounts  # noqa: E402

TOKEN = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW06c2VydmljZWFjY291bnQifQ.c2lnbmF0dXJl"


def admin(tmp_path: Path) -> Path:
    path = tmp_path / "admin.kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "clusters": [
                    {"name": "sim", "cluster": {"server": "https://127.0.0.1:6443", "certificate-authority": "ca"}}
                ],
                "users": [{"name": "admin", "user": {"client-certificate": "admin.crt", "client-key": "admin.key"}}],
            }
        )
    )
    return path


class Kubectl:
    def __init__(self, token: str = TOKEN) -> None:
        self.token = token
        self.calls: list[tuple] = []

    def __call__(self, *args: str, stdin: str | None = None) -> str:
        self.calls.append((args, yaml.safe_load(stdin) if stdin else None))
        return self.token + "\n" if args[2:4] == ("create", "token") else ""


def test_the_account_is_bound_by_the_shipped_file_and_its_kubeconfig_holds_only_its_token(tmp_path):
    kubectl = Kubectl()

    path, token = accounts.service_account_kubeconfig(
        kubectl, admin(tmp_path), "gpu-fabric-verify", tmp_path / "kc", Path("docs/rbac/verify-stage.yaml")
    )

    assert token == TOKEN
    applied = [body["kind"] for args, body in kubectl.calls if body]
    assert applied == ["Namespace", "ServiceAccount"]
    assert kubectl.calls[2][0] == ("apply", "-f", "docs/rbac/verify-stage.yaml")
    assert kubectl.calls[3][0] == ("-n", "gpu-fabric", "create", "token", "gpu-fabric-verify", "--duration=1h")
    config = yaml.safe_load(path.read_text())
    assert config["users"] == [{"name": "gpu-fabric-verify", "user": {"token": TOKEN}}]
    assert config["clusters"][0]["cluster"]["server"] == "https://127.0.0.1:6443"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_a_failed_token_request_is_an_error_not_an_empty_kubeconfig(tmp_path):
    with pytest.raises(ValueError, match="no token for gpu-fabric/gpu-fabric-verify"):
        accounts.service_account_kubeconfig(Kubectl(token=""), admin(tmp_path), "gpu-fabric-verify", tmp_path / "kc")
    assert not (tmp_path / "kc").exists()
