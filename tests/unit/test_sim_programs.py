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

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import pod_sections, verification_objects  # noqa: E402
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


# --- every stand-in renders from the tray's hardware model (simrack/hardware.py) ----------------------------------

from simrack import hardware, nodes  # noqa: E402
from simrack.programs import dcgm_diag, gpu_health  # noqa: E402

FAULTED = "gb200-r0-t2"
MARK = pod_sections.MARK


def test_the_stand_ins_mark_their_sections_as_the_checks_read_them():
    assert gpu_health.MARK == dcgm_diag.MARK == pod_sections.MARK
    log = gpu_health.log({}, node_of(), {})
    assert [rc for _text, rc in pod_sections.sections(log).values()] == [0, 0, 0, 0, 0]


def node_of(name: str = FAULTED) -> dict:
    rack, _tray = nodes.parse_tray_name(name)
    return {"metadata": {"name": name, "labels": {nodes.CLIQUE_LABEL: nodes.clique_value(rack)}}}


def sections(log: str) -> dict:
    """name -> (text, rc) of a pod log's marked sections, read as the checks read them (``pod_sections``)."""
    return {name: (text.rstrip("\n"), rc) for name, (text, rc) in pod_sections.sections(log).items()}


def health(faults: dict) -> dict:
    return sections(gpu_health.log({}, node_of(), faults))


def dcgm(faults: dict, level: int = 1) -> tuple[dict, int]:
    pod = {"spec": {"containers": [{"command": ["sh", "-c", f"nv-hostengine; dcgmi diag -r {level} -j"]}]}}
    text, code = dcgm_diag.log(pod, node_of(), faults)
    return json.loads(sections(text)["dcgmi diag"][0]), code


def entity_ids(document: dict) -> list:
    return [e["entity_id"] for e in document["entity_groups"][0]["entities"]]


def test_a_healthy_trays_gpu_health_log_has_nvlink_s_between_q_x_and_nvlink_e_with_every_link_at_50_gbs():
    log = health({})
    assert list(log) == ["clock", "nvidia-smi -q -x", "nvidia-smi nvlink -s", "nvidia-smi nvlink -e", "dmesg"]
    status = log["nvidia-smi nvlink -s"][0].splitlines()
    assert status[0] == "GPU 0: NVIDIA GB200 (UUID: GPU-0b1e7a52-5c1d-4e0a-8f3b-2a9d6c4e1f00)"
    assert status[1:3] == ["\t Link 0: 53.125 GB/s", "\t Link 1: 53.125 GB/s"]
    assert len(status) == 4 * 19 and "<inactive>" not in log["nvidia-smi nvlink -s"][0]
    assert all(rc == 0 for _text, rc in log.values())
    # the tray's own clique in every GPU's fabric section
    cluster = nodes.cluster_uuid(0)
    assert log["nvidia-smi -q -x"][0].count(f"<clusterUuid>{cluster}</clusterUuid>") == 4


def test_missing_gpu_leaves_the_gpu_out_of_every_nvidia_smi_output_and_of_dcgm():
    log = health({"missing-gpu": {"node": FAULTED, "gpu": "3"}})
    xml = log["nvidia-smi -q -x"][0]
    assert "<attached_gpus>3</attached_gpus>" in xml
    assert xml.count("<gpu id=") == 3 and "GPU-0b1e7a52-5c1d-4e0a-8f3b-2a9d6c4e1f03" not in xml
    assert xml.rstrip().endswith("</nvidia_smi_log>")
    for section in ("nvidia-smi nvlink -s", "nvidia-smi nvlink -e"):
        assert [line for line in log[section][0].splitlines() if line.startswith("GPU ")] == [
            f"GPU {g}: NVIDIA GB200 (UUID: GPU-0b1e7a52-5c1d-4e0a-8f3b-2a9d6c4e1f0{g})" for g in range(3)
        ]
    document, code = dcgm({"missing-gpu": {"node": FAULTED, "gpu": "3"}}, level=2)
    assert entity_ids(document) == [0, 1, 2] and code == 0
    for category in document["DCGM Diagnostic"]["test_categories"]:
        for test in category["tests"]:
            assert [r["entity_id"] for r in test["results"]] == [0, 1, 2]
    # another tray is whole
    assert (
        sections(gpu_health.log({}, node_of("gb200-r0-t1"), {"missing-gpu": {"node": FAULTED}}))["nvidia-smi -q -x"][
            0
        ].count("<gpu id=")
        == 4
    )


