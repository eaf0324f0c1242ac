# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""One check on every rack of the fleet: what the module ``fabric_verify`` does, from its parameters to its result.

Read the nodes (and the pods, for a check that needs free GPUs) once; plan the racks (``verification.plan_fleet``);
run the check on every rack at once, at most ``parallel_racks`` at a time, each through the lifecycle of
``rack_run.RackRun``; hold the records to the check's fleet rule; write one record per rack. An API server that
does not answer before the racks are read gives ``error`` records, which say so and nothing of the fabric.
"""

from __future__ import annotations

import json
import os
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import checks, dra, mirror, openshift
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import compute_domain as cd
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.api_unreachable import ADVICE
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.checks.base import Check
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.files import (
    FileChange,
    FileEditError,
    read_text,
    write_change,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.k8s import (
    ApiUnreachable,
    ResourceNotFoundError,
    api_endpoint,
    connect,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.kube_api import Api, ApiUnavailable
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.rack_plan import RackPlan, is_not_due
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.rack_run import RackRun, Settings
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.record import (
    FLEET,
    OUTCOME_ERROR,
    Record,
    completed,
    error_records,
    incomplete_record,
    nothing_due_record,
    now_rfc3339,
    record_for,
    superseded,
    with_view,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.text import one_line, plural
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.verification import (
    Scope,
    declared_plans,
    given_namespaces,
    missing_words,
    parse_nodes_per_clique,
    plan_fleet,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.verification_objects import pod_tolerations

UNKNOWN_CLUSTER = {"server_version": "unknown", "host": "unknown"}
# Why the trays of a declared rack were not read when the cluster could not be.
NOT_READ = "not read: the API server did not answer"


class Refused(Exception):
    """The run was refused before any rack (a selection that matches nothing); the module fails with this line."""

    def __init__(self, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.extra = extra


# -- the racks ----------------------------------------------------------------------------------------


def warm_discovery(api: Api, check: Check) -> None:
    """Resolve every kind the racks' threads will use, once, before they start: the dynamic client's
    discovery cache is not thread-safe. A kind the server does not serve (a CRD not installed) is left
    for the rack to report."""
    kinds = [
        ("Namespace", "v1"),
        ("ServiceAccount", "v1"),
        ("Secret", "v1"),
        ("Pod", "v1"),
        ("Event", "v1"),
        ("Deployment", "apps/v1"),
        ("DaemonSet", "apps/v1"),
        ("ComputeDomain", cd.API_VERSION),
        ("SelfSubjectAccessReview", "authorization.k8s.io/v1"),
    ]
    kinds += [(kind, v) for kind in ("ResourceClaimTemplate", "ResourceClaim") for v in dra.DRA_API_VERSIONS]
    kinds += list(RackRun.objects) + list(check.objects)
    for kind, api_version in kinds:
        try:
            api.resource(kind, api_version)
        except ResourceNotFoundError:
            continue


def run_racks(
    check: Check,
    api: Api,
    plans: Sequence[RackPlan],
    settings: Settings,
    parallel: int,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> List[Record]:
    """Every rack's record, racks measured ``parallel`` at a time; incomplete racks, and racks where an only-due run
    has nothing due, are recorded, not run."""
    records: Dict[str, Record] = {}
    runnable = []
    for plan in plans:
        if plan.nothing_due:
            record = nothing_due_record(check.name, plan, settings.run_id)
            records[plan.name] = completed(record, now_rfc3339(), now_rfc3339(), settings.cluster)
        elif plan.incomplete:
            record = incomplete_record(check.name, plan, settings.run_id, settings.allow_incomplete)
            records[plan.name] = completed(record, now_rfc3339(), now_rfc3339(), settings.cluster)
        else:
            runnable.append(plan)
    if runnable:
        warm_discovery(api, check)
        with ThreadPoolExecutor(max_workers=max(1, min(parallel, len(runnable)))) as pool:
            futures = {
                plan.name: pool.submit(RackRun(check, api, plan, settings, sleep, clock).run) for plan in runnable
            }
            for name, future in futures.items():
                records[name] = future.result()
    return [records[plan.name] for plan in plans]


# -- from the module's parameters ---------------------------------------------------------------------


def scope_of(params: Mapping[str, Any], now: Optional[datetime] = None) -> Scope:
    """The run's scope; ``now`` (the run's one moment, by default the clock's) is when trays are due."""
    within = float(params["due_within_hours"])
    if within < 0:
        raise ValueError(
            f"gpu_fabric_verify_due_within_hours is {params['due_within_hours']}: give 0 (the trays due now) or the "
            "hours ahead in which a verdict that expires makes its tray due"
        )
    return Scope(
        racks={str(rack): [str(n) for n in nodes or []] for rack, nodes in (params["racks"] or {}).items()},
        rack_label=params["rack_label"],
        cliques=[str(c) for c in params["cliques"]],
        nodes_per_clique=parse_nodes_per_clique(params["nodes_per_clique"]),
        node_names=[str(n) for n in params["node_names"]],
        gpus_per_tray=params["gpus_per_tray"],
        trays_per_clique=params["trays_per_clique"],
        allow_incomplete=params["allow_incomplete"],
        tolerations=pod_tolerations(params["tolerations"]),
        mnnvl_products=list(params["mnnvl_products"]),
        only_due=bool(params["only_due"]),
        due_within_hours=within,
        due_check=str(params.get("check") or ""),
        now=now or datetime.now(timezone.utc),
    )


