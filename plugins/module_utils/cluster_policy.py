# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The GPU Operator's ClusterPolicy and what it depends on.

``dcgmExporter.serviceMonitor.enabled`` without the Prometheus Operator's ServiceMonitor CRD keeps the
ClusterPolicy ``notReady`` for ever (the operator's ``state-dcgm-exporter`` waits for the CRD), so the
collection turns it on only where ``monitoring.coreos.com/v1`` is served unless told otherwise.
"""

from __future__ import annotations

import copy
from typing import Any, Dict

SERVICE_MONITOR_GROUP_VERSION = "monitoring.coreos.com/v1"


def service_monitor_wanted(setting: Any, served: bool) -> bool:
    """``dcgmExporter.serviceMonitor.enabled`` from the setting: ``auto`` follows whether the API is served."""
    if isinstance(setting, bool):
        return setting
    text = str(setting).strip().lower()
    if text == "auto":
        return served
    if text in ("true", "yes", "on", "1"):
        return True
    if text in ("false", "no", "off", "0"):
        return False
    raise ValueError(f"service monitor setting {setting!r} is not auto, true or false")


def resolve_service_monitor(values: Dict[str, Any], served: bool) -> Dict[str, Any]:
    """``values`` with ``dcgmExporter.serviceMonitor.enabled`` made the boolean to install.

    The role sets it to the user's setting (``auto``, ``true`` or ``false``, as a string) before it knows
    what the cluster serves; a boolean the user's chart values set stays as it is. The input is not changed.
    """
    resolved = copy.deepcopy(values)
    monitor = ((resolved.get("dcgmExporter") or {}).get("serviceMonitor")) or {}
    if "enabled" in monitor and not isinstance(monitor["enabled"], bool):
        monitor["enabled"] = service_monitor_wanted(monitor["enabled"], served)
    return resolved
