# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

import pytest
from ansible_collections.gpu_fabric.mnnvl.plugins.filter.mnnvl import FilterModule
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.kernel_cmdline import (
    GRACE_KERNEL_ARGS,
    grub_dropin,
    missing_kernel_args,
    parse_cmdline,
)

# The /proc/cmdline that NVIDIA's Grace CPU Benchmarking Guide shows (Platform Configuration).
GUIDE_CMDLINE = (
    "BOOT_IMAGE=/boot/vmlinuz-6.2.0-1012-nvidia-64k root=UUID=76c84c6d-a59f-4a8d-903e-4cb9ef69b970 ro"
    " rd.driver.blacklist=nouveau nouveau.modeset=0 earlycon module_blacklist=nouveau acpi_power_meter.force_cap_on=y"
    " numa_balancing=disable init_on_alloc=0 preempt=none\n"
)
# A stock Ubuntu 24.04 arm64 command line.
STOCK_CMDLINE = "BOOT_IMAGE=/vmlinuz-6.8.0-1008-nvidia-64k root=/dev/mapper/ubuntu--vg-ubuntu--lv ro quiet splash\n"


def test_parse_cmdline_flags_values_and_last_wins():
    args = parse_cmdline("ro quiet init_on_alloc=1 init_on_alloc=0 root=UUID=x=y\n")
    assert args == {"ro": None, "quiet": None, "init_on_alloc": "0", "root": "UUID=x=y"}


def test_the_guide_command_line_has_every_grace_setting():
    assert missing_kernel_args(GUIDE_CMDLINE, GRACE_KERNEL_ARGS) == []


def test_a_stock_command_line_misses_them_in_order():
    assert missing_kernel_args(STOCK_CMDLINE, GRACE_KERNEL_ARGS) == list(GRACE_KERNEL_ARGS)
    assert missing_kernel_args("init_on_alloc=1 numa_balancing=disable", GRACE_KERNEL_ARGS) == [
        "init_on_alloc=0",
        "acpi_power_meter.force_cap_on=y",
    ]
    assert missing_kernel_args("quiet", ["quiet", "earlycon"]) == ["earlycon"]


def test_grub_dropin_appends_and_refuses_shell_characters():
    assert grub_dropin(["init_on_alloc=0", "numa_balancing=disable"]).endswith(
        'GRUB_CMDLINE_LINUX="$GRUB_CMDLINE_LINUX init_on_alloc=0 numa_balancing=disable"\n'
    )
    with pytest.raises(ValueError, match="has a blank"):
        grub_dropin(['init_on_alloc=0"; reboot; "'])


def test_filters():
    filters = FilterModule().filters()
    assert filters["kernel_args_missing"](STOCK_CMDLINE, ["ro", "init_on_alloc=0"]) == ["init_on_alloc=0"]
    assert "GRUB_CMDLINE_LINUX=" in filters["grub_cmdline_dropin"](["init_on_alloc=0"])
