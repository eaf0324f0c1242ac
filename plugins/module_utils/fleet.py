# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""One lifecycle for every verification check, run on every rack at once.

Per rack: create (namespace, ComputeDomain, the check's pods or MPIJob) -> wait -> read -> judge
-> clean up (always, every deletion tried even when one fails) -> count what is left -> record.
A check is a class with ``measure`` (create, wait, read, judge) and its objects; the rest is here,
written once. Racks run concurrently in a bounded thread pool, each in its own namespace.

Every API call goes through ``kube_api.Api``, which retries transient failures (connection refused
or reset, 429, 5xx) until its deadline, and waits by one list and one watch (``kube_watch``): an API
server restart is ridden out, and a call that still fails ends the rack's check with one clean line
naming what could not be done -- never a traceback, never a verdict about the fabric.
"""

from __future__ import annotations

import re
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import compute_domain as cd
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import dra, kube_watch, mirror, openshift
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import nvbandwidth_runtime as runtime
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.k8s import (
    ResourceNotFoundError,
    is_transient,
    pod_summary,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.kube_api import Api, ApiUnavailable, Right, grant
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.text import one_line
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.verification import (
    OUTCOME_ERROR,
    OUTCOME_FAILED,
    OUTCOME_PASSED,
    RackPlan,
    dns_label,
    incomplete_record,
    plural,
    rack_namespace,
    record_for,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.verification_objects import (
    MPIJOB_API_VERSION,
    PULL_SECRET_TYPES,
    common_labels,
    imex_pod_manifest,
    imex_pod_name,
    mpijob_manifest,
    namespace_manifest,
    own_selector,
    owned_by_pods,
    pull_secret_copy,
)

# Seconds a rack's check may take when neither the site nor the check's run-time model says otherwise.
DEFAULT_TIMEOUT = 900.0

ERROR_LINE = re.compile(
    r"_ERROR_|Error:|NCCL WARN|Test NCCL failure|MPI_ABORT was invoked|lost communication with a remote daemon"
)


def now_rfc3339() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class CheckFailed(Exception):
    """The check ran and found a problem, or a step did not happen in time (message: one line)."""

    def __init__(
        self,
        summary: str,
        details: Optional[Dict[str, Any]] = None,
        failed_nodes: Sequence[str] = (),
        node_problems: Optional[Dict[str, str]] = None,
    ) -> None:
        super().__init__(summary)
        self.summary = one_line(summary)
        self.details = details or {}
        self.failed_nodes = list(failed_nodes)
        self.node_problems = node_problems or {}


class NotRun(Exception):
    """The check could not run on this cluster as it is (a component it needs is missing); one line."""


def dra_kinds(api: Any, kinds: Sequence[Tuple[str, str]]) -> Tuple[Tuple[str, str], ...]:
    """``kinds`` with each resource.k8s.io kind in the newest DRA version ``api`` serves (unchanged when none is)."""
    resolved = []
    for kind, api_version in kinds:
        if api_version.startswith(dra.DRA_GROUP + "/"):
            api_version = next((v for v in dra.DRA_API_VERSIONS if api.served(kind, v)), api_version)
        resolved.append((kind, api_version))
    return tuple(resolved)


@dataclass
class Settings:
    """What every check of a run shares."""

    namespace_prefix: str = "gpu-fabric-verify"
    # seconds per rack; 0: the check's own (Check.timeout: nvbandwidth's from its run-time model)
    timeout: float = DEFAULT_TIMEOUT
    poll: float = 3.0
    driver_namespace: str = "nvidia-dra-driver-gpu"
    run_id: str = ""
    allow_incomplete: bool = False
    pod_security_level: str = "baseline"
    cluster: Dict[str, str] = field(default_factory=dict)
    openshift: bool = False
    # seconds OpenShift's namespace controller is given to write the namespace's SCC annotations
    openshift_annotation_wait: float = 60.0
    # rack -> an existing namespace the site gives (verification.given_namespaces); a rack not in it gets
    # a namespace of its own, created and deleted by the check
    namespaces: Dict[str, str] = field(default_factory=dict)
    # image pull Secrets the checks' pods name (air-gapped sites): copied from this namespace into each namespace
    # the checks create (a namespace the site gives must hold them already)
    image_pull_secrets: List[str] = field(default_factory=list)
    # the GPU nodes' taints the checks' pods tolerate (gpu_fabric_gpu_tolerations)
    tolerations: List[Dict[str, Any]] = field(default_factory=list)
    image_pull_secrets_namespace: str = "gpu-operator"


class RackRun:
    """One check on one rack, from namespace to record.

    In a namespace of its own (the default) the check creates the namespace and deletes it at the end. In a
    namespace the site gives (``Settings.namespaces``), which racks and checks may share, the namespace is
    only read: the check asks first whether it holds every right it needs there, creates only namespaced
    objects named after the check and the rack, and deletes and counts only the objects that carry its
    labels (``own_selector``) and the claims its pods own.
    """

    objects: Tuple[Tuple[str, str], ...] = (
        ("Pod", "v1"),
        ("ComputeDomain", cd.API_VERSION),
        # the version is the newest the cluster serves (dra_kinds): v1, v1beta2 (1.33) or v1beta1 (1.32)
        ("ResourceClaim", dra.DRA_API_VERSIONS[0]),
    )
    # What every check needs in a given namespace; each check adds its own (Check.rights).
    rights: Tuple[Right, ...] = (
        Right("get", "", "namespaces"),
        *grant("list watch create delete", "", "pods"),
        Right("get", "", "pods", "log"),
        *grant("get list watch create delete", "resource.nvidia.com", "computedomains"),
        Right("get", "resource.k8s.io", "resourceclaimtemplates"),
        *grant("list watch", "resource.k8s.io", "resourceclaims"),
    )

    def __init__(
        self,
        check: Check,
        api: Api,
        plan: RackPlan,
        settings: Settings,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.check = check
        self.api = api
        self.plan = plan
        self.settings = settings
        self.sleep = sleep
        self.clock = clock
        self.given = plan.name in settings.namespaces
        self.namespace = settings.namespaces.get(plan.name) or rack_namespace(
            settings.namespace_prefix, check.name, plan.name
        )
        # check and rack in every name: racks and checks sharing a given namespace never collide
        self.compute_domain = dns_label(check.name.replace("_", "-"), plan.name)
        self.claim_template = dns_label(self.compute_domain, "channel")
        self.selector = own_selector(check.name, plan.name)
        self.namespace_checked = False  # a given namespace: it exists and every right is held
        self.deadline = 0.0
        self.timeout = check.timeout(plan, settings.timeout)  # seconds from namespace to verdict
        self.created_domain = False
        self.uid_range: Optional[openshift.UidRange] = None  # the namespace's SCC user range (OpenShift)
        self.timings: Dict[str, float] = {}  # step -> seconds, in the record: where a rack's time went

    def timed(self, step: str, fn: Callable[[], Any]) -> Any:
        start = self.clock()
        try:
            return fn()
        finally:
            self.timings[step] = round(self.timings.get(step, 0.0) + self.clock() - start, 2)

    # -- the lifecycle -----------------------------------------------------------------------------

    def run(self) -> Dict[str, Any]:
        started = now_rfc3339()
        self.deadline = self.clock() + self.timeout
        outcome, failed_nodes, problems = OUTCOME_FAILED, [], {}
        details: Dict[str, Any] = {"namespace": self.namespace, "namespace_given": self.given}
        try:
            result = self.check.measure(self)
            outcome = OUTCOME_PASSED if result.passed else OUTCOME_FAILED
            summary, failed_nodes, problems = result.summary, result.failed_nodes, result.node_problems
            details.update(result.details)
        except CheckFailed as exc:
            summary, failed_nodes, problems = exc.summary, exc.failed_nodes, exc.node_problems
            details.update(exc.details)
        except ApiUnavailable as exc:
            outcome = OUTCOME_ERROR
            summary = f"could not {exc}; the check did not finish, which says nothing of the fabric: run it again"
        except NotRun as exc:
            outcome = OUTCOME_ERROR
            summary = f"the check could not run: {exc}"
        except cd.ComputeDomainError as exc:  # refused by the API server: ours; not ready in time: the fabric's
            outcome = OUTCOME_ERROR if exc.not_run or is_transient(exc) else OUTCOME_FAILED
            summary = str(exc)
        except Exception as exc:  # a bug of ours: still clean up, and say it is not the fabric
            outcome = OUTCOME_ERROR
            summary = f"the check stopped on an unexpected error ({type(exc).__name__}: {exc}); please report it"
        summary = f"rack {self.plan.name}: {one_line(summary)}"
        cleanup_errors = self.clean_up()
        left, uncounted = self.count_left()
        if left:  # our cleanup did not finish: a measurement that passed is not a verdict either
            outcome = OUTCOME_ERROR if outcome == OUTCOME_PASSED else outcome
            summary += f"; {plural(left, 'object')} left in namespace {self.namespace} after the cleanup"
            if cleanup_errors:
                summary += ": " + "; ".join(cleanup_errors)
        details.setdefault("violations", [] if outcome == OUTCOME_PASSED else [summary])
        record = record_for(
            self.check.name,
            self.plan,
            outcome,
            summary,
            details,
            failed_nodes,
            problems,
            self.settings.run_id,
            self.settings.allow_incomplete,
        )
        record.update(
            started=started,
            finished=now_rfc3339(),
            cluster=dict(self.settings.cluster),
            objects_left=None if uncounted else left,
            objects_uncounted=uncounted,
            cleanup_error="; ".join(cleanup_errors),
            timings=dict(self.timings),
        )
        return record

    # -- steps the checks share --------------------------------------------------------------------

    def remaining(self) -> float:
        return max(self.deadline - self.clock(), 1.0)

    def wait_for(self, what: str, probe: Callable[[], Any], describe: Optional[Callable[[], str]] = None) -> Any:
        """Poll ``probe`` until it returns something truthy; past the deadline the check fails, naming ``what``."""
        return self.timed(f"wait: {what}", lambda: self._wait_for(what, probe, describe))

    def _wait_for(self, what: str, probe: Callable[[], Any], describe: Optional[Callable[[], str]]) -> Any:
        started = self.clock()
        reads = 0
        while True:
            value = probe()
            reads += 1
            if value:
                return value
            if self.clock() >= self.deadline:
                waited = self.clock() - started
                extra = f"; {describe()}" if describe else ""
                raise CheckFailed(f"{what}: still not done after {reads} reads ({waited:.0f} s){extra}")
            self.sleep(min(self.settings.poll, max(self.deadline - self.clock(), 0.1)))

    def watch_for(
        self,
        what: str,
        kind: str,
        api_version: str,
        judge: Callable[[kube_watch.Objects], Any],
        describe: Optional[Callable[[], str]] = None,
        name: str = "",
        window: Union[float, Callable[[], float]] = kube_watch.WINDOW,
    ) -> Any:
        """Wait until ``judge`` of the check's objects of ``kind`` (the one ``name``, or all that carry its
        labels) answers something truthy: one list and one watch per window, however long the wait; past
        the deadline the check fails, naming ``what``."""
        return self.timed(
            f"wait: {what}", lambda: self._watch_for(what, kind, api_version, judge, describe, name, window)
        )

    def _watch_for(
        self,
        what: str,
        kind: str,
        api_version: str,
        judge: Callable[[kube_watch.Objects], Any],
        describe: Optional[Callable[[], str]],
        name: str,
        window: Union[float, Callable[[], float]],
    ) -> Any:
        started = self.clock()
        selector = "" if name else self.selector
        outcome = self.api.watch_until(kind, api_version, self.namespace, judge, self.deadline, selector, name, window)
        if outcome.value:
            return outcome.value
        extra = f"; {describe()}" if describe else ""
        raise CheckFailed(
            f"{what}: still not done after {self.clock() - started:.0f} s ({plural(outcome.events, 'change')} "
            f"seen){extra}"
        )

    def create_namespace(self) -> None:
        if self.given:
            self.timed("check the given namespace", self._check_given_namespace)
        else:
            self.timed("create the namespace", self._create_namespace)

    def _check_given_namespace(self) -> None:
        """The given namespace exists and every right the check needs is held there, before anything is created;
        what an interrupted earlier run of this check on this rack left there is deleted first."""
        needed = self.rights + self.check.rights
        missing = [right for right in needed if not self.api.can(right, self.namespace)]
        if missing:
            raise NotRun(missing_rights_message(self.namespace, self.plan.name, missing, len(needed)))
        if self.api.get("Namespace", "v1", self.namespace) is None:
            raise NotRun(
                f"namespace {self.namespace}, given for rack {self.plan.name}, does not exist: create it (the checks "
                "never create nor delete a given namespace) or fix gpu_fabric_verify_namespace(s)"
            )
        self.namespace_checked = True
        if self.settings.openshift:  # annotated when the site made it; the pods' user follows it as in our own
            self.uid_range = self.read_uid_range()
        left, _uncounted = self.count_left()
        if left:
            errors = self.clean_up()
            if errors:
                raise CheckFailed(
                    f"{plural(left, 'object')} of an earlier run of this check left in namespace {self.namespace} "
                    f"could not be deleted: {'; '.join(errors)}"
                )

    def _create_namespace(self) -> None:
        existing = self.api.get("Namespace", "v1", self.namespace)
        if existing and (existing.get("metadata") or {}).get("deletionTimestamp"):
            self.wait_for(
                f"namespace {self.namespace} of an earlier run to go",
                lambda: self.api.get("Namespace", "v1", self.namespace) is None,
            )
        self.api.create(
            namespace_manifest(
                self.namespace,
                self.check.name,
                self.plan.name,
                self.check.pod_security_level or self.settings.pod_security_level,
            )
        )
        self.copy_pull_secrets()
        # the API refuses pods until kube-controller-manager made the namespace's default ServiceAccount
        self.wait_for(
            f"the default ServiceAccount of namespace {self.namespace}",
            lambda: self.api.get("ServiceAccount", "v1", "default", self.namespace),
        )
        if self.settings.openshift:
            self.uid_range = self.read_uid_range()

    def copy_pull_secrets(self) -> None:
        """Each image pull Secret of the run, copied from the site's namespace into the check's own, before any
        pod. The copies carry the check's labels and go with the namespace (they are not counted one by one:
        that would need the right to list Secrets, hence to read them, in every namespace)."""
        if self.settings.image_pull_secrets:
            self.timed("copy the image pull Secrets", self._copy_pull_secrets)

    def _copy_pull_secrets(self) -> None:
        source = self.settings.image_pull_secrets_namespace
        for name in self.settings.image_pull_secrets:
            secret = self.api.get("Secret", "v1", name, source)
            if secret is None:
                raise NotRun(
                    f"image pull Secret {name} does not exist in namespace {source}: create it there, or set "
                    "gpu_fabric_verify_image_pull_secrets_namespace to the namespace that holds it"
                )
            if secret.get("type") not in PULL_SECRET_TYPES:
                raise NotRun(
                    f"Secret {source}/{name} is of type {secret.get('type') or '(none)'}, not an image pull Secret "
                    f"({' or '.join(PULL_SECRET_TYPES)}): fix gpu_fabric_verify_image_pull_secrets"
                )
            self.api.create(
                pull_secret_copy(secret, self.namespace, self.check.name, self.plan.name, self.settings.run_id)
            )

    def read_uid_range(self) -> openshift.UidRange:
        """The namespace's SCC user range, which OpenShift's namespace controller writes a moment after the
        namespace is created; waited for a bounded time (``openshift_annotation_wait``)."""
        started, reads = self.clock(), 0
        while True:
            found = openshift.namespace_uid_range(self.api.get("Namespace", "v1", self.namespace))
            reads += 1
            if found is not None:
                return found
            if self.clock() - started >= self.settings.openshift_annotation_wait:
                raise NotRun(
                    f"namespace {self.namespace} has no {openshift.UID_RANGE_ANNOTATION} annotation after "
                    f"{reads} reads ({self.clock() - started:.0f} s): OpenShift's namespace controller (in "
                    "openshift-controller-manager) did not annotate it; check that it runs"
                )
            self.sleep(min(self.settings.poll, 1.0))

    def with_pull_secrets(self, body: Dict[str, Any]) -> Dict[str, Any]:
        """``body`` (a Pod or an MPIJob) with the run's image pull Secrets on every pod template."""
        if not self.settings.image_pull_secrets:
            return body
        return mirror.mirror_manifest([body], "", {}, self.settings.image_pull_secrets)[0]

    def create_pod(self, body: Dict[str, Any]) -> Dict[str, Any]:
        """Create a pod of the check; SCC admission refusing it ends the check with one line saying why."""
        body = self.with_pull_secrets(body)
        try:
            return self.api.create(body)
        except ApiUnavailable as exc:
            if openshift.is_scc_refusal(str(exc)):
                user = ((body.get("spec") or {}).get("securityContext") or {}).get("runAsUser")
                raise NotRun(
                    openshift.scc_refusal_message(
                        f"pod {self.namespace}/{body['metadata']['name']}", str(exc), self.namespace, user
                    )
                ) from exc
            raise

    def domain_request(self, state: str, wait_nodes: Sequence[str] = ()) -> cd.Request:
        return cd.Request(
            name=self.compute_domain,
            namespace=self.namespace,
            state=state,
            spec=cd.ComputeDomainSpec(num_nodes=0, channel_template_name=self.claim_template),
            wait=True,
            wait_timeout=int(self.remaining()),
            wait_sleep=self.settings.poll,
            wait_nodes=list(wait_nodes),
            driver_namespace=self.settings.driver_namespace,
            labels=common_labels(self.check.name, self.plan.name, self.settings.run_id),
        )

    def ensure_domain(self, what: str, state: str, wait_nodes: Sequence[str] = ()) -> None:
        """The rack's ComputeDomain brought to ``state`` by ``compute_domain.ensure``, which waits for it."""
        self.api.call(
            f"{what} ComputeDomain {self.namespace}/{self.compute_domain}",
            lambda: cd.ensure(
                self.api.client, self.domain_request(state, wait_nodes), sleep=self.sleep, clock=self.clock
            ),
        )

    def create_compute_domain(self) -> None:
        """The rack's ComputeDomain, waited for until its channel template exists."""
        self.created_domain = True
        self.timed("create the ComputeDomain and its channel template", lambda: self.ensure_domain("create", "present"))

    def wait_domain_nodes(self, nodes: Sequence[str]) -> None:
        """Every node's IMEX daemon Ready in the ComputeDomain (status.nodes[])."""
        self.timed(
            "wait: the IMEX daemons Ready in the ComputeDomain",
            lambda: self.ensure_domain("wait for", "present", nodes),
        )

    def read_log(self, pod: str) -> str:
        """A finished container's log; kubelets serve it a moment after the pod's phase says so."""
        return self.timed("read the logs", lambda: self._read_log(pod))

    def _read_log(self, pod: str, reads: int = 10) -> str:
        """Retries a log that is not served yet (``no logs found``, an empty answer): never judged as empty."""
        last = "the API server answered with an empty log"
        for attempt in range(reads):
            try:
                text = self.api.log(pod, self.namespace)
            except ApiUnavailable as exc:
                if "no logs" not in str(exc).lower() and " 400 " not in f" {exc} ":
                    raise
                last, text = str(exc), ""
            if text.strip():
                return text
            if attempt < reads - 1:
                self.sleep(1.0)
        raise ApiUnavailable(
            f"read the log of the finished pod {self.namespace}/{pod} after {reads} tries ({one_line(last)})"
        )

    def clean_up(self) -> List[str]:
        """Delete the check's objects and its own namespace; every step is tried, the failures are returned.

        In a given namespace the namespace stays: what carries the check's labels is deleted, and waited for.
        Nothing is deleted there before the namespace and the rights were checked (nothing was created).
        """
        errors: List[str] = []
        if self.given and not self.namespace_checked:
            return errors
        steps = list(self.check.cleanup_steps(self))
        if self.created_domain or self.given:
            steps.append(
                (f"delete ComputeDomain {self.compute_domain}", lambda: self.ensure_domain("delete", "absent"))
            )
        if self.given:
            steps.append((f"delete what is left of this check in namespace {self.namespace}", self.delete_own))
        else:
            steps.append((f"delete namespace {self.namespace}", self.delete_namespace))
        for what, step in steps:
            self.deadline = max(self.deadline, self.clock() + (self.settings.timeout or DEFAULT_TIMEOUT) / 3)
            try:
                self.timed(f"clean up: {what}", step)
            except (ApiUnavailable, CheckFailed, cd.ComputeDomainError) as exc:
                errors.append(f"{what}: {one_line(str(exc))}")
        return errors

    def delete_namespace(self) -> None:
        """Delete the namespace, and wait until nothing of the check is left in it.

        The check's own objects were deleted and waited for before; what the namespace controller
        still has to do for an empty namespace (it takes 5-30 s under load) is not waited for.
        """
        self.api.delete("Namespace", "v1", self.namespace)
        self.wait_claims_gone()
        self.wait_for(f"namespace {self.namespace} to be empty", lambda: self.count_left() == (0, []))

    def wait_claims_gone(self) -> None:
        """The ResourceClaims of the check's pods, which the garbage collector deletes a moment after the pods
        (longer on a busy cluster): watched until none is left, so that the count that follows is read once,
        not again and again. Past the deadline the count says what is left."""
        kind, api_version = dra_kinds(self.api, (("ResourceClaim", dra.DRA_API_VERSIONS[0]),))[0]
        if not self.api.served(kind, api_version):
            return

        def none_left(objects: kube_watch.Objects) -> bool:
            return not owned_by_pods(list(objects.values()), lambda pod: self.check.owns_pod(self, pod))

        self.timed(
            "wait: the ResourceClaims of the check's pods to go",
            lambda: self.api.watch_until(kind, api_version, self.namespace, none_left, self.deadline),
        )

    def own_objects(self, kind: str, api_version: str) -> List[Dict[str, Any]]:
        """The objects of ``kind`` in the namespace that this check made on this rack (see own_selector)."""
        if kind == "ResourceClaim":  # they carry the labels of the DRA controller's template: found by owner
            claims = self.api.list(kind, api_version, self.namespace)
            return owned_by_pods(claims, lambda pod: self.check.owns_pod(self, pod))
        return self.api.list(kind, api_version, self.namespace, self.selector)

    def delete_own(self) -> None:
        """Delete every object of the check's labels still in the given namespace, and wait until none is left."""
        for kind, api_version in dra_kinds(self.api, self.check.objects + self.objects):
            if kind == "ResourceClaim" or not self.api.served(kind, api_version):
                continue  # the claims go with their pods
            for obj in self.own_objects(kind, api_version):
                self.api.delete(kind, api_version, obj["metadata"]["name"], self.namespace, propagation="Foreground")
        self.wait_claims_gone()
        self.wait_for(
            f"the objects of {self.check.name} on rack {self.plan.name} in namespace {self.namespace} to be deleted",
            lambda: self.count_left() == (0, []),
        )

    def count_left(self) -> Tuple[int, List[str]]:
        """Objects of the check still there: the namespace (unless it is being deleted) and what is in it.

        A namespace that is gone took its objects with it; one that is terminating is counted by its content.
        In a given namespace only the check's own objects are counted, and the channel template of its
        ComputeDomain (the DRA controller deletes it with the ComputeDomain); the namespace is not.
        """
        if self.given:
            return self._count_own_left()
        try:
            namespace = self.api.get("Namespace", "v1", self.namespace)
        except ApiUnavailable:
            return 0, ["Namespace"]
        if namespace is None:
            return 0, []
        left = 0 if (namespace.get("metadata") or {}).get("deletionTimestamp") else 1
        uncounted: List[str] = []
        for kind, api_version in dra_kinds(self.api, self.objects + self.check.objects):
            try:
                if self.api.served(kind, api_version):
                    left += len(self.api.list(kind, api_version, self.namespace))
            except ApiUnavailable:
                uncounted.append(kind)
        return left, uncounted

    def _count_own_left(self) -> Tuple[int, List[str]]:
        if not self.namespace_checked:
            return 0, []  # nothing was created
        left, uncounted = 0, []
        for kind, api_version in dra_kinds(self.api, self.objects + self.check.objects):
            try:
                if self.api.served(kind, api_version):
                    left += len(self.own_objects(kind, api_version))
            except ApiUnavailable:
                uncounted.append(kind)
        try:
            for api_version in dra.DRA_API_VERSIONS:
                if self.api.served("ResourceClaimTemplate", api_version):
                    if self.api.get("ResourceClaimTemplate", api_version, self.claim_template, self.namespace):
                        left += 1
                    break
        except ApiUnavailable:
            uncounted.append("ResourceClaimTemplate")
        return left, uncounted


