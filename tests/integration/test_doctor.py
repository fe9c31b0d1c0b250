"""`doctor` on the lab's Galera cluster behind ProxySQL: quiet on a correct setup, and each of
the usual ways writes miss the writer found with its fix; nothing changed by it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from checker_core.core.model import NodeAddress
from tests.integration.rig import PassRun, Rig
from tests.lab.accounts import APP_USER, MONITOR_PASSWORD, MONITOR_USER
from tests.lab.proxysql import admin_cursor

pytestmark = [pytest.mark.galera, pytest.mark.proxysql]

WRITER, READER = 100, 101
# what a DBA sets up: writes and SELECT ... FOR UPDATE to the writer, other reads to readers
ROUTING = [
    (10, r"^SELECT.*FOR UPDATE", WRITER),
    (20, r"^SELECT", READER),
]


def admin(rig: Rig, *statements: tuple[str, tuple[object, ...]]) -> None:
    with admin_cursor(rig.proxysql) as cur:
        for sql, params in statements:
            cur.execute(sql, params)


def users_and_rules(
    rig: Rig, users: list[tuple[str, int]], rules: list[tuple[int, str, int]]
) -> None:
    statements: list[tuple[str, tuple[object, ...]]] = [
        ("DELETE FROM mysql_users", ()),
        ("DELETE FROM mysql_query_rules", ()),
    ]
    for name, hostgroup in users:
        statements.append(
            (
                "INSERT INTO mysql_users (username, password, default_hostgroup) "
                "VALUES (%s, %s, %s)",
                (name, "pw", hostgroup),
            )
        )
    for rule_id, digest, hostgroup in rules:
        statements.append(
            (
                "INSERT INTO mysql_query_rules (rule_id, active, match_digest, "
                "destination_hostgroup, apply) VALUES (%s, 1, %s, %s, 1)",
                (rule_id, digest, hostgroup),
            )
        )
    statements += [("LOAD MYSQL USERS TO RUNTIME", ()), ("LOAD MYSQL QUERY RULES TO RUNTIME", ())]
    admin(rig, *statements)


def monitor_variables(rig: Rig, **values: str) -> None:
    statements: list[tuple[str, tuple[object, ...]]] = [
        ("UPDATE global_variables SET variable_value = %s WHERE variable_name = %s", (v, k))
        for k, v in values.items()
    ]
    admin(rig, *statements, ("LOAD MYSQL VARIABLES TO RUNTIME", ()))


@pytest.fixture
def lab_rig(rig: Rig) -> Iterator[Rig]:
    """The rig with the correct routing; ProxySQL's monitor put back as the lab has it."""
    users_and_rules(rig, [(APP_USER, WRITER)], ROUTING)
    try:
        yield rig
    finally:
        monitor_variables(
            rig,
            **{
                "mysql-monitor_enabled": "true",
                "mysql-monitor_username": MONITOR_USER,
                "mysql-monitor_password": MONITOR_PASSWORD,
            },
        )
        users_and_rules(rig, [], [])
        admin(rig, ("DELETE FROM mysql_galera_hostgroups", ()))


def doctor(rig: Rig) -> tuple[PassRun, list[str]]:
    ran = rig.run("doctor")
    found = [line for line in ran.stdout.splitlines() if line.startswith(("problem:", "warning:"))]
    return ran, found


def test_the_lab_correct_setup_says_nothing_and_changes_nothing(lab_rig: Rig) -> None:
    # ProxySQL's monitor may shun a row meanwhile: the rows as configured are compared
    before = (lab_rig.live(), lab_rig.staged())
    ran, found = doctor(lab_rig)
    assert ran.code == 0, ran.stdout + ran.stderr
    assert found == []
    assert "doctor: nothing found (3 node(s), 1 cluster(s))" in ran.stdout
    assert (lab_rig.live(), lab_rig.staged()) == before


def test_a_rule_sending_inserts_to_the_readers(lab_rig: Rig) -> None:
    users_and_rules(lab_rig, [(APP_USER, WRITER)], [(5, r"^INSERT", READER), *ROUTING])
    ran, found = doctor(lab_rig)
    assert ran.code == 2
    assert found == [
        f"problem: user {APP_USER}: an INSERT goes to hostgroup {READER}, the reader hostgroup "
        f"of cluster lab, by query rule 5 (match_digest '^INSERT'); fix: make rule 5 send "
        f"writes to {WRITER}, or put a rule before it that does"
    ]


