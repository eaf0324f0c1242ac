# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The simulated rack across Kubernetes and DRA driver releases: the flags that turn DRA on where it is
beta (1.32, 1.33), the stand-ins' objects in each resource.k8s.io version, and the daemon names of each
DRA driver release. The last test (``-m sim``) has the rack's API server validate the stand-ins' objects
in every DRA version it serves.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT / "sim"))
from simrack.cluster import dra_flags  # noqa: E402
from simrack.controllers import computedomain, kubeletplugin  # noqa: E402
from simrack.controllers.kube import to_dra_version  # noqa: E402

UID = "6f1c2a4e-9b7d-4c3e-8a21-0d5f7e9b1c42"
CD = {
    "apiVersion": "resource.nvidia.com/v1beta1",
    "kind": "ComputeDomain",
    "metadata": {"name": "verify-rack0", "namespace": "ns", "uid": UID},
    "spec": {"numNodes": 0, "channel": {"resourceClaimTemplate": {"name": "verify-rack0-channel"}}},
}
NODE = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {"name": "gb200-r0-t0", "uid": "0f0e0d0c-0000-4000-8000-000000000001"},
}


@pytest.mark.parametrize(
    ("version", "runtime_config"),
    [
        ("1.32.11", "--runtime-config=resource.k8s.io/v1beta1=true"),
        ("1.33.13", "--runtime-config=resource.k8s.io/v1beta1=true,resource.k8s.io/v1beta2=true"),
    ],
)
def test_where_dra_is_beta_the_control_plane_turns_it_on(version, runtime_config):
    flags = dra_flags(version)
    gate = "--feature-gates=DynamicResourceAllocation=true"
    assert flags == {
        "kube-apiserver": [gate, runtime_config],
        "kube-controller-manager": [gate],
        "kube-scheduler": [gate],
    }


@pytest.mark.parametrize("version", ["1.34.4", "1.35.10", "1.37.2"])
def test_from_1_34_dra_needs_no_flag(version):
    assert dra_flags(version) == {}


def test_in_v1beta1_a_slices_devices_keep_their_attributes_under_basic():
    body = kubeletplugin.resource_slice(NODE)
    assert to_dra_version(body, "v1beta2")["spec"]["devices"] == body["spec"]["devices"]
    old = to_dra_version(body, "v1beta1")
    assert old["apiVersion"] == "resource.k8s.io/v1beta1"
    assert old["spec"]["devices"][0] == {
        "name": "channel-0",
        "basic": {"attributes": {"type": {"string": "channel"}, "id": {"int": 0}}},
    }
    assert body["apiVersion"] == "resource.k8s.io/v1"  # the v1 body is left as it was


def test_in_v1beta1_a_request_names_its_device_class_itself():
    body = computedomain.workload_claim_template(CD)
    new = to_dra_version(body, "v1beta2")
    assert new["spec"]["spec"]["devices"]["requests"] == body["spec"]["spec"]["devices"]["requests"]
    old = to_dra_version(body, "v1beta1")
    assert old["spec"]["spec"]["devices"]["requests"] == [
        {"name": "channel", "deviceClassName": "compute-domain-default-channel.nvidia.com"}
    ]


@pytest.mark.parametrize(
    ("image", "names"),
    [
        (
            "nvcr.io/nvidia/k8s-dra-driver-gpu:v25.8.0",
            ("verify-rack0-6f1c2", "verify-rack0-daemon-claim-template-6f1c2"),
        ),
        ("", ("verify-rack0-6f1c2", "verify-rack0-daemon-claim-template-6f1c2")),
        ("nvcr.io/nvidia/k8s-dra-driver-gpu:v25.12.0", (f"computedomain-daemon-{UID}", f"computedomain-daemon-{UID}")),
        ("registry.site:5000/nvidia/k8s-dra-driver-gpu:v26.4.1", (f"computedomain-daemon-{UID}",) * 2),
    ],
)
def test_the_daemon_is_named_as_the_running_driver_release_names_it(image, names):
    assert computedomain.daemon_names(CD, image) == names
    assert computedomain.daemon_set(CD, "nvidia-dra-driver-gpu", image)["metadata"]["name"] == names[0]


@pytest.mark.sim
def test_the_api_server_accepts_the_stand_ins_objects_in_every_dra_version_it_serves(sim_rack, namespace):
    group = json.loads(sim_rack.kubectl("get", "--raw", "/apis/resource.k8s.io").stdout)
    served = [v["version"] for v in group["versions"] if v["version"] in ("v1", "v1beta2", "v1beta1")]
    assert served, group
    node = sim_rack.get_json("node", "sim-control-plane")
    node.update(apiVersion="v1", kind="Node")
    cd = dict(CD, metadata=dict(CD["metadata"], namespace=namespace))
    for version in served:
        for body in (kubeletplugin.resource_slice(node), computedomain.workload_claim_template(cd)):
            obj = to_dra_version(body, version)
            made = sim_rack.kubectl("create", "--dry-run=server", "-o", "json", "-f", "-", input=json.dumps(obj))
            assert json.loads(made.stdout)["apiVersion"] == f"resource.k8s.io/{version}"