def missing_rights_message(namespace: str, rack: str, missing: Sequence[Right], needed: int) -> str:
    """One line naming the rights the identity lacks in a given namespace, and the file that grants them."""
    if len(missing) == needed:
        found = f"holds none of the {needed} rights the check needs in namespace {namespace}, given for rack {rack}"
        hint = " (create the namespace first if it does not exist)"
    else:
        found = f"lacks {plural(len(missing), 'right')} in namespace {namespace}, given for rack {rack}: " + ", ".join(
            str(right) for right in missing
        )
        hint = ""
    return (
        f"this identity {found}; apply the Role and RoleBinding of docs/rbac/verify-stage-namespaced.yaml "
        f"in namespace {namespace}{hint}"
    )


@dataclass
class Result:
    passed: bool
    summary: str
    details: Dict[str, Any] = field(default_factory=dict)
    failed_nodes: List[str] = field(default_factory=list)
    node_problems: Dict[str, str] = field(default_factory=dict)


class Check:
    """A verification check: its name, its objects and how it measures one rack."""

    name = ""
    uses_gpus = True
    pod_security_level = ""
    objects: Tuple[Tuple[str, str], ...] = ()
    rights: Tuple[Right, ...] = ()  # beyond RackRun.rights, in a given namespace

    def measure(self, run: RackRun) -> Result:
        raise NotImplementedError

    def owns_pod(self, run: RackRun, name: str) -> bool:
        """Whether the pod ``name`` is one this check makes on the rack of ``run`` (its claims are then ours)."""
        return False

    def cleanup_steps(self, run: RackRun) -> List[Tuple[str, Callable[[], None]]]:
        return []

    def plan_view(self, run: RackRun) -> Dict[str, Any]:
        """What the check would create on the rack (check mode)."""
        return {"namespace": run.namespace, "compute_domain": run.compute_domain, "nodes": list(run.plan.nodes)}

    def run_estimate(self, plan: RackPlan) -> Optional[runtime.Estimate]:
        """The modelled run time of the check on the rack of ``plan`` (None: the check has no model)."""
        return None

    def timeout(self, plan: RackPlan, configured: float) -> float:
        """Seconds the check may take on the rack: ``configured`` when > 0 (the site's), else the start
        allowance plus the modelled run x the safety factor (``nvbandwidth_runtime.wait_seconds``), else 900."""
        if configured > 0:
            return configured
        estimate = self.run_estimate(plan)
        return float(runtime.wait_seconds(estimate)) if estimate else DEFAULT_TIMEOUT


