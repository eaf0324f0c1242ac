# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""OpenShift detection, the namespace's SCC range, the pods' user and the SCC refusal line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import kube_api, openshift, rack_run
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.checks import base
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.checks import imex_channel as imex_check
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.checks import nvbandwidth as nvbandwidth_check
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.rack_plan import RackPlan
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.verification_objects import imex_pod_manifest
from fake_clock import Clock
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic.exceptions import api_exception
from mpi_settings import MPI

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "k8s"
FORBIDDEN = (FIXTURES / "openshift-scc-forbidden-pod.json").read_text()

# GET /apis of a cluster (APIGroupList), trimmed to the names
KUBERNETES_GROUPS = {"kind": "APIGroupList", "groups": [{"name": "apps"}, {"name": "resource.k8s.io"}]}
OPENSHIFT_GROUPS = {
    "kind": "APIGroupList",
    "groups": [{"name": "apps"}, {"name": "config.openshift.io"}, {"name": "security.openshift.io"}],
}


def test_openshift_is_the_cluster_serving_both_groups():
    assert openshift.is_openshift(OPENSHIFT_GROUPS) is True
    assert openshift.is_openshift(KUBERNETES_GROUPS) is False
    only_security = {"groups": [{"name": "security.openshift.io"}]}
    assert openshift.is_openshift(only_security) is False


def test_detection_reads_k8s_cluster_info_apis_keys():
    apis = {"v1": {}, "apps/v1": {}, "security.openshift.io/v1": {}, "config.openshift.io/v1": {}}
    assert openshift.is_openshift(apis) is True
    assert openshift.is_openshift(["apps/v1", "config.openshift.io/v1"]) is False


def test_detection_refuses_what_it_cannot_read():
    with pytest.raises(TypeError, match="got int"):
        openshift.api_groups(3)


def test_the_uid_range_annotation_is_first_and_size():
    namespace = {"metadata": {"annotations": {openshift.UID_RANGE_ANNOTATION: "1000680000/10000"}}}
    found = openshift.namespace_uid_range(namespace)
    assert found == openshift.UidRange(1000680000, 10000)
    assert 1000689999 in found and 1000690000 not in found and 1000 not in found
    assert openshift.namespace_uid_range({"metadata": {}}) is None
    with pytest.raises(ValueError, match="expected <first uid>/<size>"):
        openshift.parse_uid_range("1000680000-1000689999")


def test_the_pods_user_outside_the_range_is_left_to_the_scc_where_the_image_allows():
    uid_range = openshift.UidRange(1000680000, 10000)
    assert openshift.pod_run_as_user(65534, None, arbitrary_uid_works=True) == 65534
    assert openshift.pod_run_as_user(65534, uid_range, arbitrary_uid_works=True) is None
    assert openshift.pod_run_as_user(1000680005, uid_range, arbitrary_uid_works=True) == 1000680005
    assert openshift.pod_run_as_user(1000, uid_range, arbitrary_uid_works=False) == 1000


def test_a_pod_without_a_fixed_user_keeps_run_as_non_root():
    pod = imex_pod_manifest("gb200-r0-t0", "ns", "rack0", "t", "busybox", None)
    for context in (pod["spec"]["securityContext"], pod["spec"]["containers"][0]["securityContext"]):
        assert context["runAsNonRoot"] is True
        assert "runAsUser" not in context and "runAsGroup" not in context
    assert pod["spec"]["containers"][0]["securityContext"]["capabilities"] == {"drop": ["ALL"]}


class ForbiddingClient:
    """The dynamic client's resource lookup, and a create answered as OpenShift's SCC admission answers it."""

    def resource(self, kind, api_version):
        return (kind, api_version)

    def create(self, resource, body, namespace=None):
        error = ApiException(status=403, reason="Forbidden")
        error.body = FORBIDDEN
        raise api_exception(error)


def test_a_pod_refused_by_scc_admission_ends_the_check_with_one_line():
    plan = RackPlan("rack0", ["c.1"], ["gb200-r0-t0"], ["gb200-r0-t0"], [], 4, "NVIDIA GB200")
    run = rack_run.RackRun(
        imex_check.ImexChannelCheck("busybox"), kube_api.Api(ForbiddingClient()), plan, rack_run.Settings()
    )
    pod = imex_pod_manifest("gb200-r0-t0", run.namespace, "rack0", "t", "busybox", 65534)
    with pytest.raises(base.NotRun) as caught:
        run.create_pod(pod)
    text = str(caught.value)
    assert "\n" not in text
    assert text.startswith(
        "pod gpu-fabric-verify-imex-channel-rack0/imex-channel-gb200-r0-t0 refused by OpenShift's security context "
        "constraints: the pods run as uid 65534 and no SCC available to ServiceAccount "
        "gpu-fabric-verify-imex-channel-rack0/default admits them; allow it SCC nonroot-v2 (a RoleBinding to "
        "ClusterRole system:openshift:scc:nonroot-v2, see docs/openshift.md); server: create Pod "
        'gpu-fabric-verify-imex-channel-rack0/imex-channel-gb200-r0-t0: 403 Forbidden: pods "imex-channel-gb200-r0-t0" '
        "is forbidden: unable to validate against any security context constraint"
    )
    assert text.endswith("...") and len(text) < 700