def mirrored(params: Mapping[str, Any]) -> Dict[str, Any]:
    """``params`` with the image of each check at the site's mirror (``registry``, ``image_overrides``)."""
    moved = dict(params)
    for group in checks.image_groups():
        if isinstance(params.get(group), dict) and params[group].get("image"):
            image = mirror.mirror_image(params[group]["image"], params["registry"], params["image_overrides"])
            moved[group] = dict(params[group], image=image)
    return moved


def settings_of(params: Mapping[str, Any], cluster: Dict[str, str], given: Dict[str, str]) -> Settings:
    return Settings(
        namespace_prefix=params["namespace_prefix"],
        timeout=float(params["timeout"]),
        poll=float(params["poll_delay"]),
        driver_namespace=params["driver_namespace"],
        run_id=params["run_id"],
        allow_incomplete=params["allow_incomplete"],
        pod_security_level=params["pod_security_level"],
        cluster=cluster,
        namespaces=given,
        image_pull_secrets=list(params["image_pull_secrets"]),
        tolerations=[dict(t) for t in params["tolerations"]],
        image_pull_secrets_namespace=params["image_pull_secrets_namespace"],
        priority_class=params.get("priority_class", ""),
    )


def cluster_facts(client: Any) -> Dict[str, str]:
    try:
        version = client.client.version.get("kubernetes", {}).get("gitVersion", "unknown")
    except Exception:  # version discovery failing must not stop the check; the record says unknown
        version = "unknown"
    return {"server_version": version, "host": str(getattr(client.configuration, "host", "unknown"))}


def detect_openshift(api: Api) -> bool:
    """GET /apis through the run's API (retried like every call)."""
    groups = api.call("list the served API groups", lambda: api.client.client.request("get", "/apis"))
    return openshift.is_openshift(groups.to_dict() if hasattr(groups, "to_dict") else groups)


# -- what the run says --------------------------------------------------------------------------------


def absent_summary(check: str, plan: RackPlan) -> str:
    """A declared rack the cluster does not show, in one line: its trays, why each is missing, what to check."""
    return (
        f"rack {plan.name}: declared in gpu_fabric_racks with {plural(len(plan.declared), 'tray')}, none of them a "
        f"GPU Node of the cluster ({missing_words(plan)}); the {check} check did not run there, which says nothing "
        "of its fabric: check that the kubeconfig and its context (gpu_fabric_kubeconfig) are this site's cluster, "
        "that the trays joined it and that GPU Feature Discovery labels them, or remove the rack from "
        "gpu_fabric_racks"
    )