# -- IMEX channel injection ---------------------------------------------------------------------------


def channel0_line(listing: str) -> Optional[str]:
    for line in listing.splitlines():
        if line.rstrip().endswith(" channel0"):
            return line.rstrip()
    return None


def judge_channel_listing(listing: str) -> Tuple[bool, str]:
    """(passed, what was seen) for one pod's ``ls -la /dev/nvidia-caps-imex-channels``."""
    line = channel0_line(listing)
    if line is None:
        return False, "channel0 is missing (listing: " + " / ".join(x for x in listing.splitlines() if x.strip())[
            :200
        ] + ")"
    if not line.startswith("c"):
        return False, f"channel0 is not a character device: {line}"
    numbers = re.search(r"(\d+),\s*(\d+)", line)
    device = f"major {numbers.group(1)}, minor {numbers.group(2)}" if numbers else "character device"
    return True, device


def channel_findings(bad: Mapping[str, str], limit: int = 3) -> str:
    """'gb200-r0-t0, gb200-r0-t1 and 16 more: channel0 is missing (listing: ...)': trays with the same finding
    named together, the finding said once."""
    by_text: Dict[str, List[str]] = {}
    for node, text in bad.items():
        by_text.setdefault(text, []).append(node)
    parts = []
    for text, trays in by_text.items():
        more = f" and {len(trays) - limit} more" if len(trays) > limit else ""
        parts.append(f"{', '.join(trays[:limit])}{more}: {text}")
    return "; ".join(parts[:limit]) + (f"; {len(parts) - limit} more findings" if len(parts) > limit else "")


