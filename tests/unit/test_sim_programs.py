# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A check's stand-in output is one module of sim/simrack/programs, found without a list: the pod log
writer picks it for the check's pods, and its fault knobs join the sim's own; no rack needed.

The program here is a throwaway one, written to a folder that is added to the package's search path.
"""

from __future__ import annotations

import importlib
import json
import sys
import textwrap
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT / "sim"))

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import verification_objects  # noqa: E402
from simrack import FAULTS, faultspec, logs, programs  # noqa: E402
from simrack.controllers import podlogs  # noqa: E402

# The shape of a real program (gpu_health, dcgm_diag): the check's name, its knobs, its output.
FAKE_HEALTH = '''
"""Stand-in of the fake_health check's pod: one line per GPU, and the Xid a fault puts on one."""

from simrack import programs

CHECK = "fake_health"
FAULTS = {"fake-xid": ("node", "gpu", "code")}
FAULT_HELP = {"fake-xid": "the kernel log of one tray shows an NVRM Xid on some of its GPUs"}


def validate_fault(name, params):
    code = params.setdefault("code", "79")
    if not code.isdigit():
        raise ValueError(f"{name}: code={code} is not an Xid number")
    return params


def log(pod, node, faults):
    name = node["metadata"]["name"]
    product = node["metadata"].get("labels", {}).get("nvidia.com/gpu.product", "?")
    lines = [f"{name} GPU {gpu}: {product} healthy" for gpu in range(4)]
    xid = programs.fault_on(faults, "fake-xid", node)
    if xid is not None:
        lines += [f"NVRM: Xid (PCI:0000:0{gpu}:00): {xid['code']}, pid=1" for gpu in programs.tray_gpus(xid)]
    return "\\n".join(lines) + "\\n"
