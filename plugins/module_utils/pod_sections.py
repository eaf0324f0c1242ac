# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""How a check's pod marks the sections of its log, and how the check reads them back (a leaf).

A tray pod (gpu_health, dcgm_diag) runs several commands; each one's output is printed between two marker lines,
the second with the command's exit status::

    #### gpu-fabric begin nvidia-smi -q -x
    <the command's output>
    #### gpu-fabric end nvidia-smi -q -x rc=0

so that the check judges each command by what it printed and how it ended, and a command that never ended (the
pod killed, the log cut) is told apart from one that failed. The sim's stand-in programs print the same lines
(``sim/simrack/programs``; a unit test holds them to this module).
"""

from __future__ import annotations

import re
from typing import Dict, Optional, Tuple

MARK = "#### gpu-fabric"
_LINE = re.compile(rf"^{re.escape(MARK)} (begin|end) ([^\n]+?)(?: rc=(-?\d+))?$", re.M)


def section_script(name: str, command: str, keep_status: bool = False) -> str:
    """The shell text that runs ``command`` between the markers of section ``name``; with ``keep_status`` its exit
    status stays in ``$rc`` for what follows (``exit $rc``)."""
    if keep_status:
        return f"echo '{MARK} begin {name}'; {command}; rc=$?; echo \"{MARK} end {name} rc=$rc\""
    return f"echo '{MARK} begin {name}'; {command}; echo \"{MARK} end {name} rc=$?\""


def sections(log: str) -> Dict[str, Tuple[str, Optional[int]]]:
    """The output of each section of a pod's log: name -> (text, exit status; None when it did not end).

    An end line without its status proves nothing: its section counts as not ended."""
    found: Dict[str, Tuple[str, Optional[int]]] = {}
    begun: Dict[str, int] = {}
    for match in _LINE.finditer(log):
        kind, name = match.group(1), match.group(2)
        if kind == "begin":
            begun[name] = match.end() + 1
        elif name in begun and match.group(3) is not None:
            found[name] = (log[begun.pop(name) : match.start()], int(match.group(3)))
    for name, start in begun.items():
        found[name] = (log[start:], None)
    return found
