# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The scheduled verification's objects: the shipped verify RBAC bound to the schedule's account (never a copy of
its rules), the job's inventory, the CronJob and the exact command it runs."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import inventory_variables as iv
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import verify_schedule as vs

RBAC_TEXT = (Path(__file__).resolve().parents[4] / "docs" / "rbac" / "verify-stage.yaml").read_text()
SHIPPED = [doc for doc in yaml.safe_load_all(RBAC_TEXT) if doc]
IMAGE = "registry.example.com/gpu-fabric-ee:0.4.0"


def objects(**settings):
    return vs.objects_from_text(dict({"image": IMAGE}, **settings), RBAC_TEXT)


def cronjob(**settings):
    return objects(**settings)["schedule"][1]


def test_the_cronjob_runs_the_command_users_type_as_the_service_account():
    job = cronjob()
    assert job["metadata"] == {
        "name": "gpu-fabric-verify",
        "namespace": "gpu-fabric",
        "labels": {
            "app.kubernetes.io/name": "gpu-fabric-verify-schedule",
            "app.kubernetes.io/instance": "gpu-fabric-verify",
            "app.kubernetes.io/component": "schedule",
            "app.kubernetes.io/managed-by": "gpu_fabric.mnnvl.verify_schedule",
        },
    }
    spec = job["spec"]
    assert {k: v for k, v in spec.items() if k != "jobTemplate"} == {
        "schedule": "0 3 * * *",
        "concurrencyPolicy": "Forbid",
        "startingDeadlineSeconds": 600,
        "successfulJobsHistoryLimit": 3,
        "failedJobsHistoryLimit": 3,
        "suspend": False,
    }
    assert spec["jobTemplate"]["spec"]["backoffLimit"] == 0
    pod = spec["jobTemplate"]["spec"]["template"]["spec"]
    assert (pod["serviceAccountName"], pod["restartPolicy"]) == ("gpu-fabric-verify", "Never")
    (container,) = pod["containers"]
    assert container["image"] == IMAGE
    assert container["command"] == [
        "ansible-playbook",
        "-i",
        "/etc/gpu-fabric/inventory.yml",
        "gpu_fabric.mnnvl.verify",
    ]
    assert container["volumeMounts"] == [
        {"name": "inventory", "mountPath": "/etc/gpu-fabric", "readOnly": True},
        {"name": "report", "mountPath": "/var/lib/gpu-fabric/report"},
    ]
    assert pod["volumes"] == [
        {
            "name": "inventory",
            "configMap": {"name": "gpu-fabric-verify", "items": [{"key": "inventory.yml", "path": "inventory.yml"}]},
        },
        {"name": "report", "persistentVolumeClaim": {"claimName": "gpu-fabric-verify-report"}},
    ]
    assert "imagePullSecrets" not in pod and "timeZone" not in spec


def test_only_due_and_the_sites_arguments_follow_the_playbook():
    job = cronjob(only_due=True, extra_args=["--tags", "nvbandwidth"], inventory_mount_path="/inv/")
    assert job["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["command"] == [
        "ansible-playbook",
        "-i",
        "/inv/inventory.yml",
        "gpu_fabric.mnnvl.verify",
        "-e",
        "gpu_fabric_verify_only_due=true",
        "--tags",
        "nvbandwidth",
    ]


