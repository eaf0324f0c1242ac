# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The lifecycle of one check on one rack, written once for every check.

Create (the namespace, the ComputeDomain, what the check's ``measure`` makes) -> wait -> read -> judge
-> clean up (always, every deletion tried even when one fails) -> count what is left -> record.

Every API call goes through ``kube_api.Api``, which retries transient failures (connection refused
or reset, 429, 5xx) until its deadline, and waits by one list and one watch (``kube_watch``): an API
server restart is ridden out, and a call that still fails ends the rack's check with one clean line
naming what could not be done -- never a traceback, never a verdict about the fabric.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import compute_domain as cd
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import dra, kube_watch, mirror, openshift
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.checks.base import (
    DEFAULT_TIMEOUT,
    Check,
    CheckFailed,
    NotRun,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.k8s import api_poll, is_transient
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.kube_api import Api, ApiUnavailable, refused
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.object_names import dns_label
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.priority import (
    PRIORITY_API_VERSION,
    Preempted,
    priority_class_manifest,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.rack_plan import RackPlan
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.record import (
    OUTCOME_ERROR,
    OUTCOME_FAILED,
    OUTCOME_INCOMPLETE,
    OUTCOME_PASSED,
    Record,
    completed,
    now_rfc3339,
    record_for,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.retry import Backoff, WaitTimeout
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.rights import Right, grant
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.text import one_line, plural
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.verification import rack_namespace
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.verification_objects import (
    LOG_READER_ROLE,
    PULL_SECRET_TYPES,
    common_labels,
    log_reader_binding,
    namespace_manifest,
    own_selector,
    owned_by_pods,
    pull_secret_copy,
)


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
    pod_security_level: str = "restricted"
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
    # the PriorityClass every pod of the checks runs at (gpu_fabric_verify_priority_class); '': none
    priority_class: str = ""


# The judgement is read from the pods' logs: a right held in the namespaces of the checks only (``grant_logs``).
LOG_RIGHT = Right("get", "", "pods", "log")


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
    # Seconds the API server's authorizer is given to hold the log RoleBinding just created (grant_logs).
    grant_wait: float = 30.0
    # What every check needs in a given namespace; each check adds its own (Check.rights).
    rights: Tuple[Right, ...] = (
        Right("get", "", "namespaces"),
        *grant("list watch create delete", "", "pods"),
        LOG_RIGHT,
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

    def run(self) -> Record:
        started = now_rfc3339()
        self.deadline = self.clock() + self.timeout
        outcome, failed_nodes, problems, preempted = OUTCOME_FAILED, [], {}, []
        details: Dict[str, Any] = {"namespace": self.namespace, "namespace_given": self.given}
        try:
            result = self.check.measure(self)
            outcome = OUTCOME_PASSED if result.passed else OUTCOME_FAILED
            summary, failed_nodes, problems = result.summary, result.failed_nodes, result.node_problems
            details.update(result.details)
        except CheckFailed as exc:
            summary, failed_nodes, problems = exc.summary, exc.failed_nodes, exc.node_problems
            details.update(exc.details)
        except Preempted as exc:  # a tenant took the tray: nothing was measured there, nothing is wrong with it
            outcome, summary = OUTCOME_INCOMPLETE, exc.summary
            details["preempted_nodes"] = preempted = exc.nodes or list(self.plan.nodes)
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
        return completed(
            record_for(
                self.check.name,
                self.plan,
                outcome,
                summary,
                details,
                failed_nodes,
                problems,
                self.settings.run_id,
                self.settings.allow_incomplete,
                preempted,
            ),
            started,
            now_rfc3339(),
            self.settings.cluster,
            objects_left=None if uncounted else left,
            objects_uncounted=uncounted,
            cleanup_error="; ".join(cleanup_errors),
            timings=self.timings,
        )

    # -- steps the checks share --------------------------------------------------------------------

    def remaining(self) -> float:
        return max(self.deadline - self.clock(), 1.0)

    def wait_for(
        self,
        what: str,
        probe: Callable[[], Any],
        describe: Optional[Callable[[], str]] = None,
        delay: Union[float, Backoff, None] = None,
    ) -> Any:
        """Poll ``probe`` until it returns something truthy, ``delay`` apart (default: the run's poll interval);
        past the deadline the check fails, naming ``what``."""
        return self.timed(f"wait: {what}", lambda: self._wait_for(what, probe, describe, delay))

    def _wait_for(
        self,
        what: str,
        probe: Callable[[], Any],
        describe: Optional[Callable[[], str]],
        delay: Union[float, Backoff, None] = None,
    ) -> Any:
        started = self.clock()
        pause = self.settings.poll if delay is None else delay
        try:
            return api_poll(probe, bool, self.deadline - started, pause, self.sleep, self.clock, started=started)
        except WaitTimeout as exc:
            waited = self.clock() - started
            extra = f"; {describe()}" if describe else ""
            raise CheckFailed(f"{what}: still not done after {exc.reads} reads ({waited:.0f} s){extra}") from None

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
        if self.settings.priority_class:
            self.timed("ensure the PriorityClass", self.ensure_priority_class)
        if self.given:
            self.timed("check the given namespace", self._check_given_namespace)
        else:
            self.timed("create the namespace", self._create_namespace)

    def ensure_priority_class(self) -> None:
        """The checks' PriorityClass exists before any pod names it (the API refuses a pod naming a class that does
        not exist): read, and created when absent (docs/rbac/verify-stage*.yaml hold it for an identity that may
        only read it)."""
        name = self.settings.priority_class
        try:
            if self.api.get("PriorityClass", PRIORITY_API_VERSION, name) is not None:
                return
            self.api.create(priority_class_manifest(name))
        except ApiUnavailable as exc:
            if " 403" not in f" {exc}" and "forbidden" not in str(exc).lower():
                raise
            raise NotRun(
                f"PriorityClass {name} of the checks' pods could not be read or created ({exc}): apply "
                f"docs/rbac/verify-stage.yaml (it holds PriorityClass gpu-fabric-verify), create {name}, or set "
                "gpu_fabric_verify_priority_class to '' (the cluster's default priority)"
            ) from None

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
        self.grant_logs()
        self.copy_pull_secrets()
        # the API refuses pods until kube-controller-manager made the namespace's default ServiceAccount, which
        # it does within milliseconds: read again after 0.05 s, then twice as long each time up to the poll
        # interval, rather than a whole interval (1 s of every check on every rack, when the first read missed)
        self.wait_for(
            f"the default ServiceAccount of namespace {self.namespace}",
            lambda: self.api.get("ServiceAccount", "v1", "default", self.namespace),
            delay=Backoff(0.05, 2.0, self.settings.poll),
        )
        if self.settings.openshift:
            self.uid_range = self.read_uid_range()

    def grant_logs(self) -> None:
        """The logs of the pods in the namespace it just created, readable by this identity: already (an admin, or
        an older grant of pods/log cluster-wide), else through a RoleBinding of ClusterRole gpu-fabric-verify-logs
        to itself there (docs/rbac/verify-stage.yaml), which goes with the namespace; waited for until the API
        server's authorizer holds it, so that no log read is refused later."""
        if self.api.can(LOG_RIGHT, self.namespace):
            return
        user = self.api.username()
        labels = common_labels(self.check.name, self.plan.name, self.settings.run_id)
        try:
            self.api.create(log_reader_binding(self.namespace, user, labels))
        except ApiUnavailable as exc:
            if not refused(exc):
                raise
            raise NotRun(
                f"{user} may not read the logs of the check's pods in namespace {self.namespace}, nor bind ClusterRole "
                f"{LOG_READER_ROLE} to itself there: apply docs/rbac/verify-stage.yaml again (it holds that role and "
                f"the right to bind it); server: {exc}"
            ) from None
        started = self.clock()
        try:
            api_poll(
                lambda: self.api.can(LOG_RIGHT, self.namespace, again=True),
                bool,
                self.grant_wait,
                Backoff(0.05, 2.0, self.settings.poll),
                self.sleep,
                self.clock,
                started=started,
            )
        except WaitTimeout as exc:
            raise NotRun(
                f"RoleBinding {self.namespace}/{LOG_READER_ROLE} still does not let {user} read the logs there after "
                f"{exc.reads} reads ({self.clock() - started:.0f} s): is ClusterRole {LOG_READER_ROLE} of "
                "docs/rbac/verify-stage.yaml applied, with its rule unchanged?"
            ) from None

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
        started = self.clock()
        try:
            return api_poll(
                lambda: openshift.namespace_uid_range(self.api.get("Namespace", "v1", self.namespace)),
                lambda found: found is not None,
                self.settings.openshift_annotation_wait,
                min(self.settings.poll, 1.0),
                self.sleep,
                self.clock,
                started=started,
            )
        except WaitTimeout as exc:
            raise NotRun(
                f"namespace {self.namespace} has no {openshift.UID_RANGE_ANNOTATION} annotation after "
                f"{exc.reads} reads ({self.clock() - started:.0f} s): OpenShift's namespace controller (in "
                "openshift-controller-manager) did not annotate it; check that it runs"
            ) from None

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
            wrapped=(cd.ComputeDomainError,),
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

        def read() -> str:
            nonlocal last
            try:
                return self.api.log(pod, self.namespace)
            except ApiUnavailable as exc:
                if "no logs" not in str(exc).lower() and " 400 " not in f" {exc} ":
                    raise
                last = str(exc)
                return ""

        try:
            return api_poll(read, lambda text: bool(text.strip()), None, 1.0, self.sleep, attempts=reads)
        except WaitTimeout:
            raise ApiUnavailable(
                f"read the log of the finished pod {self.namespace}/{pod} after {reads} tries ({one_line(last)})"
            ) from None

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