def test_a_gpu_off_the_bus_fails_every_nvidia_smi_command_shows_xid_79_and_is_not_diagnosed():
    faults = {"gpu-off-bus": {"node": FAULTED, "gpu": "2"}}
    log = health(faults)
    line = "Unable to determine the device handle for GPU 0018:01:00.0: Unknown Error"
    for section in ("nvidia-smi -q -x", "nvidia-smi nvlink -s", "nvidia-smi nvlink -e"):
        assert log[section] == (line, 255)
    assert log["dmesg"][0].splitlines()[-1] == (
        "[85802.000000] NVRM: Xid (PCI:0018:01:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."
    )
    document, code = dcgm(faults)
    assert entity_ids(document) == [0, 1, 3] and code == 0
    (test,) = document["DCGM Diagnostic"]["test_categories"][0]["tests"]
    assert [r["entity_id"] for r in test["results"]] == [0, 1, 3]


def test_nvlink_down_shows_the_links_inactive_in_nvlink_s_and_nothing_in_dcgm():
    faults = {"nvlink-down": {"node": FAULTED, "gpu": "1", "links": "2"}}
    status = health(faults)["nvidia-smi nvlink -s"][0].splitlines()
    block = status[19:38]
    assert block[0].startswith("GPU 1: NVIDIA GB200")
    assert block[16:] == ["\t Link 15: 53.125 GB/s", "\t Link 16: <inactive>", "\t Link 17: <inactive>"]
    assert sum("<inactive>" in line for line in status) == 2
    assert dcgm(faults, level=3) == dcgm({}, level=3)


def test_degraded_gpu_by_rack_index_sets_the_trays_links_inactive_too():
    faults = {"degraded-gpu": {"rack": "0", "gpu": "10", "factor": "0.944"}}  # tray 2, GPU 2
    status = health(faults)["nvidia-smi nvlink -s"][0].splitlines()
    assert [i for i, line in enumerate(status) if "<inactive>" in line] == [2 * 19 + 18]


def test_row_remap_pending_shows_in_q_x_and_fails_dcgms_software_test_on_that_gpu():
    faults = {"row-remap-pending": {"node": FAULTED, "gpu": "2"}}
    xml = health(faults)["nvidia-smi -q -x"][0]
    third = xml.split("<gpu id=")[3]
    assert "<remapped_row_pending>Yes</remapped_row_pending>" in third
    assert "<remapped_row_unc>1</remapped_row_unc>" in third and "<dram_uncorrectable>1</dram_uncorrectable>" in third
    assert xml.count("<remapped_row_pending>Yes</remapped_row_pending>") == 1
    document, code = dcgm(faults)
    (software,) = document["DCGM Diagnostic"]["test_categories"][0]["tests"]
    assert [r["status"] for r in software["results"]] == ["Pass", "Pass", "Fail", "Pass"]
    assert software["results"][2]["warnings"][0]["error_id"] == 85
    assert software["results"][2]["warnings"][0]["warning"].startswith("GPU 2 had memory errors and row remappings")
    assert code == 226


def test_fabric_unhealthy_shows_in_q_x_and_fails_every_gpu_of_dcgms_software_test():
    faults = {"fabric-unhealthy": {"node": FAULTED, "gpu": "1"}}
    xml = health(faults)["nvidia-smi -q -x"][0]
    fabric = xml.split("<gpu id=")[2].split("<fabric>")[1].split("</fabric>")[0]
    assert "<state>Completed</state>" in fabric and "<status>Failure</status>" in fabric
    assert "<summary>Unhealthy</summary>" in fabric
    assert xml.count("<status>Success</status>") == 3
    document, code = dcgm(faults)
    (software,) = document["DCGM Diagnostic"]["test_categories"][0]["tests"]
    assert [r["status"] for r in software["results"]] == ["Fail"] * 4
    assert [w["error_id"] for w in software["results"][1]["warnings"]] == [112]
    assert code == 256 - 30  # DCGM_ST_NVVS_ERROR: severity 5, no isolate


