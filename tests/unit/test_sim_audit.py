# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Reading the sim API server's audit log (sim/simrack/audit.py) on a real one: which requests wrote."""

from __future__ import annotations

import datetime
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT / "sim"))

from simrack import audit  # noqa: E402

LOG = REPO_ROOT / "tests" / "fixtures" / "k8s" / "audit-serviceaccount.jsonl"
PROBE = audit.service_account_user("audit-probe", "probe")


def test_each_request_is_one_row_with_what_it_touched():
    rows = audit.requests(LOG)

    assert [row.verb for row in rows] == [
        "get", "create", "create", "create", "get", "patch", "list", "delete", "get", "get", "get", "list",
        "watch", "get", "patch",
    ]  # fmt: skip
    assert {row.user for row in rows} == {PROBE}
    assert rows[5].what == "patch configmaps audit-probe/c1 (200, kubectl/v1.34.4)"
    assert rows[1].what == "create selfsubjectaccessreviews.authorization.k8s.io (201, kubectl/v1.34.4)"
    assert rows[8].code == 404


def test_only_stored_writes_count_not_dry_runs_nor_reviews():
    writes = audit.writes(audit.requests(LOG))

    assert [row.what for row in writes] == [
        "create configmaps audit-probe/c1 (201, kubectl/v1.34.4)",
        "patch configmaps audit-probe/c1 (200, kubectl/v1.34.4)",
        "delete configmaps audit-probe/c1 (200, kubectl/v1.34.4)",
    ]
    dry_runs = [row.verb for row in audit.requests(LOG) if row.dry_run]
    assert dry_runs == ["create", "patch"]


def test_rows_are_kept_by_user_and_time():
    rows = audit.requests(LOG)
    since = rows[6].received

    assert audit.requests(LOG, user=PROBE, since=since) == rows[6:]
    assert audit.requests(LOG, user=audit.service_account_user("default", "probe")) == []
    later = rows[-1].received + datetime.timedelta(microseconds=1)
    assert audit.requests(LOG, since=later) == []


def test_a_line_cut_short_and_a_missing_log_read_as_nothing(tmp_path):
    whole = LOG.read_text().splitlines(keepends=True)
    cut = tmp_path / "audit.log"
    cut.write_text("".join(whole[:3]) + whole[3][:80])

    assert [row.verb for row in audit.requests(cut)] == ["get", "create", "create"]
    assert audit.requests(tmp_path / "absent.log") == []


def test_the_policy_logs_service_accounts_alone():
    rules = audit.POLICY["rules"]

    assert rules[0] == {"level": "Metadata", "userGroups": ["system:serviceaccounts"]}
    assert rules[-1] == {"level": "None"}