class ImexChannelCheck(Check):
    name = "imex_channel"
    uses_gpus = False
    pod_security_level = "restricted"

    def __init__(self, image: str, run_as_user: int = 65534) -> None:
        self.image = image
        self.run_as_user = run_as_user

    def plan_view(self, run: RackRun) -> Dict[str, Any]:
        view = super().plan_view(run)
        view["pods"] = [imex_pod_name(node) for node in run.plan.nodes]
        return view

    def owns_pod(self, run: RackRun, name: str) -> bool:
        return name in {imex_pod_name(node) for node in run.plan.nodes}

    def _pods(self, run: RackRun) -> Dict[str, Dict[str, Any]]:
        pods = run.api.list("Pod", "v1", run.namespace, run.selector)
        return {p["metadata"]["name"]: p for p in pods}

    def measure(self, run: RackRun) -> Result:
        nodes = run.plan.nodes
        names = {node: imex_pod_name(node) for node in nodes}
        run.create_namespace()
        run.create_compute_domain()
        # on OpenShift, a user outside the namespace's range is left to the SCC: ls runs as any user
        user = openshift.pod_run_as_user(self.run_as_user, run.uid_range, arbitrary_uid_works=True)
        for node in nodes:
            run.create_pod(
                imex_pod_manifest(
                    node,
                    run.namespace,
                    run.plan.name,
                    run.claim_template,
                    self.image,
                    user,
                    run.settings.run_id,
                    run.settings.tolerations,
                )
            )

        def scheduled(objects: kube_watch.Objects) -> bool:
            pods = by_name(objects)
            return all(((pods.get(names[n]) or {}).get("spec") or {}).get("nodeName") for n in nodes)

        def describe_pods() -> str:
            pods = self._pods(run)
            pending = {
                n: pod_summary(pods[names[n]]).split(": ", 1)[-1]
                for n in nodes
                if names[n] in pods and ((pods[names[n]].get("status") or {}).get("phase") or "Pending") == "Pending"
            }
            return f"pending pods: {channel_findings(pending)}" if pending else "no pod is pending"

        run.watch_for("the IMEX channel pods to be scheduled", "Pod", "v1", scheduled, describe_pods)
        run.wait_domain_nodes(nodes)

        def started(objects: kube_watch.Objects) -> bool:
            pods = by_name(objects)
            return all(
                ((pods.get(names[n]) or {}).get("status") or {}).get("phase") in ("Running", "Succeeded", "Failed")
                for n in nodes
            )

        run.watch_for("the IMEX channel pods to run", "Pod", "v1", started, describe_pods)
        seen: Dict[str, Tuple[bool, str]] = {}
        pods_out: List[Dict[str, Any]] = []
        pods = self._pods(run)
        for node in nodes:
            listing = run.read_log(names[node])
            seen[node] = judge_channel_listing(listing)
            pods_out.append(
                {
                    "node": node,
                    "pod": names[node],
                    "phase": ((pods.get(names[node]) or {}).get("status") or {}).get("phase"),
                    "security_context": ((pods.get(names[node]) or {}).get("spec") or {}).get("securityContext"),
                    "channel0": channel0_line(listing),
                    "listing": listing.splitlines(),
                }
            )
        bad = {node: text for node, (ok, text) in seen.items() if not ok}
        details = {
            "compute_domain": run.compute_domain,
            "run_as_user": user,
            "uid_range": str(run.uid_range) if run.uid_range else None,
            "pods": pods_out,
            "violations": [f"{node}: {text}" for node, text in bad.items()],
        }
        if bad:
            problems = {
                node: f"{text}; check that containerd has CDI enabled (enable_cdi) and that the DRA kubelet "
                f"plugin runs on {node}"
                for node, text in bad.items()
            }
            return Result(
                False,
                f"channel0 not injected in {len(bad)} of {len(nodes)} pods: {channel_findings(bad)}; check that "
                "containerd has CDI enabled (enable_cdi) and that the DRA kubelet plugin runs there",
                details,
                list(bad),
                problems,
            )
        devices = sorted({text for _ok, text in seen.values()})
        return Result(
            True,
            f"channel0 is a character device ({', '.join(devices)}) in {len(nodes)} of {len(nodes)} "
            f"pods, one per tray ({nodes[0]} .. {nodes[-1]}){_skipped(run.plan)}",
            details,
        )

    def cleanup_steps(self, run: RackRun) -> List[Tuple[str, Callable[[], None]]]:
        def delete_pods() -> None:
            for node in run.plan.nodes:
                run.api.delete("Pod", "v1", imex_pod_name(node), run.namespace)
            run.watch_for("the IMEX channel pods to be deleted", "Pod", "v1", lambda objects: not objects)

        return [("delete the IMEX channel pods", delete_pods)]


