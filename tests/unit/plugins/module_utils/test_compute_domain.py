# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

import pytest
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.compute_domain import (
    ComputeDomainError,
    ComputeDomainSpec,
    Request,
    desired_object,
    diff_view,
    ensure,
    evaluate_readiness,
    immutable_spec_message,
    of_domain,
    parse_nodes,
    spec_differences,
    spec_from_object,
    timeout_message,
    validate_spec,
)

CLIQUE = "5d5e9fd8-0ab7-4b69-8a3c-c0e2cbf2c6d1.32766"


def cd(status=None, spec=None):
    """A ComputeDomain as the API server returns it (shape of resource.nvidia.com/v1beta1 at 25.8.0)."""
    obj = {
        "apiVersion": "resource.nvidia.com/v1beta1",
        "kind": "ComputeDomain",
        "metadata": {"name": "nvb", "namespace": "verify", "uid": "0b3c", "resourceVersion": "812"},
        "spec": spec
        or {"numNodes": 0, "channel": {"resourceClaimTemplate": {"name": "nvb-channel"}, "allocationMode": "Single"}},
    }
    if status is not None:
        obj["status"] = status
    return obj


def node(name, status="Ready", index=0):
    return {"name": name, "status": status, "cliqueID": CLIQUE, "ipAddress": f"10.244.0.{index + 10}", "index": index}


def test_desired_object_matches_the_crd_shape():
    spec = ComputeDomainSpec(num_nodes=2, channel_template_name="nvb-channel", allocation_mode="All")
    assert desired_object("nvb", "verify", spec) == {
        "apiVersion": "resource.nvidia.com/v1beta1",
        "kind": "ComputeDomain",
        "metadata": {"name": "nvb", "namespace": "verify"},
        "spec": {"numNodes": 2, "channel": {"resourceClaimTemplate": {"name": "nvb-channel"}, "allocationMode": "All"}},
    }


def test_spec_from_object_fills_the_server_default_allocation_mode():
    obj = cd(spec={"numNodes": 1, "channel": {"resourceClaimTemplate": {"name": "imex-channel-0"}}})
    assert spec_from_object(obj) == ComputeDomainSpec(1, "imex-channel-0", "Single")


def test_equal_specs_have_no_differences():
    existing = spec_from_object(cd())
    assert spec_differences(existing, ComputeDomainSpec(0, "nvb-channel", "Single")) == []


def test_spec_differences_name_each_changed_field():
    existing = spec_from_object(cd())
    desired = ComputeDomainSpec(2, "nvb-channel", "All")
    assert spec_differences(existing, desired) == [
        "spec.numNodes: 0 -> 2",
        "spec.channel.allocationMode: 'Single' -> 'All'",
    ]


def test_immutable_message_tells_what_to_do():
    message = immutable_spec_message("nvb", "verify", ["spec.numNodes: 0 -> 2"])
    assert "verify/nvb" in message
    assert "spec.numNodes: 0 -> 2" in message
    assert "immutable" in message
    assert "force=true" in message
    assert "state=absent" in message


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        (ComputeDomainSpec(-1, "c"), "num_nodes is -1"),
        (ComputeDomainSpec(0, "c", "Some"), "channel_allocation_mode is 'Some'"),
        (ComputeDomainSpec(0, ""), "channel_template_name is empty"),
    ],
)
def test_validate_spec_rejects_bad_values(spec, fragment):
    problems = validate_spec(spec)
    assert len(problems) == 1
    assert fragment in problems[0]


def test_parse_nodes_defaults_missing_status_to_not_ready():
    entries = [node("gb200-r0-t0"), {"name": "gb200-r0-t1", "cliqueID": CLIQUE, "ipAddress": "10.244.0.11"}]
    parsed = parse_nodes({"status": "NotReady", "nodes": entries})
    assert [(n.name, n.status, n.clique_id, n.ip_address) for n in parsed] == [
        ("gb200-r0-t0", "Ready", CLIQUE, "10.244.0.10"),
        ("gb200-r0-t1", "NotReady", CLIQUE, "10.244.0.11"),
    ]
    assert parsed[0].to_dict() == {
        "name": "gb200-r0-t0",
        "status": "Ready",
        "clique_id": CLIQUE,
        "ip_address": "10.244.0.10",
    }


def test_absent_object_is_not_ready():
    readiness = evaluate_readiness(None)
    assert not readiness.ready
    assert readiness.reasons == ["the ComputeDomain does not exist"]


