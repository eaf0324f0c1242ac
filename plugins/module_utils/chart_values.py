# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The values the cluster stage installs each chart with: derived from the site's settings, the user's
values merged on top, and a user value that contradicts the driver owner refused before anything changes.

One owner of the NVIDIA driver for both charts (``gpu_fabric_driver_owner``): ``operator`` (the GPU
Operator's driver container, mounted at ``/run/nvidia/driver``) or ``host`` (a driver installed on the
host, under ``/``). The GPU Operator's ``driver.enabled`` and the DRA driver's ``nvidiaDriverRoot`` follow
from it, so the two charts cannot disagree about where the driver is.
"""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional, Sequence

from ansible.module_utils.parsing.convert_bool import BOOLEANS_FALSE, BOOLEANS_TRUE
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.driver_owner import DRIVER_ROOT, OWNERS
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.existing_install import merge
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.release_sets import dra_name_override

GPU_OPERATOR = "gpu-operator"
DRA_DRIVER = "nvidia-dra-driver-gpu"
CHARTS = (GPU_OPERATOR, DRA_DRIVER)


class ValuesError(ValueError):
    """Settings that cannot make the values (an unknown chart or owner, values that are not a mapping)."""


def _owner(owner: str) -> str:
    if owner not in OWNERS:
        raise ValuesError(f"gpu_fabric_driver_owner is {owner!r}; use operator or host")
    return owner


def _mapping(value: Any, name: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValuesError(f"{name} must be a mapping of chart values, not {type(value).__name__}")
    return value


def _flag(value: Any) -> Optional[bool]:
    """A chart value read as a boolean the way Helm's templates and Ansible's ``bool`` read it; None: not one."""
    if isinstance(value, bool):
        return value
    key = value.strip().lower() if isinstance(value, str) else value
    if not isinstance(key, (str, int, float)):
        return None
    return True if key in BOOLEANS_TRUE else False if key in BOOLEANS_FALSE else None


def driver_owner_conflict(chart: str, owner: str, user_values: Any) -> str:
    """One line naming the user value that contradicts the driver owner and both ways out, or ""."""
    owner = _owner(owner)
    values = _mapping(user_values, _variable(chart))
    if chart == GPU_OPERATOR:
        driver = values.get("driver")
        if not isinstance(driver, Mapping) or "enabled" not in driver:
            return ""
        given, wanted = driver["enabled"], owner == "operator"
        if _flag(given) == wanted:
            return ""
        return (
            f"gpu_operator_values sets driver.enabled={str(given).lower()} but gpu_fabric_driver_owner={owner} "
            f"requires driver.enabled={str(wanted).lower()}. Remove driver.enabled from gpu_operator_values, or set "
            f"gpu_fabric_driver_owner to {'operator' if _flag(given) else 'host'} (it also sets the DRA driver's "
            "nvidiaDriverRoot). Nothing was installed."
        )
    if chart == DRA_DRIVER:
        if "nvidiaDriverRoot" not in values or values["nvidiaDriverRoot"] == DRIVER_ROOT[owner]:
            return ""
        given = values["nvidiaDriverRoot"]
        where = (
            "the GPU Operator driver container mounts the driver at /run/nvidia/driver"
            if owner == "operator"
            else "a driver installed on the host lives under /"
        )
        return (
            f"dra_driver_values sets nvidiaDriverRoot={given} but gpu_fabric_driver_owner={owner} requires "
            f"nvidiaDriverRoot={DRIVER_ROOT[owner]} ({where}). Remove nvidiaDriverRoot from dra_driver_values, or "
            f"set gpu_fabric_driver_owner to {'operator' if given == DRIVER_ROOT['operator'] else 'host'} (it also "
            "sets the GPU Operator's driver.enabled). Nothing was installed."
        )
    raise ValuesError(f"chart is {chart!r}; use one of {', '.join(CHARTS)}")


def _variable(chart: str) -> str:
    return {GPU_OPERATOR: "gpu_operator_values", DRA_DRIVER: "dra_driver_values"}.get(chart, "values")


def chart_values(
    chart: str,
    owner: str,
    user_values: Any = None,
    mirror_values: Any = None,
    tolerations: Sequence[Any] = (),
    service_monitor: Any = "auto",
    schedulable_control_plane: Sequence[str] = (),
    controller_fallback_affinity: Any = None,
    chart_name: str = "",
) -> Dict[str, Any]:
    """The values a chart is installed with: the collection's, then the mirror's, then the user's.

    ``gpu-operator``: ``driver.enabled`` from the owner, DCGM on, the operands' tolerations, the
    ServiceMonitor setting as given (``auto`` is resolved against the cluster by
    ``gpu_operator_install_info``). ``nvidia-dra-driver-gpu``: ``nvidiaDriverRoot`` from the owner, the
    driver's GPU allocation off (the GPU Operator's device plugin hands out GPUs), the kubelet plugin's
    tolerations, and, where no control-plane node is schedulable, the controller's affinity replaced by
    ``controller_fallback_affinity`` (the chart requires a control-plane node; ``None`` drops the rule), and
    under the renamed chart ``dra-driver-nvidia-gpu`` (``chart_name``) the old name as ``nameOverride``, so the
    objects keep their names.
    A contradicting user value is for :func:`driver_owner_conflict` to refuse first.
    """
    owner = _owner(owner)
    user = _mapping(user_values, _variable(chart))
    mirror = _mapping(mirror_values, "the mirror's values")
    if chart == GPU_OPERATOR:
        ours: Dict[str, Any] = {
            "driver": {"enabled": owner == "operator"},
            "dcgm": {"enabled": True},
            "daemonsets": {"tolerations": list(tolerations or [])},
            "dcgmExporter": {"serviceMonitor": {"enabled": str(service_monitor).lower()}},
        }
        return merge(ours, mirror, user)
    if chart == DRA_DRIVER:
        ours = {
            "nvidiaDriverRoot": DRIVER_ROOT[owner],
            "resources": {"gpus": {"enabled": False}},
            "kubeletPlugin": {"tolerations": list(tolerations or [])},
        }
        if dra_name_override(chart_name):
            ours["nameOverride"] = dra_name_override(chart_name)
        placement: Dict[str, Any] = {}
        if not schedulable_control_plane:
            placement = {"controller": {"affinity": dict(controller_fallback_affinity or {}) or None}}
        return merge(ours, mirror, placement, user)
    raise ValuesError(f"chart is {chart!r}; use one of {', '.join(CHARTS)}")
