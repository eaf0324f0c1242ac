# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Which version of the DRA API (``resource.k8s.io``) a cluster serves, and how to turn it on.

Kubernetes serves Dynamic Resource Allocation in three versions: ``v1beta1`` (1.32, off by default),
``v1beta2`` (1.33, off by default) and ``v1`` (1.34, on by default). The NVIDIA DRA driver 25.8.0
works with any of them (its chart picks the newest the cluster serves, its controllers fall back
from v1 to v1beta2 and v1beta1), so the collection does the same: it reads the newest served
version once and uses it for every DeviceClass, ResourceSlice, ResourceClaim and
ResourceClaimTemplate it reads or deletes.

>>> served_dra_version(["v1", "resource.k8s.io/v1beta1", "resource.k8s.io/v1beta2"])
'resource.k8s.io/v1beta2'
>>> dra_problem(["resource.k8s.io/v1beta2"], "v1.33.13")
''
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Iterable, Optional, Tuple

DRA_GROUP = "resource.k8s.io"
# Newest first: the order in which the chart and the driver's client pick one.
DRA_API_VERSIONS: Tuple[str, ...] = ("resource.k8s.io/v1", "resource.k8s.io/v1beta2", "resource.k8s.io/v1beta1")

# Off by default before 1.34: the feature gate on every component and the beta API on the API server.
_RUNTIME_CONFIG = {
    32: "resource.k8s.io/v1beta1=true",
    33: "resource.k8s.io/v1beta1=true,resource.k8s.io/v1beta2=true",
}
_COMPONENTS = "kube-apiserver, kube-controller-manager, kube-scheduler and every kubelet"


def group_versions(served: Any) -> set:
    """The ``group/version`` strings in ``served``: the ``apis`` of kubernetes.core.k8s_cluster_info
    (a mapping keyed by group/version), a list of group/versions, or an APIGroupList (``GET /apis``)."""
    if isinstance(served, Mapping) and "groups" in served:
        found = set()
        for group in served.get("groups") or []:
            if isinstance(group, Mapping):
                versions = group.get("versions") or []
                found.update(str(v.get("groupVersion", "")) for v in versions if isinstance(v, Mapping))
        return found
    if isinstance(served, (Mapping, list, tuple, set, frozenset)):
        return {str(item) for item in served}
    raise TypeError(f"expected the served API group/versions or an APIGroupList, got {type(served).__name__}")


def served_dra_version(served: Any, candidates: Iterable[str] = DRA_API_VERSIONS) -> Optional[str]:
    """The newest of ``candidates`` in ``served`` (see :func:`group_versions`), or None."""
    versions = group_versions(served)
    return next((c for c in candidates if c in versions), None)


def _minor(server_version: str) -> Optional[int]:
    match = re.match(r"^\s*v?1\.(\d+)", server_version or "")
    return int(match.group(1)) if match else None


def enable_advice(server_version: str) -> str:
    """How to make a cluster of ``server_version`` serve the DRA API (one sentence)."""
    minor = _minor(server_version)
    if minor is not None and minor < 32:
        return (
            "upgrade the control plane and the kubelets to Kubernetes 1.32 or later "
            "(1.34+ serves resource.k8s.io/v1 by default)"
        )
    if minor in _RUNTIME_CONFIG:
        return (
            f"on Kubernetes 1.{minor} DRA is off by default: start {_COMPONENTS} with "
            f"--feature-gates=DynamicResourceAllocation=true, and kube-apiserver with "
            f"--runtime-config={_RUNTIME_CONFIG[minor]}; or upgrade to Kubernetes 1.34.2+, which serves "
            "resource.k8s.io/v1 by default"
        )
    return (
        "Kubernetes 1.34 and later serve resource.k8s.io/v1 by default: remove DynamicResourceAllocation=false from "
        f"the --feature-gates of {_COMPONENTS}, and resource.k8s.io/v1=false (or api/all=false) from the "
        "--runtime-config of kube-apiserver"
    )


def dra_problem(served: Any, server_version: str, required: str = "") -> str:
    """One line saying what is wrong with the cluster's DRA API, or "" when a usable version is served.

    ``required`` (a group/version) demands that version; empty accepts any of :data:`DRA_API_VERSIONS`.
    """
    candidates = (required,) if required else DRA_API_VERSIONS
    if served_dra_version(served, candidates):
        return ""
    have = served_dra_version(served)
    if required and have:
        return (
            f"the API server {server_version} serves {have} but not {required} (cluster_preflight_dra_api_version); "
            "the NVIDIA DRA driver works with any of " + ", ".join(DRA_API_VERSIONS) + ": leave the variable empty "
            f"to use the served one, or {enable_advice(server_version)}"
        )
    wanted = required or ", ".join(DRA_API_VERSIONS)
    return f"the API server {server_version} serves no DRA API ({wanted}); {enable_advice(server_version)}"
