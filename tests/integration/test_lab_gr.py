"""The GR lab does to a real MySQL Group Replication group what it promises.

Each test starts from the healthy group (`gr` fixture: 3 ONLINE, member 1 PRIMARY) and may break
it. Every wait is a poll with a deadline; nothing here asserts on how long anything took.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pymysql
import pytest

from tests.lab.accounts import MONITOR_PASSWORD, MONITOR_USER
from tests.lab.gr import GrLab, MemberStatus
from tests.lab.paths import LOOPBACK
from tests.lab.process import LabError, wait_until

pytestmark = pytest.mark.gr

DEADLINE = 90.0
BACKLOG = 1200


def _ports_seen_by(gr: GrLab, n: int) -> set[int] | None:
    """The ports in member n's own view, or None while it does not answer."""
    view = gr.member_status(n).view
    return None if view is None else {row.port for row in view}


def _wait_view(gr: GrLab, n: int, ports: set[int]) -> None:
    wait_until(lambda: _ports_seen_by(gr, n) == ports, DEADLINE, f"member {n} to see {ports}")


def _new_primary(gr: GrLab, old: int) -> Callable[[], int | None]:
    def probe() -> int | None:
        primary = gr.primary_index()
        return primary if primary != old else None

    return probe


def _port(gr: GrLab, n: int) -> int:
    return next(m.port for m in gr.members if m.index == n)


def _assert_healthy(statuses: list[MemberStatus], primary: int) -> None:
    assert [st.member_state for st in statuses] == ["ONLINE"] * 3
    assert [st.index for st in statuses if st.member_role == "PRIMARY"] == [primary]
    for st in statuses:
        assert st.super_read_only is (st.index != primary)
        assert st.view is not None
        assert sorted(row.state for row in st.view) == ["ONLINE"] * 3


def _lab_mysqld_pids(gr: GrLab) -> list[int]:
    """Every process whose command line names a member cnf of this lab, read from /proc."""
    marker = f"--defaults-file={gr.root}/".encode()
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        if marker in cmdline:
            pids.append(int(entry.name))
    return pids


def test_up_forms_a_single_primary_group(gr: GrLab) -> None:
    statuses = gr.status()
    _assert_healthy(statuses, primary=1)
    assert gr.primary_index() == 1
    gr.sql(1, "INSERT INTO gr_lab.ticks (n) VALUES (1)")
    with pytest.raises(LabError, match="super-read-only"):
        gr.sql(2, "INSERT INTO gr_lab.ticks (n) VALUES (2)")


def test_monitor_account_reads_what_the_checker_needs(gr: GrLab) -> None:
    for member in gr.members:
        conn = pymysql.connect(
            host=LOOPBACK,
            port=member.port,
            user=MONITOR_USER,
            password=MONITOR_PASSWORD,
            connect_timeout=5,
            read_timeout=10,
        )
        with conn, conn.cursor() as cur:
            cur.execute(
                "SELECT MEMBER_STATE FROM performance_schema.replication_group_members"
                " WHERE MEMBER_PORT = %s",
                (member.port,),
            )
            assert cur.fetchall() == (("ONLINE",),)
            cur.execute("SELECT COUNT(*) FROM performance_schema.replication_group_member_stats")
            assert cur.fetchall() == ((3,),)
            cur.execute(
                "SELECT @@super_read_only, @@read_only, @@group_replication_single_primary_mode"
            )
            assert cur.fetchall() == ((int(member.index != 1), int(member.index != 1), 1),)


def test_stop_of_the_primary_elects_another_and_start_brings_it_back(gr: GrLab) -> None:
    gr.stop(1)
    assert gr.member_status(1).pid is None
    new = wait_until(_new_primary(gr, old=1), DEADLINE, "a new primary")
    wait_until(lambda: gr.member_status(new).super_read_only is False, DEADLINE, "it writable")
    gr.start(1)
    st = gr.member_status(1)
    assert (st.member_state, st.member_role) == ("ONLINE", "SECONDARY")
    assert st.super_read_only is True
    assert gr.primary_index() == new


def test_kill_of_a_secondary_shrinks_the_group_and_start_rejoins(gr: GrLab) -> None:
    gr.kill(3)
    assert gr.member_status(3).pid is None
    survivors = {_port(gr, 1), _port(gr, 2)}
    _wait_view(gr, 1, survivors)
    _wait_view(gr, 2, survivors)
    gr.start(3)
    assert gr.member_status(3).member_state == "ONLINE"
    gr.wait_all_online()


