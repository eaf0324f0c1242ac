# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The releases the cluster stage installs together, as named sets, and the combinations it refuses.

A set names one version of each component, proven together on the simulated rack (docs/compatibility.md):

- ``26.7`` (the default): GPU Operator v26.7.0, the NVIDIA DRA driver 0.4.1 from its new home (chart
  ``dra-driver-nvidia-gpu``, an OCI chart at registry.k8s.io, kubernetes-sigs/dra-driver-nvidia-gpu),
  MPI operator v0.8.2 (v0.8.0's stability fixes: a terminating launcher pod no longer recreated, the launcher Job
  deep-copied, the Running condition not emitted again). GPU Operator 26.7 is the release NVIDIA supports today.
- ``25.10``: the guide's set. GPU Operator v25.10.0 (out of NVIDIA's support), chart
  ``nvidia-dra-driver-gpu`` 25.8.0 from NGC, MPI operator v0.6.0.

``gpu_fabric_release_set`` picks one; each role's version variable still wins when set. The roles read a set
through the ``release_set`` filter, so this file is the one home of these versions.

The refusals, each one line naming what to change, run before anything is installed:

- the GPU Operator's GPUCluster mode (``gpuCluster.deployCR``, or a GPUCluster on the cluster): the operator
  would deploy a DRA driver of its own beside the release this collection installs;
