"""Shared setup for tests that run modules in-process."""

from __future__ import annotations

import http.server
import json
import threading
from pathlib import Path
from typing import Any, Iterator

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


class Unavailable(http.server.BaseHTTPRequestHandler):
    """An API server that answers the verify preflight's one question (the admission group's resources) and is
    unavailable (503) to every other call: the checks then start, and each says it could not reach the API server
    (the preflight refuses a port nothing listens on before any check runs)."""

    def do_GET(self) -> None:  # pylint: disable=invalid-name  # the handler's name
        served = self.path == "/apis/admissionregistration.k8s.io/v1"
        body = json.dumps({"resources": [{"name": "validatingadmissionpolicies"}]} if served else {}).encode()
        self.send_response(200 if served else 503)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_POST = do_PUT = do_PATCH = do_DELETE = do_GET

    def log_message(self, format: str, *args: Any) -> None:  # pylint: disable=redefined-builtin
        return


@pytest.fixture(scope="module")
def unavailable_api() -> Iterator[str]:
    """The address of an :class:`Unavailable` API server."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Unavailable)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def unavailable_api_kubeconfig(path: Path, server: str) -> Path:
    """``path``, a kubeconfig of ``server`` (an :func:`unavailable_api`)."""
    path.write_text(
        "apiVersion: v1\nkind: Config\n"
        f"clusters: [{{name: unavailable, cluster: {{server: '{server}'}}}}]\n"
        "users: [{name: nobody, user: {token: not-used}}]\n"
        "contexts: [{name: unavailable, context: {cluster: unavailable, user: nobody}}]\ncurrent-context: unavailable\n"
    )
    return path


@pytest.fixture(autouse=True)
def _run_as_on_a_target(monkeypatch):
    """Run modules as they run on a managed host.

    Importing controller code (the filter tests do, through ``ansible.errors``) flags the whole
    interpreter as the controller, and from then on ``module.warn()`` goes to the controller's
    display instead of the module result. Modules never run that way, so their tests must not.
    """
    monkeypatch.setattr(_internal, "is_controller", False)