def test_a_volume_source_replaces_the_claim_and_the_schedule_options_pass_through():
    job = cronjob(
        report_volume={"name": "x", "nfs": {"server": "nas", "path": "/gpu-fabric"}},
        time_zone="Europe/Berlin",
        image_pull_secrets=["ee-pull"],
        active_deadline_seconds=7200,
        suspend=True,
    )
    pod = job["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert pod["volumes"][1] == {"nfs": {"server": "nas", "path": "/gpu-fabric"}, "name": "report"}
    assert pod["imagePullSecrets"] == [{"name": "ee-pull"}]
    assert (job["spec"]["timeZone"], job["spec"]["suspend"]) == ("Europe/Berlin", True)
    assert job["spec"]["jobTemplate"]["spec"]["activeDeadlineSeconds"] == 7200


# -- the refresh job: the Node verdict refreshed between runs ---------------------------------------------------


def test_the_refresh_cronjob_runs_refresh_state_as_the_same_account_with_the_same_image_and_inventory():
    made = objects(node_verdict_rbac=True, image_pull_secrets=["ee-pull"], time_zone="UTC", suspend=True)
    (refresh,) = made["refresh"]
    assert made["removed"] == []
    assert refresh["metadata"] == {
        "name": "gpu-fabric-verify-refresh",
        "namespace": "gpu-fabric",
        "labels": {
            "app.kubernetes.io/name": "gpu-fabric-verify-schedule",
            "app.kubernetes.io/instance": "gpu-fabric-verify",
            "app.kubernetes.io/component": "refresh-schedule",
            "app.kubernetes.io/managed-by": "gpu_fabric.mnnvl.verify_schedule",
        },
    }
    spec = refresh["spec"]
    assert {k: v for k, v in spec.items() if k != "jobTemplate"} == {
        "schedule": "0 * * * *",
        "concurrencyPolicy": "Forbid",
        "startingDeadlineSeconds": 600,
        "successfulJobsHistoryLimit": 3,
        "failedJobsHistoryLimit": 3,
        "suspend": True,
        "timeZone": "UTC",
    }
    pod = spec["jobTemplate"]["spec"]["template"]["spec"]
    verify_pod = made["schedule"][1]["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == verify_pod["serviceAccountName"] == "gpu-fabric-verify"
    assert pod["imagePullSecrets"] == verify_pod["imagePullSecrets"] == [{"name": "ee-pull"}]
    (container,) = pod["containers"]
    assert (container["name"], container["image"]) == ("refresh", IMAGE)
    assert container["command"] == [
        "ansible-playbook",
        "-i",
        "/etc/gpu-fabric/inventory.yml",
        "gpu_fabric.mnnvl.refresh_state",
    ]
    # the verify job's inventory; no report volume (the refresh writes no report)
    assert pod["volumes"] == [verify_pod["volumes"][0]]
    assert verify_pod["volumes"][0]["configMap"]["name"] == made["schedule"][0]["metadata"]["name"]
    assert container["volumeMounts"] == [{"name": "inventory", "mountPath": "/etc/gpu-fabric", "readOnly": True}]
    assert spec["jobTemplate"]["metadata"]["labels"]["app.kubernetes.io/component"] == "refresh"
    assert made["refresh_note"] == (
        "CronJob gpu-fabric/gpu-fabric-verify-refresh refreshes the Node verdict on '0 * * * *' "
        "(gpu_fabric.mnnvl.refresh_state)"
    )


def test_the_refresh_job_writes_the_nodes_with_the_verdict_writers_rights_and_no_more():
    """The job's account is the one the shipped node-verdict binding names, with the shipped rules; nothing else of
    the schedule's RBAC grants a write on Nodes."""
    made = objects(node_verdict_rbac=True, namespace="ops", service_account="verifier", refresh_schedule="*/15 * * * *")
    (refresh,) = made["refresh"]
    assert refresh["spec"]["schedule"] == "*/15 * * * *"
    account = refresh["spec"]["jobTemplate"]["spec"]["template"]["spec"]["serviceAccountName"]
    by_name = {(o["kind"], o["metadata"]["name"]): o for o in made["rbac"]}
    binding = by_name[("ClusterRoleBinding", "gpu-fabric-verify-node-verdict")]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account, "namespace": "ops"}]
    shipped = next(d for d in SHIPPED if (d["kind"], d["metadata"]["name"]) == binding_role(binding))
    assert by_name[binding_role(binding)]["rules"] == shipped["rules"]
    node_writes = sorted(
        (o["metadata"]["name"], resource, verb)
        for o in made["rbac"]
        if o["kind"] in ("ClusterRole", "Role")
        for rule in o.get("rules") or []
        for resource in rule.get("resources") or []
        if resource.startswith("nodes")
        for verb in rule.get("verbs") or []
        if verb not in ("get", "list", "watch")
    )
    assert node_writes == [
        ("gpu-fabric-verify-node-verdict", "nodes", "patch"),
        ("gpu-fabric-verify-node-verdict", "nodes/status", "patch"),
    ]


def binding_role(binding):
    return (binding["roleRef"]["kind"], binding["roleRef"]["name"])