- a chart that carries CRDs another release owns, without the collection applying them (the ComputeDomain
  CRDs ship in both GPU Operator 26.7 and the DRA driver charts: the DRA driver's release owns them);
- a DRA driver release beside the collection's (named the old way next to the new, or in another namespace)
  and a ``nameOverride`` that would rename every object of the driver;
- a move of a release back from ``dra-driver-nvidia-gpu`` to ``nvidia-dra-driver-gpu`` (upstream supports no
  downgrade), decided by ``chart_release`` from the release's history (``forward_only_charts``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Dict, Iterable, Mapping, Optional, Sequence

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.text import unquoted_number_hint

OLD_DRA_CHART = "nvidia-dra-driver-gpu"
NEW_DRA_CHART = "dra-driver-nvidia-gpu"
DRA_CHARTS = (OLD_DRA_CHART, NEW_DRA_CHART)
# Under the renamed chart the objects keep the old chart's names (Deployment nvidia-dra-driver-gpu-controller,
# label key nvidia-dra-driver-gpu-component) with this nameOverride, as upstream's upgrade guide sets it:
# without it an upgrade in place would make a second controller and kubelet plugin beside the first.
DRA_NAME_OVERRIDE = "nvidia-dra-driver-gpu"
# Owned by the DRA driver's release; GPU Operator 26.7's chart carries copies in its crds/.
COMPUTE_DOMAIN_CRDS = ("computedomains.resource.nvidia.com", "computedomaincliques.resource.nvidia.com")
MPI_MANIFEST_URL = "https://raw.githubusercontent.com/kubeflow/mpi-operator/{version}/deploy/v2beta1/mpi-operator.yaml"
HELM_ANNOTATIONS = ("meta.helm.sh/release-name", "meta.helm.sh/release-namespace")
# The DeviceClasses either DRA driver chart makes (which of them depends on its values).
DRA_DEVICE_CLASSES = (
    "compute-domain-daemon.nvidia.com",
    "compute-domain-default-channel.nvidia.com",
    "gpu.nvidia.com",
    "mig.nvidia.com",
    "vfio.gpu.nvidia.com",
)


class ReleaseSetError(ValueError):
    """A set that does not exist (message: one line naming the sets)."""


@dataclass(frozen=True)
class ReleaseSet:
    """One version of each component, installed and proven together."""

    name: str
    gpu_operator_chart_version: str
    dra_driver_chart_name: str
    dra_driver_chart_version: str
    dra_driver_chart_repo_url: str
    # The image the DRA driver chart pulls (its image.repository); air-gapped sites mirror it.
    dra_driver_image: str
    mpi_operator_version: str

    @property
    def mpi_operator_manifest_url(self) -> str:
        return MPI_MANIFEST_URL.format(version=self.mpi_operator_version)

    def as_vars(self) -> Dict[str, Any]:
        """The set as the roles read it (the ``release_set`` filter)."""
        return {
            **asdict(self),
            "mpi_operator_manifest_url": self.mpi_operator_manifest_url,
            "compute_domain_crds": list(COMPUTE_DOMAIN_CRDS),
            "dra_driver_forward_only_charts": [NEW_DRA_CHART],
        }


SETS: Dict[str, ReleaseSet] = {
    "26.7": ReleaseSet(
        name="26.7",
        gpu_operator_chart_version="v26.7.0",
        dra_driver_chart_name=NEW_DRA_CHART,
        dra_driver_chart_version="0.4.1",
        dra_driver_chart_repo_url="oci://registry.k8s.io/dra-driver-nvidia/charts",
        dra_driver_image="registry.k8s.io/dra-driver-nvidia/dra-driver-nvidia-gpu",
        mpi_operator_version="v0.8.2",
    ),
    "25.10": ReleaseSet(
        name="25.10",
        gpu_operator_chart_version="v25.10.0",
        dra_driver_chart_name=OLD_DRA_CHART,
        dra_driver_chart_version="25.8.0",
        dra_driver_chart_repo_url="https://helm.ngc.nvidia.com/nvidia",
        dra_driver_image="nvcr.io/nvidia/k8s-dra-driver-gpu",
        mpi_operator_version="v0.6.0",
    ),
}
DEFAULT = "26.7"


# The page that lists the sets and what each was proven against (in the repository: the collection does not ship it).
COMPATIBILITY_URL = "https://github.com/gpu-fabric/mnnvl/blob/main/docs/compatibility.md"


def release_set(name: Optional[str] = None) -> ReleaseSet:
    """The set called ``name``; the default set for an empty name."""
    key = str(name or DEFAULT).strip()
    if key not in SETS:
        hint = unquoted_number_hint(key, SETS)
        raise ReleaseSetError(
            f"gpu_fabric_release_set is {key!r}; use one of {', '.join(SETS)} ({COMPATIBILITY_URL})"
            + (f"; {hint}" if hint else "")
        )
    return SETS[key]


def dra_name_override(chart_name: str) -> str:
    """The ``nameOverride`` the collection gives the DRA driver chart: the old name under the renamed chart."""
    return DRA_NAME_OVERRIDE if chart_name == NEW_DRA_CHART else ""


def _dig(values: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(values, Mapping):
            return None
        values = values.get(key)
    return values


def _true(value: Any) -> bool:
    return value is True or (isinstance(value, str) and value.strip().lower() in ("true", "yes", "on", "1"))


def gpu_cluster_problem(gpu_operator_values: Any) -> str:
    """One line when the GPU Operator's values turn on GPUCluster mode, or ""."""
    if not _true(_dig(gpu_operator_values, "gpuCluster", "deployCR")):
        return ""
    return (
        "gpu_operator_values sets gpuCluster.deployCR: the GPU Operator would deploy a DRA driver of its own "
        "(GPUCluster, a technology preview with no migration) beside the release the dra_driver role installs: "
        "remove gpuCluster from gpu_operator_values"
    )


def gpu_clusters_problem(gpu_clusters: Iterable[Mapping[str, Any]]) -> str:
    """One line when GPUCluster objects exist (the GPU Operator deploys the DRA driver from them), or ""."""
    names = sorted(str(_dig(g, "metadata", "name") or "?") for g in gpu_clusters or ())
    if not names:
        return ""
    return (
        f"GPUCluster {', '.join(names)} exists: the GPU Operator deploys the DRA driver from it, and a second "
        "driver release would fight it over the same devices; delete the GPUCluster (kubectl delete gpucluster "
        f"{names[0]}) or leave the DRA driver to it and skip the dra_driver role (--skip-tags dra_driver)"
    )


def name_override_problem(chart_name: str, user_values: Any) -> str:
    """One line when the user's ``nameOverride`` would rename the DRA driver's objects, or ""."""
    wanted = dra_name_override(chart_name)
    given = _dig(user_values, "nameOverride")
    if not wanted or given in (None, "", wanted):
        return ""
    return (
        f"dra_driver_values sets nameOverride {given!r}: the {NEW_DRA_CHART} chart must keep "
        f"nameOverride {wanted!r}, or every object of the driver is renamed and the collection's waits and "
        "checks find none of them; remove nameOverride from dra_driver_values"
    )


def chart_version_problem(chart_name: str, chart_version: str) -> str:
    """One line when the DRA driver chart's version belongs to the other chart name, or "".

    The releases restarted at 0.4.0 under the new name: 25.x is ``nvidia-dra-driver-gpu``'s, 0.x is
    ``dra-driver-nvidia-gpu``'s. An inventory that pinned ``dra_driver_chart_version: 25.8.0`` under an earlier
    collection would otherwise ask Helm for a chart that does not exist.
    """
    try:
        major = int(str(chart_version).strip().lstrip("vV").split(".", maxsplit=1)[0])
    except ValueError:
        return ""
    if chart_name == NEW_DRA_CHART and major >= 25:
        owner, fix = OLD_DRA_CHART, 'gpu_fabric_release_set: "25.10" to stay on it, or drop the pin (0.4.1 in set 26.7)'
    elif chart_name == OLD_DRA_CHART and major < 25:
        owner, fix = NEW_DRA_CHART, 'gpu_fabric_release_set: "26.7" (or dra_driver_chart_name: dra-driver-nvidia-gpu)'
    else:
        return ""
    return (
        f"dra_driver_chart_version {chart_version} is a version of chart {owner}, not of {chart_name} (the releases "
        f"restarted at 0.4.0 when the chart was renamed): set {fix}"
    )


def dra_release_problem(device_classes: Iterable[Mapping[str, Any]], release_name: str, namespace: str) -> str:
    """One line when a Helm release other than ``namespace/release_name`` runs the DRA driver, or "".

    Read from the DeviceClasses the driver's chart makes: Helm annotates every object it creates with the
    release that owns it, and these are cluster-wide, so no rights on Secrets in other namespaces are needed.
    """
    for device_class in device_classes or ():
        meta = device_class.get("metadata") or {}
        if meta.get("name") not in DRA_DEVICE_CLASSES:
            continue
        annotations = meta.get("annotations") or {}
        owner, owner_namespace = (annotations.get(key) for key in HELM_ANNOTATIONS)
        if owner and (owner, owner_namespace) != (release_name, namespace):
            return (
                f"release {owner_namespace}/{owner} already runs the NVIDIA DRA driver (it owns DeviceClass "
                f"{meta.get('name')}); a second release {namespace}/{release_name} would fight it: set "
                f"dra_driver_release_name: {owner} and dra_driver_namespace: {owner_namespace} to upgrade it in "
                "place (docs/upgrade.md), or uninstall it first"
            )
    return ""


def downgrade_problem(release: str, installed_chart: str, chart_name: str, forward_only: Sequence[str]) -> str:
    """One line when the release would move from a chart of ``forward_only`` to another chart, or "".

    The DRA driver supports no way back from ``dra-driver-nvidia-gpu`` 0.4 to ``nvidia-dra-driver-gpu``: its
    kubelet plugin's checkpoint and the ComputeDomain schema changed.
    """
    if not installed_chart or installed_chart == chart_name or installed_chart not in forward_only:
        return ""
    return (
        f"release {release} runs chart {installed_chart}; moving it to chart {chart_name} is a downgrade the "
        f"chart does not support: keep {installed_chart} (for the DRA driver, release set 26.7)"
    )


def foreign_crds_problem(release: str, carried: Sequence[str], foreign: Sequence[str], upgrade_crds: bool) -> str:
    """One line when a chart carries CRDs another release owns and Helm would install them, or ""."""
    theirs = sorted(set(carried) & set(foreign))
    if not theirs or upgrade_crds:
        return ""
    return (
        f"release {release}: the chart carries {', '.join(theirs)}, which another release owns; with "
        "upgrade_crds off Helm would install them from this chart too: turn upgrade_crds on (the collection "
        "then applies this chart's other CRDs and leaves those to their owner)"
    )


def gpu_operator_problem(gpu_operator_values: Any) -> str:
    """The gpu_operator role's refusal before it installs anything: one line, or ""."""
    return gpu_cluster_problem(gpu_operator_values)


def dra_driver_problem(
    chart_name: str,
    dra_driver_values: Any,
    release_name: str,
    namespace: str,
    device_classes: Iterable[Mapping[str, Any]] = (),
    gpu_clusters: Iterable[Mapping[str, Any]] = (),
    chart_version: str = "",
) -> str:
    """The dra_driver role's refusals before it installs anything, joined in one line, or ""."""
    found = (
        chart_version_problem(chart_name, chart_version),
        gpu_clusters_problem(gpu_clusters),
        dra_release_problem(device_classes, release_name, namespace),
        name_override_problem(chart_name, dra_driver_values),
    )
    return "; ".join(problem for problem in found if problem)