def by_name(objects: kube_watch.Objects) -> Dict[str, Dict[str, Any]]:
    """The watched objects of one namespace by name."""
    return {key.split("/", 1)[-1]: obj for key, obj in objects.items()}


def _skipped(plan: RackPlan) -> str:
    if not plan.skipped:
        return ""
    return (
        f"; {plural(len(plan.skipped), 'tray')} skipped: "
        + ", ".join(f"{s['node']} {s['reason']}" for s in plan.skipped[:3])
        + (" and more" if len(plan.skipped) > 3 else "")
    )


# -- MPIJob checks (nvbandwidth, NCCL) ----------------------------------------------------------------

# Seconds between reads of a namespace's events while an MPIJob runs on OpenShift, where SCC admission
# refusing its pods changes nothing the job's watch sees.
SCC_WINDOW = 15.0


class MpiJobCheck(Check):
    """A benchmark in an MPIJob over every usable tray of the rack, judged from the launcher's log."""

    objects = (("MPIJob", MPIJOB_API_VERSION),)
    rights = grant("get list watch create delete", "kubeflow.org", "mpijobs")
    # Seconds an MPIJob may stay without any status condition: the MPI operator sets Created as soon as it
    # syncs the job, so none by then means no operator is running (or none watches the namespace).
    operator_grace = 60.0

    def __init__(self, image: str, mpi: Mapping[str, Any], judge: Callable[..., Dict[str, Any]]) -> None:
        self.image = image
        self.mpi = dict(mpi)
        self.judge_log = judge  # (log, rack plan, trays in rank order) -> verdict dict, see judges.py

    def job_name(self, run: RackRun) -> str:
        return dns_label(self.name.replace("_", "-"), run.plan.name, limit=40)

    def launcher_args(self, run: RackRun) -> List[str]:
        raise NotImplementedError

    def pod_selector(self, run: RackRun, role: str = "") -> str:
        """The MPI operator's labels of this job's pods (role: launcher or worker; empty - both)."""
        selector = f"training.kubeflow.org/job-name={self.job_name(run)}"
        return selector + (f",training.kubeflow.org/job-role={role}" if role else "")

    def owns_pod(self, run: RackRun, name: str) -> bool:
        return re.fullmatch(rf"{re.escape(self.job_name(run))}-(launcher(-[a-z0-9]+)?|worker-\d+)", name) is not None

    def judge(self, run: RackRun, log: str, nodes: Sequence[str]) -> Result:
        """The check's judge (``judges.py``) on the launcher's log; ``nodes``: the tray of each worker in rank order."""
        verdict = self.judge_log(log, run.plan, nodes)
        return Result(
            bool(verdict["passed"]),
            verdict["summary"] + _skipped(run.plan),
            verdict.get("details", {}),
            verdict.get("failed_nodes", []),
            verdict.get("node_problems", {}),
        )

    def plan_view(self, run: RackRun) -> Dict[str, Any]:
        view = super().plan_view(run)
        view.update(mpijob=self.job_name(run), ranks=run.plan.gpus_per_tray * len(run.plan.nodes))
        return view

    def manifest(self, run: RackRun) -> Dict[str, Any]:
        return mpijob_manifest(
            self.job_name(run),
            run.namespace,
            self.name,
            run.plan.name,
            run.plan.nodes,
            run.plan.gpus_per_tray,
            run.claim_template,
            self.image,
            self.launcher_args(run),
            self.mpi,
            run.settings.run_id,
            run.settings.tolerations,
        )

    def measure(self, run: RackRun) -> Result:
        job = self.job_name(run)
        run.create_namespace()
        run.create_compute_domain()
        run.api.create(run.with_pull_secrets(self.manifest(run)))

        placement: Dict[str, str] = {}  # worker pod -> tray, read while the workers start
        workers = len(run.plan.nodes)
        created = run.clock()
        synced = [False]  # the operator wrote a status: it runs and watches this namespace

        def finished(objects: kube_watch.Objects) -> Optional[Dict[str, str]]:
            if run.settings.openshift:
                self.raise_scc_refusal(run, job)
            if len(placement) < workers:  # the operator writes the job's status as its pods start
                for pod in run.api.list("Pod", "v1", run.namespace, self.pod_selector(run, "worker")):
                    node = (pod.get("spec") or {}).get("nodeName")
                    if node:
                        placement[pod["metadata"]["name"]] = node
            obj = by_name(objects).get(job) or {}
            conditions = (obj.get("status") or {}).get("conditions") or []
            synced[0] = synced[0] or bool(conditions)
            for condition in conditions:
                if condition.get("type") in ("Succeeded", "Failed") and condition.get("status") == "True":
                    return condition
            if not conditions and run.clock() - created > self.operator_grace:
                raise NotRun(
                    f"MPIJob {run.namespace}/{job} has no status after {self.operator_grace:.0f} s: no MPI operator "
                    "is running (or none watches this namespace); check its Deployment (playbooks/cluster.yml "
                    "installs it: role mpi_operator)"
                )
            return None

        def window() -> float:
            """Until the operator writes a status, the watch ends when its grace does, for the judge to say so;
            on OpenShift SCC admission refuses pods with no change to the job: the events are read each
            ``SCC_WINDOW``."""
            if not synced[0]:
                return max(1.0, self.operator_grace - (run.clock() - created) + 1.0)
            return SCC_WINDOW if run.settings.openshift else kube_watch.WINDOW

        condition = run.watch_for(
            f"MPIJob {job} to finish", "MPIJob", MPIJOB_API_VERSION, finished, lambda: self.describe(run), job, window
        )
        launcher = self.launcher(run)
        log = run.read_log(launcher["metadata"]["name"]) if launcher else ""
        if condition["type"] == "Failed":
            gone = sorted({node for node in placement.values() if run.api.get("Node", "v1", node) is None})
            text = self.failure_text(job, condition, launcher, log)
            if gone:
                text += f"; {plural(len(gone), 'tray')} left the cluster during the run: {', '.join(gone)}"
            raise CheckFailed(
                text,
                {"job": job, "launcher": pod_summary(launcher) if launcher else None, "trays_gone": gone},
                failed_nodes=gone,
                node_problems={node: "left the cluster during the run" for node in gone},
            )
        result = self.judge(run, log, self.rank_nodes(run, job, placement))
        result.details.setdefault("job", job)
        return result

    def raise_scc_refusal(self, run: RackRun, job: str) -> None:
        """The MPI operator creates the pods: a refusal by SCC admission shows in its events (FailedCreate)."""
        for event in run.api.list("Event", "v1", run.namespace):
            if event.get("type") == "Warning" and openshift.is_scc_refusal(event.get("message") or ""):
                raise NotRun(
                    openshift.scc_refusal_message(
                        f"pods of MPIJob {run.namespace}/{job}",
                        event.get("message") or "",
                        run.namespace,
                        int(self.mpi["run_as_user"]),
                        "the mpiuser of the mpi-operator images: their sshd runs as no other user",
                    )
                )

    def rank_nodes(self, run: RackRun, job: str, placement: Mapping[str, str]) -> List[str]:
        """The tray of each worker in rank order: ranks fill worker 0 first (``ppr:<slots>:node``), and the
        scheduler, not the order of the trays, decides which tray worker N runs on."""
        nodes = [placement.get(f"{job}-worker-{index}") for index in range(len(run.plan.nodes))]
        if all(nodes) and sorted(nodes) == sorted(run.plan.nodes):
            return [str(node) for node in nodes]
        return list(run.plan.nodes)  # never seen running (a failed start): trays in name order

    def launcher(self, run: RackRun) -> Optional[Dict[str, Any]]:
        pods = run.api.list("Pod", "v1", run.namespace, self.pod_selector(run, "launcher"))
        return sorted(pods, key=lambda p: p["metadata"].get("creationTimestamp") or "")[-1] if pods else None

    def describe(self, run: RackRun) -> str:
        pods = run.api.list("Pod", "v1", run.namespace, self.pod_selector(run))
        waiting = [pod_summary(p) for p in pods if (p.get("status") or {}).get("phase") != "Running"]
        return (f"{len(pods)} pod(s); " + "; ".join(waiting[:3])) if pods else "no pod was created"

    def failure_text(self, job: str, condition: Mapping[str, Any], launcher: Optional[Dict[str, Any]], log: str) -> str:
        text = f"MPIJob {job} failed ({condition.get('reason', '')}: {one_line(condition.get('message', ''))})"
        if not launcher:
            return text + "; no launcher pod exists"
        statuses = (launcher.get("status") or {}).get("containerStatuses") or [{}]
        term = ((statuses[0].get("state") or {}).get("terminated")) or {}
        node = (launcher.get("spec") or {}).get("nodeName") or "(unscheduled)"
        text += (
            f"; launcher pod {launcher['metadata']['name']} on {node}"
            f" is {(launcher.get('status') or {}).get('phase')} (exit code {term.get('exitCode', 'none')}, "
            f"reason {term.get('reason', 'none')})"
        )
        lines = [line.strip() for line in log.splitlines() if line.strip()]
        errors = [line for line in lines if ERROR_LINE.search(line)]
        if errors:
            return text + "; error lines: " + " / ".join(errors[:3])
        return text + ("; last log lines: " + " / ".join(lines[-5:]) if lines else "")

    def cleanup_steps(self, run: RackRun) -> List[Tuple[str, Callable[[], None]]]:
        job = self.job_name(run)

        def delete_job() -> None:
            if not run.api.served("MPIJob", MPIJOB_API_VERSION):
                return
            run.api.delete("MPIJob", MPIJOB_API_VERSION, job, run.namespace, propagation="Foreground")
            run.watch_for(
                f"MPIJob {job} and its pods to be deleted",
                "MPIJob",
                MPIJOB_API_VERSION,
                lambda objects: not objects,
                name=job,
            )

        return [(f"delete MPIJob {job}", delete_job)]


