# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The objects of a scheduled verification: playbooks/verify.yml run by a CronJob inside the cluster.

A ServiceAccount, the shipped least-privilege verify RBAC (``docs/rbac/verify-stage.yaml``, read as it is and
bound to that account: never a second copy of the rules), a ConfigMap holding the inventory the job runs with,
and the CronJob: the collection's execution environment image running exactly the command a user types,
``ansible-playbook -i <inventory> gpu_fabric.mnnvl.verify``, as the ServiceAccount (the kubernetes client falls
back to the pod's in-cluster account when no kubeconfig is given), the report kept in a volume the site chooses.
Beside it, where the schedule writes the verdict on the Nodes, a second CronJob runs
``ansible-playbook -i <inventory> gpu_fabric.mnnvl.refresh_state`` on its own schedule, as the same account with
the same image and inventory, so that a verdict that expired between two verifications shows on its Node.
Pure functions from the role's variables to manifests; the role applies them with ``kubernetes.core.k8s``.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence

try:  # on the controller (the filter); the uninstall's module reads only the label below
    import yaml
except ImportError:
    yaml = None

RBAC_FILE = "docs/rbac/verify-stage.yaml"
# what the shipped file binds, and the namespaces of its Roles, replaced by the schedule's own
SHIPPED_ACCOUNT = ("gpu-fabric", "gpu-fabric-verify")
SHIPPED_DRIVER_NAMESPACE = "nvidia-dra-driver-gpu"
SHIPPED_PULL_SECRETS_NAMESPACE = "gpu-operator"
# the optional objects of the file, by name suffix: included only when asked for
OPTIONAL = {
    "pull_secrets": "gpu-fabric-verify-pull-secrets",
    "node_verdict": "gpu-fabric-verify-node-verdict",
    "host_checks": "gpu-fabric-verify-host-checks",
}
# The checks that need privileged pods; the host-check grant's ConfigMap (its admission policy's parameters) holds
# the image and the command script of each, as the check makes them from the site's gpu_fabric_verify_settings.
HOST_CHECKS = ("gpu_health", "dcgm_diag")
SETTINGS_VARIABLE = "gpu_fabric_verify_settings"

# The site's verify variables, carried from the inventory that applies the schedule into the job's, so that the
# scheduled run checks what a run by hand from that inventory checks (the same racks under the same names, trays,
# images, thresholds, history): every variable of the verify stage's roles and the shared gpu_fabric_verify_*,
# by prefix, so that a new one is carried without a change here ...
VERIFY_PREFIXES = (
    "gpu_fabric_verify_",
    "verify_common_",
    "verify_cliques_",
    "verify_imex_channel_",
    "verify_nvbandwidth_",
    "verify_nccl_",
    "verify_checks_",
    "report_",
)
# ... and the shared values those roles read (their defaults and tasks, the gpu_fabric role's, playbooks/verify.yml)
VERIFY_SHARED = (
    "gpu_fabric_racks",
    "gpu_fabric_rack_label",
    "gpu_fabric_trays_per_clique",
    "gpu_fabric_gpus_per_tray",
    "gpu_fabric_mnnvl_products",
    "gpu_fabric_gpu_tolerations",
    "gpu_fabric_registry",
    "gpu_fabric_image_overrides",
    "gpu_fabric_dra_driver_namespace",
    "gpu_fabric_gpu_operator_namespace",
    "gpu_fabric_openshift",
    "gpu_fabric_release_set",
    "gpu_fabric_check_variables",
    "gpu_fabric_check_tags",
    "dra_driver_namespace",
    "gpu_operator_namespace",
)
# read by the verify stage, but the job's own: each with the reason it is not carried
NOT_CARRIED = {
    "gpu_fabric_kubeconfig": "the job connects as its pod's ServiceAccount",
    "gpu_fabric_kube_context": "the job connects as its pod's ServiceAccount",
    "gpu_fabric_k8s_auth_environment": "the job connects as its pod's ServiceAccount",
    "gpu_fabric_report_dir": "the job's report is on its volume (verify_schedule_report_mount_path)",
    "report_dir": "the job's report is on its volume (verify_schedule_report_mount_path)",
    "report_records_dir": "the job's report is on its volume (verify_schedule_report_mount_path)",
    "report_history_dir": "the job's report is on its volume (verify_schedule_report_mount_path)",
    "verify_common_report_dir": "the job's report is on its volume (verify_schedule_report_mount_path)",
    "gpu_fabric_verify_run_id": "every scheduled run names itself",
    "report_run_id": "every scheduled run names itself",
    "verify_common_run_id": "every scheduled run names itself",
    # what a run of the roles sets (register, set_fact), when the schedule is applied in the same play
    "report_metrics": "a result of the run",
    "report_records": "a result of the run",
    "report_refusal": "a result of the run",
    "report_result": "a result of the run",
    "verify_checks_selected": "a result of the run",
    "verify_common_result": "a result of the run",
}

MANAGED_BY = "gpu_fabric.mnnvl.verify_schedule"
INVENTORY_KEY = "inventory.yml"
PLAYBOOK = "gpu_fabric.mnnvl.verify"
REFRESH_PLAYBOOK = "gpu_fabric.mnnvl.refresh_state"
REFRESH_SUFFIX = "-refresh"
# what a site writes for "no refresh job" besides '' and false
NO_REFRESH_WORDS = ("false", "no", "off", "none", "null")


def is_carried(name: str) -> bool:
    """Whether the site's variable ``name`` goes into the job's inventory (a verify variable the job does not
    set itself)."""
    return name not in NOT_CARRIED and (name in VERIFY_SHARED or name.startswith(VERIFY_PREFIXES))


def carried_names(names: Iterable[str]) -> List[str]:
    """The names of the site's variables (an inventory host's) that the job's inventory carries, sorted."""
    return sorted({str(name) for name in names if is_carried(str(name))})


class ScheduleError(ValueError):
    """The schedule's variables cannot make a CronJob (message: one line, naming the variable)."""


@dataclass
class Schedule:
    """What the site chooses (the role's ``verify_schedule_*`` variables)."""

    image: str
    namespace: str = "gpu-fabric"
    name: str = "gpu-fabric-verify"
    service_account: str = "gpu-fabric-verify"
    schedule: str = "0 3 * * *"
    # the refresh job's schedule (cron); empty or false: no refresh job (an earlier one is removed)
    refresh_schedule: Any = "0 * * * *"
    time_zone: str = ""
    suspend: bool = False
    only_due: bool = False
    extra_args: List[str] = field(default_factory=list)
    # the site's verify variables as the inventory that applies the schedule sets them (see VERIFY_PREFIXES), and
    # the role's verify_schedule_verify_vars, which win; both are written into the job's inventory
    site_vars: Dict[str, Any] = field(default_factory=dict)
    verify_vars: Dict[str, Any] = field(default_factory=dict)
    # the report volume: an existing PVC by name, or any volume source dict (its ``name`` is set here)
    report_claim: str = "gpu-fabric-verify-report"
    report_volume: Dict[str, Any] = field(default_factory=dict)
    report_mount_path: str = "/var/lib/gpu-fabric/report"
    inventory_mount_path: str = "/etc/gpu-fabric"
    concurrency_policy: str = "Forbid"
    starting_deadline_seconds: int = 600
    successful_jobs_history_limit: int = 3
    failed_jobs_history_limit: int = 3
    active_deadline_seconds: int = 0
    image_pull_policy: str = "IfNotPresent"
    image_pull_secrets: List[str] = field(default_factory=list)
    resources: Dict[str, Any] = field(default_factory=dict)
    # which optional RBAC objects of the shipped file come along, and where its Roles live
    pull_secrets_rbac: bool = False
    node_verdict_rbac: bool = False
    host_checks_rbac: bool = False
    driver_namespace: str = SHIPPED_DRIVER_NAMESPACE
    pull_secrets_namespace: str = SHIPPED_PULL_SECRETS_NAMESPACE

    def __post_init__(self) -> None:
        if not str(self.image or "").strip():
            raise ScheduleError(
                "verify_schedule_image is empty: name the collection's execution environment image your site built "
                "(docs/execution-environment.md), e.g. registry.example.com/gpu-fabric-ee:0.4.0"
            )
        if self.concurrency_policy not in ("Forbid", "Replace", "Allow"):
            raise ScheduleError(
                f"verify_schedule_concurrency_policy is {self.concurrency_policy!r}, not Forbid, Replace or Allow"
            )
        if any(not str(arg) for arg in self.extra_args):
            raise ScheduleError("verify_schedule_extra_args holds an empty argument")
        if self.refresh_schedule is None or self.refresh_schedule is False:
            self.refresh_schedule = ""
        if not isinstance(self.refresh_schedule, str):
            raise ScheduleError(
                f"verify_schedule_refresh_schedule is {self.refresh_schedule!r}: give a cron schedule such as "
                "'0 * * * *', or '' (or false) for no refresh job"
            )
        self.refresh_schedule = self.refresh_schedule.strip()
        # -e verify_schedule_refresh_schedule=false hands over the text, not the boolean
        if self.refresh_schedule.lower() in NO_REFRESH_WORDS:
            self.refresh_schedule = ""


def labels(schedule: Schedule, component: str) -> Dict[str, str]:
    return {
        "app.kubernetes.io/name": "gpu-fabric-verify-schedule",
        "app.kubernetes.io/instance": schedule.name,
        "app.kubernetes.io/component": component,
        "app.kubernetes.io/managed-by": MANAGED_BY,
    }


def user_name(namespace: str, service_account: str) -> str:
    return f"system:serviceaccount:{namespace}:{service_account}"


def command(schedule: Schedule) -> List[str]:
    """Exactly what a user types: ``ansible-playbook -i <inventory> gpu_fabric.mnnvl.verify``, with
    ``-e gpu_fabric_verify_only_due=true`` for a run over the trays that are due only, and the site's arguments."""
    inventory = f"{schedule.inventory_mount_path.rstrip('/')}/{INVENTORY_KEY}"
    args = ["ansible-playbook", "-i", inventory, PLAYBOOK]
    if schedule.only_due:
        args += ["-e", "gpu_fabric_verify_only_due=true"]
    return args + [str(arg) for arg in schedule.extra_args]


def refresh_name(schedule: Schedule) -> str:
    return f"{schedule.name}{REFRESH_SUFFIX}"


def refresh_command(schedule: Schedule) -> List[str]:
    """What a user types to refresh the Node state: ``ansible-playbook -i <inventory> gpu_fabric.mnnvl.refresh_state``
    (the verify job's own arguments, such as ``--tags``, are not the refresh's)."""
    inventory = f"{schedule.inventory_mount_path.rstrip('/')}/{INVENTORY_KEY}"
    return ["ansible-playbook", "-i", inventory, REFRESH_PLAYBOOK]


def refresh_wanted(schedule: Schedule) -> bool:
    """Whether the schedule holds the refresh job: a refresh schedule is given, and the account holds the
    node-verdict rights (``gpu-fabric-verify-node-verdict``), the ones the job writes the Nodes with. Without them
    the verdict is not written on the Nodes by this account, so there is nothing of it to refresh."""
    return bool(schedule.refresh_schedule) and bool(schedule.node_verdict_rbac)


def refresh_note(schedule: Schedule) -> str:
    """One line saying whether the refresh job is there, and why not when it is not."""
    name = f"CronJob {schedule.namespace}/{refresh_name(schedule)}"
    if refresh_wanted(schedule):
        return f"{name} refreshes the Node verdict on {schedule.refresh_schedule!r} ({REFRESH_PLAYBOOK})"
    if not schedule.refresh_schedule:
        return f"no {name}: verify_schedule_refresh_schedule is empty; an earlier one is removed"
    return (
        f"no {name}: it writes the Node verdict with the node-verdict rights, and verify_schedule_node_verdict_rbac "
        "is false; set it to true (with gpu_fabric_verify_label_nodes or gpu_fabric_verify_node_condition) to "
        "refresh the Nodes between runs; an earlier one is removed"
    )


def inventory(schedule: Schedule) -> Dict[str, Any]:
    """The inventory of the job: the controller is the pod itself; the site's verify variables (those carried, by
    name), then ``verify_vars``; the report goes to the volume."""
    site_vars = {name: schedule.site_vars[name] for name in carried_names(schedule.site_vars)}
    site_vars.update(schedule.verify_vars)
    site_vars["gpu_fabric_report_dir"] = schedule.report_mount_path
    return {
        "all": {
            "children": {
                "k8s_controller": {
                    "hosts": {
                        "localhost": {
                            "ansible_connection": "local",
                            "ansible_python_interpreter": "{{ ansible_playbook_python }}",
                        }
                    }
                }
            },
            "vars": site_vars,
        }
    }


class _Data(str):
    """A string of the site's that Ansible must take as data: written with YAML's ``!unsafe`` tag."""


def _as_data(value: Any) -> Any:
    if isinstance(value, str):
        return _Data(value)
    if isinstance(value, Mapping):
        return {key: _as_data(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_as_data(item) for item in value]
    return value


def inventory_text(schedule: Schedule) -> str:
    """The job's inventory as YAML. Every string of the site's variables is tagged ``!unsafe``: the values were
    resolved where the schedule was deployed, and the job takes them as they are (a ``{{ 7*7 }}`` stays that
    text, never 49); only the connection's own ``{{ ansible_playbook_python }}`` is a template."""

    class InventoryDumper(yaml.SafeDumper):
        pass

    InventoryDumper.add_representer(_Data, lambda dumper, value: dumper.represent_scalar("!unsafe", str(value)))
    document = inventory(schedule)
    document["all"]["vars"] = _as_data(document["all"]["vars"])
    return "# The inventory of the scheduled verification (role gpu_fabric.mnnvl.verify_schedule)\n" + yaml.dump(
        document, Dumper=InventoryDumper, default_flow_style=False, sort_keys=False
    )


# What a host check's container reads of its rack's run: the GPUs of a tray (dcgm_diag's limit; no parameter of the
# policy, which holds the image and the command only).
_TRAY_RUN = SimpleNamespace(plan=SimpleNamespace(gpus_per_tray=0))


def host_checks_params(
    verify_settings: Any, registry: str = "", image_overrides: Optional[Mapping[str, str]] = None
) -> Dict[str, str]:
    """The data of the host-check grant's ConfigMap: ``<check>.image`` and ``<check>.script`` (the ``sh -c`` script
    of its container) of each host check, made by the check itself from ``gpu_fabric_verify_settings`` and its image
    moved to the site's mirror (``gpu_fabric_registry``, ``gpu_fabric_image_overrides``) as a run moves it, so that
    the policy admits exactly the pods the checks will create with the site's settings."""
    from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import checks, fleet

    if verify_settings is None:
        verify_settings = {}
    if not isinstance(verify_settings, Mapping):
        raise ScheduleError(f"{SETTINGS_VARIABLE} is not a mapping of the checks' option groups: {verify_settings!r}")
    try:
        params = checks.with_settings({"settings": dict(verify_settings)})
        params = fleet.mirrored(dict(params, registry=registry or "", image_overrides=dict(image_overrides or {})))
        made = {name: checks.get(name).from_params(params) for name in HOST_CHECKS}
    except ValueError as exc:
        raise ScheduleError(f"{SETTINGS_VARIABLE}: {exc}") from None
    data: Dict[str, str] = {}
    for name, check in made.items():
        container = check.container(_TRAY_RUN, "")
        command = list(container.get("command") or [])
        if command[:2] != ["sh", "-c"] or len(command) != 3 or container.get("args"):
            raise ScheduleError(f"the {name} check's container runs {command!r}, not sh -c <script>")
        data[f"{name}.image"] = str(container["image"])
        data[f"{name}.script"] = command[2]
    return data


def rbac_objects(schedule: Schedule, shipped: Sequence[Mapping[str, Any]]) -> List[Dict[str, Any]]:
    """The shipped verify RBAC (``docs/rbac/verify-stage.yaml``, parsed) bound to the schedule's ServiceAccount.

    The rules are the file's; only the subjects, the admission policies' user name, the Roles' namespaces and the
    host-check grant's parameters (its ConfigMap, in the schedule's namespace, from the site's check settings)
    change. The optional objects (pull Secrets, node verdict, host checks) come only when asked for.
    """
    wanted_optional = {
        OPTIONAL["pull_secrets"]: schedule.pull_secrets_rbac,
        OPTIONAL["node_verdict"]: schedule.node_verdict_rbac,
        OPTIONAL["host_checks"]: schedule.host_checks_rbac,
    }
    old_user = user_name(*SHIPPED_ACCOUNT)
    new_user = user_name(schedule.namespace, schedule.service_account)
    namespaces = {
        SHIPPED_DRIVER_NAMESPACE: schedule.driver_namespace,
        SHIPPED_PULL_SECRETS_NAMESPACE: schedule.pull_secrets_namespace,
    }
    out: List[Dict[str, Any]] = []
    for doc in shipped:
        if not doc:
            continue
        obj = copy.deepcopy(dict(doc))
        meta = obj.setdefault("metadata", {})
        if not wanted_optional.get(meta.get("name", ""), True):
            continue
        if meta.get("namespace") in namespaces:
            meta["namespace"] = namespaces[meta["namespace"]]
        for subject in obj.get("subjects") or []:
            if (
                subject.get("kind") == "ServiceAccount"
                and (subject.get("namespace"), subject.get("name")) == SHIPPED_ACCOUNT
            ):
                subject["namespace"], subject["name"] = schedule.namespace, schedule.service_account
        for condition in (obj.get("spec") or {}).get("matchConditions") or []:
            condition["expression"] = condition.get("expression", "").replace(f'"{old_user}"', f'"{new_user}"')
        if meta.get("name") == OPTIONAL["host_checks"]:
            if obj.get("kind") == "ConfigMap":
                meta["namespace"] = schedule.namespace
                site = dict(schedule.site_vars, **schedule.verify_vars)
                obj["data"] = host_checks_params(
                    site.get(SETTINGS_VARIABLE), site.get("gpu_fabric_registry"), site.get("gpu_fabric_image_overrides")
                )
            param_ref = (obj.get("spec") or {}).get("paramRef")
            if param_ref:
                param_ref["namespace"] = schedule.namespace
        meta["labels"] = dict(meta.get("labels") or {}, **{"app.kubernetes.io/managed-by": MANAGED_BY})
        out.append(obj)
    return out


def report_volume(schedule: Schedule) -> Dict[str, Any]:
    """The report's volume: the site's volume source, else its existing PersistentVolumeClaim."""
    if schedule.report_volume:
        volume = {k: copy.deepcopy(v) for k, v in schedule.report_volume.items() if k != "name"}
    elif schedule.report_claim:
        volume = {"persistentVolumeClaim": {"claimName": schedule.report_claim}}
    else:
        raise ScheduleError(
            "the report has no volume: set verify_schedule_report_claim (an existing PersistentVolumeClaim) or "
            "verify_schedule_report_volume (a volume source, e.g. {nfs: {server: ..., path: ...}})"
        )
    return dict(volume, name="report")


def _cronjob(schedule: Schedule, *, name: str, component: str, cron: str, command_line: List[str], report: bool):
    """A CronJob of the schedule: the execution environment image running ``command_line`` as the schedule's
    ServiceAccount, with the job's inventory mounted (and the report volume when ``report``)."""
    mounts: List[Dict[str, Any]] = [{"name": "inventory", "mountPath": schedule.inventory_mount_path, "readOnly": True}]
    volumes: List[Dict[str, Any]] = [
        {
            "name": "inventory",
            "configMap": {"name": schedule.name, "items": [{"key": INVENTORY_KEY, "path": INVENTORY_KEY}]},
        }
    ]
    if report:
        mounts.append({"name": "report", "mountPath": schedule.report_mount_path})
        volumes.append(report_volume(schedule))
    container: Dict[str, Any] = {
        "name": component,
        "image": schedule.image,
        "imagePullPolicy": schedule.image_pull_policy,
        "command": command_line,
        "workingDir": "/tmp",
        # Ansible writes its temporary files under $HOME; the image's user may have none
        "env": [
            {"name": "HOME", "value": "/tmp"},
            {"name": "ANSIBLE_NOCOLOR", "value": "1"},
        ],
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
        },
        "volumeMounts": mounts,
    }
    if schedule.resources:
        container["resources"] = copy.deepcopy(schedule.resources)
    pod_spec: Dict[str, Any] = {
        "serviceAccountName": schedule.service_account,
        "restartPolicy": "Never",
        "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [container],
        "volumes": volumes,
    }
    if schedule.image_pull_secrets:
        pod_spec["imagePullSecrets"] = [{"name": secret} for secret in schedule.image_pull_secrets]
    job_spec: Dict[str, Any] = {
        # a failed verification is the report's to say, not a reason to run it again at once
        "backoffLimit": 0,
        "template": {"metadata": {"labels": labels(schedule, component)}, "spec": pod_spec},
    }
    if schedule.active_deadline_seconds:
        job_spec["activeDeadlineSeconds"] = int(schedule.active_deadline_seconds)
    spec: Dict[str, Any] = {
        "schedule": cron,
        "concurrencyPolicy": schedule.concurrency_policy,
        "startingDeadlineSeconds": int(schedule.starting_deadline_seconds),
        "successfulJobsHistoryLimit": int(schedule.successful_jobs_history_limit),
        "failedJobsHistoryLimit": int(schedule.failed_jobs_history_limit),
        "suspend": bool(schedule.suspend),
        "jobTemplate": {"metadata": {"labels": labels(schedule, component)}, "spec": job_spec},
    }
    if schedule.time_zone:
        spec["timeZone"] = schedule.time_zone
    cronjob_component = "schedule" if component == "verify" else f"{component}-schedule"
    return {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": name, "namespace": schedule.namespace, "labels": labels(schedule, cronjob_component)},
        "spec": spec,
    }


def cronjob(schedule: Schedule) -> Dict[str, Any]:
    """The verify CronJob: ``command(schedule)`` on ``schedule.schedule``, the report on its volume."""
    return _cronjob(
        schedule,
        name=schedule.name,
        component="verify",
        cron=schedule.schedule,
        command_line=command(schedule),
        report=True,
    )


def refresh_cronjob(schedule: Schedule) -> Dict[str, Any]:
    """The refresh CronJob: ``refresh_command(schedule)`` on ``schedule.refresh_schedule``, as the same account
    with the same image, inventory and job settings; no report volume (the refresh writes no report, and a
    ReadWriteOnce claim held by a verify pod on another node would keep it from starting)."""
    return _cronjob(
        schedule,
        name=refresh_name(schedule),
        component="refresh",
        cron=schedule.refresh_schedule,
        command_line=refresh_command(schedule),
        report=False,
    )


def schedule_objects(schedule: Schedule, shipped_rbac: Sequence[Mapping[str, Any]]) -> Dict[str, Any]:
    """Every object of the schedule, in the order they are applied (and the reverse of their removal):
    ``namespace`` (the schedule's, created when absent), ``rbac`` (the ServiceAccount and the shipped verify
    RBAC bound to it), ``schedule`` (the ConfigMap and the verify CronJob) and ``refresh`` (the refresh CronJob,
    or nothing); ``removed``: what the settings leave out and an earlier apply may have made (the refresh CronJob
    without a refresh, as a definition to delete); ``refresh_note``: one line saying which."""
    account = {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {
            "name": schedule.service_account,
            "namespace": schedule.namespace,
            "labels": labels(schedule, "rbac"),
        },
    }
    config = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": schedule.name, "namespace": schedule.namespace, "labels": labels(schedule, "inventory")},
        "data": {INVENTORY_KEY: inventory_text(schedule)},
    }
    # labelled: an apply of a bare name records no field of its manager, so that a compare would never find it applied
    namespace = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": schedule.namespace, "labels": labels(schedule, "namespace")},
    }
    wanted = refresh_wanted(schedule)
    removed = {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": refresh_name(schedule), "namespace": schedule.namespace},
    }
    return {
        "namespace": [namespace],
        "rbac": [account, *rbac_objects(schedule, shipped_rbac)],
        "schedule": [config, cronjob(schedule)],
        "refresh": [refresh_cronjob(schedule)] if wanted else [],
        "removed": [] if wanted else [removed],
        "refresh_note": refresh_note(schedule),
    }


def schedule_of(settings: Mapping[str, Any]) -> Schedule:
    """The role's variables (without their ``verify_schedule_`` prefix) -> a :class:`Schedule`; an unknown name
    is refused, naming it."""
    known = set(Schedule.__dataclass_fields__)
    unknown = sorted(set(settings) - known)
    if unknown:
        raise ScheduleError(f"unknown setting(s) of the schedule: {', '.join(unknown)}")
    return Schedule(**{k: copy.deepcopy(v) for k, v in settings.items()})


def objects_from_text(settings: Mapping[str, Any], rbac_text: str) -> Dict[str, Any]:
    """The schedule's objects from the role's variables and the text of the shipped ``verify-stage.yaml``."""
    shipped = [doc for doc in yaml.safe_load_all(rbac_text) if doc]
    if not any(doc.get("kind") == "ClusterRole" for doc in shipped):
        raise ScheduleError(f"the verify RBAC read from {RBAC_FILE} holds no ClusterRole: is it the shipped file?")
    return schedule_objects(schedule_of(settings), shipped)
