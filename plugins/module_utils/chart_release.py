# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""One Helm release of the cluster stage, judged in one place: what is installed, what should be, what to do.

The ``chart_release`` module knows the release's latest revision from the ``helm history`` that its
pending-release check reads anyway (the revision's status and its chart, ``<name>-<version>``), reads the
values the site gave with one ``helm get values -o json``, and installs or upgrades only when one of them
differs from what the play asks for. (``helm status -o json`` carries the values but not the chart.) No
chart is downloaded to decide that, unless the version asked for is a range (``~25.10``), which only
``helm show chart`` resolves. The chart's CRDs
(``helm show crds``) are applied server-side on every run, since Helm creates a chart's ``crds/`` on the
first install only and never upgrades them. The functions here are the decisions and the messages;
:mod:`chart_release_runner` runs Helm and the API calls.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

try:
    import yaml
except ImportError:  # reported by AnsibleK8SModule's requires("kubernetes"): the client needs PyYAML
    yaml = None
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.helm_release import Revision
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.text import one_line

# A version Helm matches exactly (Helm's --version also takes ranges: ~1.2, ^1, >=1.0 <2.0, 1.x).
_EXACT_VERSION = re.compile(r"^v?\d+(\.\d+){0,2}(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$")
# The version at the end of Helm's "<chart name>-<chart version>": a chart version is SemVer 2 (x.y.z).
_CHART_AND_VERSION = re.compile(r"^(?P<name>.+?)-(?P<version>v?\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?)$")
CRD_KIND = "CustomResourceDefinition"


class ChartReleaseError(ValueError):
    """Helm printed something that is not what was asked for (message: one line)."""


@dataclass(frozen=True)
class Installed:
    """The release's latest revision: its history entry and the values the site gave it."""

    revision: int
    status: str
    chart_name: str
    chart_version: str
    app_version: str
    values: Dict[str, Any]


@dataclass(frozen=True)
class Plan:
    """``install``, ``upgrade`` or ``none``, and why, one reason per difference."""

    action: str
    reasons: List[str] = field(default_factory=list)


def split_chart(chart: str, chart_name: str = "") -> Tuple[str, str]:
    """Helm's ``<chart name>-<chart version>`` (``helm history``, ``helm list``) as name and version; the name
    asked for first, since a chart's name may hold dashes and digits."""
    chart = (chart or "").strip()
    if chart_name and chart.startswith(f"{chart_name}-"):
        return chart_name, chart[len(chart_name) + 1 :]
    match = _CHART_AND_VERSION.match(chart)
    return (match["name"], match["version"]) if match else (chart, "")


def parse_values(text: str) -> Dict[str, Any]:
    """``helm get values <release> -o json``: the values the site gave (``null`` when it gave none)."""
    try:
        values = json.loads(text or "null")
    except ValueError as exc:
        raise ChartReleaseError(f"helm get values printed no JSON ({exc})") from exc
    if values is None:
        return {}
    if not isinstance(values, dict):
        raise ChartReleaseError("helm get values printed JSON that is not a mapping of values")
    return values


def installed_release(latest: Revision, values: Mapping[str, Any], chart_name: str = "") -> Installed:
    """The release as :func:`plan` compares it: ``latest`` from ``helm history``, ``values`` from
    ``helm get values``."""
    name, version = split_chart(latest.chart, chart_name)
    return Installed(
        revision=latest.number,
        status=latest.status,
        chart_name=name,
        chart_version=version,
        app_version=latest.app_version,
        values=dict(values),
    )


def is_exact_version(version: str) -> bool:
    """Whether ``version`` names one chart version (else Helm resolves it as a range)."""
    return bool(_EXACT_VERSION.match((version or "").strip()))


def same_version(a: str, b: str) -> bool:
    """Chart versions equal as Helm's semver reads them: ``v25.10.0`` is ``25.10.0``."""
    return (a or "").strip().lstrip("vV") == (b or "").strip().lstrip("vV")


def parse_chart_version(text: str) -> str:
    """The ``version`` of ``helm show chart``'s Chart.yaml."""
    try:
        chart = yaml.safe_load(text or "")
    except yaml.YAMLError as exc:
        raise ChartReleaseError(f"helm show chart printed no YAML ({one_line(exc, 300)})") from exc
    if not isinstance(chart, dict) or not chart.get("version"):
        raise ChartReleaseError("helm show chart printed a Chart.yaml without a version")
    return str(chart["version"])


def plain(values: Any) -> Any:
    """``values`` as Helm stores them: JSON types only (what YAML and Jinja give, compared like for like)."""
    return json.loads(json.dumps(values, sort_keys=True, default=str))


# A value under a key that reads as a credential is shown as REDACTED in results and diffs (registry
# passwords, tokens, keys of a private registry's pull secret). Names of secrets ("secretName",
# "imagePullSecrets: [{name: ...}]") are hidden too where the key matches; a list or mapping under such a
# key is walked, so a secret's name under "name" stays readable.
SECRET_KEY = re.compile(
    r"pass(word|wd|phrase)|secret|token|api[-_]?key|private[-_]?key|credential|dockerconfigjson",
    re.IGNORECASE,
)
REDACTED = "********"


def redact(values: Any, secret: bool = False, hidden: Any = None) -> Any:
    """``values`` with every scalar under a credential-looking key (``SECRET_KEY``) replaced by ``REDACTED``,
    and every scalar that ``hidden`` (the module's ``secret_values``) sets, whatever its key."""
    if hidden is not None and not isinstance(hidden, Mapping):
        secret = True  # a leaf of secret_values: whatever stands here came from it
        hidden = None
    if isinstance(values, Mapping):
        below = hidden if isinstance(hidden, Mapping) else {}
        return {key: redact(value, bool(SECRET_KEY.search(str(key))), below.get(key)) for key, value in values.items()}
    if isinstance(values, list):
        return [redact(value, secret) for value in values]
    if secret and values not in (None, "", True, False):
        return REDACTED
    return values


def merge_values(values: Mapping[str, Any], secret_values: Mapping[str, Any]) -> Dict[str, Any]:
    """``values`` with ``secret_values`` merged over them, mapping into mapping (a list or scalar replaces)."""
    merged = dict(values)
    for key, value in secret_values.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = merge_values(merged[key], value)
        else:
            merged[key] = value
    return merged


def plan(installed: Optional[Installed], chart_name: str, chart_version: str, values: Mapping[str, Any]) -> Plan:
    """What the release needs: installed when absent; upgraded when its latest revision is not
    ``deployed`` (a failed upgrade), or its chart or version or values are not the ones asked for."""
    if installed is None:
        return Plan("install", ["not installed"])
    reasons = []
    if installed.status != "deployed":
        reasons.append(f"revision {installed.revision} is {installed.status or 'of no status'}")
    if chart_name and installed.chart_name and installed.chart_name != chart_name:
        reasons.append(f"chart {installed.chart_name}, not {chart_name}")
    if not same_version(installed.chart_version, chart_version):
        reasons.append(f"chart version {installed.chart_version or '(none)'} -> {chart_version}")
    if plain(installed.values) != plain(dict(values)):
        changed = changed_keys(installed.values, values)
        reasons.append(f"values differ ({', '.join(changed)})" if changed else "values differ")
    return Plan("upgrade" if reasons else "none", reasons)


def changed_keys(now: Mapping[str, Any], wanted: Mapping[str, Any], prefix: str = "", limit: int = 8) -> List[str]:
    """The dotted paths of the values that differ (added, removed or changed), the first ``limit`` of them."""
    paths: List[str] = []
    for key in sorted(set(now) | set(wanted), key=str):
        path = f"{prefix}{key}"
        a, b = now.get(key, _MISSING), wanted.get(key, _MISSING)
        if isinstance(a, Mapping) and isinstance(b, Mapping):
            paths.extend(changed_keys(a, b, f"{path}.", limit))
        elif a is _MISSING or b is _MISSING or plain(a) != plain(b):
            paths.append(path)
    return paths[:limit]


_MISSING = object()


def separated(text: str) -> str:
    """``helm show crds`` with a ``---`` before each top-level ``apiVersion:`` that follows another in the same
    document. Helm prints the chart's CRD files one after another and relies on each file starting with ``---``;
    without it, YAML would read two files as one mapping and keep only the last CRD."""
    lines, seen = [], False
    for line in (text or "").splitlines():
        if line.rstrip() == "---" or line.startswith("--- "):
            seen = False
        elif line.startswith("apiVersion:"):
            if seen:
                lines.append("---")
            seen = True
        lines.append(line)
    return "\n".join(lines)


def crd_documents(text: str) -> List[Dict[str, Any]]:
    """The CustomResourceDefinitions of ``helm show crds`` (YAML documents; empty ones and others left out), a
    CRD file without a leading ``---`` read as a document of its own (:func:`separated`)."""
    try:
        documents = list(yaml.safe_load_all(separated(text)))
    except yaml.YAMLError as exc:
        raise ChartReleaseError(f"helm show crds printed no YAML ({one_line(exc, 300)})") from exc
    crds = []
    for document in documents:
        if not isinstance(document, dict) or document.get("kind") != CRD_KIND:
            continue
        if not (document.get("metadata") or {}).get("name"):
            raise ChartReleaseError("helm show crds printed a CustomResourceDefinition without a name")
        crds.append(document)
    return crds


def namespace_labels_patch(namespace: Optional[Mapping[str, Any]], labels: Mapping[str, str]) -> Dict[str, str]:
    """The labels of ``labels`` the namespace lacks or has with another value (all of them when it is absent).
    Other labels of the namespace are the site's and stay."""
    have = ((namespace or {}).get("metadata") or {}).get("labels") or {}
    return {key: str(value) for key, value in labels.items() if have.get(key) != str(value)}


def upgrade_args(
    name: str,
    chart_ref: str,
    chart_version: str,
    values_file: str,
    wait_timeout: int,
    chart_repo_url: str = "",
    take_ownership: bool = False,
    skip_crds: bool = False,
) -> List[str]:
    """``helm upgrade --install`` of the release with exactly the values of ``values_file``
    (``--reset-values``: nothing of an earlier revision's values is carried over); ``--skip-crds`` when the
    CRDs were applied before (Helm would otherwise create the chart's ``crds/`` on a first install, those
    another release owns among them)."""
    args = ["upgrade", name, chart_ref, "--install", "--version", chart_version, "--reset-values"]
    args += ["--values", values_file, "--wait", "--timeout", f"{wait_timeout}s"]
    if chart_repo_url:
        args += ["--repo", chart_repo_url]
    if take_ownership:
        args.append("--take-ownership")
    if skip_crds:
        args.append("--skip-crds")
    return args


def values_diff(
    release: str, now: Mapping[str, Any], wanted: Mapping[str, Any], hidden: Optional[Mapping[str, Any]] = None
) -> Dict[str, str]:
    """Ansible's ``--diff`` of the release's values, before and after, as YAML, credentials redacted (``hidden``:
    the secret values, redacted wherever they stand)."""
    return {
        "before_header": f"{release} values (installed)",
        "after_header": f"{release} values (wanted)",
        "before": to_yaml(redact(now, hidden=hidden)),
        "after": to_yaml(redact(wanted, hidden=hidden)),
    }


def to_yaml(values: Mapping[str, Any]) -> str:
    return yaml.safe_dump(plain(dict(values)), default_flow_style=False, sort_keys=True) if values else ""


def release_line(release: str, chart_name: str, chart_version: str, the_plan: Plan, check_mode: bool) -> str:
    """One line: what was (or, in check mode, would be) done to the release and why."""
    chart = f"{chart_name} {chart_version}".strip()
    if the_plan.action == "none":
        return f"release {release}: {chart} deployed with the values asked for"
    done = (
        f"would {the_plan.action}" if check_mode else {"install": "installed", "upgrade": "upgraded"}[the_plan.action]
    )
    return f"release {release}: {done} {chart} ({'; '.join(the_plan.reasons)})"


def summary(parts: Sequence[str]) -> str:
    """The module's ``msg``: its steps' lines, joined."""
    return "; ".join(part for part in parts if part)
