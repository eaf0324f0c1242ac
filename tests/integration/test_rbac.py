# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The shipped RBAC (docs/rbac/) is enough, and each stage runs with nothing more, on the simulated rack.

The sim's API server authorizes with Node,RBAC (sim/simrack/cluster.py), so a ServiceAccount gets exactly
what the applied file grants. Each test, as admin, creates the ServiceAccount that the file binds
(gpu-fabric/gpu-fabric-cluster, gpu-fabric/gpu-fabric-verify), applies the file unchanged, mints a token
(``kubectl create token``), writes a kubeconfig holding only that token, and runs the stage's playbook
with it the way the README tells users: ``K8S_AUTH_KUBECONFIG`` and ``gpu_fabric_kubeconfig``
(``KUBECONFIG`` too, for Helm).

The cluster stage is proven from scratch: the stage is uninstalled as admin first (both Helm releases,
the MPI operator manifest, the CRDs, the namespaces), then playbooks/cluster.yml installs it under the
ServiceAccount, then a second run converges with changed=0. The stage is left installed, as the
``cluster_stage`` fixture expects.
"""

from __future__ import annotations

import base64
import datetime
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from verify_helpers import ZERO, cluster_stage_installed, gpu_trays, uninstall_cluster_stage, verification_objects

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT / "sim"))
from simrack import accounts, audit  # noqa: E402

pytestmark = pytest.mark.sim

RBAC = REPO_ROOT / "docs" / "rbac"
SA_NAMESPACE = accounts.NAMESPACE
RECAP = re.compile(r"^localhost\s*:\s*ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.M)
VERDICT_LABEL = "gpu-fabric.nvidia.com/verified"


def write_kubeconfig(sim_rack, path: Path, user: dict[str, str]) -> Path:
    return accounts.kubeconfig(sim_rack.kubeconfig, path, user)


def playbook(sim_rack, kubeconfig: Path, playbook_name: str, *args: str, timeout: int = 900):
    env = dict(sim_rack.env, K8S_AUTH_KUBECONFIG=str(kubeconfig), KUBECONFIG=str(kubeconfig))
    env.update(ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0")
    return subprocess.run(
        [
            str(REPO_ROOT / ".venv" / "bin" / "ansible-playbook"),
            "-i",
            str(REPO_ROOT / "inventories" / "sim"),
            str(REPO_ROOT / "playbooks" / playbook_name),
            "-e",
            json.dumps({"gpu_fabric_kubeconfig": str(kubeconfig)}),
            *args,
        ],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def recap(result: subprocess.CompletedProcess) -> dict[str, int]:
    match = RECAP.search(result.stdout)
    assert match, f"no PLAY RECAP:\n{result.stdout[-4000:]}\n{result.stderr[-2000:]}"
    return dict(zip(("ok", "changed", "unreachable", "failed"), (int(g) for g in match.groups())))


def verify_vars(report_dir: Path, prefix: str, **extra: Any) -> str:
    return json.dumps(
        {
            "gpu_fabric_report_dir": str(report_dir),
            "gpu_fabric_verify_namespace_prefix": prefix,
            "verify_imex_channel_timeout": 120,
            "verify_nvbandwidth_timeout": 180,
            "verify_nccl_timeout": 180,
            **extra,
        }
    )


def records(report_dir: Path) -> dict[str, dict[str, Any]]:
    return {p.parent.name: json.loads(p.read_text()) for p in sorted((report_dir / "records").glob("*/rack0.json"))}


@pytest.fixture(scope="module")
def cluster_installed_as_sa(sim_rack, tmp_path_factory):
    """playbooks/cluster.yml from scratch, then again, under the cluster-stage ServiceAccount."""
    uninstall_cluster_stage(sim_rack)
    kubeconfig, _token = sim_rack.service_account_kubeconfig(
        "gpu-fabric-cluster", tmp_path_factory.mktemp("rbac") / "kc", RBAC / "cluster-stage.yaml"
    )
    first = playbook(sim_rack, kubeconfig, "cluster.yml")
    started = datetime.datetime.now(datetime.timezone.utc)
    second = playbook(sim_rack, kubeconfig, "cluster.yml")
    return first, second, sim_rack.audited(audit.service_account_user(SA_NAMESPACE, "gpu-fabric-cluster"), started)


@pytest.fixture(scope="module")
def verify_sa(cluster_installed_as_sa, sim_rack, tmp_path_factory) -> tuple[Path, str]:
    """The verify-stage ServiceAccount with the shipped file applied (after the cluster stage: the file's
    diagnostics Role lives in the DRA driver's namespace), and a token kubeconfig of it."""
    return sim_rack.service_account_kubeconfig(
        "gpu-fabric-verify", tmp_path_factory.mktemp("rbac") / "verify-kc", RBAC / "verify-stage.yaml"
    )


def test_the_cluster_stage_installs_and_converges_with_only_the_shipped_rbac(sim_rack, cluster_installed_as_sa):
    first, second, _requests = cluster_installed_as_sa
    assert first.returncode == 0, first.stdout[-6000:] + first.stderr[-2000:]
    assert recap(first)["changed"] > 0
    assert cluster_stage_installed(sim_rack)
    assert second.returncode == 0, second.stdout[-6000:] + second.stderr[-2000:]
    assert recap(second)["changed"] == 0
    # the first revision of each release: installed by the ServiceAccount, not left from an admin's install
    for release, namespace in (("gpu-operator", "gpu-operator"), ("nvidia-dra-driver-gpu", "nvidia-dra-driver-gpu")):
        names = sim_rack.kubectl("get", "secret", "-n", namespace, "-l", "owner=helm", "-o", "name").stdout.split()
        assert names == [f"secret/sh.helm.release.v1.{release}.v1"]


def test_a_second_cluster_run_sends_the_api_server_no_write(cluster_installed_as_sa):
    """Counted by the API server itself (its audit log, simrack.audit): on an unchanged cluster every
    release, manifest and CRD is compared before anything is sent, so nothing is created, updated,
    patched or deleted, not even a dry run."""
    _first, second, requests = cluster_installed_as_sa
    assert second.returncode == 0, second.stdout[-6000:] + second.stderr[-2000:]
    assert requests, "the audit log holds none of the second run's requests: is the sim's audit log on?"
    assert [row.what for row in audit.writes(requests)] == []
    assert [row.what for row in requests if row.dry_run] == []


def test_a_cliques_check_with_labels_off_sends_the_api_server_no_write(sim_rack, verify_sa, tmp_path):
    kubeconfig, _token = verify_sa
    started = datetime.datetime.now(datetime.timezone.utc)
    run = playbook(sim_rack, kubeconfig, "verify.yml", "--tags", "cliques", "-e", verify_vars(tmp_path, "rbac-cliques"))

    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    assert sorted(records(tmp_path)) == ["cliques"]
    requests = sim_rack.audited(audit.service_account_user(SA_NAMESPACE, "gpu-fabric-verify"), started)
    assert requests, "the audit log holds none of the run's requests: is the sim's audit log on?"
    assert [row.what for row in audit.writes(requests)] == []


def test_the_cluster_stage_account_cannot_reach_outside_its_namespaces(sim_rack, verify_sa):
    def can(*args: str) -> str:
        return sim_rack.kubectl(
            "auth", "can-i", *args, f"--as=system:serviceaccount:{SA_NAMESPACE}:gpu-fabric-cluster", check=False
        ).stdout.strip()

    assert can("create", "deployments", "-n", "gpu-operator") == "yes"
    assert can("get", "secrets", "-n", "kube-system") == "no"
    assert can("create", "pods", "-n", "default") == "no"
    assert can("delete", "clusterroles/cluster-admin") == "no"
    assert can("bind", "clusterroles/cluster-admin") == "no"


def test_the_admission_policy_keeps_the_verify_account_in_its_own_namespaces(sim_rack, verify_sa, tmp_path):
    kubeconfig, _token = verify_sa

    def as_verify(*args: str, manifest: dict[str, Any] | None = None) -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(sim_rack.bin_dir / "kubectl"), "--kubeconfig", str(kubeconfig), *args, "--dry-run=server"],
            input=json.dumps(manifest) if manifest else None,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "not-a-check"},
        "spec": {"containers": [{"name": "c", "image": "registry.invalid/busybox:1"}]},
    }
    if sim_rack.kubectl("get", "namespace", "rbac-vap-tenant", check=False).returncode != 0:
        sim_rack.kubectl("create", "namespace", "rbac-vap-tenant")  # as admin: a namespace of somebody else
    # the API server takes a policy in a moment after it is applied (the fixture just did): wait until it refuses
    sim_rack.wait_until(
        "the admission policy to be in force",
        lambda: as_verify("-n", "default", "create", "-f", "-", manifest=pod).returncode != 0,
        timeout=60,
    )
    own = {"app.kubernetes.io/part-of": "gpu-fabric-verify"}
    restricted = {**own, "pod-security.kubernetes.io/enforce": "restricted"}
    labelled = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "rbac-vap-own", "labels": restricted}}
    unenforced = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "rbac-vap-open", "labels": own}}
    # RBAC allows each of these calls (cluster-wide verbs); the policy refuses those outside the checks' namespaces
    refused = {
        "a pod in default": (
            as_verify("-n", "default", "create", "-f", "-", manifest=pod),
            "gpu-fabric-verify may create pods only in its own namespaces "
            "(labelled app.kubernetes.io/part-of=gpu-fabric-verify), not in default",
        ),
        "a tenant's namespace deleted": (
            as_verify("delete", "namespace", "rbac-vap-tenant"),
            "gpu-fabric-verify may delete only namespaces labelled app.kubernetes.io/part-of=gpu-fabric-verify, "
            "not rbac-vap-tenant",
        ),
        "a namespace of its own without Pod Security restricted": (
            as_verify("create", "-f", "-", manifest=unenforced),
            "gpu-fabric-verify may create a namespace only with Pod Security pod-security.kubernetes.io/enforce="
            "restricted, not rbac-vap-open with enforce=(none)",
        ),
        "a namespace without the label": (
            as_verify("create", "namespace", "rbac-vap-plain"),
            "gpu-fabric-verify may create only namespaces labelled app.kubernetes.io/part-of=gpu-fabric-verify, "
            "not rbac-vap-plain",
        ),
    }
    for what, (result, message) in refused.items():
        assert result.returncode != 0, what
        assert "ValidatingAdmissionPolicy 'gpu-fabric-verify-own-namespaces'" in result.stderr, (what, result.stderr)
        assert message in result.stderr, (what, result.stderr)
    allowed = as_verify("create", "-f", "-", manifest=labelled)
    assert allowed.returncode == 0, allowed.stderr
    # the logs: read in no namespace, and the log reader bound only in its own namespaces and only to itself
    logs_namespace = own_namespace(sim_rack, "rbac-vap-logs", "restricted")
    itself = {"kind": "ServiceAccount", "name": "gpu-fabric-verify", "namespace": SA_NAMESPACE}
    another = {"kind": "ServiceAccount", "name": "default", "namespace": "default"}
    for namespace, subject, message in (
        (
            "rbac-vap-tenant",
            itself,
            "gpu-fabric-verify may create rolebindings only in its own namespaces (labelled "
            "app.kubernetes.io/part-of=gpu-fabric-verify), not in rbac-vap-tenant",
        ),
        (
            logs_namespace,
            another,
            "gpu-fabric-verify may bind only ClusterRole gpu-fabric-verify-logs, and only to itself: RoleBinding "
            "rbac-vap-logs/gpu-fabric-verify-logs binds ClusterRole gpu-fabric-verify-logs to ServiceAccount default",
        ),
    ):
        result = as_verify("create", "-f", "-", manifest=log_binding(namespace, subject))
        assert result.returncode != 0, (namespace, subject)
        assert "ValidatingAdmissionPolicy 'gpu-fabric-verify-own-namespaces'" in result.stderr, result.stderr
        assert message in result.stderr, result.stderr
    bound = as_verify("create", "-f", "-", manifest=log_binding(logs_namespace, itself))
    assert bound.returncode == 0, bound.stderr
    admin = dict(log_binding(logs_namespace, itself), roleRef=dict(log_binding("", itself)["roleRef"], name="admin"))
    escalation = as_verify("create", "-f", "-", manifest=admin)  # RBAC's own refusal: no `bind` on admin
    assert escalation.returncode != 0 and "is attempting to grant RBAC permissions not currently held" in (
        escalation.stderr
    ), escalation.stderr
    as_account = f"--as=system:serviceaccount:{SA_NAMESPACE}:gpu-fabric-verify"
    for namespace in ("kube-system", "default", logs_namespace):
        read = sim_rack.kubectl("auth", "can-i", "get", "pods/log", "-n", namespace, as_account, check=False)
        assert read.stdout.strip() == "no", namespace
    sim_rack.kubectl("delete", "namespace", logs_namespace, "--wait=false")
    # kube-system: Kubernetes' own NamespaceLifecycle refuses its deletion before any policy is asked
    system = as_verify("delete", "namespace", "kube-system")
    assert system.returncode != 0 and "this namespace may not be deleted" in system.stderr, system.stderr
    for namespace in ("kube-system", "rbac-vap-tenant", "default"):
        assert sim_rack.kubectl("get", "namespace", namespace).returncode == 0
    sim_rack.kubectl("delete", "namespace", "rbac-vap-tenant", "--wait=false")


