# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""A GPU Operator that someone else installed, found before anything changes, and what to do about it.

Helm annotates every object of a release with ``meta.helm.sh/release-name`` and
``meta.helm.sh/release-namespace``; the ClusterPolicy (one per cluster) thus names the release that owns the
operator. Three cases are not the collection's own install:

* ``foreign_release``: another release (another name or namespace) owns it. Installing ours next to it fails
  with Helm's ownership error ("invalid ownership metadata") or runs two operators;
* ``unmanaged``: a ClusterPolicy without Helm's annotations (applied by hand or by another tool);
* ``site_values``: our release name and namespace, but the site set values there (``helm upgrade --set``)
  that the collection's upgrade would replace or drop (Helm's upgrade resets values not given).

The collection marks its own values (``MARKER_KEY``), so values it set itself are never taken for the site's.
The choice (``on_existing``) is ``fail`` (the default: say what was found, change nothing), ``adopt`` (manage
the found release, its values kept under the collection's; an unmanaged install is taken over with Helm's
``--take-ownership``) or ``skip`` (leave it, skip the role).
"""

from __future__ import annotations

import base64
import gzip
import json
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence

RELEASE_NAME_ANNOTATION = "meta.helm.sh/release-name"
RELEASE_NAMESPACE_ANNOTATION = "meta.helm.sh/release-namespace"
MARKER_KEY = "gpuFabric"
MARKER = {"managedBy": "gpu_fabric.mnnvl"}
CHOICES = ("fail", "adopt", "skip")
NAMES_SHOWN = 8

NONE = "none"  # no GPU Operator: install
OURS = "ours"  # our release, our values (or none the site set): install or upgrade
FOREIGN_RELEASE = "foreign_release"
UNMANAGED = "unmanaged"
SITE_VALUES = "site_values"


@dataclass
class ExistingInstall:
    kind: str
    action: str  # install, adopt, skip or fail
    release_name: str
    release_namespace: str
    values: Dict[str, Any]
    take_ownership: bool
    message: str
    site_values: List[str] = field(default_factory=list)

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)


def helm_release_values(secret: Mapping[str, Any]) -> Dict[str, Any]:
    """The user-supplied values (``helm get values``) of a Helm release Secret (``sh.helm.release.v1.*``).

    The Secret's ``data.release`` is base64 (Kubernetes) of base64 (Helm) of the gzipped release JSON.
    """
    payload = base64.b64decode(base64.b64decode((secret.get("data") or {}).get("release", "")))
    if payload[:2] == b"\x1f\x8b":
        payload = gzip.decompress(payload)
    return json.loads(payload).get("config") or {}


def latest_deployed(secrets: Sequence[Mapping[str, Any]]) -> Optional[Mapping[str, Any]]:
    """The Secret of the deployed revision among a release's Secrets (labels ``status``, ``version``)."""
    deployed = [s for s in secrets if ((s.get("metadata") or {}).get("labels") or {}).get("status") == "deployed"]
    return max(deployed, key=lambda s: int(s["metadata"]["labels"].get("version", 0)), default=None)


def owning_release(obj: Mapping[str, Any]) -> Optional[tuple]:
    """``(release, namespace)`` of the Helm release that made ``obj``, or None."""
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    name = annotations.get(RELEASE_NAME_ANNOTATION)
    namespace = annotations.get(RELEASE_NAMESPACE_ANNOTATION)
    return (str(name), str(namespace)) if name and namespace else None


def _flatten(values: Mapping[str, Any], prefix: str = "") -> Dict[str, Any]:
    flat: Dict[str, Any] = {}
    for key, value in values.items():
        path = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, Mapping) and value:
            flat.update(_flatten(value, path))
        else:
            flat[path] = value
    return flat


def site_value_changes(current: Mapping[str, Any], wanted: Mapping[str, Any]) -> List[str]:
    """The values set in the release (dotted paths) that an upgrade with ``wanted`` replaces or drops.

    Empty when the collection set the release's values itself (they carry ``MARKER_KEY``).
    """
    if (current or {}).get(MARKER_KEY) == MARKER:
        return []
    have = _flatten({k: v for k, v in (current or {}).items() if k != MARKER_KEY})
    want = _flatten(wanted or {})
    changes = []
    for path, value in sorted(have.items()):
        if path not in want:
            changes.append(f"{path}={_short(value)} (dropped)")
        elif want[path] != value:
            changes.append(f"{path}={_short(value)} (replaced by {_short(want[path])})")
    return changes


def _short(value: Any) -> str:
    text = str(value).lower() if isinstance(value, bool) else str(value)
    return text if len(text) <= 40 else text[:37] + "..."


