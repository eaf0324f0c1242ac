# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The collection's one rule for waiting and retrying (``retry``), and the API's errors bound to it (``k8s.api_poll``,
``k8s.api_retry``): which are read again, the pauses, the deadline, the attempts."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import k8s, retry
from fake_clock import Clock
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic.exceptions import DynamicApiError, api_exception
from urllib3.exceptions import MaxRetryError, NewConnectionError


def api_error(status):
    """The dynamic client's exception for an HTTP answer, built the way the client builds it."""
    reason = "Service Unavailable" if status >= 500 else "Forbidden"
    return api_exception(ApiException(status=status, reason=reason))


def test_poll_returns_once_the_judge_holds():
    clock = Clock()
    reads = iter(["", "a Pending", "a Ready"])
    found = k8s.api_poll(
        lambda: next(reads), lambda read: read.endswith("Ready"), 60, 5, sleep=clock.sleep, clock=clock
    )
    assert found == "a Ready" and clock.slept == [5, 5]


def test_poll_times_out_with_the_last_read():
    clock = Clock()
    with pytest.raises(retry.WaitTimeout) as caught:
        k8s.api_poll(lambda: "a Running", lambda read: False, 12, 5, sleep=clock.sleep, clock=clock)
    assert caught.value.last == "a Running"
    # the last pause is cut short: the last read is at the deadline, not one delay after it
    assert (clock.slept, clock.now, caught.value.reads) == ([5, 5, 2], 12, 4)


def test_poll_reads_again_after_a_transient_error_and_not_after_a_refusal():
    clock = Clock()
    outcomes = iter([api_error(503), MaxRetryError(None, "/api", NewConnectionError(None, "refused")), ["ok"]])

    def read():
        outcome = next(outcomes)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    assert k8s.api_poll(read, bool, 60, 2, sleep=clock.sleep, clock=clock) == ["ok"]
    assert clock.slept == [2, 2]

    def refused():
        raise api_error(403)

    with pytest.raises(DynamicApiError):
        k8s.api_poll(refused, bool, 60, 2, sleep=clock.sleep, clock=clock)
    assert clock.slept == [2, 2]  # not read again


def test_poll_gives_up_on_transient_errors_at_the_deadline():
    clock = Clock()

    def read():
        raise api_error(503)

    with pytest.raises(DynamicApiError):
        k8s.api_poll(read, bool, 10, 4, sleep=clock.sleep, clock=clock)
    assert (clock.slept, clock.now) == ([4, 4, 2], 10)


# ---------------------------------------------------------------------------------------------
# The one rule of every wait and retry: pauses (fixed or a Backoff) cut at the deadline, attempts
# ---------------------------------------------------------------------------------------------


def failing(*outcomes):
    """A call that raises or returns each of ``outcomes`` in turn, counting its calls."""
    pending = list(outcomes)

    def call():
        call.calls += 1
        outcome = pending.pop(0) if pending else outcomes[-1]
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    call.calls = 0
    return call


def test_a_backoff_doubles_up_to_its_cap_and_a_number_is_a_fixed_pause():
    pauses = retry.Backoff(1.0, 2.0, 10.0).pauses()
    assert list(itertools.islice(pauses, 7)) == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0, 10.0]
    pauses = retry.Backoff(0.5, 2.0, 2.0).pauses()
    assert list(itertools.islice(pauses, 4)) == [0.5, 1.0, 2.0, 2.0]
    pauses = retry.Backoff(3.0).pauses()
    assert list(itertools.islice(pauses, 3)) == [3.0, 3.0, 3.0]


def test_retry_backs_off_until_the_patience_and_tries_once_more_at_its_end():
    clock = Clock()
    call = failing(api_error(503))
    with pytest.raises(DynamicApiError):
        k8s.api_retry(call, 60, retry.Backoff(1.0, 2.0, 10.0), sleep=clock.sleep, clock=clock)
    assert clock.slept == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0, 10.0, 10.0, 5.0]
    assert (clock.now, call.calls) == (60, 10)


