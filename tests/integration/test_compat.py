# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The cluster and verify stages on the Kubernetes release the simulated rack runs.

`make compat` brings up one small rack per release in COMPAT_VERSIONS (GPU_FABRIC_SIM_K8S_VERSION, each
built into a cache of its own) and runs this file on each; docs/compatibility.md records the outcome.
On 1.32 and 1.33 the sim turns DRA on as cluster_preflight's advice says (the feature gate and the beta
API versions), so the collection meets resource.k8s.io/v1beta2 or v1beta1 instead of v1.
"""

from __future__ import annotations

import json
import os
import sys
from typing import TYPE_CHECKING

import pytest
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.release_sets import release_set as release_set_named
from test_cluster_stage import helm_release
from verify_helpers import REPO_ROOT, ZERO, apply_cluster_stage, gpu_trays, run_verify, verification_objects

sys.path.insert(0, str(REPO_ROOT / "sim"))
from simrack import build_versions


def release_set_vars(name: str) -> dict:
    return release_set_named(name).as_vars()


if TYPE_CHECKING:
    from conftest import SimRack

pytestmark = [
    pytest.mark.sim,
    pytest.mark.skipif(
        not os.environ.get("GPU_FABRIC_SIM_K8S_VERSION"),
        reason="runs on a release chosen with GPU_FABRIC_SIM_K8S_VERSION (make compat, .ci/run); the default "
        "release is proven by test_verify_stage.py and test_cluster_stage.py",
    ),
]


def expected_dra_version(k8s_version: str) -> str:
    minor = int(k8s_version.split(".")[1])
    return (
        "resource.k8s.io/v1" if minor >= 34 else "resource.k8s.io/v1beta2" if minor == 33 else "resource.k8s.io/v1beta1"
    )


# The guide's set first, then the default one: 26.7 after 25.10 is the supported move in place (the other way
# round is a downgrade the DRA driver refuses), so each set is proven on the release, and the move too.
@pytest.mark.parametrize("release_set", ["25.10", "26.7"])
def test_cluster_then_verify_pass_on_the_release_the_rack_runs(sim_rack: SimRack, tmp_path, release_set):
    version = build_versions(environ=sim_rack.env)["K8S_VERSION"]
    served = json.loads(sim_rack.kubectl("version", "-o", "json").stdout)["serverVersion"]["gitVersion"]
    assert served == f"v{version}"
    groups = json.loads(sim_rack.kubectl("get", "--raw", "/apis/resource.k8s.io").stdout)
    dra = expected_dra_version(version)
    assert groups["preferredVersion"]["groupVersion"] == dra

    cluster = apply_cluster_stage(sim_rack, "-e", f"gpu_fabric_release_set={release_set}")
    cluster_output = cluster.stdout + cluster.stderr
    assert cluster.returncode == 0, cluster_output[-8000:]
    assert f"Kubernetes v{version}, " in cluster_output and f"{dra} served" in cluster_output
    assert f"ResourceSlices on every GPU node ({dra})" in cluster_output
    wanted = release_set_vars(release_set)
    assert [helm_release(sim_rack, name, name).get("chart") for name in ("gpu-operator", "nvidia-dra-driver-gpu")] == [
        f"gpu-operator-{wanted['gpu_operator_chart_version']}",
        f"{wanted['dra_driver_chart_name']}-{wanted['dra_driver_chart_version']}",
    ]

    racks = gpu_trays(sim_rack)
    run = run_verify(sim_rack, tmp_path / "report")
    assert run.process.returncode == 0, run.output[-6000:]
    records = run.records()
    assert sorted(records) == ["cliques", "imex_channel", "nvbandwidth"]
    for check, by_rack in records.items():
        assert sorted(by_rack) == sorted(racks), check
        for rack, record in by_rack.items():
            assert record["outcome"] == "passed", (check, rack, record["summary"])
            assert record["nodes"] == racks[rack]
            assert record["objects_left"] == 0
            assert record["cluster"]["server_version"] == f"v{version}"
    assert run.report()["passed"] is True
    assert verification_objects(sim_rack, run.prefix) == ZERO
