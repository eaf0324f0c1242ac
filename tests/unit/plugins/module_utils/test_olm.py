# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Who installed the GPU Operator: OLM (a Subscription for its package) or Helm."""

from __future__ import annotations

import copy
import json
from pathlib import Path

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import olm

SUBSCRIPTION = json.loads(
    (Path(__file__).resolve().parents[3] / "fixtures" / "k8s" / "olm-gpu-operator-subscription.json").read_text()
)
POLICY = {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": "gpu-cluster-policy"}}
OTHER = {"metadata": {"namespace": "openshift-nfd", "name": "nfd"}, "spec": {"name": "nfd"}, "status": {}}


def test_a_subscription_and_a_cluster_policy_mean_olm_owns_the_operator():
    install = olm.operator_install([OTHER, SUBSCRIPTION], [POLICY])
    assert install.owner == olm.OLM
    assert install.message == (
        "GPU Operator installed by OLM (Subscription nvidia-gpu-operator/gpu-operator-certified, "
        "CSV gpu-operator-certified.v25.10.0); ClusterPolicy gpu-cluster-policy; the Helm release is not installed"
    )
    assert install.to_dict()["managed_by_olm"] is True
    assert install.to_dict()["subscription"]["namespace"] == "nvidia-gpu-operator"


def test_no_subscription_for_the_operator_leaves_it_to_helm():
    install = olm.operator_install([OTHER], [POLICY])
    assert (install.owner, install.to_dict()["managed_by_olm"]) == (olm.HELM, False)
    assert install.cluster_policies == ["gpu-cluster-policy"]
    assert olm.operator_install([], []).owner == olm.HELM


def test_a_subscription_without_a_cluster_policy_is_named_and_not_installed_over():
    install = olm.operator_install([SUBSCRIPTION], [])
    assert install.owner == olm.OLM_WITHOUT_POLICY
    assert install.to_dict()["managed_by_olm"] is True
    assert install.message.startswith(
        "OLM Subscription nvidia-gpu-operator/gpu-operator-certified installs the GPU Operator "
        "(CSV gpu-operator-certified.v25.10.0) but no ClusterPolicy exists"
    )


def test_a_subscription_olm_has_not_resolved_yet_says_so():
    pending = copy.deepcopy(SUBSCRIPTION)
    pending["status"] = {}
    community = copy.deepcopy(SUBSCRIPTION)
    community["metadata"] = {"namespace": "operators", "name": "gpu-operator"}
    community["spec"]["name"] = "gpu-operator"
    install = olm.operator_install([pending, community], [POLICY])
    # sorted by namespace/name: nvidia-gpu-operator before operators
    assert install.message.startswith(
        "GPU Operator installed by OLM (Subscription nvidia-gpu-operator/gpu-operator-certified, CSV not resolved yet) "
        "(also operators/gpu-operator)"
    )