@pytest.mark.parametrize(
    ("settings", "note"),
    [
        (
            {"node_verdict_rbac": True, "refresh_schedule": ""},
            "no CronJob gpu-fabric/gpu-fabric-verify-refresh: verify_schedule_refresh_schedule is empty; an earlier "
            "one is removed",
        ),
        (
            {"node_verdict_rbac": True, "refresh_schedule": False},
            "no CronJob gpu-fabric/gpu-fabric-verify-refresh: verify_schedule_refresh_schedule is empty; an earlier "
            "one is removed",
        ),
        (
            {"node_verdict_rbac": True, "refresh_schedule": " False "},
            "no CronJob gpu-fabric/gpu-fabric-verify-refresh: verify_schedule_refresh_schedule is empty; an earlier "
            "one is removed",
        ),
        (
            {"refresh_schedule": "0 * * * *"},
            "no CronJob gpu-fabric/gpu-fabric-verify-refresh: it writes the Node verdict with the node-verdict "
            "rights, and verify_schedule_node_verdict_rbac is false; set it to true (with "
            "gpu_fabric_verify_label_nodes or gpu_fabric_verify_node_condition) to refresh the Nodes between runs; "
            "an earlier one is removed",
        ),
    ],
)
def test_without_a_refresh_the_refresh_cronjob_is_left_out_and_an_earlier_one_removed(settings, note):
    made = objects(**settings)
    assert made["refresh"] == []
    assert made["removed"] == [
        {
            "apiVersion": "batch/v1",
            "kind": "CronJob",
            "metadata": {"name": "gpu-fabric-verify-refresh", "namespace": "gpu-fabric"},
        }
    ]
    assert made["refresh_note"] == note
    # the verify CronJob and its inventory stay as they are
    assert [o["kind"] for o in made["schedule"]] == ["ConfigMap", "CronJob"]


def test_a_refresh_schedule_that_is_no_text_is_refused_naming_the_variable():
    with pytest.raises(vs.ScheduleError, match=r"^verify_schedule_refresh_schedule is 60: give a cron schedule"):
        objects(refresh_schedule=60)


class Data(str):
    """A value the inventory tags ``!unsafe`` (Ansible takes it as data, never as a template)."""


class InventoryLoader(yaml.SafeLoader):
    """YAML as written, each ``!unsafe`` value read as :class:`Data`, so that a test sees which values are tagged."""


InventoryLoader.add_constructor("!unsafe", lambda loader, node: Data(loader.construct_scalar(node)))


def inventory_of(config) -> dict:
    return yaml.load(config["data"]["inventory.yml"], Loader=InventoryLoader)


def test_the_inventory_runs_on_the_pod_itself_with_the_sites_variables_and_the_report_on_the_volume():
    config = objects(verify_vars={"gpu_fabric_verify_cliques": ["rack0"], "gpu_fabric_report_dir": "elsewhere"})[
        "schedule"
    ][0]
    assert config["metadata"]["name"] == "gpu-fabric-verify" and config["kind"] == "ConfigMap"
    assert inventory_of(config) == {
        "all": {
            "children": {
                "k8s_controller": {
                    "hosts": {
                        "localhost": {
                            "ansible_connection": "local",
                            "ansible_python_interpreter": "{{ ansible_playbook_python }}",
                        }
                    }
                }
            },
            "vars": {"gpu_fabric_verify_cliques": ["rack0"], "gpu_fabric_report_dir": "/var/lib/gpu-fabric/report"},
        }
    }
    # the site's strings are data; the connection's interpreter is the one template of the file
    inventory = inventory_of(config)
    assert (inventory["all"]["vars"]["gpu_fabric_verify_cliques"][0]).__class__ is Data
    assert (inventory["all"]["vars"]["gpu_fabric_report_dir"]).__class__ is Data
    python = inventory["all"]["children"]["k8s_controller"]["hosts"]["localhost"]["ansible_python_interpreter"]
    assert (python).__class__ is str


