# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A small dict-in, dict-out REST client for the stand-in controllers.

The controllers speak to many API groups (core, apps, batch, resource.k8s.io and three CRD
groups) and want plain dicts; the typed clients add nothing here. Credentials come from the
sim's kubeconfig through ``kubernetes.config`` so token and client-certificate kubeconfigs
both work.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import ssl
import urllib.parse
from dataclasses import dataclass
from typing import Any, Iterator, Optional

import urllib3
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config


class ApiError(Exception):
    """An HTTP error answered by the API server."""

    def __init__(self, status: int, body: str, what: str) -> None:
        super().__init__(f"{what}: HTTP {status}: {body[:400]}")
        self.status = status
        self.body = body


@dataclass(frozen=True)
class Resource:
    """Where a kind lives in the REST tree."""

    group: str
    version: str
    plural: str
    namespaced: bool = True

    def path(self, namespace: Optional[str] = None, name: Optional[str] = None, sub: Optional[str] = None) -> str:
        base = f"/api/{self.version}" if not self.group else f"/apis/{self.group}/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        if name:
            base += f"/{name}"
        if sub:
            base += f"/{sub}"
        return base

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


NODES = Resource("", "v1", "nodes", namespaced=False)
PODS = Resource("", "v1", "pods")
SECRETS = Resource("", "v1", "secrets")
CONFIGMAPS = Resource("", "v1", "configmaps")
SERVICES = Resource("", "v1", "services")
NAMESPACES = Resource("", "v1", "namespaces", namespaced=False)
DEPLOYMENTS = Resource("apps", "v1", "deployments")
DAEMONSETS = Resource("apps", "v1", "daemonsets")
JOBS = Resource("batch", "v1", "jobs")
RUNTIMECLASSES = Resource("node.k8s.io", "v1", "runtimeclasses", namespaced=False)
# resource.k8s.io kinds are written in v1 and sent in the newest version the API server serves (v1 from
# Kubernetes 1.34, v1beta2 on 1.33, v1beta1 on 1.32), as the real DRA driver's client does.
DRA_GROUP = "resource.k8s.io"
DRA_VERSIONS = ("v1", "v1beta2", "v1beta1")
RESOURCESLICES = Resource("resource.k8s.io", "v1", "resourceslices", namespaced=False)
DEVICECLASSES = Resource("resource.k8s.io", "v1", "deviceclasses", namespaced=False)
RESOURCECLAIMTEMPLATES = Resource("resource.k8s.io", "v1", "resourceclaimtemplates")
COMPUTEDOMAINS = Resource("resource.nvidia.com", "v1beta1", "computedomains")
MPIJOBS = Resource("kubeflow.org", "v2beta1", "mpijobs")
CLUSTERPOLICIES = Resource("nvidia.com", "v1", "clusterpolicies", namespaced=False)
CRDS = Resource("apiextensions.k8s.io", "v1", "customresourcedefinitions", namespaced=False)
KWOK_LOGS = Resource("kwok.x-k8s.io", "v1alpha1", "logs")


def to_dra_version(obj: dict[str, Any], version: str) -> dict[str, Any]:
    """A resource.k8s.io object written in v1, as ``version`` spells it.

    v1beta2 has the v1 shape for what the stand-ins write. v1beta1 differs in two places: a device of a
    ResourceSlice keeps its attributes and capacity under ``basic``, and a request of a claim names its
    DeviceClass itself instead of under ``exactly``.
    """
    out = copy.deepcopy(obj)
    out["apiVersion"] = f"{DRA_GROUP}/{version}"
    if version != "v1beta1":
        return out
    if out.get("kind") == "ResourceSlice":
        devices = (out.get("spec") or {}).get("devices") or []
        for i, device in enumerate(devices):
            basic = {k: v for k, v in device.items() if k != "name"}
            devices[i] = {"name": device["name"], "basic": basic}
    if out.get("kind") in ("ResourceClaimTemplate", "ResourceClaim"):
        spec = out.get("spec") or {}
        spec = spec.get("spec", spec) if out["kind"] == "ResourceClaimTemplate" else spec
        for request in (spec.get("devices") or {}).get("requests") or []:
            request.update(request.pop("exactly", None) or {})
    return out