def log_binding(namespace: str, subject: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "gpu-fabric-verify-logs", "namespace": namespace},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "gpu-fabric-verify-logs"},
        "subjects": [subject],
    }


def test_the_verify_stage_passes_with_only_the_shipped_rbac(sim_rack, verify_sa, tmp_path):
    kubeconfig, _token = verify_sa
    prefix = "rbac-verify"
    extra = {
        "gpu_fabric_verify_nccl": True,
        "verify_nccl_image": "registry.invalid/nccl-tests:2.13-sim",
        "report_label_nodes": True,
    }
    run = playbook(sim_rack, kubeconfig, "verify.yml", "-e", verify_vars(tmp_path, prefix, **extra))

    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    found = records(tmp_path)
    assert sorted(found) == ["cliques", "imex_channel", "nccl", "nvbandwidth"]
    assert all(record["passed"] and record["objects_left"] == 0 for record in found.values()), found
    assert verification_objects(sim_rack, prefix) == ZERO
    trays = gpu_trays(sim_rack)["rack0"]
    labels = {n["metadata"]["name"]: n["metadata"]["labels"] for n in sim_rack.get_json("nodes")["items"]}
    assert {labels[tray].get(VERDICT_LABEL) for tray in trays} == {"passed"}
    for tray in trays:
        sim_rack.kubectl("label", "node", tray, f"{VERDICT_LABEL}-")
        sim_rack.kubectl("annotate", "node", tray, "gpu-fabric.nvidia.com/verification-")