def test_ansible_reads_the_sites_values_in_the_jobs_inventory_as_they_are_never_as_templates(tmp_path):
    """The rendered inventory, read by ansible-playbook as the job reads it: text that looks like a template
    stays that text (at any depth), numbers and booleans keep their type."""
    site = {
        "gpu_fabric_verify_namespace_prefix": "{{ 7*7 }}",
        "gpu_fabric_verify_cliques": ["{{ 7*7 }}", "rack1"],
        "gpu_fabric_verify_settings": {"dcgm_diag": {"level": 2, "note": "{# kept #}x"}},
        "gpu_fabric_trays_per_clique": 18,
        "gpu_fabric_verify_nccl": True,
    }
    config = objects(verify_vars=site)["schedule"][0]
    (tmp_path / "inventory.yml").write_text(config["data"]["inventory.yml"])
    names = [*sorted(site), "gpu_fabric_report_dir"]
    (tmp_path / "read.yml").write_text(
        "- hosts: k8s_controller\n  gather_facts: false\n  tasks:\n"
        "    - ansible.builtin.copy:\n"
        f"        content: \"{{{{ dict(names | zip(names | map('extract', vars))) | to_json }}}}\"\n"
        f"        dest: {tmp_path / 'values.json'}\n"
        f"      vars:\n        names: {json.dumps(names)}\n"
    )
    run = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-playbook"), "-i", "inventory.yml", "read.yml"],
        cwd=tmp_path,
        env=dict(os.environ, ANSIBLE_NOCOLOR="1"),
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert json.loads((tmp_path / "values.json").read_text()) == dict(
        site, gpu_fabric_report_dir="/var/lib/gpu-fabric/report"
    )


def test_the_namespace_is_labelled_so_that_its_apply_is_recorded():
    (namespace,) = objects(namespace="ops")["namespace"]
    assert namespace["metadata"]["name"] == "ops"
    assert namespace["metadata"]["labels"]["app.kubernetes.io/managed-by"] == vs.MANAGED_BY
    # never the checks' label: the uninstall and the verify account's admission policy treat those as the checks'
    assert "app.kubernetes.io/part-of" not in namespace["metadata"]["labels"]


def test_the_shipped_rbac_is_bound_to_the_schedules_account_with_its_rules_unchanged():
    rbac = objects(namespace="ops", service_account="verifier")["rbac"]
    assert rbac[0] == {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {
            "name": "verifier",
            "namespace": "ops",
            "labels": {
                "app.kubernetes.io/name": "gpu-fabric-verify-schedule",
                "app.kubernetes.io/instance": "gpu-fabric-verify",
                "app.kubernetes.io/component": "rbac",
                "app.kubernetes.io/managed-by": "gpu_fabric.mnnvl.verify_schedule",
            },
        },
    }
    by_name = {(o["kind"], o["metadata"]["name"]): o for o in rbac[1:]}
    assert set(by_name) == {
        ("ClusterRole", "gpu-fabric-verify"),
        ("ClusterRole", "gpu-fabric-verify-logs"),
        ("ClusterRoleBinding", "gpu-fabric-verify"),
        ("Role", "gpu-fabric-verify-diagnostics"),
        ("RoleBinding", "gpu-fabric-verify-diagnostics"),
        ("ValidatingAdmissionPolicy", "gpu-fabric-verify-own-namespaces"),
        ("ValidatingAdmissionPolicyBinding", "gpu-fabric-verify-own-namespaces"),
        ("PriorityClass", "gpu-fabric-verify"),
    }
    shipped_role = next(d for d in SHIPPED if d["kind"] == "ClusterRole")
    assert by_name[("ClusterRole", "gpu-fabric-verify")]["rules"] == shipped_role["rules"]
    for key in (("ClusterRoleBinding", "gpu-fabric-verify"), ("RoleBinding", "gpu-fabric-verify-diagnostics")):
        assert by_name[key]["subjects"] == [{"kind": "ServiceAccount", "name": "verifier", "namespace": "ops"}]
    (condition,) = by_name[("ValidatingAdmissionPolicy", "gpu-fabric-verify-own-namespaces")]["spec"]["matchConditions"]
    assert condition["expression"] == 'request.userInfo.username == "system:serviceaccount:ops:verifier"'
    assert all(o["metadata"]["labels"]["app.kubernetes.io/managed-by"] == vs.MANAGED_BY for o in rbac)
    # the shipped documents themselves are left as they were read
    assert next(d for d in SHIPPED if d["kind"] == "ClusterRoleBinding")["subjects"][0]["namespace"] == "gpu-fabric"


