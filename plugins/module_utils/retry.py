# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The collection's one rule for waiting and retrying (a leaf: it imports nothing of the collection).

:func:`poll` reads until a judge holds; :func:`retry` tries a call again while it fails for a reason worth
another try. Both pause a fixed length or the next pause of a :class:`Backoff`, never past the deadline (the
last try is at the deadline), and make at most so many attempts where a count bounds them. Which errors are
worth another try is the caller's: ``k8s.api_poll`` and ``k8s.api_retry`` bind the Kubernetes API's (429, a
5xx, no answer), the Pushgateway's push its own. Every wait and retry of the collection goes through them; a
watch (``kube_watch``) is not a poll and keeps its own loop.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Optional, Tuple, Type, TypeVar, Union

T = TypeVar("T")


def never(_exc: BaseException) -> bool:
    """No error is worth another try (the default: a caller names the ones that are)."""
    return False


class WaitTimeout(Exception):
    """The judge was still unsatisfied at the deadline; ``last`` is what was read last, ``reads`` how many reads."""

    def __init__(self, last: Any, reads: int = 0) -> None:
        super().__init__("timed out")
        self.last = last
        self.reads = reads


@dataclass(frozen=True)
class Backoff:
    """The pauses between two tries: ``first``, then each ``factor`` times the one before, never above ``cap``.

    >>> pauses = Backoff(1.0, 2.0, 10.0).pauses()
    >>> [next(pauses) for _ in range(6)]
    [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]
    """

    first: float
    factor: float = 1.0
    cap: float = math.inf

    def pauses(self) -> Iterator[float]:
        pause = min(self.first, self.cap)
        while True:
            yield pause
            pause = min(pause * self.factor, self.cap)


class _Schedule:
    """When the next try starts: after the backoff's next pause, cut short at the deadline (the last try is at
    the deadline, never after it); none once the deadline has passed or every attempt was made."""

    def __init__(
        self,
        timeout: Optional[float],
        delay: Union[float, Backoff],
        attempts: int,
        clock: Callable[[], float],
        started: Optional[float],
    ) -> None:
        # no deadline (timeout None): no clock is read, the attempts alone bound the tries
        self.deadline = None if timeout is None else (clock() if started is None else started) + timeout
        self.pauses = (delay if isinstance(delay, Backoff) else Backoff(delay)).pauses()
        self.attempts = attempts
        self.clock = clock

    def pause(self, tries: int) -> Optional[float]:
        """The pause before the next try, after ``tries`` tries; None: no try is left."""
        if self.attempts and tries >= self.attempts:
            return None
        pause = next(self.pauses)
        if self.deadline is not None:
            left = self.deadline - self.clock()
            if left <= 0:
                return None
            pause = min(pause, left)
        return pause


def poll(
    read: Callable[[], T],
    done: Callable[[T], bool],
    timeout: Optional[float],
    delay: Union[float, Backoff],
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    transient: Callable[[BaseException], bool] = never,
    *,
    attempts: int = 0,
    started: Optional[float] = None,
    errors: Tuple[Type[BaseException], ...] = (),
) -> T:
    """``read()`` until ``done`` holds for what it returns, for at most ``timeout`` seconds from ``started`` (now
    when not given; None: no deadline) and at most ``attempts`` reads (0: no bound).

    The collection's one rule for waiting and retrying. Between two reads it pauses ``delay`` seconds, or the
    next pause of a :class:`Backoff`; a pause never runs past the deadline, so the last read is at the deadline.
    A read that fails with one of ``errors`` that ``transient`` calls passing (for the API: 429, a 5xx, no
    answer; ``k8s.api_poll``) is tried again the same way; once no try is left, its error propagates. Any other
    error propagates at once. A judge still unsatisfied when no read is left raises :class:`WaitTimeout` with the
    last value read.
    """
    schedule = _Schedule(timeout, delay, attempts, clock, started)
    reads = 0
    while True:
        reads += 1
        try:
            value = read()
        except errors as exc:  # pylint: disable=catching-non-exception  # a tuple of exception classes
            pause = schedule.pause(reads) if transient(exc) else None
            if pause is None:
                raise
            _pause(sleep, pause)
            continue
        if done(value):
            return value
        pause = schedule.pause(reads)
        if pause is None:
            raise WaitTimeout(value, reads)
        _pause(sleep, pause)


def _pause(sleep: Callable[[float], None], seconds: float) -> None:
    if seconds > 0:  # a retry without a pause (a conflict answered by a fresh read) sleeps not at all
        sleep(seconds)


def retry(
    call: Callable[[], T],
    patience: Optional[float],
    delay: Union[float, Backoff],
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    transient: Callable[[BaseException], bool] = never,
    *,
    attempts: int = 0,
    started: Optional[float] = None,
    errors: Tuple[Type[BaseException], ...] = (),
) -> T:
    """``call()``, tried again under :func:`poll`'s rule while it fails transiently, for at most ``patience``
    seconds (None: no bound) and ``attempts`` tries (0: no bound); the error of the last try propagates, as
    does at once an error that is not transient."""
    return poll(
        call,
        lambda _value: True,
        patience,
        delay,
        sleep,
        clock,
        transient,
        attempts=attempts,
        started=started,
        errors=errors,
    )