def test_xid_and_nvlink_errors_are_hardware_faults_rendered_as_before():
    assert "xid" in faultspec.PARAMS and "xid" not in gpu_health.FAULTS
    log = health({"xid": {"node": FAULTED, "gpu": "1", "code": "48"}, "nvlink-errors": {"node": FAULTED, "gpu": "3"}})
    assert (
        log["dmesg"][0]
        .splitlines()[-1]
        .endswith("NVRM: Xid (PCI:0009:01:00): 48, pid='<unknown>', name=<unknown>, see NVIDIA's Xid catalogue")
    )
    errors = log["nvidia-smi nvlink -e"][0].splitlines()
    gpu3 = errors[errors.index(next(line for line in errors if line.startswith("GPU 3"))) :]
    assert "\t Link 7: Link recovery failed events: 3" in gpu3
    assert sum(line.endswith("recovery failed events: 3") for line in errors) == 1


def test_the_node_keeps_capacity_and_loses_allocatable_for_a_gpu_off_the_bus():
    faults = {"gpu-off-bus": {"node": "gb200-r0-t1", "gpu": "0"}}
    assert nodes.desired_gpus(1, 2, faults) == {"gb200-r0-t0": 4, "gb200-r0-t1": 4}
    assert nodes.desired_allocatable(1, 2, faults) == {"gb200-r0-t0": 4, "gb200-r0-t1": 3}
    current = [nodes.tray_node(0, t, "v1.34.4") for t in range(2)]
    assert nodes.tray_changes(current, 1, 2, faults) == {"gb200-r0-t1": {"gpus": 4, "allocatable": 3}}
    created = nodes.tray_node(0, 1, "v1.34.4", 4, 3)["status"]
    assert (created["capacity"]["nvidia.com/gpu"], created["allocatable"]["nvidia.com/gpu"]) == ("4", "3")
    assert nodes.desired_gpus(1, 4, {"missing-gpu": {"node": "gb200-r0-t3", "gpu": "1"}})["gb200-r0-t3"] == 3


def _job(workers: int = 2) -> tuple[dict, list]:
    mpijob = {
        "metadata": {"name": "nvb", "namespace": "gpu-fabric-verify"},
        "spec": {"slotsPerWorker": 4, "mpiReplicaSpecs": {"Worker": {"replicas": workers}}},
    }
    bound = [
        {"metadata": {"name": f"nvb-worker-{w}"}, "spec": {"nodeName": f"gb200-r0-t{w + 1}"}} for w in range(workers)
    ]
    return mpijob, bound


def _cells(text: str) -> list:
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("memcpy CE"))
    return [line.split()[1:] for line in lines[start + 2 : start + 10]]


def test_nvlink_down_scales_its_gpus_matrix_row_and_column_by_the_links_left():
    mpijob, bound = _job()
    launcher = {"metadata": {"name": "nvb-launcher", "annotations": {}}, "spec": {"containers": [{"command": []}]}}
    healthy = _cells(podlogs.launcher_log(launcher, mpijob, {}, bound))
    faults = {"nvlink-down": {"node": FAULTED, "gpu": "1", "links": "3"}}  # worker 1 (tray 2): rank 5
    degraded = _cells(podlogs.launcher_log(launcher, mpijob, faults, bound))
    for r in range(8):
        for c in range(8):
            if r == c:
                continue
            want = float(healthy[r][c]) * (15 / 18 if 5 in (r, c) else 1)
            assert float(degraded[r][c]) == pytest.approx(want, abs=0.006), (r, c)


def test_a_lost_nvlink_lowers_the_racks_nccl_figures_the_same_way():
    mpijob, bound = _job()
    launcher = {
        "metadata": {"name": "nvb-launcher", "annotations": {}},
        "spec": {"containers": [{"command": ["mpirun", "all_reduce_perf", "-b", "1G", "-e", "1G"]}]},
    }

    def busbw(faults: dict) -> float:
        text = podlogs.launcher_log(launcher, mpijob, faults, bound)
        return float(next(line for line in text.splitlines() if "Avg bus bandwidth" in line).split(":")[1])

    assert busbw({"nvlink-down": {"node": FAULTED, "gpu": "0", "links": "9"}}) < busbw({}) * 0.6
    assert busbw({"nvlink-down": {"node": "gb200-r0-t3", "gpu": "0", "links": "9"}}) == busbw({})  # not in the job


