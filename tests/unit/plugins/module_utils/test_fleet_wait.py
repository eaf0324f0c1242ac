# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The check's wait per rack: the site's timeout, or the nvbandwidth run-time model's; and the plan's line."""

from __future__ import annotations

import pytest
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import fleet, rack_run
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.checks import base
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.checks import imex_channel as imex_check
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.checks import nvbandwidth as nvbandwidth_check
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.rack_plan import RackPlan
from fake_clock import Clock
from mpi_settings import MPI

READ_CE = "multinode_device_to_device_memcpy_read_ce"


def nvl72(trays: int = 18, product: str = "NVIDIA-GB200") -> RackPlan:
    nodes = [f"t{i}" for i in range(trays)]
    return RackPlan("rack0", ["c.1"], nodes, nodes, [], 4, product)


def nvbandwidth(testcase: str = READ_CE, extra_args=()) -> nvbandwidth_check.NvbandwidthCheck:
    return nvbandwidth_check.NvbandwidthCheck("img", MPI, testcase, list(extra_args), lambda *a: {})


def test_the_default_wait_of_a_full_nvl72_follows_from_the_model():
    # 900 s allowance + 2 x 977.6 s modelled (5,112 pairs x 0.1893 s + 10 s start-up), rounded up
    assert nvbandwidth().timeout(nvl72(), 0) == 2856.0


def test_the_wait_grows_with_the_rack_and_the_buffer():
    two_trays = nvbandwidth().timeout(nvl72(2), 0)  # 8 GPUs: 56 pairs
    assert two_trays == pytest.approx(900 + 2 * (10 + 56 * 0.1893), abs=1)
    bigger = nvbandwidth(extra_args=["--bufferSize", "4096"]).timeout(nvl72(), 0)
    assert bigger > nvbandwidth().timeout(nvl72(), 0) + 2000


def test_the_bisect_mode_waits_little_more_than_the_allowance():
    assert nvbandwidth("multinode_bisect_write_ce").timeout(nvl72(), 0) == 939.0


def test_the_sites_timeout_wins():
    assert nvbandwidth().timeout(nvl72(), 1200) == 1200


def test_a_check_without_a_model_keeps_900():
    assert imex_check.ImexChannelCheck("img").timeout(nvl72(), 0) == base.DEFAULT_TIMEOUT == 900.0


def test_the_rack_run_takes_its_deadline_from_the_check():
    run = rack_run.RackRun(nvbandwidth(), object(), nvl72(), rack_run.Settings(timeout=0), clock=lambda: 100.0)
    assert run.timeout == 2856.0
    run = rack_run.RackRun(nvbandwidth(), object(), nvl72(), rack_run.Settings(timeout=90), clock=lambda: 100.0)
    assert run.timeout == 90


def test_the_plan_view_and_the_check_mode_summary_print_the_expected_time():
    check = nvbandwidth()
    run = rack_run.RackRun(check, object(), nvl72(), rack_run.Settings(timeout=0))
    view = check.plan_view(run)
    assert view["ranks"] == 72 and view["timeout_s"] == 2856.0
    assert view["expected_run"]["pairs"] == 5112
    assert view["expected_run"]["seconds"] == 977.6
    racks = [{"rack": "rack0", "would_create": view}, {"rack": "rack1", "would_create": {"namespace": "n"}}]
    assert fleet.check_mode_summary("nvbandwidth", racks) == (
        "check mode: nvbandwidth would run on 2 rack(s); nothing created; rack rack0: "
        "multinode_device_to_device_memcpy_read_ce on 72 GPUs: 5112 pairs in 5112 step(s) of 0.189 s, "
        "expected 16 min 18 s; waits up to 47 min 36 s"
    )


def test_an_unreadable_buffer_size_makes_the_check_unusable():
    params = {
        "check": "nvbandwidth",
        "registry": "",
        "image_overrides": {},
        "mpi": MPI,
        "history_dir": "",
        "run_id": "",
        "nvbandwidth": {
            "image": "img",
            "testcase": READ_CE,
            "extra_args": ["-b", "lots"],
            "peak_gbps_by_product": [],
            "product_references": [],
        },
    }
    with pytest.raises(
        ValueError, match=r"--bufferSize is 'lots'; expected a number \(fix verify_nvbandwidth_extra_args\)"
    ):
        nvbandwidth_check.NvbandwidthCheck.from_params(params)


class NoPods:
    def list(self, *args, **kwargs):
        return []


def test_a_wait_that_runs_out_says_what_the_model_expected():
    run = rack_run.RackRun(nvbandwidth(), NoPods(), nvl72(), rack_run.Settings(timeout=600))
    assert nvbandwidth().describe(run) == (
        "no pod was created; the run models to 16 min 18 s (5112 pairs) after the start, the wait was "
        "10 min 0 s: if the rack is only slow, raise verify_nvbandwidth_timeout"
    )


def test_a_rack_wait_reads_until_its_deadline_and_says_how_often_it_read():
    clock = Clock(100.0)
    settings = rack_run.Settings(timeout=10, poll=3.0)
    run = rack_run.RackRun(imex_check.ImexChannelCheck("img"), object(), nvl72(2), settings, clock.sleep, clock)
    run.deadline = clock() + 10
    with pytest.raises(base.CheckFailed) as caught:
        run.wait_for("the pods Running", lambda: None, lambda: "2 pods Pending")
    # retry.poll's rule: the last pause is cut short, the last read is at the deadline
    assert clock.slept == [3.0, 3.0, 3.0, 1.0] and clock.now == 110.0
    assert caught.value.summary == "the pods Running: still not done after 5 reads (10 s); 2 pods Pending"
    answers = iter([None, None, "ready"])
    run.deadline = clock() + 10
    assert run.wait_for("the pods Running", lambda: next(answers)) == "ready"
    assert clock.slept[4:] == [3.0, 3.0]


class LateServiceAccount:
    """kube-controller-manager makes the namespace's default ServiceAccount a moment after the namespace: the
    first ``misses`` reads find none."""

    def __init__(self, misses: int) -> None:
        self.misses = misses
        self.created: list = []

    def get(self, kind, api_version, name, namespace=None):
        if kind != "ServiceAccount":
            return None
        self.misses -= 1
        return {"metadata": {"name": name, "namespace": namespace}} if self.misses < 0 else None

    def create(self, body):
        self.created.append(body["kind"])
        return body

    def can(self, right, namespace):  # an identity that reads logs everywhere binds itself nothing
        return True


def test_the_default_service_account_is_read_again_soon_not_a_whole_poll_interval_later():
    clock = Clock(100.0)
    api = LateServiceAccount(misses=3)
    settings = rack_run.Settings(timeout=60, poll=3.0)
    run = rack_run.RackRun(imex_check.ImexChannelCheck("img"), api, nvl72(2), settings, clock.sleep, clock)
    run.deadline = clock() + 60
    run.create_namespace()
    assert api.created == ["Namespace"]
    assert clock.slept == [0.05, 0.1, 0.2]  # 0.35 s where a 3 s poll interval slept 9 s
    assert run.timings["wait: the default ServiceAccount of namespace " + run.namespace] == pytest.approx(0.35)
