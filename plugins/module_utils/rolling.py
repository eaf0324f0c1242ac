# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Racks of trays: which rack a host is in, its rack peers, and orders of disruptive changes (reboots) that keep
every NVL72 rack short of one tray at most."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence


def rack_waves(hosts: Sequence[str], racks: Mapping[str, Optional[str]]) -> List[List[str]]:
    """Split ``hosts`` into waves that take at most one tray out of each rack.

    Wave ``n`` holds the ``n``-th host (in the order given) of every rack, so racks change in
    parallel and each rack loses one tray at a time. Hosts without a rack (missing or empty) are
    treated as one rack: not knowing where a tray is, two of them must not go down together.
    """
    by_rack: Dict[str, List[str]] = {}
    seen = set()
    for host in hosts:
        if host in seen:
            continue
        seen.add(host)
        by_rack.setdefault(str(racks.get(host) or ""), []).append(host)
    depth = max((len(members) for members in by_rack.values()), default=0)
    return [[members[n] for members in by_rack.values() if n < len(members)] for n in range(depth)]


def host_racks(
    hosts: Sequence[str],
    host_vars: Mapping[str, Mapping[str, Any]],
    rack_var: str = "gpu_fabric_rack",
    racks: Optional[Mapping[str, Sequence[str]]] = None,
) -> Dict[str, str]:
    """Host -> rack: the host variable ``rack_var``, else the key of ``racks`` (rack -> hosts) listing the host."""
    listed = {host: rack for rack, members in (racks or {}).items() for host in members or []}
    result = {}
    for host in hosts:
        value = (host_vars.get(host) or {}).get(rack_var)
        result[host] = str(value) if value not in (None, "") else str(listed.get(host, ""))
    return result


def rack_peers(host: str, hosts: Sequence[str], racks: Mapping[str, str]) -> List[str]:
    """The hosts (in the order given) of ``host``'s rack; all of ``hosts`` when ``host`` has no rack."""
    rack = racks.get(host) or ""
    if not rack:
        return list(hosts)
    return [peer for peer in hosts if racks.get(peer) == rack]
