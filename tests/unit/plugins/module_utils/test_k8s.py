# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

import io
import json
import types

import pytest
import urllib3
from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.testing import patch_module_args
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.k8s import (
    ApiUnreachable,
    api_error_text,
    api_failure_text,
    auth_argument_spec,
    connect,
    connection_reason,
    is_transient,
    iter_pages,
    json_page,
    list_served,
    pod_summary,
    retry,
    workload_summary,
)
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic.exceptions import ResourceNotFoundError, api_exception
from urllib3.exceptions import MaxRetryError, NewConnectionError, ProtocolError, ReadTimeoutError, SSLError
from urllib3.response import HTTPResponse

# The API server's answer to a log read of a container that has not written yet (as kube-apiserver
# 1.34 returns it through kwok's kubelet server), and a proxy's error page in front of an API server.
NO_LOGS = (
    b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"no logs found for container '
    b'\\"mpi-launcher\\" in pod nvbandwidth-rack0-launcher-x","reason":"BadRequest","code":400}'
)
PROXY_PAGE = b"<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body><center>nginx</center></body></html>"


def client_error(status: int, reason: str, body: bytes, content_type: str):
    """The dynamic client's exception for an HTTP answer, built the way the client builds it."""
    response = types.SimpleNamespace(
        status=status, reason=reason, data=body, headers={"Content-Type": content_type, "Audit-Id": "4b1c"}
    )
    return api_exception(ApiException(http_resp=response))


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (
            client_error(400, "Bad Request", NO_LOGS, "application/json"),
            '400 Bad Request: no logs found for container "mpi-launcher" in pod nvbandwidth-rack0-launcher-x',
        ),
        (client_error(502, "Bad Gateway", PROXY_PAGE, "text/html"), "502 Bad Gateway: 502 Bad Gateway nginx"),
        (api_exception(ApiException(status=503, reason="Service Unavailable")), "503 Service Unavailable"),
        (
            MaxRetryError(None, "/api/v1/nodes", NewConnectionError(None, "Connection refused")),
            "None: Max retries exceeded with url: /api/v1/nodes "
            "(Caused by NewConnectionError('None: Connection refused'))",
        ),
    ],
)
def test_an_api_error_is_one_line_without_headers(exc, expected):
    text = api_error_text(exc)
    assert text == expected
    assert "Audit-Id" not in text and "\n" not in text


def test_a_long_error_is_cut():
    exc = client_error(500, "Internal Server Error", b"x" * 1000, "text/plain")
    assert len(api_error_text(exc)) == 300 and api_error_text(exc).endswith("...")


def test_iter_pages_follows_continue_tokens_and_passes_the_limit():
    pages = {
        None: {"metadata": {"continue": "t1"}, "items": [{"n": 1}, {"n": 2}]},
        "t1": {"metadata": {"continue": "t2"}, "items": [{"n": 3}]},
        "t2": {"metadata": {}, "items": [{"n": 4}]},
    }
    calls = []

    def list_page(**kwargs):
        calls.append(kwargs)
        return pages[kwargs.get("_continue")]

    items = list(iter_pages(list_page, limit=2, label_selector="nvidia.com/gpu.present=true"))
    assert [i["n"] for i in items] == [1, 2, 3, 4]
    assert calls == [
        {"label_selector": "nvidia.com/gpu.present=true", "limit": 2},
        {"label_selector": "nvidia.com/gpu.present=true", "limit": 2, "_continue": "t1"},
        {"label_selector": "nvidia.com/gpu.present=true", "limit": 2, "_continue": "t2"},
    ]