class NvbandwidthCheck(MpiJobCheck):
    name = "nvbandwidth"

    def __init__(
        self,
        image: str,
        mpi: Mapping[str, Any],
        testcase: str,
        extra_args: Sequence[str],
        judge: Callable[..., Dict[str, Any]],
    ) -> None:
        super().__init__(image, mpi, judge)
        self.testcase = testcase
        self.extra_args = list(extra_args)

    def launcher_args(self, run: RackRun) -> List[str]:
        return ["--report-bindings", "-q", "nvbandwidth", "-t", self.testcase, *self.extra_args]

    def run_estimate(self, plan: RackPlan) -> Optional[runtime.Estimate]:
        gpus = plan.gpus_per_tray * len(plan.nodes)
        return runtime.estimate_for(self.testcase, gpus, self.extra_args, plan.gpu_product) if gpus else None

    def measure(self, run: RackRun) -> Result:
        result = super().measure(run)
        estimate = self.run_estimate(run.plan)
        if estimate is not None:  # what the model expected, next to the record's timings: the model checked
            result.details.setdefault("expected_run", estimate.to_dict())
        return result

    def describe(self, run: RackRun) -> str:
        """The pods, and what the run-time model expected (in the message of a wait that ran out)."""
        estimate = self.run_estimate(run.plan)
        if estimate is None:
            return super().describe(run)
        return (
            f"{super().describe(run)}; the run models to {runtime.duration_text(estimate.seconds)} "
            f"({estimate.pairs} pairs) after the start, the wait was {runtime.duration_text(run.timeout)}: "
            "if the rack is only slow, raise verify_nvbandwidth_timeout"
        )

    def plan_view(self, run: RackRun) -> Dict[str, Any]:
        view = super().plan_view(run)
        estimate = self.run_estimate(run.plan)
        if estimate is not None:
            view.update(
                expected_run=estimate.to_dict(),
                timeout_s=run.timeout,
                expected=runtime.plan_text(estimate, int(run.timeout)),
            )
        return view


class NcclCheck(MpiJobCheck):
    name = "nccl"

    def __init__(
        self,
        image: str,
        mpi: Mapping[str, Any],
        binary: str,
        args: Sequence[str],
        mpirun_args: Sequence[str],
        judge: Callable[..., Dict[str, Any]],
    ) -> None:
        super().__init__(image, mpi, judge)
        self.binary = binary
        self.args = list(args)
        self.mpirun_args = list(mpirun_args)

    def launcher_args(self, run: RackRun) -> List[str]:
        return ["-q", *self.mpirun_args, self.binary, *self.args]


# -- the run ------------------------------------------------------------------------------------------


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
) -> List[Dict[str, Any]]:
    """Every rack's record, racks measured ``parallel`` at a time; incomplete racks are recorded, not run."""
    records: Dict[str, Dict[str, Any]] = {}
    runnable = []
    for plan in plans:
        if plan.incomplete:
            record = incomplete_record(check.name, plan, settings.run_id, settings.allow_incomplete)
            record.update(
                started=now_rfc3339(),
                finished=now_rfc3339(),
                cluster=dict(settings.cluster),
                objects_left=0,
                objects_uncounted=[],
                cleanup_error="",
            )
            records[plan.name] = record
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