def test_wait_nodes_require_each_named_node_ready():
    obj = cd({"status": "NotReady", "nodes": [node("gb200-r0-t0"), node("gb200-r0-t1", "NotReady", 1)]})
    readiness = evaluate_readiness(obj, wait_nodes=["gb200-r0-t0", "gb200-r0-t1", "gb200-r0-t2"])
    assert not readiness.ready
    assert readiness.missing_nodes == ["gb200-r0-t2"]
    assert readiness.not_ready_nodes == ["gb200-r0-t1"]
    assert readiness.reasons == ["nodes not yet in status.nodes: gb200-r0-t2", "nodes not Ready: gb200-r0-t1"]


def test_wait_nodes_ignore_the_aggregate_status():
    # With numNodes=0 the aggregate is documented as "for debugging": per-node readiness decides.
    obj = cd({"status": "NotReady", "nodes": [node("gb200-r0-t0"), node("gb200-r0-t1", index=1)]})
    readiness = evaluate_readiness(obj, wait_nodes=["gb200-r0-t1", "gb200-r0-t0"])
    assert readiness.ready
    assert readiness.reasons == []


def test_num_nodes_needs_enough_ready_nodes_and_ready_aggregate():
    obj = cd({"status": "NotReady", "nodes": [node("gb200-r0-t0"), node("gb200-r0-t1", "NotReady", 1)]})
    readiness = evaluate_readiness(obj, num_nodes=2)
    assert not readiness.ready
    assert readiness.reasons == ["1 of 2 nodes Ready", "status.status is NotReady, expected Ready"]
    assert readiness.not_ready_nodes == ["gb200-r0-t1"]


def test_num_nodes_ready():
    obj = cd({"status": "Ready", "nodes": [node("gb200-r0-t0"), node("gb200-r0-t1", index=1)]})
    readiness = evaluate_readiness(obj, num_nodes=2)
    assert readiness.ready
    assert readiness.aggregate == "Ready"
    assert [n.name for n in readiness.nodes] == ["gb200-r0-t0", "gb200-r0-t1"]


def test_num_nodes_zero_waits_for_a_status_only():
    assert evaluate_readiness(cd()).reasons == ["the controller has not written a status yet"]
    assert evaluate_readiness(cd({"status": "Ready"})).ready
    # a node that joined but is not Ready still blocks
    joined = evaluate_readiness(cd({"status": "Ready", "nodes": [node("gb200-r0-t3", "NotReady", 3)]}))
    assert not joined.ready
    assert joined.reasons == ["nodes not Ready: gb200-r0-t3"]


def test_diff_view_drops_status_and_server_metadata():
    obj = cd({"status": "Ready", "nodes": [node("gb200-r0-t0")]})
    assert diff_view(obj) == {
        "apiVersion": "resource.nvidia.com/v1beta1",
        "kind": "ComputeDomain",
        "metadata": {"name": "nvb", "namespace": "verify"},
        "spec": {
            "numNodes": 0,
            "channel": {"resourceClaimTemplate": {"name": "nvb-channel"}, "allocationMode": "Single"},
        },
    }
    assert diff_view(None) == {}


def test_timeout_message_names_status_nodes_and_driver_state():
    obj = cd({"status": "NotReady", "nodes": [node("gb200-r0-t0"), node("gb200-r0-t1", "NotReady", 1)]})
    readiness = evaluate_readiness(obj, wait_nodes=["gb200-r0-t0", "gb200-r0-t1"])
    message = timeout_message(
        "nvb", "verify", 30, readiness, ["Deployment nvidia-dra-driver-gpu/nvidia-dra-driver-gpu-controller 0/1 ready"]
    )
    assert message.startswith("ComputeDomain verify/nvb not ready after 30s: nodes not Ready: gb200-r0-t1.")
    assert "status.status=NotReady; status.nodes: Ready: gb200-r0-t0; NotReady: gb200-r0-t1." in message
    assert "DRA driver: Deployment nvidia-dra-driver-gpu/nvidia-dra-driver-gpu-controller 0/1 ready." in message


class ServerWithoutTheCrd:
    """Discovery of an API server on which computedomains.resource.nvidia.com is not installed."""

    def resource(self, kind, api_version):
        from kubernetes.dynamic.exceptions import ResourceNotFoundError

        raise ResourceNotFoundError(f"No matches found for {{'api_version': '{api_version}', 'kind': '{kind}'}}")


def test_absent_without_the_crd_is_already_absent():
    request = Request(
        name="nvb",
        namespace="verify",
        state="absent",
        spec=ComputeDomainSpec(num_nodes=0, channel_template_name="nvb-channel"),
    )
    result = ensure(ServerWithoutTheCrd(), request)
    assert result["changed"] is False
    assert result["compute_domain"] == {}


def test_present_without_the_crd_says_to_install_the_dra_driver():
    request = Request(
        name="nvb",
        namespace="verify",
        state="present",
        spec=ComputeDomainSpec(num_nodes=0, channel_template_name="nvb-channel"),
    )
    with pytest.raises(ComputeDomainError, match=r"CRD computedomains.resource.nvidia.com is missing"):
        ensure(ServerWithoutTheCrd(), request)


