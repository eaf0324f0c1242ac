# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Whether a server-side apply would change an object, decided from the object as read, without sending it.

A server-side apply of an unchanged object changes nothing stored, but it is still a PATCH: the API
server authorizes it, admits it, runs every admission webhook and writes an audit event, and a site's
audit log shows the collection writing on every run. :func:`apply_reason` compares first, so that an
unchanged cluster receives reads alone.

An apply is skipped only when all three hold (otherwise it is sent, which is always safe):

- every field the manifest sets has that value on the live object (:func:`contains`; the server's
  defaults may add fields, they change nothing);
- the field manager already applied this object (a ``managedFields`` entry with operation ``Apply``), so
  skipping never leaves a field owned by someone else that the apply would have taken over;
- every map field that manager owns is still in the manifest (:func:`owned_but_dropped`): a field removed
  from a newer manifest is pruned by an apply, so its absence makes the apply needed. Owned fields are
  followed through maps down to the first list, whose items the first rule compares.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

ABSENT = "absent"


def contains(live: Any, desired: Any) -> bool:
    """True when ``live`` carries every value ``desired`` sets: maps key by key, lists item by item (same
    length, same order), other values equal. An empty map or list, or a null, in ``desired`` asks for
    nothing (the API server drops them)."""
    if desired is None or desired == {} or desired == []:
        return True
    if isinstance(desired, Mapping):
        if not isinstance(live, Mapping):
            return False
        return all(contains(live.get(key), value) for key, value in desired.items())
    if isinstance(desired, (list, tuple)):
        if not isinstance(live, (list, tuple)) or len(live) != len(desired):
            return False
        return all(contains(have, want) for have, want in zip(live, desired))
    if isinstance(desired, bool) or isinstance(live, bool):
        return live is desired
    if isinstance(desired, (int, float)) and isinstance(live, (int, float)):
        return float(live) == float(desired)
    return live == desired


def manager_entry(live: Mapping[str, Any], field_manager: str) -> Optional[Mapping[str, Any]]:
    """The ``managedFields`` entry of ``field_manager``'s applies (no subresource), or None."""
    for entry in (live.get("metadata") or {}).get("managedFields") or []:
        if entry.get("manager") == field_manager and entry.get("operation") == "Apply" and not entry.get("subresource"):
            return entry
    return None


def owned_but_dropped(fields: Mapping[str, Any], desired: Any, path: Tuple[str, ...] = ()) -> List[str]:
    """The dotted paths of map fields in ``fields`` (a ``fieldsV1`` tree) that ``desired`` no longer sets."""
    dropped: List[str] = []
    for key, below in fields.items():
        if not key.startswith("f:"):
            continue  # ".", or a list item (k:, v:, i:), compared by contains()
        name = key[2:]
        here = (*path, name)
        if not isinstance(desired, Mapping) or name not in desired:
            dropped.append(".".join(here))
            continue
        value = desired[name]
        if isinstance(below, Mapping) and isinstance(value, Mapping):
            dropped.extend(owned_but_dropped(below, value, here))
    return dropped


def apply_reason(live: Optional[Mapping[str, Any]], desired: Mapping[str, Any], field_manager: str) -> Optional[str]:
    """Why an apply of ``desired`` by ``field_manager`` is needed on ``live`` (None when it is not)."""
    if live is None:
        return ABSENT
    if not contains(live, desired):
        return "differs"
    entry = manager_entry(live, field_manager)
    if entry is None:
        return f"not applied by {field_manager} yet"
    dropped = owned_but_dropped(entry.get("fieldsV1") or {}, desired)
    if dropped:
        return "drops " + ", ".join(dropped[:3])
    return None


def object_key(obj: Mapping[str, Any]) -> str:
    """``Kind namespace/name`` (``Kind name`` when cluster-scoped), for results and messages."""
    metadata = obj.get("metadata") or {}
    where = (
        f"{metadata['namespace']}/{metadata.get('name', '')}" if metadata.get("namespace") else metadata.get("name", "")
    )
    return f"{obj.get('kind', '')} {where}"


def split_needed(
    groups: Mapping[str, Sequence[Mapping[str, Any]]], reasons: Mapping[str, Optional[str]]
) -> Dict[str, List[Mapping[str, Any]]]:
    """Each group's objects whose apply is needed (``reasons[object_key(obj)]`` set), in their order."""
    return {name: [obj for obj in objects if reasons.get(object_key(obj))] for name, objects in groups.items()}