class EventsApi:
    """``Api.list`` of the namespace's events."""

    def __init__(self, events):
        self.events = events

    def list(self, kind, api_version, namespace=None, label_selector=""):
        assert (kind, namespace) == ("Event", "gpu-fabric-verify-nvbandwidth-rack0")
        return self.events


def test_mpi_pods_refused_by_scc_admission_are_found_in_the_events():
    message = "Error creating: " + json.loads(FORBIDDEN)["message"].replace("imex-channel-gb200-r0-t0", "nvb-worker-0")
    plan = RackPlan("rack0", ["c.1"], ["t0", "t1"], ["t0", "t1"], [], 4, "NVIDIA GB200")
    check = nvbandwidth_check.NvbandwidthCheck(
        "img", MPI, "multinode_device_to_device_memcpy_read_ce", [], lambda *a: {}
    )
    normal = {"type": "Normal", "reason": "Scheduled", "message": "Successfully assigned"}
    run = rack_run.RackRun(check, EventsApi([normal]), plan, rack_run.Settings(openshift=True))
    check.raise_scc_refusal(run, "nvbandwidth-rack0")  # nothing refused: no error
    run.api = EventsApi([normal, {"type": "Warning", "reason": "FailedCreate", "message": message}])
    with pytest.raises(base.NotRun) as caught:
        check.raise_scc_refusal(run, "nvbandwidth-rack0")
    assert str(caught.value).startswith(
        "pods of MPIJob gpu-fabric-verify-nvbandwidth-rack0/nvbandwidth-rack0 refused by OpenShift's security "
        "context constraints: the pods run as uid 1000 (the mpiuser of the mpi-operator images: their sshd runs as "
        "no other user) and no SCC available to ServiceAccount gpu-fabric-verify-nvbandwidth-rack0/default admits "
        "them; allow it SCC nonroot-v2"
    )


class NamespaceApi:
    """``Api.get`` of the namespace: the annotations appear after ``after`` reads."""

    def __init__(self, after):
        self.after = after
        self.reads = 0

    def get(self, kind, api_version, name, namespace=None):
        self.reads += 1
        annotations = {openshift.UID_RANGE_ANNOTATION: "1000680000/10000"} if self.reads > self.after else {}
        return {"metadata": {"name": name, "annotations": annotations}}


def test_the_namespace_annotation_is_waited_for_a_bounded_time():
    plan = RackPlan("rack0", ["c.1"], ["t0"], ["t0"], [], 4, "NVIDIA GB200")
    clock = Clock()
    settings = rack_run.Settings(openshift=True, openshift_annotation_wait=10.0, poll=1.0)
    run = rack_run.RackRun(imex_check.ImexChannelCheck("busybox"), NamespaceApi(3), plan, settings, clock.sleep, clock)
    assert run.read_uid_range() == openshift.UidRange(1000680000, 10000)
    run = rack_run.RackRun(
        imex_check.ImexChannelCheck("busybox"), NamespaceApi(100), plan, settings, clock.sleep, clock
    )
    with pytest.raises(base.NotRun, match=r"has no openshift.io/sa.scc.uid-range annotation after 11 reads \(10 s\)"):
        run.read_uid_range()


class GivenNamespaceApi(NamespaceApi):
    """A namespace the site gave, annotated long ago; every right held, nothing of an earlier run left."""

    def can(self, right, namespace):
        return True

    def served(self, kind, api_version):
        return False


def test_a_given_namespace_on_openshift_has_its_user_range_read_too():
    plan = RackPlan("rack0", ["c.1"], ["t0"], ["t0"], [], 4, "NVIDIA GB200")
    clock = Clock()
    settings = rack_run.Settings(openshift=True, namespaces={"rack0": "site-gpu"})
    run = rack_run.RackRun(
        imex_check.ImexChannelCheck("busybox"), GivenNamespaceApi(0), plan, settings, clock.sleep, clock
    )
    run.create_namespace()
    assert run.namespace == "site-gpu" and run.uid_range == openshift.UidRange(1000680000, 10000)
