# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""verification_metrics's Pushgateway credentials: the push gets them, nothing the module prints shows them.

The module runs in-process up to its real ``exit_json``/``fail_json``, which print the JSON result that Ansible's
callback shows (``-vvv`` adds its ``invocation.module_args``); the HTTP call is a recording stand-in of ``open_url``,
and, for basic authentication, a real Pushgateway (Debian's ``prometheus-pushgateway``) that requires it.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request

import pytest
from ansible.module_utils.testing import patch_module_args
from ansible_collections.gpu_fabric.mnnvl.plugins.modules import verification_metrics

from tests.conftest import FIXTURES

RECORDS = str(FIXTURES / "verification_records" / "records")
RUN = "20261201T101500Z-ab12"
PASSWORD = "hunter2-0b7c"
TOKEN = "tok-0f9e8d7c6b5a"
PUSHGATEWAY = "https://push.example.com"


class Answer:
    def getcode(self) -> int:
        return 200

    def close(self) -> None:
        pass


@pytest.fixture
def opener(monkeypatch):
    """open_url as a Pushgateway that accepts every push; the calls it got."""
    calls = []

    def accept(url, **kwargs):
        calls.append((url, kwargs))
        return Answer()

    monkeypatch.setattr(verification_metrics, "open_url", accept)
    return calls


def printed(capsys, args: dict) -> tuple[str, dict]:
    """What the module prints for Ansible (its whole result, arguments included), and that result."""
    with patch_module_args(dict(args, _ansible_check_mode=False, _ansible_diff=True)), pytest.raises(SystemExit):
        verification_metrics.main()
    out = capsys.readouterr().out
    return out, json.loads(out)


def test_basic_authentication_reaches_the_push_and_its_password_shows_nowhere(capsys, opener):
    out, result = printed(
        capsys, {"records_dir": RECORDS, "run_id": RUN, "pushgateway_url": PUSHGATEWAY, "username": "robot",
                 "password": PASSWORD}
    )  # fmt: skip
    assert result["pushed"] is True, result
    _url, kwargs = opener[0]
    assert (kwargs["url_username"], kwargs["url_password"], kwargs["force_basic_auth"]) == ("robot", PASSWORD, True)
    assert PASSWORD not in out
    assert result["invocation"]["module_args"]["password"] == "VALUE_SPECIFIED_IN_NO_LOG_PARAMETER"


def test_the_former_option_names_still_give_basic_authentication(capsys, opener):
    out, result = printed(
        capsys, {"records_dir": RECORDS, "run_id": RUN, "pushgateway_url": PUSHGATEWAY, "url_username": "robot",
                 "url_password": PASSWORD}
    )  # fmt: skip
    assert result["pushed"] is True, result
    assert (opener[0][1]["url_username"], opener[0][1]["url_password"]) == ("robot", PASSWORD)
    assert PASSWORD not in out


def test_a_bearer_token_reaches_the_push_and_shows_nowhere(capsys, opener):
    out, result = printed(
        capsys, {"records_dir": RECORDS, "run_id": RUN, "pushgateway_url": PUSHGATEWAY, "bearer_token": TOKEN,
                 "headers": {"X-Scope-OrgID": "gpu-fleet"}}
    )  # fmt: skip
    assert result["pushed"] is True, result
    assert opener[0][1]["headers"]["Authorization"] == f"Bearer {TOKEN}"
    assert opener[0][1]["headers"]["X-Scope-OrgID"] == "gpu-fleet"
    assert TOKEN not in out


def test_a_url_with_credentials_is_refused_and_its_password_shows_nowhere(capsys, opener, tmp_path):
    textfile = tmp_path / "gpu_fabric.prom"
    out, result = printed(
        capsys, {"records_dir": RECORDS, "run_id": RUN, "textfile": str(textfile),
                 "pushgateway_url": f"https://robot:{PASSWORD}@push.example.com:9091"}
    )  # fmt: skip
    assert result["failed"] is True
    assert result["msg"] == (
        "pushgateway_url https://***@push.example.com:9091 carries credentials, which would show in the task's "
        "result, its messages and its -vvv arguments; give the URL without them and the credentials as username "
        "and password (report_pushgateway_username, report_pushgateway_password) or bearer_token "
        "(report_pushgateway_bearer_token)"
    )
    assert PASSWORD not in out  # the arguments -vvv shows included
    assert opener == [] and not textfile.exists()


def test_an_authorization_header_is_refused_and_its_token_shows_nowhere(capsys, opener):
    out, result = printed(
        capsys, {"records_dir": RECORDS, "run_id": RUN, "pushgateway_url": PUSHGATEWAY,
                 "headers": {"Authorization": f"Bearer {TOKEN}"}}
    )  # fmt: skip
    assert result["failed"] is True
    assert result["msg"].startswith("headers holds Authorization, whose value would show in the task's arguments")
    assert TOKEN not in out
    assert opener == []


def bcrypt_hash(password: str) -> str:
    crypt = pytest.importorskip("crypt", reason="the crypt module (Python < 3.13) hashes the Pushgateway's password")
    hashed = crypt.crypt(password, crypt.mksalt(crypt.METHOD_BLOWFISH))
    if not hashed or not hashed.startswith("$2"):
        pytest.skip("this libcrypt has no bcrypt")
    return hashed


@pytest.fixture(scope="module")
def guarded_pushgateway(tmp_path_factory):
    """A Pushgateway on a free local port that takes only the user robot with PASSWORD (its --web.config.file)."""
    binary = next(
        (shutil.which(name) for name in ("prometheus-pushgateway", "pushgateway") if shutil.which(name)), None
    )
    if not binary:
        reason = "no Pushgateway binary: apt-get install prometheus-pushgateway"
        if os.environ.get("CI"):
            pytest.fail(f"{reason} (.ci/run installs it; CI must run this test)")
        pytest.skip(reason)
    config = tmp_path_factory.mktemp("pushgateway") / "web.yml"
    config.write_text(json.dumps({"basic_auth_users": {"robot": bcrypt_hash(PASSWORD)}}))
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    process = subprocess.Popen(
        [binary, f"--web.listen-address=127.0.0.1:{port}", f"--web.config.file={config}", "--log.level=warn"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                urllib.request.urlopen(f"{url}/-/ready", timeout=5).close()  # the test's own local Pushgateway
            except urllib.error.HTTPError:
                break  # it answers: 401 without credentials
            except (urllib.error.URLError, OSError):
                if process.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"the Pushgateway did not start: {process.stderr.read().decode()}")
                time.sleep(0.1)
            else:
                pytest.fail("the Pushgateway answered without credentials")
        yield url
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_a_pushgateway_behind_basic_authentication_takes_the_push_and_refuses_a_wrong_password(
    capsys, guarded_pushgateway
):
    args = {"records_dir": RECORDS, "run_id": RUN, "pushgateway_url": guarded_pushgateway, "username": "robot",
            "push_attempts": 1}  # fmt: skip
    out, result = printed(capsys, dict(args, password=PASSWORD))
    assert result["pushed"] is True and result["push_url"] == f"{guarded_pushgateway}/metrics/job/gpu_fabric_verify"
    assert PASSWORD not in out
    wrong = "not-" + PASSWORD
    out, result = printed(capsys, dict(args, password=wrong))
    assert result["failed"] is True
    assert result["msg"].startswith(
        f"the Pushgateway at {guarded_pushgateway}/metrics/job/gpu_fabric_verify answered HTTP 401 Unauthorized"
    )
    assert wrong not in out and PASSWORD not in out
