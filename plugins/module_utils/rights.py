# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What an identity must be allowed to do, as RBAC grants it: one verb on one kind (``Right``), asked of the API
server by ``kube_api.Api.can`` and named by the checks (``Check.rights``) without their importing the client."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Tuple


@dataclass(frozen=True)
class Right:
    """One verb on one kind in a namespace, as RBAC grants it (docs/rbac/verify-stage-namespaced.yaml)."""

    verb: str
    group: str
    resource: str
    subresource: str = ""

    def __str__(self) -> str:
        kind = f"{self.resource}/{self.subresource}" if self.subresource else self.resource
        return f"{self.verb} {kind}" + (f".{self.group}" if self.group else "")


def grant(verbs: str, group: str, resource: str, subresource: str = "") -> Tuple[Right, ...]:
    return tuple(Right(verb, group, resource, subresource) for verb in verbs.split())