def absent_record(check: str, plan: RackPlan, run_id: str) -> Record:
    """The record of a declared rack the cluster does not show: ``error``, a finding about the site (the wrong
    cluster, trays not joined, GPU Feature Discovery not running), not about the fabric; it fails the run."""
    summary = absent_summary(check, plan)
    return record_for(check, plan, OUTCOME_ERROR, summary, {"violations": [summary], "absent": True}, run_id=run_id)


def with_absent(check: str, plans: Sequence[RackPlan], records: Sequence[Record], run_id: str) -> List[Record]:
    """The records of the racks found and, for each declared rack the cluster does not show, its ``absent_record``,
    in the order of ``plans``."""
    by_rack = {record["rack"]: record for record in records}
    by_rack.update({plan.name: absent_record(check, plan, run_id) for plan in plans if plan.absent})
    return [by_rack[plan.name] for plan in plans if plan.name in by_rack]


def with_missing(record: Record, plan: RackPlan) -> Record:
    """``record`` whose summary names the trays of its rack gpu_fabric_racks declares and the cluster lacks."""
    if not plan.missing or plan.absent:
        return record
    named = Record(**record)  # type: ignore[typeddict-item]
    named["summary"] = one_line(f"{record.get('summary', '')}; {missing_words(plan)}")
    return named


def unreachable_message(text: str) -> str:
    """``text`` (what could not be done, one line) and what to do about it."""
    return f"{text}; the check did not run, which says nothing of the fabric: {ADVICE}"


def fleet_summary(check: str, records: Sequence[Record]) -> str:
    failed = [r for r in records if not r["passed"]]
    if not records:
        return f"{check}: no rack to verify"
    if not failed:
        return f"{check}: {len(records)} of {len(records)} racks passed ({', '.join(r['rack'] for r in records)})"
    return f"{check}: {len(failed)} of {len(records)} racks failed: " + " | ".join(r["summary"] for r in failed)


def due_words(rack: Mapping[str, Any]) -> str:
    """An only-due plan of one rack: ``rack1: 1 tray due (t5 skipped at ...: ...), 1 partner; 2 not due``."""
    if rack.get("nothing_due"):
        return f"{rack['rack']}: nothing due"
    due = ", ".join(f"{entry['node']} {entry['reason']}" for entry in rack["due"])
    words = f"{rack['rack']}: {plural(len(rack['due']), 'tray')} due ({due})"
    if rack["partners"]:
        words += f", {plural(len(rack['partners']), 'partner')} ({', '.join(rack['partners'])})"
    not_due = [skip for skip in rack["trays"]["skipped"] if is_not_due(skip["reason"])]
    return words + (f", {len(not_due)} not due" if not_due else "")


def check_mode_summary(check: str, racks: Sequence[Mapping[str, Any]]) -> str:
    """The plan in one line: the racks, per rack the expected run time where the check models one, and in an
    only-due run the due trays with their reason, the partners and the racks with nothing due."""
    runs = [r for r in racks if not r.get("nothing_due") and not r.get("absent")]
    absent = [r["rack"] for r in racks if r.get("absent")]
    expected = [
        f"rack {r['rack']}: {r['would_create']['expected']}"
        for r in runs
        if (r.get("would_create") or {}).get("expected")
    ]
    count = f"{len(runs)} of {len(racks)}" if len(runs) < len(racks) else str(len(racks))
    due = [due_words(r) for r in racks if "due" in (r.get("trays") or {})]
    return (
        f"check mode: {check} would run on {count} rack(s); nothing created"
        + "".join(f"; {line}" for line in expected)
        + (f"; only the due trays: {'; '.join(due)}" if due else "")
        + (f"; declared in gpu_fabric_racks, not in the cluster (the run fails): {', '.join(absent)}" if absent else "")
    )