def test_select_for_update_caught_by_a_read_rule(lab_rig: Rig) -> None:
    users_and_rules(lab_rig, [(APP_USER, WRITER)], [(20, r"^SELECT", READER)])
    ran, found = doctor(lab_rig)
    assert ran.code == 2
    assert len(found) == 1 and "a SELECT ... FOR UPDATE goes to hostgroup 101" in found[0]


def test_a_user_whose_default_hostgroup_is_unmanaged(lab_rig: Rig) -> None:
    users_and_rules(lab_rig, [(APP_USER, WRITER), ("reports", 5)], ROUTING)
    ran, found = doctor(lab_rig)
    assert ran.code == 0, "a warning: the user may write to a cluster no checker here manages"
    assert found == [
        "warning: user reports: its default_hostgroup 5 is no hostgroup a cluster of this "
        "configuration manages: its writes go where no checker moves the writer; fix: if the "
        "user writes to a managed cluster, set its default_hostgroup to that cluster's "
        f"writer_hostgroup (lab: {WRITER})"
    ]


def test_a_user_that_writes_to_the_readers_by_default(lab_rig: Rig) -> None:
    users_and_rules(lab_rig, [(APP_USER, READER)], ROUTING)
    ran, found = doctor(lab_rig)
    assert ran.code == 2
    assert f"problem: user {APP_USER}: an INSERT goes to hostgroup {READER}" in found[0]
    assert f"by its default_hostgroup; fix: set its default_hostgroup to {WRITER}" in found[0]


def test_proxysql_monitor_account_without_replication_client_or_refused(
    lab_rig: Rig, galera: Any, nodes: list[NodeAddress]
) -> None:
    galera.sql(1, "CREATE USER IF NOT EXISTS 'plain'@'127.0.0.1' IDENTIFIED BY 'plain-pw'")
    try:
        monitor_variables(
            lab_rig, **{"mysql-monitor_username": "plain", "mysql-monitor_password": "plain-pw"}
        )
        ran, found = doctor(lab_rig)
        assert ran.code == 0
        assert found == [
            f"warning: node {n}: ProxySQL's monitor account plain has no REPLICATION CLIENT: "
            "ProxySQL's replication checks (max_replication_lag) fail on this node; fix: GRANT "
            "REPLICATION CLIENT ON *.* TO plain (on one node: grants replicate)"
            for n in nodes
        ]
        monitor_variables(lab_rig, **{"mysql-monitor_password": "wrong"})
        ran, found = doctor(lab_rig)
        assert ran.code == 2
        assert len(found) == 3 and all("cannot log in (error 1045" in f for f in found), found
        assert "wrong" not in ran.stdout + ran.stderr
    finally:
        galera.sql(1, "DROP USER IF EXISTS 'plain'@'127.0.0.1'")


def test_proxysql_monitor_disabled(lab_rig: Rig) -> None:
    monitor_variables(lab_rig, **{"mysql-monitor_enabled": "false"})
    ran, found = doctor(lab_rig)
    assert ran.code == 0
    assert len(found) == 1
    assert found[0].startswith("warning: ProxySQL's monitor: mysql-monitor_enabled is false")


def test_the_native_galera_manager_on_a_managed_hostgroup(lab_rig: Rig) -> None:
    # staged, never loaded: a live one would start moving the lab's servers
    admin(
        lab_rig,
        (
            "INSERT INTO mysql_galera_hostgroups (writer_hostgroup, backup_writer_hostgroup, "
            "reader_hostgroup, offline_hostgroup, active) VALUES (%s, %s, %s, %s, 1)",
            (WRITER, 102, READER, 9100),
        ),
    )
    ran = lab_rig.run("doctor")
    assert ran.code == 2
    assert (
        "problem: cluster lab: mysql_galera_hostgroups (staged) manages hostgroup 100 as its "
        "writer_hostgroup, which this checker manages as writer_hostgroup" in ran.stdout
    ), ran.stdout
