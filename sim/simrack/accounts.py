"""A ServiceAccount bound by the collection's shipped RBAC, and a kubeconfig that holds only its token.

Tests and benchmarks run a stage as a site does: with the identity ``docs/rbac/`` grants, never the sim's
admin. The API server's audit log (``simrack.audit``) records exactly that identity's requests, so what a
stage asks of the API server is counted apart from the sim's own components.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Optional

import yaml

NAMESPACE = "gpu-fabric"

# kubectl(*args, stdin=None) -> its stdout; raises when kubectl fails
Kubectl = Callable[..., str]


def kubeconfig(admin_kubeconfig: Path, path: Path, user: dict[str, Any], name: str = "stage") -> Path:
    """A kubeconfig at ``path`` for the sim's API server (as the admin's names it) and ``user`` alone
    (a token, or a client certificate and key), readable by its owner only."""
    admin = yaml.safe_load(admin_kubeconfig.read_text())
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "sim", "cluster": admin["clusters"][0]["cluster"]}],
        "users": [{"name": name, "user": user}],
        "contexts": [{"name": name, "context": {"cluster": "sim", "user": name}}],
        "current-context": name,
    }
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)
    return path


def ensure_service_account(kubectl: Kubectl, name: str, namespace: str = NAMESPACE) -> None:
    """ServiceAccount ``namespace``/``name`` and its namespace, created when missing (apply: no error when there)."""
    for obj in (
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": namespace}},
    ):
        kubectl("apply", "-f", "-", stdin=json.dumps(obj))


def service_account_kubeconfig(
    kubectl: Kubectl,
    admin_kubeconfig: Path,
    name: str,
    path: Path,
    rbac_file: Optional[Path] = None,
    duration: str = "1h",
    namespace: str = NAMESPACE,
) -> tuple[Path, str]:
    """ServiceAccount ``namespace``/``name`` (bound by ``rbac_file`` when given, applied as the admin) and a
    kubeconfig with only a fresh token of it; the kubeconfig's path and the token."""
    ensure_service_account(kubectl, name, namespace)
    if rbac_file is not None:
        kubectl("apply", "-f", str(rbac_file))
    token = kubectl("-n", namespace, "create", "token", name, f"--duration={duration}").strip()
    if token.count(".") != 2:
        raise ValueError(f"kubectl create token gave no token for {namespace}/{name}: {token[:40]!r}")
    return kubeconfig(admin_kubeconfig, path, {"token": token}, name), token
