# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""fleet.verify, the run behind the module fabric_verify: its decisions before any rack runs, on a cluster in
memory (two trays of one clique)."""

from __future__ import annotations

import types

import pytest
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import checks, fleet
from ansible_collections.gpu_fabric.mnnvl.plugins.modules import fabric_verify


def tray(name: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"nvidia.com/gpu.present": "true", "nvidia.com/gpu.clique": "c0.1"}},
        "spec": {},
        "status": {
            "allocatable": {"nvidia.com/gpu": "4"},
            "capacity": {"nvidia.com/gpu": "4"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


class Cluster:
    """kubernetes.core's client as the run uses it, with two trays and nothing else."""

    configuration = types.SimpleNamespace(host="https://api.example:6443")

    def __init__(self):
        self.client = types.SimpleNamespace(version={"kubernetes": {"gitVersion": "v1.34.2"}}, request=self.groups)
        self.created = []

    def resource(self, kind, api_version):
        return kind

    def get(self, resource, serialize=True, **params):
        items = [tray("gb200-r0-t0"), tray("gb200-r0-t1")] if resource == "Node" else []
        return {"kind": f"{resource}List", "metadata": {}, "items": items}

    def create(self, *args, **kwargs):
        self.created.append(args)
        raise AssertionError("the run created something")

    def groups(self, method, path):
        return {"kind": "APIGroupList", "groups": []}


def params(check: str, **given) -> dict:
    """The module's parameters with its defaults, as Ansible hands them to main."""
    spec = dict(fabric_verify.ARGUMENT_SPEC)
    result = ArgumentSpecValidator(spec).validate(dict(check=check, run_id="r1", records_dir="/nowhere", **given))
    assert not result.error_messages, result.error_messages
    return result.validated_parameters


def never_write(records):
    raise AssertionError("check mode wrote records")


def test_check_mode_plans_each_rack_and_writes_nothing():
    result = fleet.verify(params("imex_channel"), True, Cluster, never_write)
    (rack,) = result["racks"]
    assert rack["would_create"]["pods"] == ["imex-channel-gb200-r0-t0", "imex-channel-gb200-r0-t1"]
    assert result["summary"] == "check mode: imex_channel would run on 1 rack(s); nothing created"
    assert (result["changed"], result["records"], result["files"]) == (False, [], [])


def test_a_check_that_only_reads_gives_its_records_in_check_mode_too():
    result = fleet.verify(params("cliques", gpus_per_tray=4), True, Cluster, never_write)
    (record,) = result["records"]
    assert record["verdict"] == "passed" and record["cluster"]["server_version"] == "v1.34.2"
    assert record["started"] <= record["finished"] and record["objects_left"] == 0


def test_a_check_configured_so_that_it_cannot_run_gives_each_rack_an_error_record_and_creates_nothing():
    written = []
    result = fleet.verify(params("nccl"), False, Cluster, lambda records: written.extend(records) or ["f"])
    (record,) = result["records"]
    assert record["verdict"] == "error" and record["summary"].startswith("rack clique-c0-1: nccl.image is empty")
    assert written == result["records"] and result["files"] == ["f"]


def test_a_selection_that_matches_nothing_refuses_the_run_naming_the_racks():
    with pytest.raises(fleet.Refused, match=r"^rack9 matches no rack, clique .* \(racks selected: none\)") as caught:
        fleet.verify(params("cliques", cliques=["rack9"]), False, Cluster, never_write)
    assert caught.value.extra == {"racks": []}


def test_records_that_cannot_be_written_refuse_the_run_and_keep_the_records():
    def full_disk(records):
        raise OSError(28, "No space left on device")

    with pytest.raises(fleet.Refused, match=r"could not write the records under /nowhere: .*No space left") as caught:
        fleet.verify(params("cliques"), False, Cluster, full_disk)
    assert caught.value.extra["records"][0]["check"] == "cliques"


def test_every_check_of_the_registry_can_be_planned():
    for name in checks.names():
        given = {"nccl": {"image": "nccl-tests:1"}} if name == "nccl" else {}
        assert fleet.verify(params(name, **given), True, Cluster, never_write)["passed"] is True


def test_an_unknown_check_refuses_the_run_naming_the_checks():
    with pytest.raises(fleet.Refused, match=r"^no check is called 'dcgm': the checks are cliques, imex_channel, "):
        fleet.verify(params("dcgm"), True, Cluster, never_write)