def test_the_verify_stage_copies_pull_secrets_with_only_the_shipped_rbac(sim_rack, verify_sa, tmp_path):
    kubeconfig, _token = verify_sa
    prefix = "rbac-pull"
    config = base64.b64encode(json.dumps({"auths": {"registry.example.com": {"auth": "cm9ib3Q6cw=="}}}).encode())
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/dockerconfigjson",
        "metadata": {"name": "mirror-pull", "namespace": "gpu-operator"},
        "data": {".dockerconfigjson": config.decode()},
    }
    sim_rack.apply(secret)
    try:
        run = playbook(
            sim_rack,
            kubeconfig,
            "verify.yml",
            "--tags",
            "imex_channel,nvbandwidth",
            "-e",
            verify_vars(tmp_path, prefix, gpu_fabric_verify_image_pull_secrets=["mirror-pull"]),
        )
    finally:
        sim_rack.kubectl("delete", "secret", "-n", "gpu-operator", "mirror-pull", "--ignore-not-found")

    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    found = records(tmp_path)
    assert sorted(found) == ["imex_channel", "nvbandwidth"]
    assert all(record["passed"] and record["objects_left"] == 0 for record in found.values()), found
    assert all(record["timings"]["copy the image pull Secrets"] >= 0 for record in found.values())
    assert verification_objects(sim_rack, prefix) == ZERO

    def can(*args: str) -> str:
        return sim_rack.kubectl(
            "auth", "can-i", *args, f"--as=system:serviceaccount:{SA_NAMESPACE}:gpu-fabric-verify", check=False
        ).stdout.strip()

    assert can("get", "secrets", "-n", "gpu-operator") == "yes"
    assert can("create", "secrets", "-n", f"{prefix}-imex-channel-rack0") == "yes"
    assert can("get", "secrets", "-n", "kube-system") == "no"
    assert can("get", "secrets", "-n", f"{prefix}-imex-channel-rack0") == "no"
    assert can("list", "secrets", "-n", "gpu-operator") == "no"
    assert can("list", "secrets", "--all-namespaces") == "no"
    assert can("update", "secrets", "-n", "gpu-operator") == "no"