def write_records(module: Any, check: str, records_dir: str, records: Sequence[Record]) -> List[str]:
    """Replace this check's records of an earlier run with this run's; returns the paths written.

    Each record goes through the collection's file writer (temporary file, atomic move); a record of a rack
    this run did not cover is removed when an earlier run wrote it (``record.superseded``: a run that
    overlaps this one keeps its own), and the flat record of 0.1.0 is removed.
    """
    directory = os.path.join(records_dir, check)
    wanted = {
        os.path.join(directory, f"{r['rack']}.json"): json.dumps(r, indent=2, sort_keys=True) + "\n" for r in records
    }
    stale = [os.path.join(directory, n) for n in os.listdir(directory)] if os.path.isdir(directory) else []
    stale.append(os.path.join(records_dir, f"{check}.json"))  # the layout of 0.1.0
    for path in stale:
        if path.endswith(".json") and path not in wanted and os.path.exists(path):
            try:
                old = json.loads(read_text(path) or "null")
            except ValueError:
                old = None
            if superseded(old if isinstance(old, dict) else None, records):
                os.unlink(path)
    for path, text in wanted.items():
        write_change(
            module, FileChange(path=path, before=read_text(path), after=text), backup=False, create_parents=True
        )
    return list(wanted)


def result_of(
    params: Mapping[str, Any],
    records: Sequence[Record],
    racks: List[Dict[str, Any]],
    started: str,
    cluster: Mapping[str, str],
    write: Optional[Callable[[List[Record]], List[str]]],
) -> Dict[str, Any]:
    """The run's result, its records completed (a check that created nothing: the read is the whole check) and
    written by ``write`` (None: check mode, nothing is written); records that cannot be written refuse the run."""
    finished = now_rfc3339()
    view = checks.get(params["check"]).view  # the check writes what the report shows of each record
    done = [with_view(completed(record, started, finished, cluster), view(record)) for record in records]
    try:
        files = write(done) if write and params["records_dir"] else []
    except (FileEditError, OSError) as exc:
        raise Refused(f"could not write the records under {params['records_dir']}: {exc}", records=done) from None
    return dict(
        changed=bool(files),
        passed=all(r["passed"] for r in done),
        summary=fleet_summary(params["check"], done),
        records=done,
        racks=racks,
        failed_racks=[r["rack"] for r in done if not r["passed"]],
        files=files,
    )


# -- the run ------------------------------------------------------------------------------------------


