"""ProxySQL's own states are not an operator's intent, with clients holding connections.

A real ProxySQL keeps a server a LOAD removed in runtime_mysql_servers as OFFLINE_HARD for as long
as clients hold connections to it (the emulator plays that with ProxySQLLab.hold). That leftover
is never staged, never bars the node from a role, and never makes a pass refuse to act.
Hostgroups and weights as in test_galera_checker: node1 1000 > node2 500 > node3 100.
"""

from __future__ import annotations

import fcntl
import os
from typing import Any

import pytest

from checker_core.core.model import (
    Change,
    ChangeKind,
    NodeAddress,
    Plan,
    ServerRow,
    ServerStatus,
)
from checker_core.edges.admin_errors import ApplyFailed
from tests.integration.rig import HG, PassRun, Rig, rows_as_written

pytestmark = [pytest.mark.galera, pytest.mark.proxysql]

HARD = ServerStatus.OFFLINE_HARD


def runtime_status(rig: Rig, hostgroup: int, node: NodeAddress) -> ServerStatus | None:
    """The status ProxySQL itself shows, not read as configured."""
    found = [r.status for r in rig.live_raw() if (r.hostgroup_id, r.node) == (hostgroup, node)]
    return found[0] if found else None


def checked_passes(rig: Rig, count: int) -> list[PassRun]:
    """Passes that each exit 0 and leave nothing OFFLINE_HARD staged (no operator set any)."""
    done = []
    for _ in range(count):
        result = rig.run()
        assert result.code == 0, result.stderr
        hard = [r.describe() for r in rig.admin.read_rows(HG.all).staging if r.status is HARD]
        assert hard == [], f"{result.summary}: staged {hard}"
        done.append(result)
    return done


def test_a_writer_removed_while_a_client_holds_it_comes_back_and_may_write_again(
    rig: Rig, galera: Any, nodes: list[NodeAddress]
) -> None:
    n1, n2, _ = nodes
    rig.write_config(drain_timeout_ms=0)
    checked_passes(rig, 1)
    assert rig.writers == {n1}
    with rig.proxysql.hold(HG.writer, n1.host, n1.port) as held:
        galera.desync(1, True)
        # drains (OFFLINE_SOFT) first; the drain times out with the client still there, and the
        # row removed from the writer hostgroup stays OFFLINE_HARD in ProxySQL's runtime
        runs = checked_passes(rig, 3)
        assert rig.writers == {n2}
        assert runtime_status(rig, HG.writer, n1) is HARD
        assert (
            f"leaving ProxySQL once its clients let go: {n1} in hostgroup {HG.writer} "
            "(1 connection(s) in use)"
        ) in runs[-1].summary
        galera.desync(1, False)
        checked_passes(rig, 2)
        assert n1 in rig.backups
        assert n1 in rig.readers
        assert rig.writers == {n2}
        held.release()
    checked_passes(rig, 1)
    assert runtime_status(rig, HG.writer, n1) is None
    galera.kill(2)
    failover = checked_passes(rig, 1)[0]
    assert rig.writers == {n1}, failover.summary
    assert f"writer {n1} (was {n2})" in failover.summary


def test_a_writer_decommissioned_while_held_stops_no_pass(
    rig: Rig, galera: Any, nodes: list[NodeAddress]
) -> None:
    n1, n2, n3 = nodes
    checked_passes(rig, 1)
    with rig.proxysql.hold(HG.writer, n1.host, n1.port):
        # the operator takes node1 out of the roster and out of every hostgroup
        rig.admin.execute(
            "DELETE FROM mysql_servers WHERE hostname = %s AND port = %s", (n1.host, n1.port)
        )
        rig.admin.execute("LOAD MYSQL SERVERS TO RUNTIME")
        assert runtime_status(rig, HG.writer, n1) is HARD
        assert rig.writers == set()
        first = checked_passes(rig, 1)[0]
        assert rig.writers == {n2}, first.summary
        galera.kill(2)
        second = checked_passes(rig, 1)[0]
        assert rig.writers == {n3}, second.summary
        assert all(r.node != n1 for r in rig.admin.read_rows(HG.all).staging)