def test_the_optional_rbac_comes_only_when_asked_for_and_follows_the_namespaces_given():
    names = [o["metadata"]["name"] for o in objects()["rbac"]]
    assert not any(n.endswith(("pull-secrets", "node-verdict")) for n in names)
    rbac = objects(
        pull_secrets_rbac=True, node_verdict_rbac=True, driver_namespace="dra", pull_secrets_namespace="site"
    )["rbac"]
    namespaced = {
        (o["kind"], o["metadata"]["name"]): o["metadata"]["namespace"] for o in rbac if o["metadata"].get("namespace")
    }
    assert namespaced == {
        ("ServiceAccount", "gpu-fabric-verify"): "gpu-fabric",
        ("Role", "gpu-fabric-verify-diagnostics"): "dra",
        ("RoleBinding", "gpu-fabric-verify-diagnostics"): "dra",
        ("Role", "gpu-fabric-verify-pull-secrets"): "site",
        ("RoleBinding", "gpu-fabric-verify-pull-secrets"): "site",
    }
    assert ("ClusterRole", "gpu-fabric-verify-node-verdict") in {(o["kind"], o["metadata"]["name"]) for o in rbac}


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"image": " "}, r"^verify_schedule_image is empty: name the collection's execution environment image"),
        (
            {"concurrency_policy": "Never"},
            r"^verify_schedule_concurrency_policy is 'Never', not Forbid, Replace or Allow$",
        ),
        ({"report_claim": ""}, r"^the report has no volume: set verify_schedule_report_claim"),
        ({"schedul": "* * * * *"}, r"^unknown setting\(s\) of the schedule: schedul$"),
    ],
)
def test_settings_that_make_no_cronjob_are_refused_naming_the_variable(settings, message):
    with pytest.raises(vs.ScheduleError, match=message):
        vs.objects_from_text(dict({"image": IMAGE}, **settings), RBAC_TEXT)


def test_a_file_that_is_not_the_shipped_rbac_is_refused():
    with pytest.raises(vs.ScheduleError, match=r"holds no ClusterRole: is it the shipped file\?$"):
        vs.objects_from_text({"image": IMAGE}, "kind: ConfigMap\nmetadata: {name: x}\n")


# -- the site's verify variables in the job's inventory -------------------------------------------------------

REPO = Path(__file__).resolve().parents[4]
ROLE_NAME = re.compile(r"gpu_fabric\.mnnvl\.([a-z_]+)")
# a variable read (a mapping key, such as a set_stats key, is followed by a colon)
READ = r"\b{name}\b(?!\s*:)"


def verify_stage_roles() -> list:
    """The roles playbooks/verify.yml runs, with the roles they include and depend on (the shared gpu_fabric too)."""
    play = yaml.safe_load((REPO / "playbooks" / "verify.yml").read_text())[0]
    todo = [entry["role"].split(".")[-1] for entry in play["roles"]]
    found: list = []
    while todo:
        role = todo.pop()
        if role in found:
            continue
        found.append(role)
        texts = [p.read_text() for p in sorted((REPO / "roles" / role / "tasks").glob("*.yml"))]
        texts.append((REPO / "roles" / role / "meta" / "main.yml").read_text())
        todo += [name for text in texts for name in ROLE_NAME.findall(text) if (REPO / "roles" / name).is_dir()]
    return sorted(found)


def spec_options(role: str) -> set:
    specs = yaml.safe_load((REPO / "roles" / role / "meta" / "argument_specs.yml").read_text())["argument_specs"]
    return {name for spec in specs.values() for name in spec.get("options") or {}}


def verify_stage_texts() -> list:
    """The verify playbook and the verify stage's roles' tasks and defaults, without their comments."""
    paths = [REPO / "playbooks" / "verify.yml"]
    for role in verify_stage_roles():
        paths += sorted((REPO / "roles" / role / "tasks").glob("*.yml"))
        paths += sorted((REPO / "roles" / role / "defaults").glob("*.yml"))
    return [re.sub(r"(^|\s)#.*$", "", path.read_text(), flags=re.M) for path in paths]


