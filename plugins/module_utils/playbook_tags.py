# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The tags of the collection's playbooks, in one list, and what a run's ``--tags`` and ``--skip-tags`` select.

Ansible runs nothing for a tag that no task has, and says nothing: ``--tags nvbandwith`` ends with every play
skipped and exit status 0. The playbooks' first play holds the run's tags to this list (``tag_problems``), so a tag
that selects nothing is named in one line before anything runs. A run that selects no host-stage tag does not touch
the trays at all (``host_stage_selected``): ``playbooks/hosts.yml`` picks no host then, so the host roles' argument
validation (about 20 s per 18 trays) is not run on every tray for ``--tags cluster`` or ``--tags nvbandwidth``.
``tests/unit/test_playbook_tags.py`` holds this list to what ``ansible-playbook --list-tags`` shows.
"""

from __future__ import annotations

import difflib
from typing import Dict, List, Sequence, Tuple

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.check_catalog import CHECK_NAMES

# Ansible's own tags: always and never mark tasks; all, tagged and untagged select.
ANSIBLE_TAGS = ("all", "always", "never", "tagged", "untagged")
# What Molecule skips in every playbook it runs (converge, check, idempotence): tags a test marks tasks with, so a
# playbook that has none is right to be run with them.
MOLECULE_SKIP_TAGS = ("molecule-notest", "notest", "molecule-idempotence-notest")
HOST_STAGE = ("hosts", "preflight", "nvidia_driver", "containerd", "nvidia_imex")
CLUSTER_STAGE = ("cluster", "cluster_preflight", "gpu_operator", "dra_driver", "mpi_operator")
GPU_CHECKS = ("gpus",)
# the checks with roles of their own, each under its name and its role's; the other checks run in verify_checks
VERIFY_STAGE = (
    "verify",
    "cliques",
    "verify_cliques",
    "imex_channel",
    "verify_imex_channel",
    "nvbandwidth",
    "verify_nvbandwidth",
    "nccl",
    "verify_nccl",
    "verify_checks",
    "report",
)
OTHER_PLAYBOOKS = ("schedule", "verify_schedule", "refresh_state", "uninstall")


def check_tags() -> Tuple[str, ...]:
    """The checks of the registry that run in the role verify_checks, each selected by its name as a tag."""
    return tuple(name for name in CHECK_NAMES if name not in VERIFY_STAGE)


def playbook_tags() -> Tuple[str, ...]:
    """Every tag that selects something in the collection's playbooks (Ansible's own apart)."""
    return HOST_STAGE + CLUSTER_STAGE + GPU_CHECKS + VERIFY_STAGE + check_tags() + OTHER_PLAYBOOKS


def tag_problems(run_tags: Sequence[str], skip_tags: Sequence[str]) -> List[str]:
    """One line per tag of ``--tags`` or ``--skip-tags`` that no task of the playbooks has, with the nearest tag."""
    known = playbook_tags()
    problems = []
    options: Dict[str, Sequence[str]] = {"--tags": run_tags, "--skip-tags": skip_tags}
    for option, given in options.items():
        for tag in dict.fromkeys(str(t) for t in given or []):
            if tag in known or tag in ANSIBLE_TAGS or (option == "--skip-tags" and tag in MOLECULE_SKIP_TAGS):
                continue
            close = difflib.get_close_matches(tag, known, n=1, cutoff=0.6)
            hint = f" (did you mean {close[0]}?)" if close else ""
            problems.append(
                f"{option} names {tag!r}, which no task of the gpu_fabric.mnnvl playbooks has, so it selects "
                f"nothing{hint}; the tags are {', '.join(known)}"
            )
    return problems


def host_stage_selected(run_tags: Sequence[str], skip_tags: Sequence[str]) -> bool:
    """Whether a run with these tags runs a host role on the trays: no ``--tags`` (or ``all``, ``tagged``), a
    host-stage tag, or a tag of none of the collection's playbooks (a site's own, on the play that imports one;
    ``gpu_fabric_check_tags: false``); and ``--skip-tags`` leaves a host role to run."""
    run = set(str(t) for t in run_tags or [])
    skip = set(str(t) for t in skip_tags or [])
    if "hosts" in skip or set(HOST_STAGE[1:]) <= skip:
        return False
    if not run or run & {"all", "tagged"} or run - set(playbook_tags()) - set(ANSIBLE_TAGS):
        return True
    if "hosts" in run:
        return True
    return bool(run & (set(HOST_STAGE[1:]) - skip))


def once_per_fleet(problems_by_host: Dict[str, Sequence[str]]) -> List[str]:
    """Each problem the trays' variable checks found, once, in the order first found; one that not every tray has
    names the trays that have it (a host variable), so a group variable's mistake is one line, not one per tray."""
    hosts_of: Dict[str, List[str]] = {}
    for host, problems in problems_by_host.items():
        for problem in problems or []:
            hosts_of.setdefault(str(problem), []).append(str(host))
    return [
        problem if len(hosts) == len(problems_by_host) else f"{problem} (on {', '.join(hosts)})"
        for problem, hosts in hosts_of.items()
    ]
