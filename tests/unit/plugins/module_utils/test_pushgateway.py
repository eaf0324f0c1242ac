# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The Pushgateway push: the group's URL, the checks before sending, retries and the one-line failure.

The HTTP call is injected here; tests/unit/plugins/modules/test_verification_metrics.py pushes to a real one.
"""

from __future__ import annotations

import io
import urllib.error

import pytest
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.pushgateway import (
    PushError,
    PushTarget,
    given_secrets,
    group_url,
    is_transient,
    push,
    target_problems,
)

URL = "http://pushgateway.monitoring:9091"


class Answer:
    def __init__(self, code: int = 200) -> None:
        self.code = code
        self.closed = False

    def getcode(self) -> int:
        return self.code

    def close(self) -> None:
        self.closed = True


def http_error(code: int, body: str = "") -> urllib.error.HTTPError:
    return urllib.error.HTTPError(
        URL, code, {400: "Bad Request", 503: "Service Unavailable"}.get(code, "x"), {}, io.BytesIO(body.encode())
    )


class Opener:
    """open_url as the Pushgateway answers it: each call takes the next answer (an exception is raised)."""

    def __init__(self, *answers) -> None:
        self.answers = list(answers)
        self.calls = []

    def __call__(self, url, **kwargs):
        self.calls.append((url, kwargs))
        answer = self.answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return answer


def test_the_group_url_encodes_what_a_path_cannot_carry():
    assert group_url(PushTarget(URL + "/")) == f"{URL}/metrics/job/gpu_fabric_verify"
    target = PushTarget(URL, job="verify", grouping={"zone": "", "fleet": "a/b", "site": "dc 1"})
    # in name order; a value with '/' or an empty one as base64url, others percent-encoded
    assert group_url(target) == f"{URL}/metrics/job/verify/fleet@base64/YS9i/site/dc%201/zone@base64/="


@pytest.mark.parametrize(
    ("target", "words"),
    [
        (PushTarget("pushgateway:9091"), "is not an http(s) URL"),
        (PushTarget(URL, job=""), "job is empty"),
        (PushTarget(URL, grouping={"bad-name": "x", "job": "y"}), "grouping label names bad-name, job are not allowed"),
        (PushTarget(URL, grouping={"rack": "r0"}), "grouping labels rack are also labels of the pushed metrics"),
    ],
)
def test_a_target_that_cannot_work_is_refused_before_sending(target, words):
    assert words in target_problems(target, ["check", "rack"])


def test_a_good_target_has_no_problem():
    assert target_problems(PushTarget(URL, grouping={"fleet": "a"}), ["check", "rack"]) == ""


def test_the_push_is_a_put_of_the_text_with_its_content_type_and_credentials():
    answer = Answer()
    opener = Opener(answer)
    target = PushTarget(URL, username="u", password="p", headers={"X-Scope-OrgID": "gpu"}, validate_certs=False)
    result = push(target, "x 1\n", "text/plain; version=0.0.4; charset=utf-8", opener, sleep=pytest.fail)
    assert result == {"url": f"{URL}/metrics/job/gpu_fabric_verify", "status": 200, "tries": 1}
    url, kwargs = opener.calls[0]
    assert url == f"{URL}/metrics/job/gpu_fabric_verify"
    assert kwargs["method"] == "PUT" and kwargs["data"] == b"x 1\n"
    assert kwargs["headers"] == {"Content-Type": "text/plain; version=0.0.4; charset=utf-8", "X-Scope-OrgID": "gpu"}
    assert (kwargs["url_username"], kwargs["url_password"], kwargs["force_basic_auth"]) == ("u", "p", True)
    assert kwargs["validate_certs"] is False and answer.closed


def test_a_bearer_token_goes_as_the_authorization_header_without_basic_authentication():
    opener = Opener(Answer())
    push(PushTarget(URL, bearer_token="tok-0f9e8d"), "x 1\n", "text/plain", opener, sleep=pytest.fail)
    _url, kwargs = opener.calls[0]
    assert kwargs["headers"] == {"Content-Type": "text/plain", "Authorization": "Bearer tok-0f9e8d"}
    assert (kwargs["url_username"], kwargs["url_password"], kwargs["force_basic_auth"]) == (None, None, False)


CREDENTIALS = (
    "username and password (report_pushgateway_username, report_pushgateway_password) or bearer_token "
    "(report_pushgateway_bearer_token)"
)


@pytest.mark.parametrize(
    ("target", "message"),
    [
        (
            PushTarget("https://robot:hunter2@push.example.com:9091/prefix"),
            "pushgateway_url https://***@push.example.com:9091/prefix carries credentials, which would show in the "
            "task's result, its messages and its -vvv arguments; give the URL without them and the credentials as "
            + CREDENTIALS,
        ),
        (
            PushTarget("https://tok-0f9e8d@push.example.com"),
            "pushgateway_url https://***@push.example.com carries credentials, which would show in the task's result, "
            "its messages and its -vvv arguments; give the URL without them and the credentials as " + CREDENTIALS,
        ),
        (
            PushTarget(URL, headers={"authorization": "Bearer tok-0f9e8d"}),
            "headers holds Authorization, whose value would show in the task's arguments (-vvv); remove it from "
            "headers (report_pushgateway_headers) and give the credentials as " + CREDENTIALS,
        ),
        (
            PushTarget(URL, username="robot", password="hunter2", bearer_token="tok-0f9e8d"),
            "both bearer_token and username/password are set, and a push carries one Authorization; set bearer_token "
            "(report_pushgateway_bearer_token) or username and password, not both",
        ),
        (
            PushTarget(URL, password="hunter2"),
            "password is set without username, so no basic authentication would be sent; set username "
            "(report_pushgateway_username) too",
        ),
    ],
)
def test_credentials_anywhere_but_their_options_are_refused_naming_none(target, message):
    assert target_problems(target, ["rack"]) == message
    assert "hunter2" not in message and "tok-0f9e8d" not in message and "robot" not in message


def test_credentials_in_their_options_are_no_problem():
    assert target_problems(PushTarget(URL, username="robot", password="hunter2"), ["rack"]) == ""
    assert target_problems(PushTarget(URL, bearer_token="tok-0f9e8d", headers={"X-Scope-OrgID": "a"}), ["rack"]) == ""


@pytest.mark.parametrize(
    ("url", "headers", "secrets"),
    [
        ("https://robot:hunter2@push.example.com", {}, ("hunter2",)),
        ("https://tok-0f9e8d@push.example.com", None, ("tok-0f9e8d",)),
        (URL, {"Authorization": "Bearer tok-0f9e8d", "X-Scope-OrgID": "gpu"}, ("Bearer tok-0f9e8d",)),
        (URL, {"X-Scope-OrgID": "gpu"}, ()),
        ("", {}, ()),
    ],
)
def test_the_secrets_given_where_no_no_log_covers_them(url, headers, secrets):
    assert given_secrets(url, headers) == secrets


def test_a_transient_failure_is_tried_again_with_the_backoff():
    pauses = []
    opener = Opener(
        urllib.error.URLError(ConnectionRefusedError(111, "Connection refused")), http_error(503), Answer(202)
    )
    result = push(PushTarget(URL), "x 1\n", "text/plain", opener, sleep=pauses.append, clock=lambda: 0.0)
    assert result["tries"] == 3 and result["status"] == 202
    assert pauses == [1.0, 2.0]


def test_a_refused_push_fails_at_once_with_the_pushgateways_words():
    body = 'pushed metrics are invalid or inconsistent with existing metrics: collected metric "x"\nhas help "a"'
    opener = Opener(http_error(400, body), Answer())
    with pytest.raises(PushError) as raised:
        push(PushTarget(URL), "x 1\n", "text/plain", opener, sleep=pytest.fail)
    assert str(raised.value) == (
        f"the Pushgateway at {URL}/metrics/job/gpu_fabric_verify answered HTTP 400 Bad Request: pushed metrics are "
        'invalid or inconsistent with existing metrics: collected metric "x" has help "a"'
    )
    assert len(opener.calls) == 1


def test_a_pushgateway_that_stays_down_gives_one_line_after_the_last_try():
    refused = urllib.error.URLError(ConnectionRefusedError(111, "Connection refused"))
    opener = Opener(refused, refused, refused)
    with pytest.raises(PushError) as raised:
        push(PushTarget(URL, attempts=3), "x 1\n", "text/plain", opener, sleep=lambda _s: None, clock=lambda: 0.0)
    assert str(raised.value) == (
        f"cannot push the metrics to {URL}/metrics/job/gpu_fabric_verify: [Errno 111] Connection refused "
        "(after 3 tries); check that the Pushgateway runs and the URL (pushgateway_url) is right"
    )


@pytest.mark.parametrize(
    ("error", "transient"),
    [
        (http_error(500), True),
        (http_error(429), True),
        (http_error(404), False),
        (http_error(401), False),
        (TimeoutError("timed out"), True),
        (urllib.error.URLError("no route"), True),
        (ValueError("a bug"), False),
    ],
)
def test_which_failures_are_tried_again(error, transient):
    assert is_transient(error) is transient