def test_the_verify_stage_is_the_roles_the_verify_playbook_runs():
    assert verify_stage_roles() == [
        "gpu_fabric",
        "report",
        "verify_checks",
        "verify_cliques",
        "verify_common",
        "verify_imex_channel",
        "verify_nccl",
        "verify_nvbandwidth",
    ]


@pytest.mark.parametrize("role", [r for r in verify_stage_roles() if r != "gpu_fabric"])
def test_every_variable_a_verify_role_declares_is_carried_or_the_jobs_own(role):
    """A new variable of a verify role (its argument spec) reaches the scheduled run without a change to the list."""
    left_out = sorted(name for name in spec_options(role) if not vs.is_carried(name) and name not in vs.NOT_CARRIED)
    assert left_out == []


def test_every_shared_variable_the_verify_stage_reads_is_carried_or_the_jobs_own():
    """The gpu_fabric_* values and other roles' variables that the verify roles' defaults, tasks and the playbook
    read (gpu_fabric_racks, gpu_fabric_trays_per_clique, dra_driver_namespace, ...): each is carried, or named
    with its reason as the job's own."""
    texts = verify_stage_texts()
    stage = set(verify_stage_roles()) - {"gpu_fabric"}
    others = {
        name
        for role in sorted(p.name for p in (REPO / "roles").iterdir() if (p / "meta" / "argument_specs.yml").is_file())
        if role not in stage
        for name in spec_options(role)
    }
    shared = {name for text in texts for name in re.findall(r"\bgpu_fabric_[a-z0-9_]*[a-z0-9]\b", text)}
    read = sorted(name for name in others | shared if any(re.search(READ.format(name=name), t) for t in texts))
    assert {"gpu_fabric_racks", "gpu_fabric_trays_per_clique", "dra_driver_namespace", "gpu_fabric_kubeconfig"} <= set(
        read
    )
    assert [name for name in read if not vs.is_carried(name) and name not in vs.NOT_CARRIED] == []
    # and the list names nothing the verify stage does not read
    assert sorted(set(vs.VERIFY_SHARED) - set(read)) == []


def test_what_a_verify_run_sets_itself_is_never_carried():
    """What the verify stage registers or sets (report_result, verify_common_result, the run id, ...) stays out,
    also when the schedule is applied in the same play as a verify run."""
    play = yaml.safe_load((REPO / "playbooks" / "verify.yml").read_text())[0]
    tasks = [*play.get("pre_tasks", []), *play.get("post_tasks", [])]
    for role in verify_stage_roles():
        tasks += [
            t for p in sorted((REPO / "roles" / role / "tasks").glob("*.yml")) for t in yaml.safe_load(p.read_text())
        ]
    set_names = iv.task_names(tasks)
    assert {"gpu_fabric_verify_run_id", "report_result", "verify_common_result"} <= set_names
    assert sorted(name for name in set_names if vs.is_carried(name)) == []


def test_the_sites_verify_variables_reach_the_jobs_inventory_and_nothing_else_does():
    site = {
        "gpu_fabric_racks": {"rack-a": ["gb200-a-t0", "gb200-a-t1"]},
        "gpu_fabric_rack_label": "example.com/rack",
        "gpu_fabric_trays_per_clique": 18,
        "gpu_fabric_gpus_per_tray": 4,
        "verify_nvbandwidth_image": "registry.example.com/nvbandwidth:v0.7",
        "verify_nvbandwidth_min_fraction_of_peak": 0.85,
        "gpu_fabric_verify_settings": {"dcgm_diag": {"level": 2}},
        "dra_driver_namespace": "dra",
        # the job's own, and what is not the verify stage's
        "gpu_fabric_kubeconfig": "/home/admin/.kube/config",
        "gpu_fabric_report_dir": "/srv/reports",
        "gpu_fabric_verify_run_id": "20261206T030000Z",
        "gpu_fabric_driver_owner": "host",
        "verify_schedule_image": IMAGE,
        "ansible_host": "10.0.0.1",
        "site_registry": "registry.example.com",
    }
    config = objects(site_vars=site, verify_vars={"gpu_fabric_gpus_per_tray": 2})["schedule"][0]
    assert inventory_of(config)["all"]["vars"] == {
        "dra_driver_namespace": "dra",
        "gpu_fabric_gpus_per_tray": 2,  # verify_schedule_verify_vars wins
        "gpu_fabric_rack_label": "example.com/rack",
        "gpu_fabric_racks": {"rack-a": ["gb200-a-t0", "gb200-a-t1"]},
        "gpu_fabric_trays_per_clique": 18,
        "gpu_fabric_verify_settings": {"dcgm_diag": {"level": 2}},
        "verify_nvbandwidth_image": "registry.example.com/nvbandwidth:v0.7",
        "verify_nvbandwidth_min_fraction_of_peak": 0.85,
        "gpu_fabric_report_dir": "/var/lib/gpu-fabric/report",
    }
    assert vs.carried_names(site) == [
        "dra_driver_namespace",
        "gpu_fabric_gpus_per_tray",
        "gpu_fabric_rack_label",
        "gpu_fabric_racks",
        "gpu_fabric_trays_per_clique",
        "gpu_fabric_verify_settings",
        "verify_nvbandwidth_image",
        "verify_nvbandwidth_min_fraction_of_peak",
    ]