def test_retry_returns_the_first_answer_and_raises_a_refusal_at_once():
    clock = Clock()
    call = failing(api_error(503), ConnectionRefusedError(), "answer")
    assert k8s.api_retry(call, 60, 2.0, sleep=clock.sleep, clock=clock) == "answer"
    assert (clock.slept, call.calls) == ([2.0, 2.0], 3)
    refused = failing(api_error(403))
    with pytest.raises(DynamicApiError):
        k8s.api_retry(refused, 60, 2.0, sleep=pytest.fail, clock=clock)
    assert refused.calls == 1


def test_attempts_alone_bound_a_retry_without_a_deadline_and_read_no_clock():
    def no_clock():
        pytest.fail("the clock was read")

    slept = []
    call = failing(api_error(503))
    with pytest.raises(DynamicApiError):
        k8s.api_retry(call, None, retry.Backoff(0.5, 2.0, 2.0), sleep=slept.append, clock=no_clock, attempts=4)
    assert (slept, call.calls) == ([0.5, 1.0, 2.0], 4)


def test_a_zero_pause_retries_without_sleeping():
    def conflict(exc):
        return getattr(exc, "status", 0) == 409

    call = failing(api_error(409), api_error(409), "written")
    assert k8s.api_retry(call, None, 0.0, sleep=pytest.fail, transient=conflict, attempts=5) == "written"
    assert call.calls == 3


def test_a_poll_bounded_by_attempts_times_out_with_its_reads():
    slept = []
    with pytest.raises(retry.WaitTimeout) as caught:
        k8s.api_poll(lambda: "", bool, None, 1.0, sleep=slept.append, attempts=3)
    assert (caught.value.last, caught.value.reads, slept) == ("", 3, [1.0, 1.0])


def test_the_deadline_counts_from_when_the_caller_started():
    clock = Clock()
    clock.now = 100.0
    with pytest.raises(retry.WaitTimeout) as caught:
        k8s.api_poll(lambda: None, bool, 10, 3, sleep=clock.sleep, clock=clock, started=95.0)
    assert (clock.slept, clock.now, caught.value.reads) == ([3, 2], 105.0, 3)


def test_a_deadline_already_passed_reads_once():
    clock = Clock()
    with pytest.raises(retry.WaitTimeout) as caught:
        k8s.api_poll(lambda: None, bool, -5, 3, sleep=pytest.fail, clock=clock)
    assert caught.value.reads == 1


class Wrapped(Exception):
    """An error of our own raised from an API error (as the ComputeDomain helpers raise theirs)."""


def test_errors_widen_what_is_tried_again_and_transient_still_decides():
    clock = Clock()
    transient = Wrapped("read failed")
    transient.__cause__ = api_error(503)
    call = failing(transient, "ok")
    with pytest.raises(Wrapped):  # not one of the API errors: raised at once
        k8s.api_retry(call, 60, 1.0, sleep=clock.sleep, clock=clock)
    call = failing(transient, "ok")
    assert k8s.api_retry(call, 60, 1.0, sleep=clock.sleep, clock=clock, errors=(DynamicApiError, Wrapped)) == "ok"
    refused = Wrapped("refused")
    refused.__cause__ = api_error(403)
    with pytest.raises(Wrapped):
        k8s.api_retry(failing(refused), 60, 1.0, sleep=pytest.fail, clock=clock, errors=(Wrapped,))
    assert clock.slept == [1.0]


def test_a_bug_in_the_read_is_never_retried():
    call = failing(KeyError("name"))
    with pytest.raises(KeyError):
        k8s.api_poll(call, bool, 60, 1.0, sleep=pytest.fail, clock=Clock())
    assert call.calls == 1


def test_the_rule_is_a_leaf_and_retries_only_what_its_caller_names():
    source = Path(retry.__file__).read_text(encoding="utf-8")
    assert "ansible_collections" not in source.split('"""', 2)[2]
    call = failing(ConnectionRefusedError(), "answer")
    with pytest.raises(ConnectionRefusedError):  # no error is worth another try unless the caller says so
        retry.retry(call, 60, 1.0, sleep=pytest.fail, clock=Clock())
    call = failing(ConnectionRefusedError(), "answer")
    clock = Clock()
    named = retry.retry(call, 60, 1.0, sleep=clock.sleep, clock=clock, transient=bool, errors=(ConnectionError,))
    assert (named, call.calls) == ("answer", 2)
