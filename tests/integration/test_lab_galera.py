"""The Galera lab does what it promises, checked on the real cluster through status() and SQL.

Every test starts from the healthy cluster (the `galera` fixture repairs whatever the previous
test broke). The full-stop tests come last: they cost the most.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pymysql
import pytest

from tests.lab import process
from tests.lab.accounts import APP_PASSWORD, APP_SCHEMA, APP_USER, MONITOR_PASSWORD, MONITOR_USER
from tests.lab.galera import NODE_INDEXES, GaleraLab, NodeStatus, main

pytestmark = pytest.mark.galera

# ER_UNKNOWN_COM_ERROR: "WSREP has not yet prepared node for application use"
WSREP_NOT_READY = 1047
ER_OPTION_PREVENTS_STATEMENT = 1290
TABLE = f"`{APP_SCHEMA}`.`lab_probe`"


def _wait(probe: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    process.wait_until(probe, timeout, what, interval=0.3)


def _size_seen_by(lab: GaleraLab, nodes: list[int], size: int) -> Callable[[], bool]:
    def probe() -> bool:
        return all(
            s.primary and s.wsrep_cluster_size == size for s in lab.status() if s.index in nodes
        )

    return probe


def _connect(
    lab: GaleraLab, n: int, user: str, password: str, timeout: float = 5.0
) -> pymysql.connections.Connection[pymysql.cursors.Cursor]:
    node = lab.node(n)
    return pymysql.connect(
        host=node.host,
        port=node.port,
        user=user,
        password=password,
        connect_timeout=timeout,
        read_timeout=timeout,
        autocommit=True,
    )


def _app_query(lab: GaleraLab, n: int, query: str) -> list[tuple[object, ...]]:
    with _connect(lab, n, APP_USER, APP_PASSWORD) as conn, conn.cursor() as cur:
        cur.execute(query)
        return [tuple(row) for row in cur.fetchall()]


def _probe_table(lab: GaleraLab, n: int = 1) -> None:
    lab.sql(n, f"CREATE TABLE IF NOT EXISTS {TABLE} (id INT PRIMARY KEY, note VARCHAR(64))")


def _write_row(lab: GaleraLab, n: int, row_id: int, note: str) -> None:
    _probe_table(lab, n)
    lab.sql(n, f"REPLACE INTO {TABLE} (id, note) VALUES (%s, %s)", (row_id, note))


def _has_row(lab: GaleraLab, n: int, row_id: int, note: str) -> bool:
    return lab.sql(n, f"SELECT note FROM {TABLE} WHERE id = %s", (row_id,)) == [(note,)]


def _lab_mariadbds(lab: GaleraLab) -> list[int]:
    """Live processes whose command line names a file under the lab's directory."""
    found: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if (
            "mariadbd" in cmdline
            and str(lab.base) in cmdline
            and process.pid_alive(int(entry.name))
        ):
            found.append(int(entry.name))
    return found


def _assert_healthy(statuses: list[NodeStatus]) -> None:
    assert [s.index for s in statuses] == list(NODE_INDEXES)
    for s in statuses:
        assert s.pid is not None and not s.frozen, s
        assert s.wsrep_local_state_comment == "Synced", s
        assert s.wsrep_cluster_status == "Primary", s
        assert s.wsrep_cluster_size == 3, s


def test_up_gives_three_synced_primary_nodes(galera: GaleraLab) -> None:
    statuses = galera.status()
    _assert_healthy(statuses)
    assert len({s.pid for s in statuses}) == 3
    assert [s.port for s in statuses] == [3311, 3312, 3313]
    for s in statuses:
        assert s.read_only is False and s.wsrep_desync is False
        assert s.wsrep_reject_queries == "NONE"
        assert s.wsrep_local_recv_queue is not None


def test_sql_runs_on_one_node_and_writes_replicate(galera: GaleraLab) -> None:
    assert galera.sql(2, "SELECT @@port") == [(3312,)]
    _write_row(galera, 1, 1, "from node1")
    _wait(lambda: _has_row(galera, 3, 1, "from node1"), "the row to reach node3")


def test_accounts_exist_with_their_privileges(galera: GaleraLab) -> None:
    user, password = galera.monitor_credentials
    assert (user, password) == (MONITOR_USER, MONITOR_PASSWORD)
    with _connect(galera, 2, user, password) as conn, conn.cursor() as cur:
        cur.execute("SHOW GLOBAL STATUS LIKE 'wsrep_cluster_size'")
        assert cur.fetchall() == (("wsrep_cluster_size", "3"),)
        cur.execute("SELECT @@read_only")
        assert cur.fetchall() == ((0,),)
    _probe_table(galera)
    assert len(_app_query(galera, 3, f"SELECT COUNT(*) FROM {TABLE}")) == 1
    with _connect(galera, 1, "root", "") as conn, conn.cursor() as cur:
        cur.execute("SELECT CURRENT_USER()")
        assert cur.fetchall() == (("root@127.0.0.1",),)


