# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The words of a record's outcome and verdict, and the rule between them (a leaf: it imports nothing).

The writer of a record (``record``), its readers (``report_records``, the report, the metrics, the history) and
the Node state (``node_verdict``, ``tray_state``) take them from here, so that a word has one home.
"""

from __future__ import annotations

PASSED = "passed"
FAILED = "failed"
# The check ran on fewer trays than a rack needs for the verdict (a rack left with one tray).
INCOMPLETE = "incomplete"
# The check could not run or finish: says nothing of the fabric.
ERROR = "error"
OUTCOMES = (PASSED, FAILED, INCOMPLETE, ERROR)
# What a record says of its rack (``verdict_of``): an incomplete outcome is a failure unless its check allows it.
VERDICTS = (PASSED, FAILED, ERROR)


def verdict_of(outcome: str, passed: bool) -> str:
    """A record's verdict: ``error`` when its check could not run or finish, else passed or failed."""
    if outcome == ERROR:
        return ERROR
    return PASSED if passed else FAILED