def verify(
    params: Mapping[str, Any],
    check_mode: bool,
    make_client: Callable[[], Any],
    write: Callable[[List[Record]], List[str]],
) -> Dict[str, Any]:
    """The module's result for ``params``: the check on every rack, or the plan in check mode. Raises ``Refused``
    for a selection that matches nothing; the records say everything else, API servers that do not answer too."""
    started = now_rfc3339()
    name = params["check"]
    writer = None if check_mode else write
    try:
        check_type = checks.get(name)
        scope = scope_of(params)
    except ValueError as exc:
        raise Refused(str(exc)) from None
    try:
        check: Optional[Check] = check_type.from_params(mirrored(checks.with_settings(params)))
        unusable = ""
    except ValueError as exc:  # the check cannot run as configured: every rack's record says why
        check, unusable = None, str(exc)
    try:
        # the client reads /version and the API groups: an API server that does not answer yet is waited for
        client = connect(make_client, params["api_patience"])
    except ApiUnreachable as exc:
        records = error_records(
            name, declared_plans(scope, NOT_READ) or [FLEET], unreachable_message(str(exc)), params["run_id"]
        )
        return result_of(
            params, records, [], started, dict(UNKNOWN_CLUSTER, host=api_endpoint(exc.__cause__) or "unknown"), writer
        )
    api = Api(client, patience=params["api_patience"])
    try:
        nodes = api.list("Node", "v1")
        pods = api.list("Pod", "v1") if check_type.uses_gpus and check is not None else []
    except ApiUnavailable as exc:
        plans = declared_plans(scope, NOT_READ) or [FLEET]
        records = error_records(name, plans, unreachable_message(f"could not {exc}"), params["run_id"])
        host = str(getattr(client.configuration, "host", "unknown"))
        return result_of(params, records, [], started, dict(UNKNOWN_CLUSTER, host=host), writer)
    plan = plan_fleet(nodes, pods, scope, uses_gpus=check_type.uses_gpus and check is not None)
    racks = [r.to_dict() for r in plan.racks]
    if plan.unknown_selections:
        known = ", ".join(r.name for r in plan.racks) or "none"
        raise Refused(
            f"{', '.join(plan.unknown_selections)} matches no rack, clique or GPU tray of the cluster "
            f"(racks selected: {known}); check gpu_fabric_verify_cliques and the node lists",
            racks=racks,
        )
    try:
        given = given_namespaces(
            [r.name for r in plan.racks if not r.absent], params["namespaces"], params["namespace"]
        )
    except ValueError as exc:
        raise Refused(str(exc), racks=racks) from None
    settings = settings_of(params, cluster_facts(client), given)
    try:
        settings.openshift = detect_openshift(api) if params["openshift"] is None else params["openshift"]
    except ApiUnavailable as exc:
        present = [rack for rack in plan.racks if not rack.absent] or ([] if plan.racks else [FLEET])
        records = error_records(name, present, unreachable_message(f"could not {exc}"), params["run_id"])
        records = with_absent(name, plan.racks, records, params["run_id"]) if plan.racks else records
        return result_of(params, records, racks, started, settings.cluster, writer)
    settings.cluster["openshift"] = str(settings.openshift).lower()
    records = fleet_records(params, check, unusable, plan.racks, nodes, scope, api, settings, check_mode, racks)
    if records is None:  # check mode: the plan
        return dict(
            changed=False,
            passed=True,
            records=[],
            racks=racks,
            failed_racks=[],
            files=[],
            summary=check_mode_summary(name, racks),
        )
    return result_of(params, records, racks, started, settings.cluster, writer)


def fleet_records(
    params: Mapping[str, Any],
    check: Optional[Check],
    unusable: str,
    plans: Sequence[RackPlan],
    nodes: Sequence[Mapping[str, Any]],
    scope: Scope,
    api: Api,
    settings: Settings,
    check_mode: bool,
    racks: List[Dict[str, Any]],
) -> Optional[List[Record]]:
    """The records of the racks, or None in check mode for a check that creates objects (``racks`` then says
    what it would create on each)."""
    name, run_id = params["check"], params["run_id"]
    if not plans:
        message = "no GPU node found: check that GPU Feature Discovery labels the nodes (nvidia.com/gpu.present=true)"
        return error_records(name, [FLEET], message, run_id)
    present = [plan for plan in plans if not plan.absent]
    if check is not None and not check.reads_only and check_mode:
        for view, rack in zip(racks, plans):
            skip = rack.absent or rack.nothing_due
            view["would_create"] = {} if skip else check.plan_view(RackRun(check, api, rack, settings))
        return None
    if check is None:
        records = error_records(name, present, unusable, run_id)
    elif not present:
        records = []
    elif check.reads_only:
        records = check.read_racks(nodes, present, scope)
    else:
        try:
            records = check.fleet_rule(run_racks(check, api, present, settings, params["parallel_racks"]))
        except ApiUnavailable as exc:  # the kinds are looked up before the racks start
            records = error_records(name, present, unreachable_message(f"could not {exc}"), run_id)
        else:
            by_plan = {plan.name: plan for plan in present}
            records = [with_missing(record, by_plan[record["rack"]]) for record in records]
    return with_absent(name, plans, records, run_id)
