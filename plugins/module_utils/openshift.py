# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""OpenShift: how the collection knows it runs on one, and what changes for the checks' pods.

OpenShift is the cluster that serves the ``security.openshift.io`` (SecurityContextConstraints) and
``config.openshift.io`` (ClusterVersion) API groups. There, the admission of SecurityContextConstraints
(SCC) decides the user of a pod: the default ``restricted-v2`` SCC admits only a user ID out of the
namespace's range, which OpenShift's namespace controller writes into the namespace's
``openshift.io/sa.scc.uid-range`` annotation (``<first>/<size>``) a moment after the namespace is
created; a pod that sets no ``runAsUser`` runs as the first ID of that range.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Optional, Set

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.text import one_line

OPENSHIFT_API_GROUPS = ("security.openshift.io", "config.openshift.io")

UID_RANGE_ANNOTATION = "openshift.io/sa.scc.uid-range"
SUPPLEMENTAL_GROUPS_ANNOTATION = "openshift.io/sa.scc.supplemental-groups"
MCS_ANNOTATION = "openshift.io/sa.scc.mcs"

# What SCC admission answers (403 Forbidden) for a pod that no SCC available to it admits.
SCC_REFUSAL = "unable to validate against any security context constraint"
# The SCC that admits a fixed non-root user (mpiuser, uid 1000), and the ClusterRole that grants its use.
NONROOT_SCC = "nonroot-v2"
NONROOT_SCC_CLUSTER_ROLE = "system:openshift:scc:nonroot-v2"


def api_groups(served: Any) -> Set[str]:
    """The API group names in ``served``: an APIGroupList (``GET /apis``), or group/version strings
    (the keys of kubernetes.core.k8s_cluster_info's ``apis``), or group names."""
    if isinstance(served, Mapping) and "groups" in served:
        return {str(group.get("name", "")) for group in served.get("groups") or [] if isinstance(group, Mapping)}
    if isinstance(served, (Mapping, list, tuple, set, frozenset)):
        return {str(item).split("/", 1)[0] for item in served if "/" in str(item) or "." in str(item)}
    raise TypeError(f"expected an APIGroupList or a list of API group/versions, got {type(served).__name__}")


def is_openshift(served: Any) -> bool:
    """Whether the cluster serving ``served`` (see :func:`api_groups`) is OpenShift: it serves both groups."""
    groups = api_groups(served)
    return all(group in groups for group in OPENSHIFT_API_GROUPS)


def discover_openshift(request: Any) -> bool:
    """``request``: a callable answering ``GET /apis`` (the APIGroupList, as a dict)."""
    return is_openshift(request())


@dataclass(frozen=True)
class UidRange:
    first: int
    size: int

    def __contains__(self, uid: object) -> bool:
        return isinstance(uid, int) and self.first <= uid < self.first + self.size

    def __str__(self) -> str:
        return f"{self.first}/{self.size}"


def parse_uid_range(text: str) -> UidRange:
    """``1000680000/10000`` (OpenShift's form: first ID, then how many) -> UidRange."""
    first, sep, size = str(text).strip().partition("/")
    if not sep or not first.isdigit() or not size.isdigit() or int(size) < 1:
        raise ValueError(f"{UID_RANGE_ANNOTATION} is {text!r}; expected <first uid>/<size>, e.g. 1000680000/10000")
    return UidRange(int(first), int(size))


def namespace_uid_range(namespace: Optional[Mapping[str, Any]]) -> Optional[UidRange]:
    """The namespace's SCC user range, or None while (or where) it carries none."""
    annotations = ((namespace or {}).get("metadata") or {}).get("annotations") or {}
    text = annotations.get(UID_RANGE_ANNOTATION)
    return parse_uid_range(text) if text else None


def pod_run_as_user(configured: int, uid_range: Optional[UidRange], arbitrary_uid_works: bool) -> Optional[int]:
    """The ``runAsUser`` to set on a check's pods; None: set none, the SCC assigns the range's first ID.

    Outside OpenShift (no range) or inside the range: the configured user. Outside the range: none where
    the image runs as any user (``ls``); the configured one where it cannot (sshd as mpiuser), which the
    namespace's service account must then be allowed (SCC nonroot-v2).
    """
    if uid_range is None or configured in uid_range:
        return configured
    return None if arbitrary_uid_works else configured


def is_scc_refusal(text: str) -> bool:
    return SCC_REFUSAL in str(text)


def scc_refusal_message(what: str, server_text: str, namespace: str, user: Optional[int], reason: str = "") -> str:
    """One line for pods that SCC admission refused: what, as which user, and the grant that admits them."""
    as_user = f"as uid {user}" if user is not None else "without a fixed user"
    because = f" ({reason})" if reason else ""
    return one_line(
        f"{what} refused by OpenShift's security context constraints: the pods run {as_user}{because} and no SCC "
        f"available to ServiceAccount {namespace}/default admits them; allow it SCC {NONROOT_SCC} (a RoleBinding "
        f"to ClusterRole {NONROOT_SCC_CLUSTER_ROLE}, see docs/openshift.md); server: {_after_refusal(server_text)}"
    )


def _after_refusal(text: str, limit: int = 240) -> str:
    line = one_line(str(text))
    return line if len(line) <= limit else line[: limit - 3] + "..."