def test_the_verify_stage_without_one_needed_rule_fails_with_a_clear_message(sim_rack, verify_sa, tmp_path):
    kubeconfig, _token = verify_sa
    role = next(yaml.safe_load_all((RBAC / "verify-stage.yaml").read_text()))
    assert role["kind"] == "ClusterRole" and role["metadata"]["name"] == "gpu-fabric-verify"
    role["rules"] = [rule for rule in role["rules"] if rule["resources"] != ["rolebindings"]]
    sim_rack.apply(role)
    try:
        run = playbook(
            sim_rack, kubeconfig, "verify.yml", "--tags", "imex_channel", "-e", verify_vars(tmp_path, "rbac-nolog")
        )
    finally:
        sim_rack.kubectl("apply", "-f", str(RBAC / "verify-stage.yaml"))

    assert run.returncode != 0
    output = run.stdout + run.stderr
    assert "Traceback" not in output
    summary = records(tmp_path)["imex_channel"]["summary"]
    assert summary.startswith(
        "rack rack0: the check could not run: system:serviceaccount:gpu-fabric:gpu-fabric-verify may not read the "
        "logs of the check's pods in namespace rbac-nolog-imex-channel-rack0, nor bind ClusterRole "
        "gpu-fabric-verify-logs to itself there: apply docs/rbac/verify-stage.yaml again (it holds that role and the "
        "right to bind it); server: create RoleBinding rbac-nolog-imex-channel-rack0/gpu-fabric-verify-logs: "
        "403 Forbidden: rolebindings.rbac.authorization.k8s.io is forbidden: User "
        '"system:serviceaccount:gpu-fabric:gpu-fabric-verify" cannot create resource "rolebindings"'
    ), summary
    assert "\n" not in summary
    # a right the identity lacks: the check could not run, which says nothing of the fabric
    assert records(tmp_path)["imex_channel"]["verdict"] == "error"
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["verdict"] == "error"
    assert report["summary"].startswith("ERROR: ") and report["totals"]["failed"] == 0
    assert "could not run (not a verdict on the fabric): imex_channel (rack0" in report["summary"]
    assert report["coverage"]["counts"]["verified"] == 0  # nothing was measured
    assert verification_objects(sim_rack, "rbac-nolog") == ZERO  # the cleanup needs no log


