# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The shared lifecycle's pure parts: the channel listing judge, failure lines, transient errors, manifests.

The lifecycle itself (create, wait, read, judge, clean up) runs against a real API server in the
integration tests (tests/integration/test_verify_stage.py, test_faults.py, test_fleet.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import (
    compute_domain,
    kube_api,
    kube_watch,
    rack_run,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.checks import base
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.checks import imex_channel as imex_check
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.checks import nvbandwidth as nvbandwidth_check
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.rack_plan import RackPlan
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.verification_objects import (
    DEFAULT_LAUNCHER_AFFINITY,
    imex_pod_manifest,
    mpijob_manifest,
    namespace_manifest,
)
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic.exceptions import ResourceNotFoundError, api_exception
from mpi_settings import MPI
from urllib3.exceptions import MaxRetryError, NewConnectionError

LISTING = (Path(__file__).resolve().parents[3] / "fixtures" / "k8s" / "imex-channel-injection-pod.log").read_text()
MISSING = "ls: cannot access '/dev/nvidia-caps-imex-channels': No such file or directory\n"


def test_the_real_listing_shows_a_character_device():
    assert imex_check.judge_channel_listing(LISTING) == (True, "major 501, minor 0")
    assert imex_check.channel0_line(LISTING) == "crw-rw-rw- 1 root root 501, 0 Jan  5 08:31 channel0"


def test_a_missing_channel_quotes_the_listing():
    assert imex_check.judge_channel_listing(MISSING) == (
        False,
        "channel0 is missing (listing: ls: cannot access '/dev/nvidia-caps-imex-channels': No such file or directory)",
    )


def test_a_channel_that_is_a_file_is_refused():
    listing = LISTING.replace("crw-rw-rw- 1 root root 501, 0", "-rw-r--r-- 1 root root 0")
    ok, text = imex_check.judge_channel_listing(listing)
    assert not ok and text.startswith("channel0 is not a character device: -rw-r--r--")


def _Status(status: int):
    """The dynamic client's error for an HTTP status, as it raises it."""
    return api_exception(ApiException(status=status, reason=f"reason {status}"))


def raising(exc: BaseException):
    def call():
        raise exc

    return call


def test_the_api_retries_transient_errors_until_it_succeeds():
    calls = []
    clock = iter(range(0, 1000, 1))

    def flaky():
        calls.append(1)
        if len(calls) < 3:
            raise _Status(503)
        return "ok"

    slept = []
    api = kube_api.Api(client=None, patience=60, sleep=slept.append, clock=lambda: next(clock))
    assert api.call("read Node x", flaky) == "ok"
    assert slept == [1.0, 2.0]


def test_the_api_gives_up_with_one_line():
    clock = iter(range(0, 1000, 30))
    api = kube_api.Api(client=None, patience=60, sleep=lambda s: None, clock=lambda: next(clock))
    refused = MaxRetryError(None, "/api/v1/nodes", NewConnectionError(None, "Failed to establish a new connection"))
    with pytest.raises(kube_api.ApiUnavailable) as caught:
        api.call("list Node", raising(refused))
    assert (
        str(caught.value) == "list Node: cannot reach the Kubernetes API for 90 s: failed to establish a new connection"
    )
    assert "\n" not in str(caught.value)


def test_the_api_does_not_retry_a_refusal():
    api = kube_api.Api(client=None, patience=60, sleep=lambda s: pytest.fail("retried"), clock=lambda: 0)
    with pytest.raises(kube_api.ApiUnavailable, match="create Pod ns/p: "):
        api.call("create Pod ns/p", raising(_Status(403)))


def test_a_failed_launcher_is_described_with_its_error_lines():
    check = nvbandwidth_check.NvbandwidthCheck(
        "img", MPI, "multinode_device_to_device_memcpy_read_ce", [], lambda *a: {}
    )
    launcher = {
        "metadata": {"name": "nvbandwidth-rack0-launcher-x"},
        "spec": {"nodeName": "sim-control-plane"},
        "status": {
            "phase": "Failed",
            "containerStatuses": [{"state": {"terminated": {"exitCode": 1, "reason": "Error"}}}],
        },
    }
    log = (
        "Running x.\n[CUDA_ERROR_NOT_PERMITTED] operation not permitted in expression cuMemCreate\n"
        "MPI_ABORT was invoked on rank 0\n"
    )
    text = check.failure_text(
        "nvbandwidth-rack0", {"reason": "BackoffLimitExceeded", "message": "Job has\nfailed"}, launcher, log
    )
    assert text == (
        "MPIJob nvbandwidth-rack0 failed (BackoffLimitExceeded: Job has failed); "
        "launcher pod nvbandwidth-rack0-launcher-x "
        "on sim-control-plane is Failed (exit code 1, reason Error); error lines: [CUDA_ERROR_NOT_PERMITTED] operation "
        "not permitted in expression cuMemCreate / MPI_ABORT was invoked on rank 0"
    )
    assert check.failure_text("j", {"reason": "R"}, None, "").endswith("; no launcher pod exists")


def test_the_mpijob_has_one_worker_per_tray_and_every_gpu_of_it():
    nodes = [f"gb200-r1-t{i}" for i in range(18)]
    job = mpijob_manifest(
        "nvbandwidth-rack1",
        "ns",
        "nvbandwidth",
        "rack1",
        nodes,
        4,
        "cd-channel",
        "img",
        ["-q", "nvbandwidth", "-t", "multinode_device_to_device_memcpy_read_ce"],
        MPI,
    )
    spec = job["spec"]
    assert spec["slotsPerWorker"] == 4
    assert spec["runPolicy"] == {"cleanPodPolicy": "Running", "backoffLimit": 0}
    launcher = spec["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]
    assert launcher["containers"][0]["args"][:6] == ["--bind-to", "core", "--map-by", "ppr:4:node", "-np", "72"]
    assert launcher["affinity"] == DEFAULT_LAUNCHER_AFFINITY
    worker = spec["mpiReplicaSpecs"]["Worker"]
    assert worker["replicas"] == 18
    terms = worker["template"]["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] == nodes
    container = worker["template"]["spec"]["containers"][0]
    assert container["resources"]["limits"] == {"nvidia.com/gpu": 4}
    assert worker["template"]["spec"]["tolerations"] == [
        {"key": "gpu-fabric.nvidia.com/unverified", "operator": "Exists", "effect": "NoSchedule"}
    ]
    assert job["metadata"]["labels"]["gpu-fabric.nvidia.com/rack"] == "rack1"


def test_the_imex_pod_is_pinned_unprivileged_and_claims_the_channel():
    pod = imex_pod_manifest("gb200-r0-t3", "ns", "rack0", "imex-channel-rack0-channel", "ubuntu:22.04", 65534)
    assert pod["metadata"]["name"] == "imex-channel-gb200-r0-t3"
    spec = pod["spec"]
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms[0]["matchExpressions"][0]["values"] == ["gb200-r0-t3"]
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["containers"][0]["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert spec["resourceClaims"] == [
        {"name": "imex-channel", "resourceClaimTemplateName": "imex-channel-rack0-channel"}
    ]


def test_the_namespace_carries_the_pod_security_level():
    ns = namespace_manifest("gpu-fabric-verify-imex-channel-rack0", "imex_channel", "rack0", "restricted")
    assert ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    assert ns["metadata"]["labels"]["app.kubernetes.io/part-of"] == "gpu-fabric-verify"


def test_trays_with_the_same_finding_are_named_together():
    missing = "channel0 is missing (listing: ls: cannot access '/dev/nvidia-caps-imex-channels')"
    bad = {f"gb200-r0-t{i}": missing for i in range(18)}
    bad["gb200-r0-t18"] = "channel0 is not a character device: -rw-r--r-- 1 root root 0 channel0"
    assert imex_check.channel_findings(bad) == (
        f"gb200-r0-t0, gb200-r0-t1, gb200-r0-t2 and 15 more: {missing}; "
        "gb200-r0-t18: channel0 is not a character device: -rw-r--r-- 1 root root 0 channel0"
    )


class LogApi:
    """``Api.log`` answering from a script: an exception to raise or a text to return, one per read."""

    def __init__(self, *answers):
        self.answers = list(answers)
        self.reads = 0

    def log(self, pod, namespace):
        self.reads += 1
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, BaseException):
            raise answer
        return answer


def rack_run_of(api) -> rack_run.RackRun:
    plan = RackPlan("rack0", ["c.1"], ["t0", "t1"], ["t0", "t1"], [], 4, "NVIDIA GB200")
    check = nvbandwidth_check.NvbandwidthCheck(
        "img", MPI, "multinode_device_to_device_memcpy_read_ce", [], lambda *a: {}
    )
    return rack_run.RackRun(check, api, plan, rack_run.Settings(), sleep=lambda s: None)


NOT_YET = kube_api.ApiUnavailable(
    'read the log of pod ns/l: 400 Bad Request: no logs found for container "mpi-launcher" in pod l'
)


def test_a_log_not_served_yet_is_read_again():
    api = LogApi(NOT_YET, "", "nvbandwidth Version: v0.8\n")
    assert rack_run_of(api).read_log("l") == "nvbandwidth Version: v0.8\n"
    assert api.reads == 3


def test_a_log_never_served_is_an_api_failure_not_an_empty_log():
    api = LogApi(NOT_YET)
    with pytest.raises(kube_api.ApiUnavailable) as caught:
        rack_run_of(api).read_log("l")
    assert api.reads == 10
    assert str(caught.value) == (
        "read the log of the finished pod gpu-fabric-verify-nvbandwidth-rack0/l after 10 tries "
        '(read the log of pod ns/l: 400 Bad Request: no logs found for container "mpi-launcher" in pod l)'
    )


def test_a_refused_log_read_is_not_retried():
    api = LogApi(kube_api.ApiUnavailable("read the log of pod ns/l: 403 Forbidden: pods/log is forbidden"))
    with pytest.raises(kube_api.ApiUnavailable, match="403 Forbidden"):
        rack_run_of(api).read_log("l")
    assert api.reads == 1


class GoneApi:
    """An API server on which the check's namespace is already gone (the cleanup has nothing to do)."""

    def delete(self, *args, **kwargs):
        return None

    def get(self, *args, **kwargs):
        return None

    def served(self, kind, api_version):
        return True

    def watch_until(self, kind, api_version, namespace, judge, deadline, *args, **kwargs):
        return kube_watch.Outcome(value=judge({}))  # nothing is left in a namespace that is gone


class Raising(base.Check):
    name = "nvbandwidth"

    def __init__(self, exc):
        self.exc = exc

    def measure(self, run):
        raise self.exc


def record_after(exc) -> dict:
    plan = RackPlan("rack0", ["c.1"], ["t0", "t1"], ["t0", "t1"], [], 4, "NVIDIA GB200")
    return rack_run.RackRun(Raising(exc), GoneApi(), plan, rack_run.Settings(), sleep=lambda s: None).run()


@pytest.mark.parametrize(
    ("exc", "verdict", "start"),
    [
        (kube_api.ApiUnavailable("list Pod ns: 503 Service Unavailable"), "error", "rack rack0: could not list Pod ns"),
        (base.NotRun("MPIJob ns/j has no status after 60 s"), "error", "rack rack0: the check could not run: "),
        (KeyError("spec"), "error", "rack rack0: the check stopped on an unexpected error (KeyError: 'spec')"),
        (compute_domain.ComputeDomainError("no CRD", not_run=True), "error", "rack rack0: no CRD"),
        (
            compute_domain.ComputeDomainError("ComputeDomain ns/d not Ready after 60 s"),
            "failed",
            "rack rack0: ComputeDomain",
        ),
        (base.CheckFailed("3 GPU pairs below 765.00 GB/s", failed_nodes=["t1"]), "failed", "rack rack0: 3 GPU"),
    ],
)
def test_a_check_that_could_not_run_is_an_error_never_a_fabric_failure(exc, verdict, start):
    record = record_after(exc)
    assert (record["verdict"], record["passed"]) == (verdict, False)
    assert record["outcome"] == verdict
    assert record["summary"].startswith(start) and "\n" not in record["summary"]
    assert record["objects_left"] == 0


def test_a_kind_the_cluster_does_not_serve_is_looked_up_once():
    """Each miss makes the dynamic client rediscover the whole API, which races between the racks' threads."""
    lookups = []

    class Client:
        def resource(self, kind, api_version):
            lookups.append((kind, api_version))
            if api_version == "resource.k8s.io/v1":  # Kubernetes 1.33
                raise ResourceNotFoundError(f"{kind} {api_version}")
            return (kind, api_version)

    api = kube_api.Api(Client(), patience=0)
    kinds = (("Pod", "v1"), ("ResourceClaim", "resource.k8s.io/v1"))
    for _attempt in range(3):
        assert rack_run.dra_kinds(api, kinds) == (("Pod", "v1"), ("ResourceClaim", "resource.k8s.io/v1beta2"))
    assert lookups == [("ResourceClaim", "resource.k8s.io/v1"), ("ResourceClaim", "resource.k8s.io/v1beta2")]
    assert api.served("ResourceClaim", "resource.k8s.io/v1") is False and len(lookups) == 2