def test_kill_then_start_rejoins_by_ist(galera: GaleraLab) -> None:
    galera.kill(1)
    assert galera.node_status(1).pid is None
    _wait(_size_seen_by(galera, [2, 3], 2), "nodes 2 and 3 to drop node1")
    # a write node1 misses while down: its restart must bring it over by IST
    _write_row(galera, 2, 2, "while node1 was down")
    log = galera.error_log(1)
    seen = log.stat().st_size

    started = galera.start(1)

    assert started.role == "joiner"
    _wait(_size_seen_by(galera, [1, 2, 3], 3), "a cluster of 3 again")
    _assert_healthy(galera.status())
    assert _has_row(galera, 1, 2, "while node1 was down")
    with log.open("rb") as handle:
        handle.seek(seen)
        assert b"IST received" in handle.read()


def test_stop_then_start(galera: GaleraLab) -> None:
    galera.stop(2)
    assert galera.node_status(2).pid is None
    _wait(_size_seen_by(galera, [1, 3], 2), "nodes 1 and 3 to see node2 leave")

    galera.start(2)

    _wait(_size_seen_by(galera, [1, 2, 3], 3), "a cluster of 3 again")
    _assert_healthy(galera.status())


def _launch_dying_with(
    galera: GaleraLab, monkeypatch: pytest.MonkeyPatch, last_line: str
) -> list[tuple[int, bool]]:
    """Make node launches die once, SIGKILLed after writing last_line to the error log.

    The stand-in names the node's my.cnf on its command line, as mariadbd does, so the lab
    tracks it as the node's process. Returns each launch's node and whether its galera.cache
    was there when it was launched, in order.
    """
    real_launch = galera._launch
    launched: list[tuple[int, bool]] = []

    def launch(n: int, extra: list[str]) -> int:
        files = galera._files(n)
        launched.append((n, files.gcache.exists()))
        if len(launched) > 1:
            return real_launch(n, extra)
        script = 'echo "$1" >> "$2"; kill -KILL $$'
        argv = ["sh", "-c", script, "sh", last_line, str(files.error_log), str(files.cnf)]
        return process.spawn(argv, log_path=files.stdout_log, pid_path=files.lab_pid)

    monkeypatch.setattr(galera, "_launch", launch)
    return launched


def test_a_node_dying_in_its_gcache_scan_starts_again_without_the_cache(
    galera: GaleraLab, monkeypatch: pytest.MonkeyPatch
) -> None:
    galera.stop(2)
    scan = "[Note] WSREP: GCache::RingBuffer initial scan...  0.0% (0/67108888 bytes) complete."
    launched = _launch_dying_with(galera, monkeypatch, scan)

    started = galera.start(2)

    assert launched == [(2, True), (2, False)], "launched again, without its galera.cache"
    assert "died scanning its galera.cache (killed by SIGKILL)" in started.repair
    _wait(_size_seen_by(galera, [1, 2, 3], 3), "a cluster of 3 again")


def test_a_node_dying_otherwise_while_starting_says_how_and_stays_down(
    galera: GaleraLab, monkeypatch: pytest.MonkeyPatch
) -> None:
    galera.stop(2)
    launched = _launch_dying_with(galera, monkeypatch, "[ERROR] Aborting")

    died = r"node2 exited while starting \(killed by SIGKILL\)"
    with pytest.raises(process.LabError, match=died):
        galera.start(2)

    assert launched == [(2, True)]
    assert galera.node_status(2).pid is None
    assert galera._files(2).gcache.exists(), "a death elsewhere keeps the cache"


def test_freeze_then_thaw(galera: GaleraLab) -> None:
    galera.freeze(3)

    frozen = galera.node_status(3)
    assert frozen.frozen and frozen.pid is not None
    assert frozen.wsrep_local_state_comment is None
    assert process.pid_frozen(frozen.pid)
    with pytest.raises(pymysql.err.OperationalError):
        _connect(galera, 3, MONITOR_USER, MONITOR_PASSWORD, timeout=1.0)
    _wait(_size_seen_by(galera, [1, 2], 2), "nodes 1 and 2 to drop the frozen node3")

    galera.thaw(3)

    assert not galera.node_status(3).frozen
    _wait(_size_seen_by(galera, [1, 2, 3], 3), "a cluster of 3 again")
    _assert_healthy(galera.status())