def client_certificate(sim_rack, user: str) -> dict[str, str]:
    """A client certificate for ``user``, signed by the sim's CA (what a kubeconfig of an x509 user holds)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    pki = sim_rack.state / "pki"
    ca_key = serialization.load_pem_private_key((pki / "ca.key").read_bytes(), password=None)
    ca = x509.load_pem_x509_certificate((pki / "ca.crt").read_bytes())
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, user)]))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()
    )
    return {
        "client-certificate-data": base64.b64encode(cert.public_bytes(serialization.Encoding.PEM)).decode(),
        "client-key-data": base64.b64encode(key_pem).decode(),
    }


def secret_forms(secret: str) -> list[str]:
    """The secret as it could appear: as written, base64-decoded (PEM), and each line of a PEM body."""
    forms = [secret]
    try:
        decoded = base64.b64decode(secret, validate=True).decode()
    except ValueError:
        return forms
    forms.append(decoded)
    forms += [line for line in decoded.splitlines() if len(line) >= 40 and not line.startswith("-----")]
    return forms


def test_a_vvv_run_never_prints_the_token_nor_the_client_key(sim_rack, verify_sa, tmp_path):
    kubeconfig, token = verify_sa
    # an x509 user of the same ClusterRole: its kubeconfig carries a client certificate and key
    user = "gpu-fabric-verify-x509"
    sim_rack.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": user},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "gpu-fabric-verify"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
        }
    )
    credentials = client_certificate(sim_rack, user)
    cert_kubeconfig = write_kubeconfig(sim_rack, tmp_path / "x509-kc", credentials)
    try:
        for config, secrets in ((kubeconfig, [token]), (cert_kubeconfig, list(credentials.values()))):
            run = playbook(
                sim_rack,
                config,
                "verify.yml",
                "-vvv",
                "--tags",
                "cliques",
                "-e",
                verify_vars(tmp_path / f"report-{config.name}", "rbac-vvv", report_label_nodes=False),
            )
            output = run.stdout + run.stderr
            assert run.returncode == 0, output[-4000:]
            assert "ESTABLISH LOCAL CONNECTION" in output  # -vvv is on
            for secret in secrets:
                for form in secret_forms(secret):
                    assert form not in output, f"{config.name}: a secret of the kubeconfig is in the -vvv output"
    finally:
        sim_rack.kubectl("delete", "clusterrolebinding", user, "--ignore-not-found")


@pytest.fixture(scope="module")
def verify_account(cluster_stage, sim_rack, tmp_path_factory) -> Path:
    """The verify-stage ServiceAccount with the shipped file applied on the installed cluster stage (not
    reinstalled under the cluster account), and a token kubeconfig of it."""
    kubeconfig, _token = sim_rack.service_account_kubeconfig(
        "gpu-fabric-verify", tmp_path_factory.mktemp("rbac") / "verify-account-kc", RBAC / "verify-stage.yaml"
    )
    return kubeconfig


def dry_run_as(sim_rack, kubeconfig: Path, *args: str, manifest: dict[str, Any] | None = None):
    return subprocess.run(
        [str(sim_rack.bin_dir / "kubectl"), "--kubeconfig", str(kubeconfig), *args, "--dry-run=server"],
        input=json.dumps(manifest) if manifest else None,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def own_namespace(sim_rack, name: str, enforce: str, check: str = "") -> str:
    """As admin: a namespace that carries the checks' label and Pod Security ``enforce``, so that what the policy
    refuses in it is the policy's doing, not Pod Security admission's (which answers first)."""
    labels = {"app.kubernetes.io/part-of": "gpu-fabric-verify", "pod-security.kubernetes.io/enforce": enforce}
    if check:
        labels["gpu-fabric.nvidia.com/check"] = check
    sim_rack.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}})
    return name


def test_the_admission_policy_refuses_what_would_reach_a_node_from_the_verify_account(sim_rack, verify_account):
    """RBAC allows each call; the policy refuses a namespace that does not enforce restricted and a pod that reaches
    the host (privileged with any image, hostPath), unless the opt-in host-check grant is there (it is not here)."""
    namespace = own_namespace(sim_rack, "rbac-vap-host", "privileged")
    pod_of = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "not-a-check", "namespace": namespace},
        "spec": {"containers": [{"name": "c", "image": "registry.invalid/busybox:1"}]},
    }
    privileged = json.loads(json.dumps(pod_of))
    privileged["spec"]["containers"][0]["securityContext"] = {"privileged": True}
    host_path = json.loads(json.dumps(pod_of))
    host_path["spec"]["volumes"] = [{"name": "root", "hostPath": {"path": "/"}}]
    added = json.loads(json.dumps(pod_of))
    added["spec"]["containers"][0]["securityContext"] = {"capabilities": {"add": ["SYS_ADMIN"]}}
    own = {"app.kubernetes.io/part-of": "gpu-fabric-verify"}

    def namespace_labelled(name: str, enforce: str) -> dict[str, Any]:
        labels = dict(own, **({"pod-security.kubernetes.io/enforce": enforce} if enforce else {}))
        return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}

    sim_rack.wait_until(
        "the admission policy to hold pods too",
        lambda: dry_run_as(sim_rack, verify_account, "create", "-f", "-", manifest=privileged).returncode != 0,
        timeout=60,
    )
    pod_message = (
        "gpu-fabric-verify may not create a privileged pod, nor one with hostPath, hostPID, hostNetwork, hostIPC or "
        f"an added capability: pod {namespace}/not-a-check (check (none)); only the host checks"
    )
    refused = {
        "a privileged pod with another image": (privileged, pod_message),
        "a hostPath pod": (host_path, pod_message),
        "a pod adding a capability": (added, pod_message),
        "a namespace labelled privileged without the host grant": (
            namespace_labelled("rbac-vap-privileged", "privileged"),
            "gpu-fabric-verify may create a namespace only with Pod Security "
            "pod-security.kubernetes.io/enforce=restricted, not rbac-vap-privileged with enforce=privileged",
        ),
        "a namespace without a Pod Security level": (
            namespace_labelled("rbac-vap-nolevel", ""),
            "pod-security.kubernetes.io/enforce=restricted, not rbac-vap-nolevel with enforce=(none)",
        ),
    }
    for what, (manifest, message) in refused.items():
        result = dry_run_as(sim_rack, verify_account, "create", "-f", "-", manifest=manifest)
        assert result.returncode != 0, what
        assert "ValidatingAdmissionPolicy 'gpu-fabric-verify-own-namespaces'" in result.stderr, (what, result.stderr)
        assert message in result.stderr, (what, result.stderr)
    for manifest in (pod_of, namespace_labelled("rbac-vap-restricted", "restricted")):
        allowed = dry_run_as(sim_rack, verify_account, "create", "-f", "-", manifest=manifest)
        assert allowed.returncode == 0, allowed.stderr
    sim_rack.kubectl("delete", "namespace", namespace, "--wait=false")


def host_check_pod(sim_rack, namespace: str, check: str = "gpu_health", **spec: Any) -> dict[str, Any]:
    """A pod as the host check makes it on the first tray (its image and command from the grant's ConfigMap, the
    check's label, nodeSelector nvidia.com/gpu.present=true), with ``spec`` laid over its spec."""
    data = sim_rack.get_json("configmap", "-n", SA_NAMESPACE, "gpu-fabric-verify-host-checks")["data"]
    tray = gpu_trays(sim_rack)["rack0"][0]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{check.replace('_', '-')}-{tray}",
            "namespace": namespace,
            "labels": {"app.kubernetes.io/part-of": "gpu-fabric-verify", "gpu-fabric.nvidia.com/check": check},
        },
        "spec": {
            "restartPolicy": "Never",
            "automountServiceAccountToken": False,
            "nodeSelector": {"nvidia.com/gpu.present": "true"},
            "containers": [
                {
                    "name": "ctr",
                    "image": data[f"{check}.image"],
                    "command": ["sh", "-c", data[f"{check}.script"]],
                    "securityContext": {"privileged": True},
                }
            ],
            **spec,
        },
    }


