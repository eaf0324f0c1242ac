# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The waits of the ``gpu_operator_ready`` and ``dra_driver_ready`` modules, one function each.

Each takes the module's parameters as a dataclass and a ``connect`` that returns a lister of the cluster
(:func:`cluster_lister`: ``list_all`` on kubernetes.core's client), reads through ``k8s.api_poll`` with the
``sleep`` and ``clock`` it is given, and returns the module's result. What is not ready in time, and an API
server that refuses to answer, are raised as :class:`NotReady`: one line, and the result keys known by then.
The judges and the messages are :mod:`rollout`'s.
"""

from __future__ import annotations

import functools
import time
from contextlib import contextmanager
from dataclasses import dataclass, fields
from typing import Any, Callable, Dict, Iterator, List, Mapping, Sequence

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.cluster_policy import PolicyTimeout, wait_ready
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.k8s import (
    DynamicApiError,
    ResourceNotFoundError,
    Urllib3Error,
    api_poll,
    list_all,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.node_verdict import error_line
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.olm import CLUSTER_POLICY_API_VERSION
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.retry import WaitTimeout
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.rollout import (
    CONTROLLER_SELECTOR,
    PLUGIN_SELECTOR,
    controller_message,
    device_class_message,
    dra_summary,
    gpu_capacity,
    gpu_nodes_message,
    gpu_nodes_summary,
    is_ready,
    missing,
    not_ready_pods,
    operator_pods_message,
    plugin_message,
    ready_pod_nodes,
    slice_message,
    slice_nodes,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.text import natural_key

# ``lister(api_version, kind, namespace=None, label_selector=None)``: every object of a kind, as plain dicts
Lister = Callable[..., List[Dict[str, Any]]]


class NotReady(Exception):
    """The component is not ready in time, or its rollout cannot be read: ``message`` (one line) and ``result``,
    the module's result keys known by then."""

    def __init__(self, message: str, **result: Any) -> None:
        super().__init__(message)
        self.message = message
        self.result = result


def cluster_lister(client: Any) -> Lister:
    """``list_all`` on kubernetes.core's ``client``."""
    return functools.partial(list_all, client)


@contextmanager
def reading(component: str, known: Dict[str, Any]) -> Iterator[None]:
    """An API error in the block raised as :class:`NotReady` naming ``component``, with what ``known`` holds then."""
    try:
        yield
    except (DynamicApiError, Urllib3Error, ConnectionError, TimeoutError) as exc:  # refused, or no answer in time
        raise NotReady(f"cannot read {component}'s rollout: {error_line(exc)}", **known) from exc


class _FromParams:
    @classmethod
    def from_params(cls, params: Mapping[str, Any]):
        """The module's parameters of the same names."""
        return cls(**{item.name: params[item.name] for item in fields(cls)})


@dataclass(frozen=True)
class DraDriverWait(_FromParams):
    """What ``dra_driver_ready`` waits for (its options)."""

    namespace: str
    gpu_node_selector: str
    dra_api_version: str
    device_classes: Sequence[str]
    resource_slice_driver: str
    chart: str
    release_name: str
    wait_timeout: int
    slice_timeout: int
    wait_sleep: float


@dataclass(frozen=True)
class GpuOperatorWait(_FromParams):
    """What ``gpu_operator_ready`` waits for (its options)."""

    name: str
    wait_timeout: int
    wait_sleep: float
    pods_namespace: str
    gpu_node_selector: str


def dra_driver_ready(
    connect: Callable[[], Lister],
    wait: DraDriverWait,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> Dict[str, Any]:
    """Read the GPU nodes, then wait, in this order, for the controller pod Ready, a Ready kubelet-plugin pod on
    every GPU node, the DeviceClasses and a ResourceSlice of the driver on every GPU node."""
    until = functools.partial(api_poll, delay=wait.wait_sleep, sleep=sleep, clock=clock)
    namespace, timeout, driver = wait.namespace, wait.wait_timeout, wait.resource_slice_driver
    known: Dict[str, Any] = {"gpu_nodes": []}
    with reading("the DRA driver", known):
        lister = connect()

        def pods(selector: str) -> Callable[[], List[Dict[str, Any]]]:
            return lambda: lister("v1", "Pod", namespace=namespace, label_selector=selector)

        found = until(lambda: lister("v1", "Node", label_selector=wait.gpu_node_selector), lambda _: True, timeout)
        nodes = known["gpu_nodes"] = sorted((node["metadata"]["name"] for node in found), key=natural_key)
        try:
            until(pods(CONTROLLER_SELECTOR), lambda found: any(is_ready(pod) for pod in found), timeout)
        except WaitTimeout as exc:
            raise NotReady(controller_message(namespace, timeout, exc.last), gpu_nodes=nodes) from None
        try:
            until(pods(PLUGIN_SELECTOR), lambda found: not missing(nodes, ready_pod_nodes(found)), timeout)
        except WaitTimeout as exc:
            absent = missing(nodes, ready_pod_nodes(exc.last))
            raise NotReady(plugin_message(namespace, timeout, absent), gpu_nodes=nodes) from None
        classes = until(lambda: lister(wait.dra_api_version, "DeviceClass"), lambda _: True, timeout)
        absent = missing(wait.device_classes, (item["metadata"]["name"] for item in classes))
        if absent:
            message = device_class_message(absent, wait.chart, namespace, wait.release_name)
            raise NotReady(message, gpu_nodes=nodes)
        try:
            until(
                lambda: lister(wait.dra_api_version, "ResourceSlice"),
                lambda found: not missing(nodes, slice_nodes(found, driver)),
                wait.slice_timeout,
            )
        except WaitTimeout as exc:
            absent = missing(nodes, slice_nodes(exc.last, driver))
            raise NotReady(slice_message(driver, absent, namespace), gpu_nodes=nodes) from None
    summary = dra_summary(wait.chart, nodes, wait.device_classes, wait.dra_api_version)
    return {"changed": False, "gpu_nodes": nodes, "msg": summary}


def gpu_operator_ready(
    connect: Callable[[], Lister],
    wait: GpuOperatorWait,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> Dict[str, Any]:
    """Wait until the ClusterPolicy is ``ready``, then (each when asked for) every pod of the operator's namespace
    is Ready and every GPU node reports ``nvidia.com/gpu`` capacity."""
    until = functools.partial(api_poll, delay=wait.wait_sleep, sleep=sleep, clock=clock)
    timeout, namespace, selector = wait.wait_timeout, wait.pods_namespace, wait.gpu_node_selector
    with reading("the GPU Operator", {}):
        lister = connect()

        def policies() -> List[Dict[str, Any]]:
            try:
                return lister(CLUSTER_POLICY_API_VERSION, "ClusterPolicy")
            except ResourceNotFoundError:  # the CRD is not installed (yet)
                return []

        try:
            readiness = wait_ready(policies, timeout, wait.name, wait.wait_sleep, sleep=sleep, clock=clock)
        except PolicyTimeout as exc:
            raise NotReady(exc.message, changed=False, **exc.readiness.to_dict()) from None
        result = dict(readiness.to_dict(), changed=False, gpus_per_node={}, pods=0)
        if namespace:
            try:
                pods = until(
                    lambda: lister("v1", "Pod", namespace=namespace),
                    lambda found: bool(found) and not not_ready_pods(found),
                    timeout,
                )
            except WaitTimeout as exc:
                raise NotReady(operator_pods_message(namespace, timeout, not_ready_pods(exc.last)), **result) from None
            result["pods"] = len(pods)
        if selector:
            try:
                nodes = until(
                    lambda: lister("v1", "Node", label_selector=selector),
                    lambda found: bool(found) and all(gpu_capacity(found).values()),
                    timeout,
                )
            except WaitTimeout as exc:
                raise NotReady(gpu_nodes_message(selector, timeout, gpu_capacity(exc.last)), **result) from None
            result["gpus_per_node"] = gpu_capacity(nodes)
    capacity = result["gpus_per_node"]
    return dict(result, msg=gpu_nodes_summary(capacity) if capacity else readiness.summary())