def test_the_host_check_grant_comes_only_when_asked_for_with_the_sites_images_and_commands():
    assert not [o for o in objects()["rbac"] if o["metadata"]["name"] == "gpu-fabric-verify-host-checks"]
    settings = {"gpu_health": {"image": "ubuntu:24.04"}, "dcgm_diag": {"level": 2}}
    rbac = objects(
        host_checks_rbac=True,
        namespace="ops",
        service_account="verifier",
        site_vars={"gpu_fabric_verify_settings": settings, "gpu_fabric_registry": "mirror.site"},
    )["rbac"]
    host = {o["kind"]: o for o in rbac if o["metadata"]["name"] == "gpu-fabric-verify-host-checks"}
    assert sorted(host) == [
        "ClusterRole",
        "ClusterRoleBinding",
        "ConfigMap",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    ]
    assert host["ClusterRole"]["rules"] == [
        {
            "apiGroups": ["gpu-fabric.nvidia.com"],
            "resources": ["hostchecks"],
            "resourceNames": ["gpu_health", "dcgm_diag"],
            "verbs": ["use"],
        }
    ]
    assert host["ClusterRoleBinding"]["subjects"] == [
        {"kind": "ServiceAccount", "name": "verifier", "namespace": "ops"}
    ]
    config = host["ConfigMap"]
    assert config["metadata"]["namespace"] == "ops"
    assert host["ValidatingAdmissionPolicyBinding"]["spec"]["paramRef"] == {
        "name": "gpu-fabric-verify-host-checks",
        "namespace": "ops",
        "parameterNotFoundAction": "Deny",
    }
    # the site's images, moved to the site's mirror as a run moves them
    assert config["data"]["gpu_health.image"] == "mirror.site/library/ubuntu:24.04"
    assert config["data"]["dcgm_diag.image"] == "mirror.site/nvidia/cloud-native/dcgm:4.6.0-1-ubuntu24.04"
    assert "dcgmi diag -r 2 -j" in config["data"]["dcgm_diag.script"]
    user = 'request.userInfo.username == "system:serviceaccount:ops:verifier"'
    assert host["ValidatingAdmissionPolicy"]["spec"]["matchConditions"][0]["expression"] == user


def test_the_shipped_host_check_parameters_are_what_the_checks_make_with_their_defaults():
    """docs/rbac/verify-stage.yaml, applied by hand, admits the host checks' pods as the collection makes them: its
    ConfigMap holds each check's default image and command script (a change of a check's script shows here)."""
    (shipped,) = [
        d for d in SHIPPED if d["kind"] == "ConfigMap" and d["metadata"]["name"] == vs.OPTIONAL["host_checks"]
    ]
    assert shipped["data"] == vs.host_checks_params({})
    assert sorted(shipped["data"]) == ["dcgm_diag.image", "dcgm_diag.script", "gpu_health.image", "gpu_health.script"]


def test_host_check_settings_the_checks_refuse_are_refused_naming_the_variable():
    with pytest.raises(vs.ScheduleError, match=r"^gpu_fabric_verify_settings: dcgm_diag.level is 7: 1 \("):
        objects(host_checks_rbac=True, site_vars={"gpu_fabric_verify_settings": {"dcgm_diag": {"level": 7}}})