def test_the_host_checks_pass_with_their_grant_and_anything_else_privileged_is_refused(
    sim_rack, verify_account, tmp_path
):
    """With the opt-in grant gpu-fabric-verify-host-checks (the shipped file holds it): the host checks' own pods are
    admitted and both checks pass (the restricted IMEX channel and nvbandwidth checks beside them); a privileged pod
    with another image, a hostPath, or off the GPU trays is refused by the grant's policy; without the grant's
    binding the same pods and their privileged namespace are refused."""
    namespace = own_namespace(sim_rack, "rbac-vap-gpu-health", "privileged", check="gpu_health")
    container = host_check_pod(sim_rack, namespace)["spec"]["containers"][0]
    sim_rack.wait_until(
        "the host-check policy to be in force",
        lambda: (
            dry_run_as(
                sim_rack,
                verify_account,
                "create",
                "-f",
                "-",
                manifest=host_check_pod(
                    sim_rack, namespace, containers=[dict(container, image="registry.invalid/x:1")]
                ),
            ).returncode
            != 0
        ),
        timeout=60,
    )
    admitted = dry_run_as(sim_rack, verify_account, "create", "-f", "-", manifest=host_check_pod(sim_rack, namespace))
    assert admitted.returncode == 0, admitted.stderr
    name = f"{namespace}/{host_check_pod(sim_rack, namespace)['metadata']['name']}"
    refused = {
        "a privileged pod with another image": (
            host_check_pod(sim_rack, namespace, containers=[dict(container, image="registry.invalid/x:1")]),
            "gpu-fabric-verify may run a gpu_health pod only with the site's image ubuntu:22.04 (ConfigMap "
            "gpu-fabric-verify-host-checks), not registry.invalid/x:1",
        ),
        "another command": (
            host_check_pod(sim_rack, namespace, containers=[dict(container, command=["sh", "-c", "cat /etc/shadow"])]),
            f"gpu-fabric-verify may run a gpu_health pod only with the check's command (sh -c and the script of "
            f"ConfigMap gpu-fabric-verify-host-checks), pod {name}",
        ),
        "a hostPath pod": (
            host_check_pod(sim_rack, namespace, volumes=[{"name": "root", "hostPath": {"path": "/"}}]),
            f"gpu-fabric-verify may run a gpu_health pod with no hostPath volume, hostNetwork, hostPID or hostIPC "
            f"(the check uses none), pod {name}",
        ),
        "a node selector that is no GPU tray": (
            host_check_pod(sim_rack, namespace, nodeSelector={"kubernetes.io/hostname": "sim-control-plane"}),
            f"gpu-fabric-verify may run a gpu_health pod only on a GPU tray (nodeSelector "
            f"nvidia.com/gpu.present=true, no nodeName), pod {name}",
        ),
        "a pod bound by name to the control-plane node, which has no GPU": (
            host_check_pod(sim_rack, namespace, nodeName="sim-control-plane"),
            f"gpu-fabric-verify may run a gpu_health pod only on a GPU tray (nodeSelector "
            f"nvidia.com/gpu.present=true, no nodeName), pod {name}",
        ),
        "a dcgm_diag pod in the gpu_health namespace": (
            host_check_pod(sim_rack, namespace, check="dcgm_diag"),
            f"gpu-fabric-verify may create a dcgm_diag pod only in a namespace of that check (labelled "
            f"gpu-fabric.nvidia.com/check=dcgm_diag), not in {namespace}",
        ),
    }
    for what, (manifest, message) in refused.items():
        result = dry_run_as(sim_rack, verify_account, "create", "-f", "-", manifest=manifest)
        assert result.returncode != 0, what
        assert "ValidatingAdmissionPolicy 'gpu-fabric-verify-host-checks'" in result.stderr, (what, result.stderr)
        assert message in result.stderr, (what, result.stderr)
    # an MPIJob in the host check's privileged namespace: its pods would be the MPI operator's, which no policy of
    # the account matches, so the MPIJob itself is refused there (the restricted checks' namespaces take it)
    privileged_template = {"spec": {"containers": [dict(container, name="launcher")]}}
    mpijob = {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": "not-a-check", "namespace": namespace},
        "spec": {
            "slotsPerWorker": 1,
            "mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "template": privileged_template},
                "Worker": {"replicas": 1, "template": privileged_template},
            },
        },
    }
    result = dry_run_as(sim_rack, verify_account, "create", "-f", "-", manifest=mpijob)
    assert result.returncode != 0
    assert "ValidatingAdmissionPolicy 'gpu-fabric-verify-own-namespaces'" in result.stderr, result.stderr
    assert (
        "gpu-fabric-verify may create an MPIJob only in a namespace with Pod Security "
        f"pod-security.kubernetes.io/enforce=restricted (the MPI operator creates its pods), not in {namespace}"
    ) in result.stderr, result.stderr

    run = playbook(
        sim_rack,
        verify_account,
        "verify.yml",
        "--tags",
        "gpu_health,dcgm_diag,imex_channel,nvbandwidth",
        "-e",
        verify_vars(tmp_path, "rbac-host"),
    )
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    found = records(tmp_path)
    # the restricted checks beside them, in their restricted namespaces (the MPI pods made by the operator)
    assert sorted(found) == ["dcgm_diag", "gpu_health", "imex_channel", "nvbandwidth"]
    assert all(record["passed"] and record["objects_left"] == 0 for record in found.values()), found

    # without the grant's binding: the own-namespaces policy refuses the same pod and a privileged namespace
    sim_rack.kubectl("delete", "clusterrolebinding", "gpu-fabric-verify-host-checks")
    try:
        message = "gpu-fabric-verify may not create a privileged pod, nor one with hostPath"
        sim_rack.wait_until(
            "the grant to be gone",
            lambda: (
                message
                in dry_run_as(
                    sim_rack, verify_account, "create", "-f", "-", manifest=host_check_pod(sim_rack, namespace)
                ).stderr
            ),
            timeout=60,
        )
        labels = {
            "app.kubernetes.io/part-of": "gpu-fabric-verify",
            "gpu-fabric.nvidia.com/check": "gpu_health",
            "pod-security.kubernetes.io/enforce": "privileged",
        }
        privileged = {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": "rbac-vap-nogrant", "labels": labels},
        }
        result = dry_run_as(sim_rack, verify_account, "create", "-f", "-", manifest=privileged)
        assert result.returncode != 0
        assert "ValidatingAdmissionPolicy 'gpu-fabric-verify-own-namespaces'" in result.stderr, result.stderr
        assert "not rbac-vap-nogrant with enforce=privileged" in result.stderr, result.stderr
    finally:
        sim_rack.kubectl("apply", "-f", str(RBAC / "verify-stage.yaml"))
        sim_rack.kubectl("delete", "namespace", namespace, "--wait=false")