def test_leave_and_join(gr: GrLab) -> None:
    gr.leave(2)
    st = gr.member_status(2)
    assert st.member_state == "OFFLINE"
    assert st.super_read_only is True
    _wait_view(gr, 1, {_port(gr, 1), _port(gr, 3)})
    gr.join(2)
    st = gr.member_status(2)
    assert (st.member_state, st.member_role) == ("ONLINE", "SECONDARY")
    _wait_view(gr, 1, {m.port for m in gr.members})


def test_freeze_gets_a_member_expelled_and_healing_brings_it_back(gr: GrLab) -> None:
    gr.freeze(3)
    st = gr.member_status(3)
    assert st.frozen and st.view is None
    with pytest.raises(pymysql.MySQLError):
        pymysql.connect(
            host=LOOPBACK, port=_port(gr, 3), user="root", connect_timeout=2, read_timeout=2
        )
    survivors = {_port(gr, 1), _port(gr, 2)}
    _wait_view(gr, 1, survivors)
    _wait_view(gr, 2, survivors)
    gr.thaw(3)
    # autorejoin_tries=0: the expelled member notices and stays out, in ERROR
    wait_until(lambda: gr.member_status(3).member_state == "ERROR", DEADLINE, "member 3 in ERROR")
    gr.ensure_healthy()
    _assert_healthy(gr.status(), primary=1)


def test_primary_switchover(gr: GrLab) -> None:
    gr.primary(2)
    assert gr.primary_index() == 2
    wait_until(lambda: gr.member_status(2).super_read_only is False, DEADLINE, "2 writable")
    assert gr.member_status(1).super_read_only is True
    gr.primary(1)
    assert gr.primary_index() == 1


def test_sql_runs_statements_with_parameters(gr: GrLab) -> None:
    assert gr.sql(2, "SELECT %s + %s", (40, 2)) == [(42,)]
    assert gr.sql(1, "DO 1") == []
    assert gr.sql(3, "SELECT @@port") == [(_port(gr, 3),)]
    with pytest.raises(LabError):
        gr.sql(1, "SELECT * FROM no_such_schema.no_such_table")


def test_backlog_grows_on_a_held_secondary_and_drains_on_release(gr: GrLab) -> None:
    with gr.hold_applier(2) as hold:
        gr.write_transactions(BACKLOG)
        queued = gr.wait_applier_queue(2, lambda q: q > 1000, "backlog past 1000")
        assert queued > 1000
        # only the held member lags: the other secondary keeps up
        gr.wait_applier_queue(3, lambda q: q == 0, "member 3 drained")
        assert gr.applier_queue(2) >= queued
        hold.release()
        assert gr.wait_applier_queue(2, lambda q: q == 0, "member 2 drained") == 0


def test_brownout_new_primary_stays_read_only_until_its_backlog_is_applied(gr: GrLab) -> None:
    gr.set_member_weight(2, 100)
    hold = gr.hold_applier(2)
    try:
        gr.write_transactions(BACKLOG)
        gr.wait_applier_queue(2, lambda q: q > 1000, "backlog past 1000")
        gr.kill(1)
        wait_until(lambda: gr.primary_index() == 2, DEADLINE, "member 2 elected")
        st = gr.member_status(2)
        assert (st.member_role, st.super_read_only) == ("PRIMARY", True)
        assert st.applier_queue is not None and st.applier_queue > 1000
        with pytest.raises(LabError, match="super-read-only"):
            gr.sql(2, "INSERT INTO gr_lab.ticks (n) VALUES (1)")
    finally:
        hold.release()
    wait_until(lambda: gr.member_status(2).super_read_only is False, DEADLINE, "2 writable")
    assert gr.applier_queue(2) == 0
    gr.sql(2, "INSERT INTO gr_lab.ticks (n) VALUES (1)")


def test_down_leaves_no_mysqld_and_up_restores_the_group(gr: GrLab) -> None:
    assert _lab_mysqld_pids(gr)
    gr.down()
    assert _lab_mysqld_pids(gr) == []
    assert all(st.pid is None for st in gr.status())
    gr.up()
    _assert_healthy(gr.status(), primary=1)