def test_desync_on_and_off(galera: GaleraLab) -> None:
    galera.desync(2, True)
    _wait(
        lambda: galera.node_status(2).wsrep_local_state_comment == "Donor/Desynced",
        "node2 to be Donor/Desynced",
    )
    assert galera.node_status(2).wsrep_desync is True

    galera.desync(2, False)
    _wait(lambda: galera.node_status(2).wsrep_local_state_comment == "Synced", "node2 Synced")
    assert galera.node_status(2).wsrep_desync is False


def test_reject_all_refuses_queries_and_none_accepts_them(galera: GaleraLab) -> None:
    _probe_table(galera)
    query = f"SELECT COUNT(*) FROM {TABLE}"

    galera.reject(1, "ALL")

    assert galera.node_status(1).wsrep_reject_queries == "ALL"
    with pytest.raises(pymysql.err.OperationalError) as refused:
        _app_query(galera, 1, query)
    assert refused.value.args[0] == WSREP_NOT_READY
    assert _app_query(galera, 2, query)  # only node1 refuses

    galera.reject(1, "NONE")

    assert galera.node_status(1).wsrep_reject_queries == "NONE"
    assert _app_query(galera, 1, query)


def test_reject_all_kill_drops_open_connections(galera: GaleraLab) -> None:
    with _connect(galera, 3, APP_USER, APP_PASSWORD) as conn, conn.cursor() as cur:
        cur.execute("SELECT 1")
        galera.reject(3, "all_kill")
        assert galera.node_status(3).wsrep_reject_queries == "ALL_KILL"
        with pytest.raises(pymysql.err.OperationalError):
            cur.execute("SELECT 1")


def test_read_only_on_and_off(galera: GaleraLab) -> None:
    _probe_table(galera)
    insert = f"REPLACE INTO {TABLE} (id, note) VALUES (3, 'app write')"

    galera.set_read_only(2, True)

    assert galera.node_status(2).read_only is True
    with pytest.raises(pymysql.err.OperationalError) as refused:
        _app_query(galera, 2, insert)
    assert refused.value.args[0] == ER_OPTION_PREVENTS_STATEMENT

    galera.set_read_only(2, False)

    assert galera.node_status(2).read_only is False
    _app_query(galera, 2, insert)


def test_cli_status_prints_a_row_per_node(
    galera: GaleraLab, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["status"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].split()[:2] == ["node", "port"]
    rows = [line.split() for line in lines[1:]]
    assert [row[0] for row in rows] == ["node1", "node2", "node3"]
    assert all(row[3] == "Synced" and row[4] == "Primary" and row[5] == "3" for row in rows)


@pytest.mark.parametrize(
    "argv",
    [[], ["bogus"], ["kill"], ["kill", "7"], ["desync", "1", "maybe"], ["reject", "1", "SOME"]],
)
def test_cli_bad_usage_exits_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    assert "usage:" in capsys.readouterr().err


def test_two_nodes_killed_then_ensure_healthy(galera: GaleraLab) -> None:
    galera.kill(2)
    galera.kill(3)

    # one node of three has no quorum
    _wait(
        lambda: galera.node_status(1).wsrep_cluster_status == "non-Primary",
        "the survivor to lose its Primary component",
    )

    galera.ensure_healthy()

    _assert_healthy(galera.status())


def test_two_nodes_killed_then_start_one_gives_a_primary_pair(galera: GaleraLab) -> None:
    galera.kill(1)
    galera.kill(3)
    _wait(
        lambda: galera.node_status(2).wsrep_cluster_status == "non-Primary",
        "the survivor to lose its Primary component",
    )

    galera.start(3)

    _wait(_size_seen_by(galera, [2, 3], 2), "nodes 2 and 3 to form a Primary pair")
    assert galera.node_status(1).pid is None


def test_all_killed_then_up_bootstraps_from_recovered_position(galera: GaleraLab) -> None:
    _write_row(galera, 3, 4, "before the crash")
    for n in NODE_INDEXES:
        galera.kill(n)
    assert all(s.pid is None for s in galera.status())

    starts = galera.up()

    assert [s.role for s in starts].count("bootstrap") == 1
    _assert_healthy(galera.status())
    for n in NODE_INDEXES:
        assert _has_row(galera, n, 4, "before the crash")


def test_down_leaves_no_mariadbd_then_up_again(galera: GaleraLab) -> None:
    galera.down()

    assert _lab_mariadbds(galera) == []
    assert all(s.pid is None for s in galera.status())

    galera.up()

    _assert_healthy(galera.status())