def test_workload_summary_reads_deployments_and_daemonsets():
    deployment = {
        "kind": "Deployment",
        "metadata": {"name": "nvidia-dra-driver-gpu-controller", "namespace": "nvidia-dra-driver-gpu"},
        "spec": {"replicas": 1},
        "status": {},
    }
    daemonset = {
        "kind": "DaemonSet",
        "metadata": {"name": "nvb-x7k2p", "namespace": "nvidia-dra-driver-gpu"},
        "status": {"desiredNumberScheduled": 2, "numberReady": 1},
    }
    assert workload_summary(deployment) == "Deployment nvidia-dra-driver-gpu/nvidia-dra-driver-gpu-controller 0/1 ready"
    assert workload_summary(daemonset) == "DaemonSet nvidia-dra-driver-gpu/nvb-x7k2p 1/2 ready"


def test_pod_summary_names_waiting_reasons_and_scheduling_failures():
    pod = {
        "metadata": {"name": "nvidia-dra-driver-gpu-controller-67cb99d84b-5q7kj"},
        "spec": {},
        "status": {
            "phase": "Pending",
            "conditions": [
                {"type": "PodScheduled", "status": "False", "message": "0/4 nodes are available: node affinity"}
            ],
        },
    }
    assert pod_summary(pod) == (
        "pod nvidia-dra-driver-gpu-controller-67cb99d84b-5q7kj on no node: Pending "
        "(unschedulable: 0/4 nodes are available: node affinity)"
    )
    crashing = {
        "metadata": {"name": "nvb-x7k2p-9jhmj"},
        "spec": {"nodeName": "gb200-r0-t1"},
        "status": {
            "phase": "Running",
            "containerStatuses": [
                {"name": "compute-domain-daemon", "state": {"waiting": {"reason": "CrashLoopBackOff"}}}
            ],
        },
    }
    assert (
        pod_summary(crashing) == "pod nvb-x7k2p-9jhmj on gb200-r0-t1: Running (compute-domain-daemon: CrashLoopBackOff)"
    )


def test_json_page_reads_the_raw_http_body_of_a_list():
    body = json.dumps({"metadata": {"continue": "t1"}, "items": [{"metadata": {"name": "gb200-r1-t1"}}]}).encode()
    response = HTTPResponse(body=io.BytesIO(body), status=200, preload_content=True)
    page = json_page(response)
    assert page == {"metadata": {"continue": "t1"}, "items": [{"metadata": {"name": "gb200-r1-t1"}}]}
    assert isinstance(page["items"][0]["metadata"], dict)