class Kube:
    """Blocking calls against one API server, answering dicts."""

    def __init__(self, kubeconfig: str) -> None:
        cfg = k8s_client.Configuration()
        k8s_config.load_kube_config(config_file=kubeconfig, client_configuration=cfg, persist_config=False)
        self.host = cfg.host.rstrip("/")
        self.headers: dict[str, str] = {"Accept": "application/json", "User-Agent": "gpu-fabric-sim-standins"}
        for key, value in (cfg.api_key or {}).items():
            prefix = (cfg.api_key_prefix or {}).get(key)
            self.headers["Authorization"] = f"{prefix} {value}" if prefix else value
        ctx = ssl.create_default_context(cafile=cfg.ssl_ca_cert) if cfg.verify_ssl else ssl._create_unverified_context()
        if cfg.cert_file:
            ctx.load_cert_chain(cfg.cert_file, cfg.key_file)
        self.http = urllib3.PoolManager(ssl_context=ctx, maxsize=8, retries=False)
        self._dra_version: Optional[str] = None

    def dra_version(self) -> str:
        """The newest resource.k8s.io version served (asked once it is known); v1 while the group is not served."""
        if self._dra_version is None:
            try:
                group = self.request("GET", f"/apis/{DRA_GROUP}")
            except ApiError as err:
                if err.status == 404:
                    return DRA_VERSIONS[0]
                raise
            served = {v.get("version") for v in group.get("versions") or []}
            found = next((v for v in DRA_VERSIONS if v in served), None)
            if found is None:
                return DRA_VERSIONS[0]
            self._dra_version = found
        return self._dra_version

    def served(self, res: Resource) -> Resource:
        """``res`` in the version the server serves (resource.k8s.io kinds: see :meth:`dra_version`)."""
        if res.group != DRA_GROUP:
            return res
        return dataclasses.replace(res, version=self.dra_version())

    def _url(self, path: str, query: Optional[dict[str, Any]] = None) -> str:
        url = self.host + path
        if query:
            url += "?" + urllib.parse.urlencode({k: v for k, v in query.items() if v is not None})
        return url

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        query: Optional[dict[str, Any]] = None,
        content_type: str = "application/json",
    ) -> dict[str, Any]:
        headers = dict(self.headers)
        data = None
        if body is not None:
            headers["Content-Type"] = content_type
            data = json.dumps(body).encode()
        resp = self.http.request(
            method, self._url(path, query), body=data, headers=headers, timeout=urllib3.Timeout(connect=5, read=30)
        )
        text = resp.data.decode(errors="replace")
        if resp.status >= 300:
            raise ApiError(resp.status, text, f"{method} {path}")
        return json.loads(text) if text else {}

    # -- conveniences -------------------------------------------------------------------------
    def get(self, res: Resource, name: str, namespace: Optional[str] = None) -> Optional[dict[str, Any]]:
        res = self.served(res)
        try:
            return self.request("GET", res.path(namespace, name))
        except ApiError as err:
            if err.status == 404:
                return None
            raise

    def list(
        self, res: Resource, namespace: Optional[str] = None, label_selector: Optional[str] = None
    ) -> list[dict[str, Any]]:
        return self.list_at(res, namespace, label_selector)[0]

    def list_at(
        self, res: Resource, namespace: Optional[str] = None, label_selector: Optional[str] = None
    ) -> tuple[list[dict[str, Any]], str]:
        """The objects and the list's resourceVersion (where a watch goes on from); ``[], ""`` while the kind is not
        served (a CRD not installed yet)."""
        res = self.served(res)
        items: list[dict[str, Any]] = []
        cont = None
        while True:
            try:
                page = self.request(
                    "GET", res.path(namespace), query={"labelSelector": label_selector, "limit": 500, "continue": cont}
                )
            except ApiError as err:
                if err.status == 404:  # the CRD is not installed (yet)
                    return [], ""
                raise
            kind = (page.get("kind") or "List").removesuffix("List")
            for item in page.get("items") or []:
                item.setdefault("apiVersion", page.get("apiVersion", res.api_version))
                item.setdefault("kind", kind)
                items.append(item)
            meta = page.get("metadata") or {}
            cont = meta.get("continue")
            if not cont:
                return items, str(meta.get("resourceVersion") or "")

    def create(self, res: Resource, obj: dict[str, Any], namespace: Optional[str] = None) -> Optional[dict[str, Any]]:
        """Create; an object that already exists is not an error (answers None)."""
        res = self.served(res)
        if res.group == DRA_GROUP:
            obj = to_dra_version(obj, res.version)
        try:
            return self.request("POST", res.path(namespace), obj)
        except ApiError as err:
            if err.status == 409:
                return None
            raise

    def merge_patch(
        self,
        res: Resource,
        name: str,
        patch: dict[str, Any],
        namespace: Optional[str] = None,
        sub: Optional[str] = None,
    ) -> Optional[dict[str, Any]]:
        res = self.served(res)
        try:
            return self.request(
                "PATCH", res.path(namespace, name, sub), patch, content_type="application/merge-patch+json"
            )
        except ApiError as err:
            if err.status == 404:
                return None
            raise

    def delete(
        self, res: Resource, name: str, namespace: Optional[str] = None, propagation: str = "Background"
    ) -> bool:
        res = self.served(res)
        try:
            self.request("DELETE", res.path(namespace, name), {"propagationPolicy": propagation})
            return True
        except ApiError as err:
            if err.status == 404:
                return False
            raise

    def watch(self, res: Resource, timeout_seconds: int = 60, resource_version: str = "") -> Iterator[dict[str, Any]]:
        """Yield watch events until the server closes the stream: from ``resource_version`` (with bookmarks), else
        from now, after an ADDED event for every object there is."""
        res = self.served(res)
        query: dict[str, Any] = {"watch": "true", "timeoutSeconds": timeout_seconds}
        if resource_version:
            query.update(resourceVersion=resource_version, allowWatchBookmarks="true")
        resp = self.http.request(
            "GET",
            self._url(res.path(), query),
            headers=self.headers,
            preload_content=False,
            timeout=urllib3.Timeout(connect=5, read=timeout_seconds + 15),
        )
        try:
            if resp.status >= 300:
                raise ApiError(resp.status, resp.read().decode(errors="replace"), f"WATCH {res.path()}")
            buf = b""
            for chunk in resp.stream(65536):
                buf += chunk
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    if line.strip():
                        yield json.loads(line)
        finally:
            resp.release_conn()


def owner_reference(obj: dict[str, Any], controller: bool = True) -> dict[str, Any]:
    """An ownerReference to ``obj`` (same namespace or cluster scoped) for the garbage collector."""
    meta = obj["metadata"]
    return {
        "apiVersion": obj["apiVersion"],
        "kind": obj["kind"],
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": controller,
        "blockOwnerDeletion": True,
    }
