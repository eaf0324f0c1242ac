# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""What an uninstall of the cluster stage removes, and what stops it.

The stack is removed in the reverse order of its install: the verification leftovers, the MPI operator,
the DRA driver, the GPU Operator. A ComputeDomain or MPIJob that a user created (not labelled by the
verification stage) still needs the driver's controller (its finalizer) and the MPI operator; removing
the stack under it would leave objects that never finish deleting, so the uninstall refuses, naming them,
unless forced (then they are deleted first, while their controllers still run).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Dict, Iterable, List, Mapping, Sequence, Tuple

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.compute_domain import (
    API_VERSION as COMPUTE_DOMAIN_API_VERSION,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.priority import PRIORITY_API_VERSION
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.verification_objects import (
    MPIJOB_API_VERSION,
    PART_OF,
    PART_OF_LABEL,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.verify_schedule import MANAGED_BY as SCHEDULE_MANAGED_BY

CRD_KIND = "CustomResourceDefinition"
# Deleted last among a manifest's objects: deleting a Namespace deletes what is in it.
_CLUSTER_SCOPED_LAST = ("Namespace",)
NAMES_SHOWN = 20


@dataclass(frozen=True)
class ObjectRef:
    api_version: str
    kind: str
    name: str
    namespace: str = ""

    @property
    def ref(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}" if self.namespace else f"{self.kind} {self.name}"

    def to_dict(self) -> Dict[str, str]:
        return asdict(self)

    def definition(self) -> Dict[str, Any]:
        """The minimal manifest kubernetes.core.k8s needs to delete the object."""
        metadata = {"name": self.name}
        if self.namespace:
            metadata["namespace"] = self.namespace
        return {"apiVersion": self.api_version, "kind": self.kind, "metadata": metadata}


def object_ref(obj: Mapping[str, Any], api_version: str = "", kind: str = "") -> ObjectRef:
    meta = obj.get("metadata") or {}
    return ObjectRef(
        api_version=str(obj.get("apiVersion") or api_version),
        kind=str(obj.get("kind") or kind),
        name=str(meta.get("name", "")),
        namespace=str(meta.get("namespace") or ""),
    )


def made_by_verification(obj: Mapping[str, Any]) -> bool:
    """Whether the verification stage created ``obj`` (its ``app.kubernetes.io/part-of`` label)."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return labels.get(PART_OF_LABEL) == PART_OF


def _sorted(refs: Iterable[ObjectRef]) -> List[ObjectRef]:
    return sorted(refs, key=lambda r: (r.kind, r.namespace, r.name))


def partition_workloads(
    compute_domains: Sequence[Mapping[str, Any]], mpijobs: Sequence[Mapping[str, Any]]
) -> Tuple[List[ObjectRef], List[ObjectRef]]:
    """The users' ComputeDomains and MPIJobs, and the verification stage's, each sorted."""
    users: List[ObjectRef] = []
    ours: List[ObjectRef] = []
    for objects, api_version, kind in (
        (compute_domains, COMPUTE_DOMAIN_API_VERSION, "ComputeDomain"),
        (mpijobs, MPIJOB_API_VERSION, "MPIJob"),
    ):
        for obj in objects:
            (ours if made_by_verification(obj) else users).append(object_ref(obj, api_version, kind))
    return _sorted(users), _sorted(ours)


def verification_namespaces(namespaces: Sequence[Mapping[str, Any]]) -> List[str]:
    """Namespaces the verification stage created (labelled); a namespace the site gave carries no label."""
    return sorted(str((n.get("metadata") or {}).get("name", "")) for n in namespaces if made_by_verification(n))


def refusal_message(users: Sequence[ObjectRef], force_variable: str = "gpu_fabric_uninstall_force") -> str:
    """One line naming the users' workloads that stop the uninstall and the two ways on."""
    names = ", ".join(r.ref for r in users[:NAMES_SHOWN])
    more = f" and {len(users) - NAMES_SHOWN} more" if len(users) > NAMES_SHOWN else ""
    return (
        f"{len(users)} workload(s) of users still use the GPU stack: {names}{more}. Delete them (or wait for the "
        f"jobs to end) and run the uninstall again, or set {force_variable}: true to delete them first. "
        "Nothing was removed."
    )


def plan_summary(users: Sequence[ObjectRef], ours: Sequence[ObjectRef], namespaces: Sequence[str], force: bool) -> str:
    if users and not force:
        return refusal_message(users)
    parts = []
    if users:
        parts.append(f"forced: {len(users)} workload(s) of users deleted first ({', '.join(r.ref for r in users)})")
    parts.append(f"{len(ours)} verification workload(s) and {len(namespaces)} verification namespace(s) to delete")
    return "; ".join(parts)


def manifest_removal(
    documents: Iterable[Any], include_crds: bool
) -> Tuple[List[Dict[str, Any]], List[Dict[str, Any]], List[Dict[str, Any]]]:
    """The objects of an install manifest to delete, in deletion order; its aggregating ClusterRoles; its CRDs.

    Deletion order is the reverse of the manifest's (a Deployment before the RBAC it runs with), with
    Namespaces last. ClusterRoles with an ``aggregationRule`` (the MPI operator's ``kubeflow-mpijobs-admin``)
    come back apart, to be deleted once the roles they aggregate are gone: deleting an aggregated role
    queues a sync of every aggregating one, and kube-controller-manager's aggregation controller force-applies
    its rules, which creates again an aggregating role deleted in between. CRDs come back only when
    ``include_crds``: deleting one deletes every object of its kind, users' included.
    """
    objects: List[ObjectRef] = []
    aggregating: List[ObjectRef] = []
    crds: List[ObjectRef] = []
    for doc in documents:
        if not isinstance(doc, Mapping) or not doc.get("kind"):
            continue
        ref = object_ref(doc)
        if ref.kind == CRD_KIND:
            crds.append(ref)
        elif ref.kind == "ClusterRole" and doc.get("aggregationRule"):
            aggregating.append(ref)
        else:
            objects.append(ref)
    ordered = [r for r in reversed(objects) if r.kind not in _CLUSTER_SCOPED_LAST]
    ordered += [r for r in reversed(objects) if r.kind in _CLUSTER_SCOPED_LAST]
    return (
        [r.definition() for r in ordered],
        [r.definition() for r in reversed(aggregating)],
        [r.definition() for r in crds] if include_crds else [],
    )


# The scheduled verification's objects (role verify_schedule: label app.kubernetes.io/managed-by), in the order they
# are deleted: the CronJobs first (verify and refresh: no new run starts), their inventory, then the rights they ran
# with; and the checks' PriorityClass (label app.kubernetes.io/part-of=gpu-fabric-verify, from
# docs/rbac/verify-stage.yaml or made by a check) last, once no pod of a check can name it.
SCHEDULE_KINDS: Tuple[Tuple[str, str], ...] = (
    ("batch/v1", "CronJob"),
    ("v1", "ConfigMap"),
    ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding"),
    ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy"),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"),
    ("rbac.authorization.k8s.io/v1", "Role"),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
    ("rbac.authorization.k8s.io/v1", "ClusterRole"),
    ("v1", "ServiceAccount"),
    (PRIORITY_API_VERSION, "PriorityClass"),
)
SCHEDULE_SELECTOR = f"app.kubernetes.io/managed-by={SCHEDULE_MANAGED_BY}"
PRIORITY_CLASS_SELECTOR = f"{PART_OF_LABEL}={PART_OF}"


def schedule_removal(found: Iterable[Mapping[str, Any]]) -> List[Dict[str, Any]]:
    """The schedule's objects and the checks' PriorityClass (as listed by ``SCHEDULE_SELECTOR`` for each of
    ``SCHEDULE_KINDS``, and ``PRIORITY_CLASS_SELECTOR`` for PriorityClasses) -> definitions to delete, in the
    order of ``SCHEDULE_KINDS``, each once; an object of another kind, or one without either label, is left."""
    order = {kind: index for index, (_version, kind) in enumerate(SCHEDULE_KINDS)}
    versions = dict((kind, version) for version, kind in SCHEDULE_KINDS)
    refs: Dict[Tuple[str, str, str], ObjectRef] = {}
    for obj in found:
        kind = str(obj.get("kind") or "")
        labels = (obj.get("metadata") or {}).get("labels") or {}
        ours = labels.get("app.kubernetes.io/managed-by") == SCHEDULE_MANAGED_BY or (
            kind == "PriorityClass" and labels.get(PART_OF_LABEL) == PART_OF
        )
        if kind in order and ours:
            ref = object_ref(obj, versions[kind], kind)
            refs[(ref.kind, ref.namespace, ref.name)] = ref
    ordered = sorted(refs.values(), key=lambda r: (order[r.kind], r.namespace, r.name))
    return [r.definition() for r in ordered]
