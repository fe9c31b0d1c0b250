"""checker_core.edges.proxysql.AdminClient against the lab's ProxySQL admin endpoint."""

from __future__ import annotations

from typing import Any

import pytest

from checker_core.core.model import Change, ChangeKind, Hostgroups, Plan, ServerRow, ServerStatus
from checker_core.core.settings import Endpoint, ProxySQLSettings, Secret, Tls
from checker_core.core.statements import plan_statements
from checker_core.edges.admin_errors import AdminAccessDenied, AdminUnreachable, ApplyFailed
from checker_core.edges.proxysql import AdminClient
from checker_core.edges.proxysql_peers import read_checksum
from tests.integration.rig import as_configured
from tests.lab.process import free_port

pytestmark = pytest.mark.proxysql

HG = Hostgroups(
    writer=100, reader=101, backup_writer=102, offline=9100, config_writer=8100, config_reader=8101
)
FOREIGN = ServerRow(500, "127.0.0.99", 3399, comment="not ours")
TEMPLATE = ServerRow(8100, "127.0.0.1", 3311, weight=1000)


def settings_for(
    lab: Any, password: str | None = None, port: int | None = None
) -> ProxySQLSettings:
    endpoint = Endpoint(
        user=lab.admin_user,
        password=Secret(password if password is not None else lab.admin_password),
        tls=Tls(),
        connect_timeout_ms=1000,
        read_timeout_ms=2000,
    )
    return ProxySQLSettings(host=lab.admin_host, port=port or lab.admin_port, endpoint=endpoint)


def insert(client: AdminClient, *rows: ServerRow) -> None:
    for row in rows:
        client.stage([row.hostgroup_id], [*list(client.read_staging([row.hostgroup_id])), row])


def change(row: ServerRow) -> Change:
    return Change(ChangeKind.ADD, None, row, "test")


@pytest.fixture
def client(proxysql_admin: Any) -> Any:
    with AdminClient.connect(settings_for(proxysql_admin)) as admin:
        insert(admin, FOREIGN, TEMPLATE)
        admin.execute("LOAD MYSQL SERVERS TO RUNTIME")
        yield admin


def test_read_rows_splits_runtime_and_staging(client: AdminClient) -> None:
    staged_only = ServerRow(101, "127.0.0.1", 3312)
    insert(client, staged_only)
    rows = client.read_rows(HG.all)
    assert as_configured(rows.runtime) == (TEMPLATE,)
    assert rows.staging == (staged_only, TEMPLATE)


def test_apply_goes_live_in_one_load_and_leaves_other_rows(client: AdminClient) -> None:
    before = read_checksum(client)
    assert before is not None
    writer = ServerRow(100, "127.0.0.1", 3311, weight=1000)
    reader = ServerRow(101, "127.0.0.1", 3312)
    plan = Plan(
        HG,
        templates=(TEMPLATE,),
        desired=(writer, reader),
        changes=(change(writer), change(reader)),
    )
    result = client.apply(plan, persist=True)
    assert result.loaded and result.saved and result.staged == 2
    after = read_checksum(client)
    assert after is not None and after.version == before.version + 1
    assert as_configured(client.read_rows(HG.all).runtime) == (writer, reader, TEMPLATE)
    foreign = client.execute(
        "SELECT hostname FROM runtime_mysql_servers WHERE hostgroup_id = %s", (500,)
    )
    assert foreign == [("127.0.0.99",)]
    disk = client.execute(
        "SELECT hostgroup_id FROM disk.mysql_servers WHERE hostgroup_id IN (%s, %s)", (100, 101)
    )
    assert sorted(int(r[0]) for r in disk) == [100, 101]


def test_empty_plan_loads_nothing(client: AdminClient) -> None:
    before = read_checksum(client)
    result = client.apply(Plan(HG, templates=(TEMPLATE,), desired=()), persist=True)
    assert (result.loaded, result.staged) == (False, 0)
    assert read_checksum(client) == before


def test_half_written_staging_is_repaired_without_load(client: AdminClient) -> None:
    writer = ServerRow(100, "127.0.0.1", 3311)
    client.apply(
        Plan(HG, templates=(TEMPLATE,), desired=(writer,), changes=(change(writer),)), persist=False
    )
    # a pass that died after writing part of its rows
    insert(client, ServerRow(101, "127.0.0.1", 3313, status=ServerStatus.OFFLINE_SOFT))
    before = read_checksum(client)
    result = client.apply(Plan(HG, templates=(TEMPLATE,), desired=(writer,)), persist=False)
    assert (result.loaded, result.staged) == (False, 1)
    assert client.read_rows(HG.all).staging == (writer, TEMPLATE)
    assert read_checksum(client) == before


def test_failed_apply_leaves_live_rows_and_staging_as_they_were(client: AdminClient) -> None:
    good = ServerRow(100, "127.0.0.1", 3311)
    client.apply(
        Plan(HG, templates=(TEMPLATE,), desired=(good,), changes=(change(good),)), persist=False
    )
    before = client.read_rows(HG.all).staging
    too_heavy = ServerRow(101, "127.0.0.1", 3312, weight=10_000_001)
    plan = Plan(HG, templates=(TEMPLATE,), desired=(too_heavy,), changes=(change(too_heavy),))
    with pytest.raises(ApplyFailed, match="CHECK constraint failed"):
        client.apply(plan, persist=False)
    assert client.read_rows(HG.all).staging == before
    assert as_configured(client.read_rows(HG.all).runtime) == (good, TEMPLATE)


def test_dry_run_statements_applied_by_hand_match_apply(client: AdminClient) -> None:
    writer = ServerRow(100, "127.0.0.1", 3311, comment="it's the writer")
    plan = Plan(HG, templates=(TEMPLATE,), desired=(writer,), changes=(change(writer),))
    for statement in plan_statements(plan, client.read_staging(HG.managed), persist=False):
        client.execute(statement.render())
    assert as_configured(client.read_rows(HG.all).runtime) == (writer, TEMPLATE)


def test_wrong_password_is_access_denied(proxysql_admin: Any) -> None:
    with pytest.raises(AdminAccessDenied, match="access denied"):
        AdminClient.connect(settings_for(proxysql_admin, password="wrong"))


def test_nothing_listening_is_unreachable(proxysql_admin: Any) -> None:
    with pytest.raises(AdminUnreachable, match="unreachable"):
        AdminClient.connect(settings_for(proxysql_admin, port=free_port()))