def merge(*layers: Optional[Mapping[str, Any]]) -> Dict[str, Any]:
    """Later layers over earlier ones, maps merged recursively and anything else (lists too) replaced: Helm's
    merge of ``--values`` files and Ansible's ``combine(recursive=true)``. ``None`` is an empty layer; no layer
    is changed."""
    merged: Dict[str, Any] = {}
    for layer in layers:
        for key, value in (layer or {}).items():
            if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
                merged[key] = merge(merged[key], value)
            else:
                merged[key] = value
    return merged


def _choices(variable: str) -> str:
    return (
        f"set {variable} to adopt (manage it, its values kept under the collection's), skip (leave it, skip the "
        "role) or fail"
    )


def decide(
    cluster_policies: Sequence[Mapping[str, Any]],
    release_name: str,
    release_namespace: str,
    current_values: Optional[Mapping[str, Any]],
    wanted_values: Mapping[str, Any],
    on_existing: str = "fail",
    found_release_values: Optional[Mapping[str, Any]] = None,
    variable: str = "gpu_operator_on_existing",
) -> ExistingInstall:
    """What the role does about the GPU Operator found on the cluster.

    ``current_values``: the user-supplied values of our release (``None``: it does not exist);
    ``found_release_values``: those of the release that owns the ClusterPolicy when it is another one.
    """
    if on_existing not in CHOICES:
        raise ValueError(f"{variable} must be one of {', '.join(CHOICES)}, not {on_existing!r}")
    wanted = merge(wanted_values, {MARKER_KEY: dict(MARKER)})
    ours = (release_name, release_namespace)
    owners = {owning_release(p) for p in cluster_policies}
    policies = sorted(str((p.get("metadata") or {}).get("name", "")) for p in cluster_policies)
    foreign = sorted(o for o in owners if o and o != ours)
    unmanaged = sorted(
        str((p.get("metadata") or {}).get("name", "")) for p in cluster_policies if not owning_release(p)
    )

    def result(kind, action, name=release_name, namespace=release_namespace, values=None, take=False, msg="", site=()):
        return ExistingInstall(
            kind, action, name, namespace, wanted if values is None else values, take, msg, list(site)
        )

    if foreign:
        name, namespace = foreign[0]
        found = (
            f"the GPU Operator is already installed by Helm release {namespace}/{name} (ClusterPolicy "
            f"{', '.join(policies)}), not by this collection's {release_namespace}/{release_name}"
        )
        if on_existing == "adopt":
            values = merge(found_release_values or {}, wanted)
            return result(
                FOREIGN_RELEASE,
                "adopt",
                name,
                namespace,
                values,
                msg=f"{found}: adopted, release {namespace}/{name} is upgraded with its values kept under "
                "the collection's",
            )
        if on_existing == "skip":
            return result(FOREIGN_RELEASE, "skip", msg=f"{found}: left as it is ({variable}=skip), role skipped")
        return result(FOREIGN_RELEASE, "fail", msg=f"{found}; {_choices(variable)}. Nothing was changed.")
    if unmanaged:
        found = (
            f"ClusterPolicy {', '.join(unmanaged)} exists without a Helm release (installed by hand or another tool)"
        )
        if on_existing == "adopt":
            return result(
                UNMANAGED,
                "adopt",
                take=True,
                msg=f"{found}: adopted, release {release_namespace}/{release_name} takes ownership of it",
            )
        if on_existing == "skip":
            return result(UNMANAGED, "skip", msg=f"{found}: left as it is ({variable}=skip), role skipped")
        return result(UNMANAGED, "fail", msg=f"{found}; {_choices(variable)}. Nothing was changed.")
    if current_values is None:
        return result(NONE, "install", msg="no GPU Operator installed: the collection installs it")
    changes = site_value_changes(current_values, wanted_values)
    if not changes:
        return result(OURS, "install", msg=f"release {release_namespace}/{release_name} is the collection's")
    shown = ", ".join(changes[:NAMES_SHOWN]) + (
        f" and {len(changes) - NAMES_SHOWN} more" if len(changes) > NAMES_SHOWN else ""
    )
    found = f"release {release_namespace}/{release_name} carries values the site set: {shown}"
    if on_existing == "adopt":
        return result(
            SITE_VALUES,
            "adopt",
            values=merge(current_values, wanted),
            site=changes,
            msg=f"{found}: adopted, kept under the collection's values",
        )
    if on_existing == "skip":
        return result(SITE_VALUES, "skip", site=changes, msg=f"{found}: left as it is ({variable}=skip), role skipped")
    return result(
        SITE_VALUES,
        "fail",
        site=changes,
        msg=f"{found}; an upgrade would replace them: put them in gpu_operator_values, or {_choices(variable)}. "
        "Nothing was changed.",
    )
