# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

from typing import Any, Optional

from ansible.errors import AnsibleFilterError
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.nccl import DEFAULT_JUDGED_MIN_BYTES, nccl_tests_summary


def nccl_tests_parse(
    text: Any,
    min_busbw_gbps: Optional[float] = None,
    expected_ranks: Optional[int] = None,
    min_bytes: Optional[int] = None,
) -> dict[str, Any]:
    """Parse nccl-tests output (all_reduce_perf and siblings) and judge it; see nccl_tests_parse.yml."""
    if not isinstance(text, str):
        raise AnsibleFilterError(
            f"nccl_tests_parse expects the benchmark's output as a string, got {type(text).__name__}; "
            "pass the launcher log, e.g. log.log or log.log_lines | join('\\n')"
        )
    try:
        threshold = None if min_busbw_gbps is None else float(min_busbw_gbps)
        ranks = None if expected_ranks is None else int(expected_ranks)
        sizes = DEFAULT_JUDGED_MIN_BYTES if min_bytes is None else int(min_bytes)
        return nccl_tests_summary(text, min_busbw_gbps=threshold, expected_ranks=ranks, min_bytes=sizes)
    except ValueError as exc:
        raise AnsibleFilterError(f"nccl_tests_parse: {exc}") from exc


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"nccl_tests_parse": nccl_tests_parse}
