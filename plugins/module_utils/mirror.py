# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Every image and download of the cluster stage, pointed at a site's mirror (air-gapped sites).

One prefix (``registry.example.com/mirror``) moves every image: the public registry host is replaced by the
prefix and the path is kept (``nvcr.io/nvidia/gpu-operator`` -> ``registry.example.com/mirror/nvidia/gpu-operator``),
the layout that ``skopeo sync`` / ``crane copy`` / a pull-through cache give. An override, keyed by the public
image without its tag, wins for one image. The charts pick their images from values, so the mirror becomes
chart values: each image component of the GPU Operator v25.10.0 chart (and its NFD subchart) and of the DRA
driver 25.8.0 chart, with the pull secrets in the shape each chart expects. The MPI operator's manifest is
rewritten object by object. Downloads (the charts' HTTP repositories, the manifest, the containerd release)
move to a file mirror that keeps the host and path under its base URL.
"""

from __future__ import annotations

import copy
import re
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple
from urllib.parse import urlsplit

DOCKER_HUB = "docker.io"
# Registries and download hosts the collection's defaults name; none may be left once a mirror is set.
PUBLIC_REGISTRIES = ("nvcr.io", "docker.io", "registry.k8s.io", "ghcr.io", "quay.io", "registry-1.docker.io")
PUBLIC_DOWNLOAD_HOSTS = (
    "helm.ngc.nvidia.com",
    "raw.githubusercontent.com",
    "github.com",
    "objects.githubusercontent.com",
    "kubernetes-sigs.github.io",
)

# The image components of chart nvidia/gpu-operator v25.10.0: values path -> (repository, image) as its
# values.yaml sets them. Each takes `repository`, `image` and `imagePullSecrets` (a list of secret names).
GPU_OPERATOR_COMPONENTS: Tuple[Tuple[str, str, str], ...] = (
    ("operator", "nvcr.io/nvidia", "gpu-operator"),
    ("operator.initContainer", "nvcr.io/nvidia", "cuda"),
    ("validator", "nvcr.io/nvidia", "gpu-operator"),
    ("driver", "nvcr.io/nvidia", "driver"),
    ("driver.manager", "nvcr.io/nvidia/cloud-native", "k8s-driver-manager"),
    ("toolkit", "nvcr.io/nvidia/k8s", "container-toolkit"),
    ("devicePlugin", "nvcr.io/nvidia", "k8s-device-plugin"),
    ("dcgm", "nvcr.io/nvidia/cloud-native", "dcgm"),
    ("dcgmExporter", "nvcr.io/nvidia/k8s", "dcgm-exporter"),
    ("gfd", "nvcr.io/nvidia", "k8s-device-plugin"),
    ("migManager", "nvcr.io/nvidia/cloud-native", "k8s-mig-manager"),
    ("nodeStatusExporter", "nvcr.io/nvidia", "gpu-operator"),
    ("gds", "nvcr.io/nvidia/cloud-native", "nvidia-fs"),
    ("gdrcopy", "nvcr.io/nvidia/cloud-native", "gdrdrv"),
    ("vgpuManager.driverManager", "nvcr.io/nvidia/cloud-native", "k8s-driver-manager"),
    ("vgpuDeviceManager", "nvcr.io/nvidia/cloud-native", "vgpu-device-manager"),
    ("vfioManager", "nvcr.io/nvidia", "cuda"),
    ("vfioManager.driverManager", "nvcr.io/nvidia/cloud-native", "k8s-driver-manager"),
    ("kataManager", "nvcr.io/nvidia/cloud-native", "k8s-kata-manager"),
    ("sandboxDevicePlugin", "nvcr.io/nvidia", "kubevirt-gpu-device-plugin"),
    ("ccManager", "nvcr.io/nvidia/cloud-native", "k8s-cc-manager"),
)
# Chart v26.7.0 changed some: no operator.initContainer nor kataManager; vfioManager runs the driver manager;
# kataSandboxDevicePlugin and draDriver (the GPUCluster's DRA driver) are new.
GPU_OPERATOR_26_7_COMPONENTS: Tuple[Tuple[str, str, str], ...] = (
    *(c for c in GPU_OPERATOR_COMPONENTS if c[0] not in ("operator.initContainer", "vfioManager", "kataManager")),
    ("vfioManager", "nvcr.io/nvidia/cloud-native", "k8s-driver-manager"),
    ("kataSandboxDevicePlugin", "nvcr.io/nvidia/cloud-native", "nvidia-sandbox-device-plugin"),
    ("draDriver", "nvcr.io/nvidia", "dra-driver-nvidia-gpu"),
)


def gpu_operator_components(chart_version: str = "") -> Tuple[Tuple[str, str, str], ...]:
    """The image components of the GPU Operator chart at ``chart_version`` (empty: v25.10.0's)."""
    try:
        year, minor = (int(part) for part in chart_version.strip().lstrip("vV").split(".")[:2])
    except ValueError:
        return GPU_OPERATOR_COMPONENTS
    return GPU_OPERATOR_26_7_COMPONENTS if (year, minor) >= (26, 7) else GPU_OPERATOR_COMPONENTS


# The NFD subchart (node-feature-discovery v0.18.2): image.repository, imagePullSecrets as [{name: ...}].
NFD_IMAGE = "registry.k8s.io/nfd/node-feature-discovery"
# Chart nvidia/nvidia-dra-driver-gpu 25.8.0: one image (image.repository), imagePullSecrets as [{name: ...}];
# chart dra-driver-nvidia-gpu 0.4 takes the same keys, its image at registry.k8s.io (release_sets.py).
DRA_DRIVER_IMAGE = "nvcr.io/nvidia/k8s-dra-driver-gpu"

_POD_SPEC_PATHS = (("spec", "template", "spec"), ("spec", "jobTemplate", "spec", "template", "spec"))
_HOST = re.compile(r"^[^/]+[.:][^/]*$|^localhost$")


def split_image(image: str) -> Tuple[str, str, str]:
    """``(registry, path, tag_or_digest)`` of an image reference, Docker Hub's implicit names made explicit.

    ``mpioperator/mpi-operator:0.6.0`` -> ``("docker.io", "mpioperator/mpi-operator", ":0.6.0")``;
    ``ubuntu:22.04`` -> ``("docker.io", "library/ubuntu", ":22.04")``.
    """
    name, at, digest = image.partition("@")
    suffix = at + digest
    head, last = name.rpartition("/")[::2]
    if ":" in last:
        last, tag = last.split(":", 1)
        suffix = f":{tag}{suffix}"
    name = f"{head}/{last}" if head else last
    first, slash, rest = name.partition("/")
    if slash and _HOST.match(first):
        return first, rest, suffix
    return DOCKER_HUB, name if slash else f"library/{name}", suffix


def mirror_repository(repository: str, prefix: str, overrides: Optional[Mapping[str, str]] = None) -> str:
    """A repository (an image without its tag) at the mirror: the override for it, else prefix + path."""
    registry, path = split_image(repository)[:2]
    public = f"{registry}/{path}"
    for key, value in (overrides or {}).items():
        key_registry, key_path = split_image(key)[:2]
        if f"{key_registry}/{key_path}" == public:
            return value
    if not prefix:
        return repository
    return f"{prefix.rstrip('/')}/{path}"


def mirror_image(image: str, prefix: str, overrides: Optional[Mapping[str, str]] = None) -> str:
    """An image reference (tag or digest kept) at the mirror; unchanged without prefix nor override."""
    if not image:
        return image
    registry, path, suffix = split_image(image)
    moved = mirror_repository(f"{registry}/{path}", prefix, overrides)
    if moved == f"{registry}/{path}" and not prefix:
        return image
    return moved + suffix


def _set(values: Dict[str, Any], dotted: str, key: str, value: Any) -> None:
    node = values
    for part in dotted.split("."):
        node = node.setdefault(part, {})
    node[key] = value


def _split_repository(moved: str) -> Tuple[str, str]:
    repository, image = moved.rpartition("/")[::2]
    return repository, image


def gpu_operator_values(
    prefix: str,
    overrides: Optional[Mapping[str, str]] = None,
    pull_secrets: Sequence[str] = (),
    chart_version: str = "",
) -> Dict[str, Any]:
    """Values of the GPU Operator chart (at ``chart_version``) that pull every image from the mirror, with the
    pull secrets."""
    values: Dict[str, Any] = {}
    if not prefix and not overrides and not pull_secrets:
        return values
    components = gpu_operator_components(chart_version)
    for path, repository, image in components:
        public = f"{repository}/{image}"
        moved = mirror_repository(public, prefix, overrides)
        if moved != public:
            new_repository, new_image = _split_repository(moved)
            _set(values, path, "repository", new_repository)
            _set(values, path, "image", new_image)
    # pull secrets are read at each top level (nested managers share their parent's)
    for path in [c[0] for c in components if "." not in c[0]] if pull_secrets else ():
        _set(values, path, "imagePullSecrets", list(pull_secrets))
    nfd = mirror_repository(NFD_IMAGE, prefix, overrides)
    if nfd != NFD_IMAGE:
        _set(values, "node-feature-discovery", "image", {"repository": nfd})
    if pull_secrets:
        _set(values, "node-feature-discovery", "imagePullSecrets", [{"name": s} for s in pull_secrets])
    return values


def dra_driver_values(
    prefix: str,
    overrides: Optional[Mapping[str, str]] = None,
    pull_secrets: Sequence[str] = (),
    image: str = DRA_DRIVER_IMAGE,
) -> Dict[str, Any]:
    """Values of the DRA driver chart that pull its image (``image``, the chart's ``image.repository``: it moved
    to registry.k8s.io with chart ``dra-driver-nvidia-gpu``) from the mirror, with the pull secrets."""
    values: Dict[str, Any] = {}
    image = image or DRA_DRIVER_IMAGE
    moved = mirror_repository(image, prefix, overrides)
    if moved != image:
        values["image"] = {"repository": moved}
    if pull_secrets:
        values["imagePullSecrets"] = [{"name": s} for s in pull_secrets]
    return values


def _pod_specs(obj: Dict[str, Any]) -> Iterable[Dict[str, Any]]:
    if obj.get("kind") == "Pod":
        yield obj.setdefault("spec", {})
    for replica in ((obj.get("spec") or {}).get("mpiReplicaSpecs") or {}).values():  # MPIJob
        template = (replica or {}).get("template") or {}
        if isinstance(template.get("spec"), dict):
            yield template["spec"]
    for path in _POD_SPEC_PATHS:
        node: Any = obj
        for key in path:
            node = node.get(key) if isinstance(node, dict) else None
        if isinstance(node, dict):
            yield node


def mirror_manifest(
    documents: Iterable[Any],
    prefix: str,
    overrides: Optional[Mapping[str, str]] = None,
    pull_secrets: Sequence[str] = (),
) -> List[Dict[str, Any]]:
    """The objects of a manifest, every container image of their pod templates at the mirror.

    Empty documents are dropped; the pull secrets are added to each pod template (none twice).
    """
    result = []
    for doc in documents:
        if not isinstance(doc, dict) or not doc:
            continue
        obj = copy.deepcopy(doc)
        for spec in _pod_specs(obj):
            for key in ("initContainers", "containers", "ephemeralContainers"):
                for container in spec.get(key) or []:
                    if container.get("image"):
                        container["image"] = mirror_image(container["image"], prefix, overrides)
            if pull_secrets:
                have = [s.get("name") for s in spec.get("imagePullSecrets") or []]
                spec["imagePullSecrets"] = list(spec.get("imagePullSecrets") or []) + [
                    {"name": s} for s in pull_secrets if s not in have
                ]
        result.append(obj)
    return result


def mirror_url(url: str, base: str) -> str:
    """A download at the file mirror: ``<base>/<host>/<path>``; unchanged without base or for oci:// refs."""
    if not base or not url or url.startswith("oci://"):
        return url
    parts = urlsplit(url)
    path = parts.path + (f"?{parts.query}" if parts.query else "")
    return f"{base.rstrip('/')}/{parts.netloc}{path}"


def chart_source(chart_name: str, repo_url: str, repo_name: str = "", authenticated: bool = False) -> Dict[str, str]:
    """Where Helm finds a chart: ``chart_ref``, ``chart_repo_url`` ("" for none) and what to log
    in to first.

    An ``oci://`` repository names the chart in the reference (Helm takes no repository URL then) and, with
    credentials, needs a registry login (``registry_host``). An HTTP repository with credentials is added as a
    named repository (``repo_name``: Helm keeps its credentials) and the chart is ``<repo_name>/<chart>``;
    without credentials it is passed as the repository URL.
    """
    if repo_url.startswith("oci://"):
        host = urlsplit(repo_url).netloc
        return {
            "chart_ref": f"{repo_url.rstrip('/')}/{chart_name}",
            "chart_repo_url": "",
            "registry_host": host if authenticated else "",
            "repo_name": "",
        }
    if authenticated:
        return {
            "chart_ref": f"{repo_name}/{chart_name}",
            "chart_repo_url": "",
            "registry_host": "",
            "repo_name": repo_name,
        }
    return {"chart_ref": chart_name, "chart_repo_url": repo_url, "registry_host": "", "repo_name": ""}


def public_hosts(text: str, hosts: Sequence[str] = PUBLIC_REGISTRIES + PUBLIC_DOWNLOAD_HOSTS) -> List[str]:
    """The public registry and download hosts named in ``text`` (a rendered manifest or values file)."""
    # A host starts a reference or follows "//"; after a single "/" it is a path at the mirror (files/ghcr.io/x).
    found = {host for host in hosts if re.search(rf"(?:(?<=//)|(?<![\w./-])){re.escape(host)}(?![\w-])", text)}
    return sorted(found)


def implicit_docker_hub_images(documents: Iterable[Mapping[str, Any]]) -> List[str]:
    """Images of pod templates that name no registry (Docker Hub implicitly): a host search cannot see them."""
    found = []
    for doc in documents:
        for spec in _pod_specs(copy.deepcopy(dict(doc))):
            for key in ("initContainers", "containers", "ephemeralContainers"):
                for container in spec.get(key) or []:
                    image = container.get("image") or ""
                    first = image.split("/", 1)[0]
                    if image and ("/" not in image or not _HOST.match(first)):
                        found.append(image)
    return found


# The options of the mirror_settings module and of its action plugin (one spec, one computation).
SETTINGS_SPEC: Dict[str, Dict[str, Any]] = dict(
    registry=dict(type="str", default=""),
    image_overrides=dict(type="dict", default={}),
    pull_secrets=dict(type="list", elements="str", default=[], no_log=False),
    download_mirror=dict(type="str", default=""),
    images=dict(type="dict", default={}),
    urls=dict(type="dict", default={}),
    charts=dict(type="dict", default={}),
    dra_driver_image=dict(type="str", default=DRA_DRIVER_IMAGE),
    gpu_operator_chart_version=dict(type="str", default=""),
    manifest=dict(type="str", default=""),
)


def settings(params: Mapping[str, Any]) -> Dict[str, Any]:
    """mirror_settings' result for its validated options; ValueError names a manifest that is not YAML."""
    prefix, overrides, secrets = params["registry"], params["image_overrides"], params["pull_secrets"]
    objects: List[Dict[str, Any]] = []
    if params["manifest"]:
        import yaml  # PyYAML comes with ansible-core; imported here so the rest needs nothing but the standard library

        try:
            objects = mirror_manifest(yaml.safe_load_all(params["manifest"]), prefix, overrides, secrets)
        except yaml.YAMLError as exc:
            raise ValueError(f"the manifest is not YAML: {str(exc).splitlines()[0]}") from exc
    return dict(
        changed=False,
        gpu_operator_values=gpu_operator_values(
            prefix, overrides, secrets, params.get("gpu_operator_chart_version") or ""
        ),
        dra_driver_values=dra_driver_values(
            prefix, overrides, secrets, params.get("dra_driver_image") or DRA_DRIVER_IMAGE
        ),
        images={k: mirror_image(str(v or ""), prefix, overrides) for k, v in params["images"].items()},
        urls={k: mirror_url(str(v or ""), params["download_mirror"]) for k, v in params["urls"].items()},
        charts={
            k: chart_source(
                str(v.get("chart", "")),
                str(v.get("repo_url", "")),
                str(v.get("repo_name", "")),
                bool(v.get("authenticated", False)),
            )
            for k, v in params["charts"].items()
        },
        manifest_objects=objects,
        # a Namespace first, apart: in check mode the dry run of an object in a namespace that does not exist yet
        # is refused (the dry-run Namespace is not kept), so those objects can only be said to be created with it
        manifest_namespaces=[o for o in objects if o.get("kind") == "Namespace"],
        manifest_namespaced=[o for o in objects if o.get("kind") != "Namespace"],
    )


# ``ansible.builtin.uri`` and ``get_url`` report no answer as status -1 and the reason after "Request failed: ", often
# wrapped in urllib's ``<... error [Errno 111] ...>``; an answer as "HTTP Error 404: Not Found".
_WRAPPED_REASON = re.compile(r"^<\w+ error (?:\[Errno -?\d+\] )?(.*)>$")


def download_failure(
    result: Mapping[str, Any], what: str, variables: Sequence[str], expected: Sequence[int] = (200,)
) -> str:
    """One line for a download that failed, naming the URL, why, and the variables that move it; empty when it did
    not fail or did not run.

    ``result``: a registered ``uri`` or ``get_url`` result, with ``failed_when: false`` (so that this line, not the
    module's, is what the run says). It failed when the module said so, when the server answered another status
    than ``expected``, or when no answer came (``uri``: status -1; ``get_url``: no status and "Request failed").
    """
    if not result or result.get("skipped"):
        return ""
    status = result.get("status", result.get("status_code"))
    message = " ".join(str(result.get("msg") or "").split())
    answered = status is not None and int(status) >= 0
    if answered and int(status) in expected and not result.get("failed"):
        return ""
    if not answered and not result.get("failed") and not message.startswith(("Request failed", "Status code was")):
        return ""  # get_url found the file in place: nothing was asked of the server
    if answered:
        detail = message.rsplit(": ", 1)[-1] if "HTTP Error" in message else ""
        reason = f"the server answered {status}" + (f" ({detail})" if detail else "")
    else:
        reason = message.split("Request failed: ", 1)[1] if "Request failed: " in message else ""
        reason = _WRAPPED_REASON.sub(r"\1", reason.strip()) or "no answer"
    source = result.get("url") or "its URL"
    where = " or ".join(variables)
    return f"cannot download {what} from {source}: {reason}; set {where} to a copy the host can read"