'''


@pytest.fixture
def add_program(tmp_path, monkeypatch):
    """add_program(name, source): a module of simrack.programs for this test only; the programs found again."""
    folder = tmp_path / "extra_programs"
    folder.mkdir()
    monkeypatch.setattr(programs, "__path__", [*programs.__path__, str(folder)])
    added: list[str] = []

    def add(name: str, source: str) -> dict[str, programs.Program]:
        (folder / f"{name}.py").write_text(textwrap.dedent(source))
        added.append(name)
        importlib.invalidate_caches()
        return programs.rediscover()

    yield add
    for name in added:
        sys.modules.pop(f"{programs.__name__}.{name}", None)
        if hasattr(programs, name):
            delattr(programs, name)
    programs.discover.cache_clear()


class FakeKube:
    """The calls the podlogs stand-in makes, on dicts of objects; Logs objects created recorded."""

    def __init__(self, pods: list, nodes: dict, computedomains: list = ()) -> None:
        self.objects = {"pods": pods, "computedomains": list(computedomains), "mpijobs": []}
        self.nodes = nodes
        self.created: list = []
        self.patches: list = []

    def list(self, res, *args, **kwargs):
        return list(self.objects.get(res.plural, []))

    def get(self, res, name, namespace=None):
        return self.nodes.get(name) if res.plural == "nodes" else None

    def create(self, res, obj, namespace=None):
        self.created.append(obj)
        return obj

    def delete(self, *args, **kwargs):
        return None

    def merge_patch(self, res, name, patch, namespace=None):
        self.patches.append((name, patch))


def tray(name: str) -> dict:
    return {"metadata": {"name": name, "labels": {"nvidia.com/gpu.product": "NVIDIA-GB200", "type": "kwok"}}}


def pod(name: str, check: str = "fake_health", node: str = "gb200-r0-t1", uid: str = "u1") -> dict:
    labels = verification_objects.common_labels(check, "rack0", "run1") if check else {}
    return {
        "metadata": {"name": name, "namespace": "gpu-fabric-verify", "uid": uid, "labels": labels},
        "spec": {"nodeName": node, "containers": [{"name": "tool", "command": ["gpu-health"]}]},
    }


def served(state: Path, name: str) -> str:
    return logs.cri_text((state / "podlogs" / "gpu-fabric-verify" / f"{name}.log").read_text())


def test_the_label_a_program_is_found_by_is_the_one_the_collection_puts_on_a_checks_objects():
    assert programs.CHECK_LABEL == verification_objects.CHECK_LABEL
    assert verification_objects.common_labels("gpu_health", "rack0")[programs.CHECK_LABEL] == "gpu_health"


def test_the_programs_of_the_tree_load_and_every_knob_has_parameters_and_a_line():
    found = programs.rediscover()
    assert all(isinstance(p, programs.Program) for p in found.values())
    assert set(faultspec.all_params()) == set(faultspec.all_descriptions())
    assert set(FAULTS) == set(faultspec.PARAMS) <= set(faultspec.all_params())


def test_a_program_is_found_without_a_list_and_its_knobs_join_the_faults(add_program):
    found = add_program("fake_health", FAKE_HEALTH)

    assert found["fake_health"].module == "fake_health"
    assert faultspec.all_params()["fake-xid"] == ("node", "gpu", "code")
    assert faultspec.all_descriptions()["fake-xid"] == (
        "the kernel log of one tray shows an NVRM Xid on some of its GPUs "
        "(simrack/programs/fake_health.py) (node=<tray> gpu=<...> code=<...>)"
    )
    assert programs.for_pod(pod("p")) is found["fake_health"]
    assert programs.for_pod(pod("p", check="imex_channel")) is None
    assert programs.for_pod(pod("p", check="")) is None


def test_the_log_writer_serves_the_programs_output_for_a_labelled_pod(add_program, tmp_path):
    add_program("fake_health", FAKE_HEALTH)
    pods = [pod("health-t1"), pod("health-t2", node="gb200-r0-t2", uid="u2"), pod("other", check="", uid="u3")]
    kube = FakeKube(pods, {"gb200-r0-t1": tray("gb200-r0-t1"), "gb200-r0-t2": tray("gb200-r0-t2")})
    controller = podlogs.PodLogsController(kube, tmp_path)
    controller.faults = {"fake-xid": {"node": "gb200-r0-t2", "gpu": "1-2", "code": "79"}}

    controller.reconcile()

    assert served(tmp_path, "health-t1") == "".join(f"gb200-r0-t1 GPU {g}: NVIDIA-GB200 healthy\n" for g in range(4))
    assert served(tmp_path, "health-t2").splitlines()[4:] == [
        "NVRM: Xid (PCI:0000:01:00): 79, pid=1",
        "NVRM: Xid (PCI:0000:02:00): 79, pid=1",
    ]
    assert [obj["metadata"]["name"] for obj in kube.created] == ["health-t1", "health-t2"]  # not the unlabelled pod
    assert not (tmp_path / "podlogs" / "gpu-fabric-verify" / "other.log").exists()


def test_a_pod_not_yet_on_its_tray_waits_and_a_program_comes_before_the_imex_listing(add_program, tmp_path):
    add_program("fake_health", FAKE_HEALTH)
    waiting = pod("health-t3", node="")
    waiting["spec"]["resourceClaims"] = [{"name": "channel", "resourceClaimTemplateName": "channel-tpl"}]
    domain = {"metadata": {"namespace": "gpu-fabric-verify"}, "spec": {"channel": {"resourceClaimTemplate": {}}}}
    domain["spec"]["channel"]["resourceClaimTemplate"]["name"] = "channel-tpl"
    kube = FakeKube([waiting], {"gb200-r0-t3": tray("gb200-r0-t3")}, [domain])
    controller = podlogs.PodLogsController(kube, tmp_path)

    controller.reconcile()
    assert kube.created == [] and "u1" not in controller.done

    waiting["spec"]["nodeName"] = "gb200-r0-t3"
    controller.reconcile()
    assert served(tmp_path, "health-t3").startswith("gb200-r0-t3 GPU 0: NVIDIA-GB200 healthy\n")
    assert "u1" in controller.done


def test_a_program_that_fails_leaves_its_pod_without_a_log_and_the_others_served(add_program, tmp_path, caplog):
    add_program("fake_health", FAKE_HEALTH)
    add_program("fake_crash", 'CHECK = "fake_crash"\nFAULTS = {}\ndef log(pod, node, faults): return 1 / 0\n')
    kube = FakeKube([pod("crash", check="fake_crash"), pod("health", uid="u2")], {"gb200-r0-t1": tray("gb200-r0-t1")})
    controller = podlogs.PodLogsController(kube, tmp_path)

    controller.reconcile()

    assert [obj["metadata"]["name"] for obj in kube.created] == ["health"]
    assert "simrack/programs/fake_crash.py: no log for gpu-fabric-verify/crash" in caplog.text


def test_a_programs_knob_is_validated_as_sim_rack_fault_does(add_program):
    add_program("fake_health", FAKE_HEALTH)

    assert faultspec.validate("fake-xid", {"node": "gb200-r1-t3", "gpu": "0,2"}, 2, 4) == {
        "node": "gb200-r1-t3",
        "gpu": "0,2",
        "code": "79",  # the program's validate_fault records its default
    }
    assert faultspec.validate("fake-xid", {"node": "gb200-r0-t0", "code": "48"}, 1, 4)["code"] == "48"


@pytest.mark.parametrize(
    ("name", "params", "message"),
    [
        ("fake-nope", {"node": "gb200-r0-t0"}, "unknown fault 'fake-nope'; known: unlabelled-node,"),
        ("fake-xid", {"node": "gb200-r0-t0", "colour": "red"}, "fake-xid: unknown parameter colour (known: node,"),
        ("fake-xid", {}, "fake-xid needs node=<tray>"),
        ("fake-xid", {"node": "gb200-r9-t0"}, "fake-xid: node=gb200-r9-t0 is not a tray of this sim"),
        ("fake-xid", {"node": "gb200-r0-t0", "gpu": "4"}, "fake-xid: gpu=4 is out of range (a tray has GPUs 0..3)"),
        ("fake-xid", {"node": "gb200-r0-t0", "code": "x"}, "fake-xid: code=x is not an Xid number"),
    ],
)
def test_unknown_and_wrong_knobs_are_refused_in_one_line(add_program, name, params, message):
    add_program("fake_health", FAKE_HEALTH)
    with pytest.raises(ValueError) as err:
        faultspec.validate(name, params, 2, 4)
    assert str(err.value).startswith(message)
    assert "fake-xid" in str(err.value)  # the known list names the program's knob too
    assert "\n" not in str(err.value)


def test_sim_rack_fault_takes_a_programs_knob_and_refuses_a_wrong_one(add_program, tmp_path, monkeypatch, capsys):
    pytest.importorskip("kubernetes")
    pytest.importorskip("yaml")
    from simrack import RackConfig, cli

    add_program("fake_health", FAKE_HEALTH)
    cli.known_faults.cache_clear()
    monkeypatch.setenv("GPU_FABRIC_SIM_STATE", str(tmp_path))
    (tmp_path / "config.json").write_text(RackConfig(racks=1, trays_per_rack=4).to_json())
    monkeypatch.setattr(cli, "kube_client", lambda paths: None)  # no rack: the tray state is not applied
    monkeypatch.setattr(cli.nodes, "apply_tray_state", lambda *args: [])
    monkeypatch.setattr(cli.nodes, "apply_busy_pods", lambda *args: [])
    try:
        with pytest.raises(SystemExit) as wrong:
            cli.main(["fault", "fake-xid", "node=gb200-r0-t1", "colour=red"])
        assert wrong.value.code == 2
        assert "fake-xid: unknown parameter colour" in capsys.readouterr().err
        with pytest.raises(SystemExit):
            cli.main(["fault", "fake-nope"])
        assert "unknown fault 'fake-nope'" in capsys.readouterr().err

        assert cli.main(["fault", "fake-xid", "node=gb200-r0-t1", "gpu=2"]) == 0
        assert json.loads((tmp_path / "faults.json").read_text()) == {
            "fake-xid": {"node": "gb200-r0-t1", "gpu": "2", "code": "79"}
        }
        capsys.readouterr()
        assert cli.main(["fault", "--list"]) == 0
        assert any(line.startswith("ON  fake-xid") for line in capsys.readouterr().out.splitlines())
        assert cli.main(["fault", "--clear", "fake-xid"]) == 0
        assert json.loads((tmp_path / "faults.json").read_text()) == {}
    finally:
        cli.known_faults.cache_clear()


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ('CHECK = "fake_bad"\nFAULTS = {}\n', "simrack/programs/fake_bad.py: needs def log(pod, node, faults)"),
        ("FAULTS = {}\ndef log(pod, node, faults): return ''\n", "simrack/programs/fake_bad.py: CHECK must be"),
        ('CHECK = "fake_bad"\ndef log(pod, node, faults): return ""\n', "simrack/programs/fake_bad.py: FAULTS must"),
        (
            'CHECK = "fake_bad"\nFAULTS = {"busy-node": ("node",)}\ndef log(pod, node, faults): return ""\n',
            "simrack/programs/fake_bad.py: fault 'busy-node' is one of the sim's own",
        ),
        ("import no_such_module\n", "simrack/programs/fake_bad.py does not import"),
    ],
)
def test_a_program_that_breaks_the_contract_is_named(add_program, source, message):
    with pytest.raises(programs.ProgramError) as err:
        add_program("fake_bad", source)
    assert str(err.value).startswith(message)


def test_a_check_or_a_knob_is_one_programs_only(add_program):
    add_program("fake_health", FAKE_HEALTH)
    with pytest.raises(programs.ProgramError, match=r"fake_twin.py: check 'fake_health' is already the one of"):
        add_program("fake_twin", 'CHECK = "fake_health"\nFAULTS = {}\ndef log(pod, node, faults): return ""\n')
    (Path(programs.__path__[-1]) / "fake_twin.py").unlink()
    source = 'CHECK = "fake_other"\nFAULTS = {"fake-xid": ()}\ndef log(pod, node, faults): return ""\n'
    with pytest.raises(programs.ProgramError, match=r"fake_twin2.py: fault 'fake-xid' is already one of .*fake_health"):
        add_program("fake_twin2", source)


def test_a_module_whose_name_starts_with_an_underscore_is_not_a_program(add_program):
    assert "fake_hidden" not in add_program("_helpers", FAKE_HEALTH.replace("fake_health", "fake_hidden"))