def test_a_failed_apply_puts_back_what_it_read_not_proxysqls_states(
    rig: Rig, nodes: list[NodeAddress]
) -> None:
    """A staging write ProxySQL refuses, after the removals and demotions went out: the apply
    puts back the staged rows it read, whatever runtime shows (a shun, a removed server held
    by a client)."""
    n1, n2, n3 = nodes
    checked_passes(rig, 1)
    rig.proxysql.shun(HG.backup_writer, n2.host, n2.port)
    with rig.proxysql.hold(HG.writer, n1.host, n1.port):
        rig.admin.execute(
            "DELETE FROM mysql_servers WHERE hostgroup_id = %s AND hostname = %s AND port = %s",
            (HG.writer, n1.host, n1.port),
        )
        rig.admin.execute("LOAD MYSQL SERVERS TO RUNTIME")
        assert runtime_status(rig, HG.writer, n1) is HARD
        # an operator's edit, staged and not loaded: put back as staged, not as live
        rig.admin.execute(
            "UPDATE mysql_servers SET weight = 42 WHERE hostgroup_id = %s AND hostname = %s "
            "AND port = %s",
            (HG.reader, n3.host, n3.port),
        )
        before = rig.staged()
        assert ServerRow(HG.reader, n3.host, n3.port, weight=42) in before, before
        # every reader out, then a writer row ProxySQL's CHECK on use_ssl refuses: the last
        # statement, as an ONLINE writer row always is
        refused = ServerRow(HG.writer, n2.host, n2.port, weight=500, use_ssl=5)
        kept = tuple(r for r in before if r.hostgroup_id not in (HG.reader, HG.writer))
        plan = Plan(
            hostgroups=HG,
            desired=(*kept, refused),
            changes=(Change(ChangeKind.ADD, None, refused, "a test"),),
            templates=tuple(r for r in before if r.hostgroup_id in HG.templates),
        )
        with pytest.raises(ApplyFailed, match="staging failed"):
            rig.admin.apply(plan, persist=False)
        staged = rig.staged()
    assert staged == before
    assert all(r.status is ServerStatus.ONLINE for r in staged), staged


def test_adopt_keeps_templates_an_operator_staged(rig: Rig, nodes: list[NodeAddress]) -> None:
    checked_passes(rig, 1)
    rig.admin.stage(HG.templates, [])
    rig.admin.execute("LOAD MYSQL SERVERS TO RUNTIME")
    mine = [ServerRow(HG.config_writer, n.host, n.port, weight=7) for n in nodes]
    rig.admin.stage(HG.templates, mine)  # staged, not loaded yet
    result = rig.run("adopt")
    assert result.code == 0, result.stderr
    assert "staged in mysql_servers and not loaded" in result.stdout
    rows = rig.admin.read_rows(HG.templates)
    assert rows.staging == tuple(mine)
    assert rows.runtime == ()


def test_adopt_takes_the_pass_lock(rig: Rig, nodes: list[NodeAddress]) -> None:
    checked_passes(rig, 1)
    before = rows_as_written(rig.admin.read_rows(HG.all))
    version = rig.load_version()
    lock = rig.state_dir / "galera.lab.lock"
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o640)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a pass under way
        result = rig.run("adopt", "--force")
    finally:
        os.close(fd)
    assert result.code == 1, result.stderr
    assert "a pass holds the lock" in result.stderr
    assert rows_as_written(rig.admin.read_rows(HG.all)) == before
    assert rig.load_version() == version
    assert rig.run("adopt", "--force").code == 0


def test_adopt_force_loads_no_operators_edit_staged_elsewhere(
    rig: Rig, nodes: list[NodeAddress]
) -> None:
    """adopt --force LOADs its templates as a pass LOADs its plan: an operator's edit staged in
    a hostgroup the cluster does not manage stays staged, not live (found by the simulated
    world: the command's LOAD carried it)."""
    checked_passes(rig, 1)
    other = 7700
    rig.admin.execute(
        "INSERT INTO mysql_servers (hostgroup_id, hostname, port, weight) VALUES (%s, %s, %s, 5)",
        (other, nodes[0].host, nodes[0].port),
    )
    rig.admin.execute("LOAD MYSQL SERVERS TO RUNTIME")
    rig.admin.execute(
        "UPDATE mysql_servers SET weight = 77 WHERE hostgroup_id = %s", (other,)
    )  # the operator's edit, not loaded yet
    result = rig.run("adopt", "--force")
    assert result.code == 0, result.stderr
    assert "kept staged, not loaded" in result.stdout
    rows = rig.admin.read_rows([other])
    assert [r.weight for r in rows.staging] == [77]
    assert [r.weight for r in rows.runtime] == [5]
    rig.admin.execute("DELETE FROM mysql_servers WHERE hostgroup_id = %s", (other,))
    rig.admin.execute("LOAD MYSQL SERVERS TO RUNTIME")
