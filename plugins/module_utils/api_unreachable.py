# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""What to do about an API server that does not answer, said the same way by every module that meets one (a
leaf: it imports nothing, so the pure judges that word it load no client).

The first half of the line, where the call went, for how long and why nothing answered
(``cannot reach the Kubernetes API at https://10.0.0.1:6443 for 90 s: connection refused``), is
``k8s.api_failure_text``'s; this is the second.
"""

from __future__ import annotations

ADVICE = (
    "check that the API server runs and that the kubeconfig (gpu_fabric_kubeconfig, K8S_AUTH_KUBECONFIG) or the host "
    "options point at it, then run it again"
)


def unreachable_line(reason: str) -> str:
    """``reason`` (``k8s.api_failure_text`` of the failure) and what to do about it, in one line."""
    return f"{reason or 'cannot reach the Kubernetes API'}; {ADVICE}"
