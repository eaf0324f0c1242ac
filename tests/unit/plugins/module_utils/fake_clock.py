# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The clock the waits and retries are given in the tests (``clock``, ``sleep``): it moves only when slept, so a
wait takes no time, and every pause is kept in ``slept``."""

from __future__ import annotations

from typing import List


class Clock:
    def __init__(self, now: float = 0.0) -> None:
        self.now = now
        self.slept: List[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds
