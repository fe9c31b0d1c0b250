"""gr-checker end to end: the lab's real MySQL Group Replication group and ProxySQL endpoint.

Single-primary group; member 1 is the primary in the healthy state. Election weights in the lab:
member 1 > member 3 > member 2, so member 3 takes over unless a test says otherwise.
"""

from __future__ import annotations

import fcntl
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pymysql
import pytest

from checker_core.core.model import NodeAddress
from tests.integration.rig import HG, Daemon, Rig, addresses
from tests.integration.test_galera_checker import snapshot
from tests.lab.accounts import MONITOR_PASSWORD, MONITOR_USER
from tests.lab.process import free_port, wait_until

pytestmark = [pytest.mark.gr, pytest.mark.proxysql]


@pytest.fixture
def members(gr: Any) -> list[NodeAddress]:
    return addresses(gr.members)


@pytest.fixture
def rig(gr: Any, proxysql_admin: Any, tmp_path: Path, members: list[NodeAddress]) -> Iterator[Rig]:
    rig = Rig("gr-checker", tmp_path, proxysql_admin)
    rig.seed(dict.fromkeys(members, 100))
    yield rig
    rig.close()


def elected(gr: Any, n: int) -> None:
    wait_until(lambda: gr.primary_index() == n, 60, f"member {n} to be the group's primary")


# 1 -------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("mode", "readers"), [(0, {1, 2}), (1, {0, 1, 2}), (2, {1, 2})])
def test_steady_state_and_quiet_second_pass(
    rig: Rig, members: list[NodeAddress], mode: int, readers: set[int]
) -> None:
    rig.write_config(writer_is_also_reader=mode)
    first = rig.run()
    assert first.code == 0, first.stderr
    assert rig.writers == {members[0]}
    assert rig.backups == set()  # secondaries are super_read_only: never writers
    assert rig.readers == {members[i] for i in readers}
    version = rig.load_version()
    second = rig.run()
    assert second.code == 0, second.stderr
    assert rig.load_version() == version
    assert "no change" in second.summary


# 2 -------------------------------------------------------------------------------------------
def test_primary_killed_new_primary_writes_old_rejoins_as_reader(
    rig: Rig, gr: Any, members: list[NodeAddress]
) -> None:
    m1, _, m3 = members
    rig.passes(1)
    gr.kill(1)
    elected(gr, 3)
    rig.passes(1)
    assert rig.writers == {m3}
    assert m1 not in rig.readers | rig.backups | set(rig.in_hostgroup(HG.writer))
    gr.start(1)
    rig.passes(1)
    assert rig.writers == {m3}
    assert m1 in rig.readers


def test_primary_leaves_the_group(rig: Rig, gr: Any, members: list[NodeAddress]) -> None:
    m1, _, m3 = members
    rig.passes(1)
    gr.leave(1)
    elected(gr, 3)
    result = rig.run()
    assert result.code == 0, result.stderr
    assert rig.writers == {m3}
    assert m1 not in rig.readers | rig.backups | set(rig.in_hostgroup(HG.writer))
    gr.join(1)
    rig.passes(1)
    assert m1 in rig.readers
    assert rig.writers == {m3}


# 3 -------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("mode", "readers"), [(0, {0, 2}), (1, {0, 1, 2}), (2, {0, 2})])
def test_planned_switchover_followed_in_one_pass(
    rig: Rig, gr: Any, members: list[NodeAddress], mode: int, readers: set[int]
) -> None:
    m1, m2, _ = members
    rig.write_config(writer_is_also_reader=mode)
    rig.passes(1)
    gr.primary(2)
    rig.passes(1)
    assert rig.writers == {m2}
    assert m1 not in rig.in_hostgroup(HG.writer)  # super_read_only now: nothing to drain
    assert rig.readers == {members[i] for i in readers}


# 4 -------------------------------------------------------------------------------------------
def brownout(gr: Any, backlog: int) -> Any:
    """Member 2 will be elected with `backlog` transactions it cannot apply until released."""
    gr.set_member_weight(2, 100)
    hold = gr.hold_applier(2)
    gr.write_transactions(backlog)
    gr.wait_applier_queue(2, lambda q: q >= backlog, f"a backlog of {backlog}")
    gr.kill(1)
    elected(gr, 2)
    wait_until(lambda: gr.member_status(2).super_read_only, 30, "member 2 in brownout")
    return hold


def test_brownout_hold_keeps_writes_waiting_then_routes(
    rig: Rig, gr: Any, members: list[NodeAddress]
) -> None:
    m2 = members[1]
    rig.passes(1)
    hold = brownout(gr, 1500)
    first = rig.run()
    assert first.code == 0, first.stderr
    assert rig.writers == set(), "no super_read_only node in the writer hostgroup"
    assert f"brownout on {m2}: applier queue" in first.summary
    second = rig.run()
    assert rig.writers == set()
    assert "/s" in second.summary  # a rate, measured over the two passes
    hold.release()
    wait_until(lambda: gr.member_status(2).super_read_only is False, 60, "member 2 writable")
    rig.passes(1)
    assert rig.writers == {m2}


def test_brownout_route_adds_the_primary_at_once(
    rig: Rig, gr: Any, members: list[NodeAddress]
) -> None:
    m2 = members[1]
    rig.write_config(brownout="route")
    rig.passes(1)
    hold = brownout(gr, 500)
    try:
        rig.passes(1)
        assert rig.writers == {m2}
    finally:
        hold.release()


# 5 -------------------------------------------------------------------------------------------
def test_lagging_secondary_leaves_readers_until_drained(
    rig: Rig, gr: Any, members: list[NodeAddress]
) -> None:
    m3 = members[2]
    rig.write_config(max_transactions_behind=100)
    rig.passes(1)
    with gr.hold_applier(3):
        gr.write_transactions(400)
        gr.wait_applier_queue(3, lambda q: q > 100, "a backlog over 100")
        rig.passes(1)
        assert m3 not in rig.readers
    gr.wait_applier_queue(3, lambda q: q == 0, "the backlog to drain")
    rig.passes(1)
    assert m3 in rig.readers


# 6 -------------------------------------------------------------------------------------------
def test_minority_member_is_offline_at_once(rig: Rig, gr: Any, members: list[NodeAddress]) -> None:
    m1 = members[0]
    rig.write_config(retry_down=3)
    rig.passes(1)
    gr.freeze(2)
    gr.freeze(3)

    def lost_quorum() -> bool:
        view = gr.member_status(1).view or []
        return sum(1 for row in view if row.state == "UNREACHABLE") == 2

    wait_until(lost_quorum, 60, "member 1 to see the others UNREACHABLE")
    rig.passes(1)
    assert rig.writers == set()
    assert m1 not in rig.readers
    gr.ensure_healthy()
    rig.passes(1)
    assert rig.writers == {m1}


# 7 -------------------------------------------------------------------------------------------
def test_recovering_member_is_not_routed_until_online(
    rig: Rig, gr: Any, members: list[NodeAddress]
) -> None:
    m3 = members[2]
    rig.passes(1)
    gr.leave(3)
    gr.write_transactions(200)
    # a read lock on member 3 keeps its recovery from applying what it missed: RECOVERING
    port = m3.port
    blocker = pymysql.connect(host=m3.host, port=port, user="root", password="")
    try:
        with blocker.cursor() as cur:
            cur.execute("FLUSH TABLES WITH READ LOCK")
        gr.sql(3, "START GROUP_REPLICATION")
        gr.wait_member_state(3, ["RECOVERING"])
        rig.passes(1)
        assert m3 not in rig.readers
    finally:
        blocker.close()
    gr.wait_member_state(3, ["ONLINE"])
    rig.passes(1)
    assert m3 in rig.readers


# 8 -------------------------------------------------------------------------------------------
def test_lock_busy_admin_down_bad_config(rig: Rig) -> None:
    rig.passes(1)
    rig.state_dir.mkdir(parents=True, exist_ok=True)
    with open(rig.state_dir / "gr.lab.lock", "a+") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        busy = rig.run()
        assert busy.code == 0
        assert "another pass holds the lock" in busy.summary
    before = snapshot(rig)
    good = rig.config.read_text()
    rig.config.write_text(
        good.replace(f"port = {rig.proxysql.admin_port}", f"port = {free_port()}", 1)
    )
    down = rig.run()
    assert down.code == 1
    assert "unreachable" in down.summary
    rig.config.write_text(good.replace('brownout = "hold"', "") + "main_segment = 1\n")
    bad = rig.run()
    assert bad.code == 2
    assert "cluster[0].main_segment: only galera-checker uses this key" in bad.stderr
    assert snapshot(rig) == before


def test_dry_run_and_pause(rig: Rig, gr: Any, members: list[NodeAddress]) -> None:
    before = snapshot(rig)
    dry = rig.run("run", "--dry-run")
    assert dry.code == 0, dry.stderr
    assert "primary" in dry.stdout and "SQL:" in dry.stdout
    assert snapshot(rig) == before
    rig.passes(1)
    assert rig.run("pause").code == 0
    gr.primary(2)
    paused = snapshot(rig)
    assert "paused" in rig.run().summary
    assert snapshot(rig) == paused
    assert rig.run("resume").code == 0
    rig.passes(1)
    assert rig.writers == {members[1]}


def test_daemon_follows_failover_reloads_and_stops(
    rig: Rig, gr: Any, members: list[NodeAddress]
) -> None:
    m1, _, m3 = members
    rig.run_settings.update(interval_ms=500, max_runtime_ms=450)
    rig.write_config()
    daemon = Daemon(rig)
    try:
        assert daemon.next_pass()["writers"] == [str(m1)]
        gr.kill(1)
        elected(gr, 3)
        wait_until(lambda: rig.writers == {m3}, 30, "the daemon to follow the new primary")
        rig.write_config(writer_is_also_reader=0)
        os.kill(daemon.proc.pid, signal.SIGHUP)
        wait_until(lambda: m3 not in rig.readers, 30, "the reloaded writer_is_also_reader=0")
    finally:
        code = daemon.stop()
    assert code == 0


# R1
def test_monitor_account_reads_the_group_tables(gr: Any, members: list[NodeAddress]) -> None:
    """The probe's one round trip works with the least privileges the README asks for."""
    from gr_checker.probe import probe

    conn = pymysql.connect(
        host=members[0].host,
        port=members[0].port,
        user=MONITOR_USER,
        password=MONITOR_PASSWORD,
        client_flag=pymysql.constants.CLIENT.MULTI_STATEMENTS,
    )
    try:
        facts = probe(conn)
    finally:
        conn.close()
    assert facts.me is not None and facts.me.role == "PRIMARY"
    assert facts.has_quorum and len(facts.members) == 3
    assert facts.applier_queue == 0


def test_plain_text_monitor_login_loads_rsa_when_it_must(
    rig: Rig, gr: Any, members: list[NodeAddress]
) -> None:
    """caching_sha2_password over plain text with the server's cache emptied needs RSA, which
    the pass loads only then (it imports PyMySQL without it)."""
    [(plugin,)] = gr.sql(1, "SELECT plugin FROM mysql.user WHERE user = 'monitor' LIMIT 1")
    assert plugin == "caching_sha2_password"
    for n in (1, 2, 3):
        gr.sql(n, "FLUSH PRIVILEGES")  # forgets every cached login
    rig.monitor_settings.update(ssl_mode="disabled")
    rig.write_config()
    result = rig.run()
    assert result.code == 0, result.stderr
    assert rig.writers == {members[0]}


def set_connect_timeout_server_max(proxysql: Any, value: str) -> None:
    from tests.lab.proxysql import admin_cursor

    with admin_cursor(proxysql) as cur:
        cur.execute(
            "UPDATE global_variables SET variable_value = %s "
            "WHERE variable_name = 'mysql-connect_timeout_server_max'",
            (value,),
        )
        cur.execute("LOAD MYSQL VARIABLES TO RUNTIME")


def test_a_hold_that_can_outlast_proxysqls_wait_is_said_before_any_failover(
    rig: Rig, proxysql_admin: Any
) -> None:
    """The lab's group expels at once (expel timeout 0): an election of ~6 s fits ProxySQL's
    default 10 s; with 5 s it does not, and check-config, status and the pass line say so."""
    fits = rig.run("check-config")
    assert fits.code == 0, fits.stderr
    assert "a failover's hold fits in mysql-connect_timeout_server_max (10000 ms)" in fits.stdout
    set_connect_timeout_server_max(proxysql_admin, "5000")
    try:
        said = rig.run("check-config")
        assert said.code == 0, said.stderr
        warning = "a failover's hold can outlast mysql-connect_timeout_server_max (5000 ms)"
        assert warning in said.stderr
        assert "group_replication_member_expel_timeout 0 s" in said.stderr
        status = rig.run("status")
        assert warning in status.stdout
        passed = rig.run()
        assert passed.code == 0, passed.stderr
        assert warning in passed.summary
    finally:
        set_connect_timeout_server_max(proxysql_admin, "10000")
