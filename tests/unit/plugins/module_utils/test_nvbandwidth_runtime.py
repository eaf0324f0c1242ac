# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

import pytest
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import nvbandwidth_runtime as rt


def test_two_h200_read_ce_models_the_measured_process_time():
    # measured on a real 2x H200 (driver 580, nvbandwidth v0.8, 512 MiB): 1.0-1.2 s, start-up included
    estimate = rt.modelled_seconds("device_to_device_memcpy_read_ce", 2, 512, 3, 394.0)
    assert estimate.pairs == 2 and estimate.steps == 2
    assert estimate.inputs["copies_per_pair"] == 60  # 3 samples x (16 timed + 4 warm-up copies)
    assert estimate.inputs["copy_s"] == pytest.approx(0.0818, abs=1e-4)  # 60 x 512 MiB / 394 GB/s
    assert estimate.per_pair_s == pytest.approx(0.1818, abs=1e-4)
    assert 1.0 <= estimate.seconds <= 1.2
    assert estimate.seconds == pytest.approx(1.1635, abs=1e-3)


def test_two_h200_host_to_device_models_the_measured_process_time():
    estimate = rt.estimate_for("host_to_device_memcpy_ce", 2, product="NVIDIA-H200")
    assert estimate.inputs["pair_gbps"] == rt.HOST_GBPS
    assert estimate.pairs == 2
    assert estimate.seconds == pytest.approx(2.5, abs=0.05)


def test_full_nvl72_pairwise_read_ce():
    estimate = rt.estimate_for("multinode_device_to_device_memcpy_read_ce", 72, product="NVIDIA-GB200")
    assert estimate.pairs == 5112 and estimate.steps == 5112
    assert estimate.inputs["pair_gbps"] == 820.0
    assert estimate.inputs["copy_s"] == pytest.approx(0.0393, abs=1e-4)
    # 0.02 step + 2 buffers x (0.04 + 0.025 MPI) + 0.0393 copies
    assert estimate.per_pair_s == pytest.approx(0.1893, abs=1e-4)
    assert estimate.seconds == pytest.approx(977.6, abs=0.1)
    assert rt.wait_seconds(estimate) == 2856  # 900 + 2 x 977.6, rounded up


def test_bidirectional_pays_four_buffers_per_pair():
    one_way = rt.estimate_for("multinode_device_to_device_memcpy_read_ce", 72, product="GB200")
    both = rt.estimate_for("multinode_device_to_device_bidirectional_memcpy_read_ce", 72, product="GB200")
    assert both.pairs == one_way.pairs
    assert both.per_pair_s - one_way.per_pair_s == pytest.approx(2 * (0.04 + 0.025))


def test_bisect_is_one_step_of_every_gpu_at_once():
    estimate = rt.estimate_for("multinode_bisect_write_ce", 72, product="NVIDIA-GB200")
    assert (estimate.pairs, estimate.steps) == (72, 1)
    assert estimate.per_pair_s == pytest.approx(0.02 + 144 * 0.065 + 0.0393, abs=1e-3)
    assert estimate.seconds == pytest.approx(19.4, abs=0.1)


def test_buffer_and_samples_from_the_extra_args():
    options = rt.run_options(["--bufferSize", "64", "-i", "1", "--loopCount=8"])
    assert options == {"buffer_mib": 64.0, "iterations": 1.0, "loop_count": 8.0}
    small = rt.estimate_for("multinode_device_to_device_memcpy_read_ce", 72, ["-b", "64", "-i", "1"], "GB200")
    assert small.inputs["copies_per_pair"] == 20
    assert small.inputs["buffer_mib"] == 64.0
    # set-up, not copies, dominates a pair: an eighth of the buffer and a third of the samples saves little
    assert small.per_pair_s == pytest.approx(0.02 + 2 * (0.005 + 0.025) + 20 * 64 * 2**20 / 820e9, abs=1e-4)
    with pytest.raises(ValueError, match="--bufferSize is 'big'; expected a number"):
        rt.run_options(["-b", "big"])


def test_unknown_testcase_is_modelled_pairwise_and_says_so():
    estimate = rt.modelled_seconds("multinode_new_thing_ce", 8)
    assert estimate.pairs == 56
    assert estimate.inputs["assumed_shape"].startswith("pairwise")
    assert estimate.inputs["startup_s"] == rt.MULTINODE_STARTUP_S


def test_pair_bandwidth_by_product():
    assert rt.pair_gbps_for("NVIDIA-GB200") == 820.0
    assert rt.pair_gbps_for("NVIDIA-H200") == 394.0
    assert rt.pair_gbps_for("NVIDIA-GH200") == 394.0
    assert rt.pair_gbps_for("NVIDIA-L40S") == rt.FALLBACK_NVLINK_GBPS
    assert rt.pair_gbps_for("NVIDIA-GB200", "host_to_device_memcpy_ce") == rt.HOST_GBPS


def test_refuses_what_cannot_run():
    with pytest.raises(ValueError, match="gpus is 0"):
        rt.modelled_seconds("device_to_device_memcpy_read_ce", 0)
    with pytest.raises(ValueError, match="must be positive"):
        rt.modelled_seconds("device_to_device_memcpy_read_ce", 2, buffer_mib=0)


def test_plan_text_and_durations():
    estimate = rt.estimate_for("multinode_device_to_device_memcpy_read_ce", 72, product="NVIDIA-GB200")
    assert rt.plan_text(estimate, rt.wait_seconds(estimate)) == (
        "multinode_device_to_device_memcpy_read_ce on 72 GPUs: 5112 pairs in 5112 step(s) of 0.189 s, "
        "expected 16 min 18 s; waits up to 47 min 36 s"
    )
    assert rt.duration_text(42.4) == "42 s"
    assert rt.duration_text(3780) == "1 h 3 min"


def test_mode_table_rows():
    rows = {row["mode"]: row for row in rt.mode_table()}
    assert rows["full pairwise (default)"]["pairs"] == 5112
    assert rows["fast: bisect"]["seconds"] == pytest.approx(19.4, abs=0.1)
    assert rows["fast: bisect"]["wait_s"] == 939