@pytest.mark.parametrize(
    ("name", "params", "recorded"),
    [
        ("nvlink-down", {"node": FAULTED}, {"node": FAULTED, "gpu": "0", "links": "1"}),
        ("missing-gpu", {"node": FAULTED}, {"node": FAULTED}),  # GPU 3 by default, recorded as before: none
        ("gpu-off-bus", {"node": FAULTED, "gpu": "2"}, {"node": FAULTED, "gpu": "2"}),
        ("fabric-unhealthy", {"node": FAULTED}, {"node": FAULTED, "gpu": "0"}),
        ("xid", {"node": FAULTED}, {"node": FAULTED, "code": "79"}),
        ("nvlink-errors", {"node": FAULTED, "gpu": "1"}, {"node": FAULTED, "gpu": "1", "link": "7", "count": "3"}),
        ("row-remap-pending", {"node": FAULTED, "gpu": "3"}, {"node": FAULTED, "gpu": "3"}),
    ],
)
def test_hardware_faults_record_their_defaults(name, params, recorded):
    assert faultspec.validate(name, params, 1, 4) == recorded


@pytest.mark.parametrize(
    ("name", "params", "message"),
    [
        ("nvlink-down", {"node": FAULTED, "links": "19"}, "nvlink-down: links=19: a GB200 GPU has 1..18 links to lose"),
        ("nvlink-down", {"node": FAULTED, "gpu": "4"}, "nvlink-down: gpu=4 is out of range (a tray has GPUs 0..3)"),
        ("gpu-off-bus", {}, "gpu-off-bus needs node=<tray>"),
        ("nvlink-errors", {"node": FAULTED, "link": "18"}, "nvlink-errors: link=18: a GB200 GPU has links 0..17"),
        ("xid", {"node": FAULTED, "code": "x"}, "xid: code=x is not a whole number"),
    ],
)
def test_wrong_hardware_faults_are_refused_in_one_line(name, params, message):
    with pytest.raises(ValueError) as err:
        faultspec.validate(name, params, 1, 4)
    assert str(err.value).startswith(message)


def test_the_fault_list_says_which_faults_are_hardware_and_that_degraded_link_is_a_measurement():
    descriptions = faultspec.all_descriptions()
    assert all(descriptions[name].startswith("hardware: ") for name in hardware.HARDWARE_FAULTS)
    assert descriptions["degraded-link"].startswith("a measurement fault, not hardware")


def test_the_log_writer_serves_gpu_health_from_the_hardware_model_of_the_pods_tray(tmp_path):
    programs.rediscover()
    pods = [pod("health-t2", check="gpu_health", node=FAULTED), pod("health-t1", check="gpu_health", uid="u2")]
    kube = FakeKube(pods, {FAULTED: node_of(), "gb200-r0-t1": node_of("gb200-r0-t1")})
    controller = podlogs.PodLogsController(kube, tmp_path)
    controller.faults = {"nvlink-down": {"node": FAULTED, "gpu": "3", "links": "1"}}

    controller.reconcile()

    faulted = sections(served(tmp_path, "health-t2"))["nvidia-smi nvlink -s"][0].splitlines()
    assert [line for line in faulted if "<inactive>" in line] == ["\t Link 17: <inactive>"]
    assert faulted.index("\t Link 17: <inactive>") == 3 * 19 + 18
    assert "<inactive>" not in served(tmp_path, "health-t1")


def test_sim_rack_fault_records_a_hardware_fault_with_its_defaults(tmp_path, monkeypatch, capsys):
    pytest.importorskip("kubernetes")
    pytest.importorskip("yaml")
    from simrack import RackConfig, cli

    cli.known_faults.cache_clear()
    monkeypatch.setenv("GPU_FABRIC_SIM_STATE", str(tmp_path))
    (tmp_path / "config.json").write_text(RackConfig(racks=1, trays_per_rack=4).to_json())
    monkeypatch.setattr(cli, "kube_client", lambda paths: None)
    applied = []
    monkeypatch.setattr(cli.nodes, "apply_tray_state", lambda core, racks, trays, faults: applied.append(faults) or [])
    monkeypatch.setattr(cli.nodes, "apply_busy_pods", lambda *args: [])
    try:
        assert cli.main(["fault", "nvlink-down", f"node={FAULTED}", "gpu=1"]) == 0
        recorded = {"nvlink-down": {"node": FAULTED, "gpu": "1", "links": "1"}}
        assert json.loads((tmp_path / "faults.json").read_text()) == recorded
        assert applied == [recorded]  # the Node state follows at once
        with pytest.raises(SystemExit) as wrong:
            cli.main(["fault", "gpu-off-bus", "node=gb200-r0-t9"])
        assert wrong.value.code == 2
        assert "gpu-off-bus: node=gb200-r0-t9 is not a tray of this sim" in capsys.readouterr().err
    finally:
        cli.known_faults.cache_clear()