def test_a_rack_of_nodes_not_ready_stays_one_readable_line():
    obj = {
        "status": {"status": "NotReady", "nodes": [{"name": f"gb200-r1-t{i}", "status": "NotReady"} for i in range(18)]}
    }
    readiness = evaluate_readiness(obj, wait_nodes=[f"gb200-r1-t{i}" for i in range(18)])
    message = timeout_message("imex-channel-rack1", "ns", 40, readiness, [])
    assert message.startswith(
        "ComputeDomain ns/imex-channel-rack1 not ready after 40s: nodes not Ready: gb200-r1-t0, gb200-r1-t1, "
        "gb200-r1-t2, gb200-r1-t3, gb200-r1-t4 and 13 more. status.status=NotReady; status.nodes: NotReady: "
        "gb200-r1-t0, gb200-r1-t1, gb200-r1-t2, gb200-r1-t3, gb200-r1-t4 and 13 more."
    )


UID = "6f1c2a4e-9b7d-4c3e-8a21-0d5f7e9b1c42"


@pytest.mark.parametrize(
    ("daemon_set", "belongs"),
    [
        # DRA driver 25.8.0: generateName "<domain name>-", the domain's UID as label
        ({"name": "verify-rack0-x7k2p", "labels": {"resource.nvidia.com/computeDomain": UID}}, True),
        # 25.12.0: named after the domain's UID
        ({"name": f"computedomain-daemon-{UID}", "labels": {"resource.nvidia.com/computeDomain": UID}}, True),
        ({"name": f"computedomain-daemon-{UID}"}, True),
        ({"name": "computedomain-daemon-0b9e", "labels": {"resource.nvidia.com/computeDomain": "0b9e"}}, False),
        ({"name": "verify-rack1-q2w3e", "labels": {"resource.nvidia.com/computeDomain": "other"}}, False),
    ],
)
def test_the_domains_daemon_set_is_found_under_each_drivers_naming(daemon_set, belongs):
    assert of_domain({"metadata": daemon_set}, "verify-rack0", UID) is belongs


class ServerOfOneDomain:
    """A ComputeDomain whose node joins at its ``ready_at``-th change, its channel template there from the
    start; counts the lists, the watches and the template's reads."""

    def __init__(self, ready_at: int):
        self.ready_at = ready_at
        self.calls = {"get": 0, "list": 0, "watch": 0, "ResourceClaimTemplate": 0}

    def resource(self, kind, api_version):
        return type("Resource", (), {"kind": kind, "api_version": api_version})()

    @staticmethod
    def domain(name, namespace, ready):
        nodes = [{"name": "t0", "status": "Ready", "cliqueID": "c.1", "ipAddress": "10.0.0.1"}] if ready else []
        return {
            "metadata": {"name": name, "namespace": namespace, "resourceVersion": "7"},
            "spec": {"numNodes": 0, "channel": {"resourceClaimTemplate": {"name": "nvb-channel"}}},
            "status": {"status": "Ready" if ready else "NotReady", "nodes": nodes},
        }

    def get(self, resource, name=None, namespace=None, field_selector=None, serialize=True):
        if resource.kind == "ResourceClaimTemplate":
            self.calls["ResourceClaimTemplate"] += 1
            return {"metadata": {"name": name, "namespace": namespace}}
        if name:  # the read before anything is done: the domain exists, as asked
            self.calls["get"] += 1
            return self.domain(name, namespace, False)
        assert field_selector == "metadata.name=nvb"
        self.calls["list"] += 1
        return {"items": [self.domain("nvb", namespace, False)], "metadata": {"resourceVersion": "7"}}

    def watch(self, resource, namespace, name, resource_version, timeout):
        assert (name, resource_version) == ("nvb", "7")
        self.calls["watch"] += 1
        for change in range(2, self.ready_at + 1):
            yield {"type": "MODIFIED", "raw_object": self.domain(name, namespace, change >= self.ready_at)}


def test_a_wait_costs_one_list_and_one_watch_and_reads_the_template_once():
    server = ServerOfOneDomain(ready_at=5)
    request = Request(
        name="nvb",
        namespace="verify",
        state="present",
        spec=ComputeDomainSpec(num_nodes=0, channel_template_name="nvb-channel"),
        wait_nodes=["t0"],
        wait_sleep=0.0,
    )

    result = ensure(server, request, sleep=lambda _s: None)

    assert [node["name"] for node in result["nodes"]] == ["t0"]
    assert server.calls == {"get": 1, "list": 1, "watch": 1, "ResourceClaimTemplate": 1}
