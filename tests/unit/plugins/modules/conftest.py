"""Shared setup for tests that run modules in-process."""

from __future__ import annotations

from pathlib import Path

import pytest
from ansible.module_utils import _internal

# A kubeconfig whose API server is a local port nothing listens on: the playbook runs that must meet an
# unreachable API (quickly, with no cluster) use it.
CLOSED_PORT_KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters:
  - name: closed-port
    cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}
users:
  - name: nobody
    user: {token: not-used}
contexts:
  - name: closed-port
    context: {cluster: closed-port, user: nobody}
current-context: closed-port
"""


@pytest.fixture
def closed_port_kubeconfig(tmp_path) -> Path:
    """``tmp_path/kubeconfig``, pointing at https://127.0.0.1:1."""
    path = tmp_path / "kubeconfig"
    path.write_text(CLOSED_PORT_KUBECONFIG)
    return path


@pytest.fixture(autouse=True)
def _run_as_on_a_target(monkeypatch):
    """Run modules as they run on a managed host.

    Importing controller code (the filter tests do, through ``ansible.errors``) flags the whole
    interpreter as the controller, and from then on ``module.warn()`` goes to the controller's
    display instead of the module result. Modules never run that way, so their tests must not.
    """
    monkeypatch.setattr(_internal, "is_controller", False)