def test_the_node_verdict_rights_change_only_the_collections_keys_on_a_node(sim_rack, verify_account):
    """The optional node-verdict rights (patch nodes, nodes/status) under their policy: the collection's labels,
    annotations, taint and condition are admitted (server-side dry runs), anything else on the Node is refused."""
    tray = gpu_trays(sim_rack)["rack0"][0]

    def patch(body: dict[str, Any], *extra: str) -> subprocess.CompletedProcess:
        return dry_run_as(
            sim_rack, verify_account, "patch", "node", tray, "--type=merge", "-p", json.dumps(body), *extra
        )

    sim_rack.wait_until(
        "the node-verdict policy to be in force",
        lambda: patch({"metadata": {"labels": {"team": "a"}}}).returncode != 0,
        timeout=60,
    )
    own = "gpu-fabric.nvidia.com/"
    admitted = {
        "the verdict label": patch({"metadata": {"labels": {f"{own}verified": "passed"}}}),
        "the verdict annotation": patch({"metadata": {"annotations": {f"{own}verification": "{}"}}}),
    }
    for what, result in admitted.items():
        assert result.returncode == 0, (what, result.stderr)
    # nodes/status: the account may patch it but not get it, which kubectl patch does first; the client patches only
    from kubernetes import client, config

    core = client.CoreV1Api(config.new_client_from_config(str(verify_account)))

    def patch_status(condition: dict[str, Any]) -> str:
        try:
            core.patch_node_status(
                tray,
                {"status": {"conditions": [condition]}},
                dry_run="All",
                _content_type="application/strategic-merge-patch+json",  # as node_verdict patches: by type
            )
        except client.ApiException as exc:
            return str(exc.body)
        return ""

    assert patch_status({"type": "GPUFabricVerified", "status": "True", "reason": "Passed"}) == ""
    refused_status = patch_status({"type": "Ready", "status": "False", "reason": "Evil"})
    assert "ValidatingAdmissionPolicy 'gpu-fabric-verify-node-verdict'" in refused_status, refused_status
    assert (
        f"gpu-fabric-verify may change only the condition GPUFabricVerified in the status of Node {tray}"
        in refused_status
    ), refused_status
    refused = {
        "another label": (
            patch({"metadata": {"labels": {"team": "a"}}}),
            f"gpu-fabric-verify may change only the labels and annotations gpu-fabric.nvidia.com/* of Node {tray}",
        ),
        "cordoning": (
            patch({"spec": {"unschedulable": True}}),
            f"gpu-fabric-verify may change only the taints gpu-fabric.nvidia.com/* of Node {tray}",
        ),
        "another taint": (
            patch({"spec": {"taints": [{"key": "evil", "effect": "NoExecute"}]}}),
            f"gpu-fabric-verify may change only the taints gpu-fabric.nvidia.com/* of Node {tray}",
        ),
    }
    for what, (result, message) in refused.items():
        assert result.returncode != 0, what
        assert "ValidatingAdmissionPolicy 'gpu-fabric-verify-node-verdict'" in result.stderr, (what, result.stderr)
        assert message in result.stderr, (what, result.stderr)
