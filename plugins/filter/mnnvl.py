# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Filters ``nvbandwidth_parse``, ``clique_groups``, ``openshift_detected``, ``rack_waves``, ``rack_peers``,
``rack_clique_conflicts``, ``imex_driver_mismatch``, ``kernel_args_missing``, ``grub_cmdline_dropin``,
``dra_api_version``, ``dra_api_problem``, ``chart_values``, ``driver_owner_conflict``, ``release_set``,
``gpu_operator_problem`` and ``dra_driver_problem`` (documentation: the YAML files beside this one)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Dict, List, Tuple

from ansible.errors import AnsibleFilterError
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import chart_values as _chart_values
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import check_catalog
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import mirror as _mirror
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import release_sets as _release_sets
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.cliques import (
    CLIQUE_LABEL,
    UNLABELLED_KEY,
    group_nodes_by_clique,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.cliques import (
    rack_clique_conflicts as _rack_clique_conflicts,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.dra import dra_problem, served_dra_version
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.imex import imex_driver_mismatch as _imex_driver_mismatch
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.kernel_cmdline import grub_dropin, missing_kernel_args
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.nvbandwidth import parse_nvbandwidth
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.nvbandwidth_output import NvbandwidthParseError
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.openshift import is_openshift
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.rolling import host_racks
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.rolling import rack_peers as _rack_peers
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.rolling import rack_waves as _rack_waves


def nvbandwidth_parse(data: Any, format: str = "auto") -> Dict[str, Dict[str, Any]]:
    """nvbandwidth output (text, JSON text or the decoded JSON) -> {testcase name: record}."""
    if format not in ("auto", "text", "json"):
        raise AnsibleFilterError(f"nvbandwidth_parse: format is {format!r}; use auto, text or json")
    if isinstance(data, Mapping):
        data = dict(data)
    elif not isinstance(data, str):
        raise AnsibleFilterError(
            "nvbandwidth_parse expects the nvbandwidth output as a string (or its decoded JSON), "
            f"got {type(data).__name__}"
        )
    try:
        output = parse_nvbandwidth(data, format)
    except NvbandwidthParseError as exc:
        raise AnsibleFilterError(f"nvbandwidth_parse: {exc}") from exc
    return {name: testcase.to_dict() for name, testcase in output.testcases.items()}


def clique_groups(
    nodes: Any, unlabelled_key: str = UNLABELLED_KEY, label: str = CLIQUE_LABEL, non_gpu_key: Any = None
) -> Dict[str, List[str]]:
    """Node objects -> {clique value: [node names], unlabelled_key: [GPU nodes without the label]}."""
    if isinstance(nodes, Mapping) and "resources" in nodes:
        nodes = nodes["resources"]  # a registered kubernetes.core.k8s_info result
    if not isinstance(nodes, (list, tuple)):
        raise AnsibleFilterError(
            f"clique_groups expects a list of Node objects (k8s_info's resources), got {type(nodes).__name__}"
        )
    try:
        grouping = group_nodes_by_clique(list(nodes), label=label)
    except ValueError as exc:
        raise AnsibleFilterError(f"clique_groups: {exc}") from exc
    if unlabelled_key in grouping.groups:
        raise AnsibleFilterError(f"clique_groups: a clique is named {unlabelled_key!r}; choose another unlabelled_key")
    result: Dict[str, List[str]] = dict(grouping.groups)
    result[unlabelled_key] = grouping.unlabelled_gpu_nodes
    if non_gpu_key:
        result[str(non_gpu_key)] = grouping.non_gpu_nodes
    return result


def openshift_detected(apis: Any) -> bool:
    """k8s_cluster_info's ``apis`` (or an APIGroupList, or group/versions) -> whether the cluster is OpenShift."""
    try:
        return is_openshift(apis)
    except TypeError as exc:
        raise AnsibleFilterError(f"openshift_detected: {exc}") from exc


def rack_waves(hosts: Any, racks: Any) -> List[List[str]]:
    """Host names and {host: rack} -> waves that take at most one tray out of each rack."""
    if not isinstance(hosts, (list, tuple)) or not all(isinstance(host, str) for host in hosts):
        raise AnsibleFilterError(f"rack_waves expects a list of host names, got {hosts!r}")
    if not isinstance(racks, Mapping):
        raise AnsibleFilterError(
            f"rack_waves expects racks as a mapping of host name to rack, got {type(racks).__name__}"
        )
    return _rack_waves(list(hosts), dict(racks))


def rack_peers(hosts: Any, host: Any, hostvars: Any, rack_var: str = "gpu_fabric_rack", racks: Any = None) -> List[str]:
    """The hosts of ``host``'s rack among ``hosts`` (all of them when the rack is unknown)."""
    if not isinstance(hosts, (list, tuple)) or not all(isinstance(name, str) for name in hosts):
        raise AnsibleFilterError(f"rack_peers expects a list of host names, got {hosts!r}")
    if racks is not None and not isinstance(racks, Mapping):
        raise AnsibleFilterError(f"rack_peers: racks must map rack names to host lists, got {type(racks).__name__}")
    names = list(hosts) if host in hosts else [*hosts, host]
    return _rack_peers(str(host), list(hosts), host_racks(names, hostvars, rack_var, racks))


def _rack_and_clique(name: str, value: Any) -> Tuple[str, str]:
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        raise AnsibleFilterError(f"rack_clique_conflicts: host {name} maps to {value!r}, expected [rack, clique]")
    rack, clique = value
    return ("" if rack is None else str(rack)), ("" if clique is None else str(clique))


def rack_clique_conflicts(
    peers: Any,
    host: Any,
    rack: Any,
    clique: Any,
    rack_var: str = "gpu_fabric_rack",
    rack_key: str = "nvidia_driver__rack",
    clique_key: str = "nvidia_driver__clique",
) -> Dict[str, Any]:
    """Peers (host -> [rack, clique], or host variables) -> the rack's hosts in another clique and the message."""
    table: Dict[str, Tuple[str, str]] = {}
    if isinstance(peers, Mapping):
        for name, value in peers.items():
            table[str(name)] = _rack_and_clique(str(name), value)
    elif isinstance(peers, (list, tuple)):
        for variables in peers:
            if not isinstance(variables, Mapping) or "inventory_hostname" not in variables:
                raise AnsibleFilterError(
                    "rack_clique_conflicts expects host variables with inventory_hostname "
                    f"(ansible_play_hosts_all | map('extract', hostvars)), got {type(variables).__name__}"
                )
            if clique_key not in variables:
                continue  # not checked (yet)
            name = str(variables["inventory_hostname"])
            table[name] = _rack_and_clique(name, [variables.get(rack_key), variables[clique_key]])
    else:
        raise AnsibleFilterError(
            "rack_clique_conflicts expects a mapping of host name to [rack, clique] or a list of host variables, "
            f"got {type(peers).__name__}"
        )
    conflicts, message = _rack_clique_conflicts(
        str(host), "" if rack is None else str(rack), "" if clique is None else str(clique), table, str(rack_var)
    )
    return {"conflicts": conflicts, "msg": message}


def imex_driver_mismatch(package_version: Any, package: str, nvrm_text: Any) -> str:
    """IMEX package version, its name and /proc/driver/nvidia/version -> why the daemon would abort ('' if not)."""
    if not isinstance(package_version, str) or not isinstance(nvrm_text, str):
        raise AnsibleFilterError("imex_driver_mismatch expects the package version and the NVRM text as strings")
    return _imex_driver_mismatch(package, package_version, nvrm_text)


def kernel_args_missing(cmdline: Any, wanted: Any) -> List[str]:
    """/proc/cmdline and the wanted arguments -> those the running kernel was not booted with."""
    if not isinstance(cmdline, str) or not isinstance(wanted, (list, tuple)):
        raise AnsibleFilterError("kernel_args_missing expects /proc/cmdline as a string and a list of arguments")
    return missing_kernel_args(cmdline, [str(arg) for arg in wanted])


def grub_cmdline_dropin(args: Any) -> str:
    """Kernel arguments -> a /etc/default/grub.d file that appends them to GRUB_CMDLINE_LINUX."""
    if not isinstance(args, (list, tuple)):
        raise AnsibleFilterError(f"grub_cmdline_dropin expects a list of kernel arguments, got {type(args).__name__}")
    try:
        return grub_dropin([str(arg) for arg in args])
    except ValueError as exc:
        raise AnsibleFilterError(f"grub_cmdline_dropin: {exc}") from exc


def dra_api_version(apis: Any) -> str:
    """k8s_cluster_info's ``apis`` -> the newest DRA API group/version served (``resource.k8s.io/v1``), or ""."""
    try:
        return served_dra_version(apis) or ""
    except TypeError as exc:
        raise AnsibleFilterError(f"dra_api_version: {exc}") from exc


def dra_api_problem(apis: Any, server_version: str, required: str = "") -> str:
    """k8s_cluster_info's ``apis`` -> one line on what is wrong with the DRA API and how to fix it, or ""."""
    try:
        return dra_problem(apis, str(server_version), str(required or ""))
    except TypeError as exc:
        raise AnsibleFilterError(f"dra_api_problem: {exc}") from exc


def chart_values(
    user_values: Any,
    chart: str,
    owner: str,
    mirror_values: Any = None,
    tolerations: Any = None,
    service_monitor: Any = "auto",
    schedulable_control_plane: Any = None,
    controller_fallback_affinity: Any = None,
    chart_name: str = "",
) -> Dict[str, Any]:
    """The user's values of a chart -> the values it is installed with (the collection's, mirror's, user's)."""
    try:
        return _chart_values.chart_values(
            str(chart),
            str(owner),
            user_values,
            mirror_values,
            list(tolerations or []),
            service_monitor,
            list(schedulable_control_plane or []),
            controller_fallback_affinity,
            str(chart_name or ""),
        )
    except _chart_values.ValuesError as exc:
        raise AnsibleFilterError(f"chart_values: {exc}") from exc


def driver_owner_conflict(user_values: Any, chart: str, owner: str) -> str:
    """The user's values of a chart -> the value that contradicts the driver owner, in one line, or ""."""
    try:
        return _chart_values.driver_owner_conflict(str(chart), str(owner), user_values)
    except _chart_values.ValuesError as exc:
        raise AnsibleFilterError(f"driver_owner_conflict: {exc}") from exc


def release_set(name: Any) -> Dict[str, Any]:
    """A release set's name (empty: the default set) -> its versions, chart names and sources."""
    try:
        return _release_sets.release_set(None if name is None else str(name)).as_vars()
    except _release_sets.ReleaseSetError as exc:
        raise AnsibleFilterError(f"release_set: {exc}") from exc


def gpu_operator_problem(user_values: Any) -> str:
    """The GPU Operator's user values -> the combination refused before the install, in one line, or ""."""
    return _release_sets.gpu_operator_problem(user_values)


def dra_driver_problem(
    chart_name: Any,
    values: Any = None,
    release_name: Any = "",
    namespace: Any = "",
    device_classes: Any = None,
    gpu_clusters: Any = None,
    chart_version: Any = "",
) -> str:
    """The DRA driver chart's name -> the combinations refused before the install, in one line, or ""."""
    return _release_sets.dra_driver_problem(
        str(chart_name),
        values,
        str(release_name),
        str(namespace),
        device_classes or (),
        gpu_clusters or (),
        str(chart_version or ""),
    )


def checks_selected(run_tags: Any, skip_tags: Any, enabled: Any, own_roles: Any = ()) -> List[str]:
    try:
        return check_catalog.selected(
            [str(t) for t in run_tags or []],
            [str(t) for t in skip_tags or []],
            check_catalog.check_names(enabled),  # one name, a comma-separated list or a list
            [str(c) for c in own_roles or []],
        )
    except ValueError as exc:
        raise AnsibleFilterError(str(exc)) from None


def download_failure(result: Any, what: str, variables: Any) -> str:
    """One line for a failed download (a registered uri or get_url result), naming its URL and the variables."""
    return _mirror.download_failure(
        result if isinstance(result, Mapping) else {}, str(what), [str(v) for v in variables]
    )


class FilterModule:
    def filters(self) -> Dict[str, Any]:
        return {
            "nvbandwidth_parse": nvbandwidth_parse,
            "clique_groups": clique_groups,
            "openshift_detected": openshift_detected,
            "rack_waves": rack_waves,
            "rack_peers": rack_peers,
            "rack_clique_conflicts": rack_clique_conflicts,
            "imex_driver_mismatch": imex_driver_mismatch,
            "kernel_args_missing": kernel_args_missing,
            "grub_cmdline_dropin": grub_cmdline_dropin,
            "dra_api_version": dra_api_version,
            "dra_api_problem": dra_api_problem,
            "chart_values": chart_values,
            "driver_owner_conflict": driver_owner_conflict,
            "release_set": release_set,
            "gpu_operator_problem": gpu_operator_problem,
            "dra_driver_problem": dra_driver_problem,
            "checks_selected": checks_selected,
            "download_failure": download_failure,
        }