def test_json_page_names_the_kind_of_each_item_as_the_clients_model_does():
    # The API server sends a list's items without kind and apiVersion; what reads them (workload_summary)
    # tells a DaemonSet from a Deployment by kind.
    body = {
        "kind": "DaemonSetList",
        "apiVersion": "apps/v1",
        "items": [
            {"metadata": {"name": "cd-1-a", "namespace": "dra"}, "status": {"desiredNumberScheduled": 0}},
            {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": {"name": "kept"}},
        ],
    }
    response = HTTPResponse(body=io.BytesIO(json.dumps(body).encode()), status=200, preload_content=True)
    items = json_page(response)["items"]
    assert [(i["kind"], i["apiVersion"]) for i in items] == [
        ("DaemonSet", "apps/v1"),
        ("PartialObjectMetadata", "meta.k8s.io/v1"),
    ]
    assert workload_summary(items[0]) == "DaemonSet dra/cd-1-a 0/0 ready"


def test_json_page_still_converts_a_client_that_answers_dicts_or_model_objects():
    assert json_page({"items": [1]}) == {"items": [1]}
    assert json_page(None) == {}


class GoneKindClient:
    """A client whose discovery still lists a deleted CRD (its list answers 404), or no longer lists it."""

    def __init__(self, error):
        self.error = error

    def resource(self, kind, api_version):
        if isinstance(self.error, ResourceNotFoundError):
            raise self.error
        return kind

    def get(self, resource, **kwargs):
        raise self.error


@pytest.mark.parametrize(
    "error",
    [
        ResourceNotFoundError("No matches found for {'api_version': 'kubeflow.org/v2beta1', 'kind': 'MPIJob'}"),
        client_error(404, "Not Found", b"404 page not found", "text/plain"),
    ],
)
def test_a_kind_not_served_or_deleted_since_discovery_lists_as_none(error):
    assert list_served(GoneKindClient(error), "kubeflow.org/v2beta1", "MPIJob") == []


def test_other_errors_of_a_list_are_raised():
    error = client_error(403, "Forbidden", b"forbidden", "text/plain")
    with pytest.raises(type(error)):
        list_served(GoneKindClient(error), "kubeflow.org/v2beta1", "MPIJob")


class _Wrapped(Exception):
    """What a helper raises from an API error (``raise _Wrapped(...) from exc``)."""


def _raised_from(cause: BaseException) -> BaseException:
    try:
        try:
            raise cause
        except BaseException as exc:
            raise _Wrapped("the ComputeDomain was not created") from exc
    except _Wrapped as wrapped:
        return wrapped


def _status(status: int) -> BaseException:
    return api_exception(ApiException(status=status, reason=f"reason {status}"))


@pytest.mark.parametrize(
    ("exc", "transient"),
    [
        (_status(429), True),
        (_status(500), True),
        (_status(503), True),
        (_status(504), True),
        (_status(400), False),
        (_status(403), False),
        (_status(404), False),
        (_status(409), False),
        (_status(422), False),
        # the client reports a TLS failure as an ApiException of status 0: a certificate does not heal by waiting
        (api_exception(ApiException(status=0, reason="SSLError\ncertificate verify failed")), False),
        (MaxRetryError(None, "/api", NewConnectionError(None, "Connection refused")), True),
        (MaxRetryError(None, "/api", SSLError("certificate verify failed")), False),
        (SSLError("certificate verify failed"), False),
        (ReadTimeoutError(None, "/api", "Read timed out."), True),
        (ProtocolError("Connection aborted.", ConnectionResetError(104, "reset")), True),
        (ConnectionResetError(104, "Connection reset by peer"), True),
        (TimeoutError("timed out"), True),
        (ValueError("a bug of ours"), False),
        (_raised_from(_status(503)), True),
        (_raised_from(_status(403)), False),
        (_Wrapped("no cause"), False),
    ],
)
def test_transient_errors_are_429_5xx_and_no_answer(exc, transient):
    assert is_transient(exc) is transient


# -- no answer: the connection, its retries and its one line ----------------------------------------


def refused() -> MaxRetryError:
    """urllib3's error for a closed port, as the client raises it (nothing listens on port 1)."""
    pool = urllib3.HTTPSConnectionPool("127.0.0.1", 1, retries=urllib3.Retry(0))
    with pytest.raises(MaxRetryError) as caught:
        pool.request("GET", "/version")
    return caught.value


class FakeClock:
    """A clock that moves only when slept: retries take no time in the tests."""

    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_a_refused_connection_is_one_line_naming_where_and_for_how_long():
    error = refused()
    assert "HTTPSConnectionPool" in str(error)  # what the user saw before
    assert (
        api_failure_text(error, 60)
        == "cannot reach the Kubernetes API at https://127.0.0.1:1 for 60 s: connection refused"
    )
    assert api_failure_text(error) == "cannot reach the Kubernetes API at https://127.0.0.1:1: connection refused"


@pytest.mark.parametrize(
    ("exc", "reason"),
    [
        (ConnectionResetError(104, "Connection reset by peer"), "connection reset by peer"),
        (
            ProtocolError("Connection aborted.", ConnectionResetError(104, "Connection reset by peer")),
            "connection reset by peer",
        ),
        (ReadTimeoutError(None, "/api", "Read timed out. (read timeout=30)"), "timed out"),
        (
            MaxRetryError(
                None,
                "/version",
                NewConnectionError(None, "Failed to resolve 'api.example' ([Errno -2] Name or service not known)"),
            ),
            "name or service not known",
        ),
        (
            MaxRetryError(
                None,
                "/version",
                SSLError(
                    "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: self-signed certificate (_ssl.c:1000)"
                ),
            ),
            "TLS: certificate verify failed: self-signed certificate",
        ),
    ],
)
def test_why_nothing_answered_in_a_few_words(exc, reason):
    assert connection_reason(exc) == reason
    assert (
        api_failure_text(exc, 0, "https://10.0.0.1:6443")
        == f"cannot reach the Kubernetes API at https://10.0.0.1:6443: {reason}"
    )


def test_an_answer_is_the_servers_status_not_a_connection_failure():
    assert api_failure_text(_status(403), 30) == "403 reason 403"


def test_connect_waits_for_an_api_server_that_comes_up_within_the_patience():
    clock, tries = FakeClock(), []

    def make_client():
        tries.append(clock.now)
        if len(tries) < 4:
            raise refused()
        return "client"

    assert connect(make_client, 60, sleep=clock.sleep, clock=clock) == "client"
    assert tries == [0.0, 2.0, 4.0, 6.0]


def test_connect_gives_up_after_the_patience_with_one_line():
    clock = FakeClock()

    def make_client():
        raise refused()

    with pytest.raises(ApiUnreachable) as caught:
        connect(make_client, 60, sleep=clock.sleep, clock=clock)
    assert str(caught.value) == "cannot reach the Kubernetes API at https://127.0.0.1:1 for 60 s: connection refused"
    assert clock.slept == [2.0] * 30
    assert is_transient(caught.value)


def test_connect_does_not_wait_out_what_waiting_does_not_heal():
    clock = FakeClock()

    def make_client():
        raise MaxRetryError(None, "/version", SSLError("[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed"))

    with pytest.raises(ApiUnreachable, match=r"^cannot reach the Kubernetes API: TLS: certificate verify failed$"):
        connect(make_client, 60, sleep=clock.sleep, clock=clock)
    assert clock.slept == []


def test_a_bug_in_making_the_client_is_not_an_unreachable_api():
    def make_client():
        raise KeyError("host")

    with pytest.raises(KeyError):
        connect(make_client, 60, sleep=pytest.fail, clock=FakeClock())


def test_retry_names_what_it_could_not_do():
    clock = FakeClock()
    with pytest.raises(ApiUnreachable) as caught:
        failing = (item for item in ())
        retry(lambda: failing.throw(_status(503)), 10, "cannot list MPIJobs", sleep=clock.sleep, clock=clock)
    assert str(caught.value) == "cannot list MPIJobs: 503 reason 503"
    assert clock.slept == [2.0] * 5


# kubernetes.core 5.0.0's connection options, in part: kubeconfig (a path, or a mapping that may hold a
# token or a client key) without no_log
SPEC_5_0 = {"kubeconfig": {"type": "raw"}, "api_key": {"no_log": True}, "host": {}, "password": {}}


def test_credential_options_are_no_log_whatever_kubernetes_core_marks():
    spec = auth_argument_spec(SPEC_5_0)
    assert [name for name, option in spec.items() if option.get("no_log")] == ["kubeconfig", "api_key", "password"]
    assert SPEC_5_0["kubeconfig"] == {"type": "raw"}  # the base is kubernetes.core's own: left as it is
    assert not spec["host"].get("no_log")


def test_a_kubeconfig_mapping_is_hidden_from_the_modules_arguments(capsys):
    kubeconfig = {
        "apiVersion": "v1",
        "users": [{"name": "verify", "user": {"token": "sa-token-0123456789abcdef"}}],
    }
    with patch_module_args({"kubeconfig": kubeconfig}), pytest.raises(SystemExit):
        module = AnsibleModule(argument_spec=auth_argument_spec(SPEC_5_0))
        assert "sa-token-0123456789abcdef" in module.no_log_values
        module.exit_json(msg="connected with sa-token-0123456789abcdef", invocation={"module_args": module.params})
    assert "sa-token-0123456789abcdef" not in capsys.readouterr().out
