# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""bench/containerd_check_mode.py: its configs are what containerd would load, and its largest fits the limit."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.containerd_edit import edit_config
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.containerd_toml import (
    ContainerdRequest,
    parse_config,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.files import MAX_CONFIG_BYTES

BENCH = Path(__file__).resolve().parents[3] / "bench" / "containerd_check_mode.py"
sys.path.insert(0, str(BENCH.parent))  # as when the script runs: its helpers beside it
_SPEC = importlib.util.spec_from_file_location("containerd_check_mode", BENCH)
containerd_check_mode = sys.modules.setdefault("containerd_check_mode", importlib.util.module_from_spec(_SPEC))
_SPEC.loader.exec_module(containerd_check_mode)


def test_the_config_holds_each_runtime_and_the_largest_default_size_is_under_the_read_limit():
    text = containerd_check_mode.config(3)
    runtimes = parse_config(text, "config.toml").unwrap()["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]
    assert sorted(runtimes["runtimes"]) == ["sandbox-00000", "sandbox-00001", "sandbox-00002"]
    assert runtimes["runtimes"]["sandbox-00001"]["options"]["SystemdCgroup"] is False
    assert (
        len(containerd_check_mode.config(3600).encode())
        <= MAX_CONFIG_BYTES
        < len(containerd_check_mode.config(3800).encode())
    )


def test_the_edit_it_times_changes_the_keys_the_containerd_role_sets():
    request = ContainerdRequest(enable_cdi=True, cdi_spec_dirs=["/etc/cdi", "/var/run/cdi"], systemd_cgroup=True)
    edited = edit_config(containerd_check_mode.config(20), "/etc/containerd/config.toml", request)
    assert len(edited.changed_keys) == 4
    assert edited.text.count("SystemdCgroup = false") == 20  # runtimes the role does not name are left alone
