# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Whether the GPU Operator of a cluster was installed by OLM (OpenShift's Operator Lifecycle Manager).

On OpenShift the GPU Operator is installed from OperatorHub: a Subscription
(``operators.coreos.com/v1alpha1``, usually in ``nvidia-gpu-operator``) for the ``gpu-operator-certified``
package makes OLM install its ClusterServiceVersion (CSV), and the ClusterPolicy is created from the CSV's
example. A Helm release of the same operator over it would run two operators on one ClusterPolicy.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence

SUBSCRIPTION_API_VERSION = "operators.coreos.com/v1alpha1"
CLUSTER_POLICY_API_VERSION = "nvidia.com/v1"
# OperatorHub's packages of the NVIDIA GPU Operator: the certified one (OpenShift), the community one.
GPU_OPERATOR_PACKAGES = ("gpu-operator-certified", "gpu-operator")

HELM = "helm"  # no Subscription for the operator: the role installs (or upgrades) its Helm release
OLM = "olm"  # a Subscription and a ClusterPolicy: OLM owns the operator, the role only checks readiness
OLM_WITHOUT_POLICY = "olm_without_policy"  # OLM installed the operator, nobody created the ClusterPolicy


@dataclass
class OlmSubscription:
    namespace: str
    name: str
    package: str
    csv: str  # the installed CSV, else the one OLM is installing; "" before OLM resolved it

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass
class OperatorInstall:
    owner: str  # HELM, OLM or OLM_WITHOUT_POLICY
    message: str
    subscription: Optional[OlmSubscription]
    cluster_policies: List[str]

    def to_dict(self) -> Dict[str, Any]:
        result = asdict(self)
        result["managed_by_olm"] = self.owner != HELM
        return result


def gpu_operator_subscriptions(
    subscriptions: Sequence[Mapping[str, Any]], packages: Sequence[str] = GPU_OPERATOR_PACKAGES
) -> List[OlmSubscription]:
    """The Subscriptions (any namespace) for a GPU Operator package, sorted by namespace/name."""
    found = []
    for item in subscriptions:
        spec = item.get("spec") or {}
        if spec.get("name") not in packages:
            continue
        status = item.get("status") or {}
        meta = item.get("metadata") or {}
        found.append(
            OlmSubscription(
                namespace=str(meta.get("namespace", "")),
                name=str(meta.get("name", "")),
                package=str(spec["name"]),
                csv=str(status.get("installedCSV") or status.get("currentCSV") or ""),
            )
        )
    return sorted(found, key=lambda s: (s.namespace, s.name))


def operator_install(
    subscriptions: Sequence[Mapping[str, Any]],
    cluster_policies: Sequence[Mapping[str, Any]],
    packages: Sequence[str] = GPU_OPERATOR_PACKAGES,
) -> OperatorInstall:
    """Who installed the GPU Operator, from the cluster's Subscriptions and ClusterPolicies."""
    policies = sorted(str((p.get("metadata") or {}).get("name", "")) for p in cluster_policies)
    found = gpu_operator_subscriptions(subscriptions, packages)
    if not found:
        return OperatorInstall(HELM, "no OLM Subscription for the GPU Operator: installed by Helm", None, policies)
    subscription = found[0]
    others = f" (also {', '.join(s.ref for s in found[1:])})" if len(found) > 1 else ""
    csv = subscription.csv or "not resolved yet"
    if not policies:
        return OperatorInstall(
            OLM_WITHOUT_POLICY,
            f"OLM Subscription {subscription.ref}{others} installs the GPU Operator (CSV {csv}) but no ClusterPolicy "
            f"exists: create it from the CSV's example (alm-examples of CSV {csv} in namespace "
            f"{subscription.namespace}, or the console's ClusterPolicy form); the role does not install the Helm "
            "chart over an OLM install",
            subscription,
            policies,
        )
    return OperatorInstall(
        OLM,
        f"GPU Operator installed by OLM (Subscription {subscription.ref}, CSV {csv}){others}; ClusterPolicy "
        f"{', '.join(policies)}; the Helm release is not installed",
        subscription,
        policies,
    )
