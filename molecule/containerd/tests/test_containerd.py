# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""containerd installed from the release tarball, CDI on in the effective configuration."""

from __future__ import annotations

from tray import SERVED_RELEASES, containerd_dump, cri_section, runc_options, sha256, unit_property

VERSION = "1.7.24"
TARBALL = f"containerd-{VERSION}-linux-amd64.tar.gz"
SITE_CONFIG = (
    "# Site containerd configuration: keep this comment.\n"
    "version = 2\n"
    'imports = ["/etc/containerd/site.d/*.toml"]\n'
    "\n"
    '[plugins."io.containerd.grpc.v1.cri".registry]\n'
    '  config_path = "/etc/containerd/certs.d"\n'
)


def test_binaries_come_from_the_pinned_release(host):
    binary = host.file("/usr/local/bin/containerd")
    assert binary.is_file
    assert binary.mode == 0o755
    assert binary.user == "root"
    assert f" {VERSION}" in host.check_output("/usr/local/bin/containerd --version")
    assert host.file("/usr/local/bin/containerd-shim-runc-v2").mode == 0o755


def test_tarball_kept_matches_the_published_checksum(host):
    kept = f"/var/cache/gpu-fabric/containerd/{TARBALL}"
    published = host.file(f"{SERVED_RELEASES}/v{VERSION}/{TARBALL}.sha256sum").content_string.split()[0]
    assert sha256(host, kept) == published


def test_service_runs_the_unpacked_binary_under_systemd(host):
    service = host.service("containerd")
    assert service.is_running
    assert service.is_enabled
    assert unit_property(host, "containerd", "FragmentPath") == "/etc/systemd/system/containerd.service"
    assert "path=/usr/local/bin/containerd" in unit_property(host, "containerd", "ExecStart")
    server = host.check_output("/usr/local/bin/ctr version")
    assert f"Version:  {VERSION}" in server.split("Server:")[1]


def test_effective_configuration_has_cdi_and_systemd_cgroup(host):
    dump = containerd_dump(host)
    cri = cri_section(dump)
    assert cri["enable_cdi"] is True
    assert cri["cdi_spec_dirs"] == ["/etc/cdi", "/var/run/cdi", "/opt/gpu-fabric/cdi"]
    assert runc_options(dump)["SystemdCgroup"] is True
    assert cri["registry"]["config_path"] == "/etc/containerd/certs.d"


def test_config_toml_keeps_site_content_and_adds_the_toolkit_import(host):
    text = host.file("/etc/containerd/config.toml").content_string
    assert text.startswith("# Site containerd configuration: keep this comment.\nversion = 2\n")
    assert 'imports = ["/etc/containerd/site.d/*.toml", "/etc/containerd/conf.d/*.toml"]' in text
    assert host.file("/etc/containerd/config.toml").mode == 0o644


def test_original_config_was_backed_up_once(host):
    backups = host.check_output("ls /etc/containerd/ | grep -c '^config.toml\\..*~$' || true")
    assert backups == "1"
    backup = host.check_output("ls /etc/containerd/config.toml.*~")
    assert host.file(backup).content_string == SITE_CONFIG


RUNC_VERSION = "1.1.5"


def test_runc_installed_from_its_release_with_the_checksum(host):
    runc = host.file("/usr/local/sbin/runc")
    assert runc.is_file
    assert runc.mode == 0o755
    assert runc.user == "root"
    assert f"runc version {RUNC_VERSION}" in host.check_output("/usr/local/sbin/runc --version")
    published = host.file(f"/srv/gpu-fabric-sim/opencontainers/runc/releases/download/v{RUNC_VERSION}/runc.sha256sum")
    expected = next(line.split()[0] for line in published.content_string.splitlines() if line.endswith(" runc.amd64"))
    assert sha256(host, "/usr/local/sbin/runc") == expected


def test_containerd_starts_a_container(host):
    # A one-binary root file system made from the tray's own /bin/echo and its libraries; containerd
    # runs it through the shim and runc, as the kubelet's first pod would.
    host.check_output(
        "rm -rf /tmp/probe-rootfs && mkdir -p /tmp/probe-rootfs/bin && cp /bin/echo /tmp/probe-rootfs/bin/"
        " && for lib in $(ldd /bin/echo | grep -o '/lib[^ ]*'); do cp --parents $lib /tmp/probe-rootfs/; done"
    )
    run = host.run("/usr/local/bin/ctr run --rm --rootfs /tmp/probe-rootfs gpu-fabric-probe /bin/echo sandbox-started")
    assert run.rc == 0, run.stderr
    assert run.stdout.strip() == "sandbox-started"
