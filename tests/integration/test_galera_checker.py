"""galera-checker end to end: the lab's real MariaDB Galera cluster and ProxySQL admin endpoint.

Every test asserts runtime_mysql_servers after the passes. Hostgroups: writer 100, reader 101,
backup writer 102, offline 9100; writer weights node1 1000 > node2 500 > node3 100.
"""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
from typing import Any

import pytest

from checker_core.core.model import NodeAddress, ServerStatus
from tests.integration.rig import HG, PASS_TIMEOUT, Daemon, Rig, as_configured
from tests.lab.process import free_port, wait_until

pytestmark = [pytest.mark.galera, pytest.mark.proxysql]


def snapshot(rig: Rig) -> tuple[object, ...]:
    rows = rig.admin.read_rows(HG.all)
    return (as_configured(rows.runtime), rows.staging, rig.load_version())


# 1 -------------------------------------------------------------------------------------------
# writer_is_also_reader: 0 keeps reads off the writer, 1 lets everyone read, 2 is ProxySQL's
# native meaning (backup writers and read-only nodes read): on this all-writable cluster, as 0
READERS = {0: {1, 2}, 1: {0, 1, 2}, 2: {1, 2}}


@pytest.mark.parametrize("mode", sorted(READERS))
def test_steady_state_and_quiet_second_pass(rig: Rig, nodes: list[NodeAddress], mode: int) -> None:
    rig.write_config(writer_is_also_reader=mode)
    first = rig.run()
    assert first.code == 0, first.stderr
    n1, n2, n3 = nodes
    assert rig.writers == {n1}
    assert rig.backups == {n2, n3}
    assert rig.readers == {nodes[i] for i in READERS[mode]}
    assert rig.offline == set()
    version = rig.load_version()
    second = rig.run()
    assert second.code == 0, second.stderr
    assert rig.load_version() == version, "an empty plan must not LOAD"
    assert "no change" in second.summary


# 2 -------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("mode", "readers"), [(0, {2}), (1, {1, 2}), (2, {2})])
def test_writer_killed_is_replaced_in_the_next_pass(
    rig: Rig, galera: Any, nodes: list[NodeAddress], mode: int, readers: set[int]
) -> None:
    n1, n2, n3 = nodes
    rig.write_config(writer_is_also_reader=mode)
    rig.passes(1)
    galera.kill(1)
    result = rig.run()
    assert result.code == 0, result.stderr
    assert rig.writers == {n2}
    assert rig.backups == {n3}
    # no row of the dead writer is left in the writer hostgroup, in any status ProxySQL could
    # turn back to ONLINE by itself
    assert n1 not in rig.in_hostgroup(HG.writer)
    assert rig.readers == {nodes[i] for i in readers}
    assert n1 in rig.offline
    assert f"writer {n2} (was {n1})" in result.summary


def test_writer_shunned_by_proxysql_is_left_to_proxysql(rig: Rig, nodes: list[NodeAddress]) -> None:
    """ProxySQL's monitor shuns the writer while the checker's probe finds it healthy: no LOAD
    pass after pass (SHUNNED is ProxySQL's own passing state), and the pass line says so."""
    n1 = nodes[0]
    rig.passes(1)
    rig.proxysql.shun(HG.writer, n1.host, n1.port)
    version = rig.load_version()
    first, *rest = rig.passes(3)
    assert f"writer {n1} SHUNNED by ProxySQL itself" in first.summary
    assert all("no change" in p.summary for p in (first, *rest)), [p.summary for p in rest]
    assert rig.load_version() == version, "a shunned writer must not cost a LOAD per pass"
    assert rig.writers == {n1}
    assert n1 not in rig.offline


# 3 -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("fail_back", [False, True])
def test_old_writer_returns(
    rig: Rig, galera: Any, nodes: list[NodeAddress], fail_back: bool
) -> None:
    n1, n2, _ = nodes
    rig.write_config(fail_back=fail_back, retry_up=2)
    rig.paced = True  # retry_up counts in time: two good probes one interval apart
    rig.passes(1)
    galera.kill(1)
    rig.passes(1)
    assert rig.writers == {n2}
    galera.start(1)
    rig.passes(1)  # first good probe: not yet trusted (retry_up=2)
    assert rig.writers == {n2}
    assert n1 not in rig.readers
    rig.passes(1)
    if fail_back:
        assert rig.writers == {n1}
        assert rig.in_hostgroup(HG.writer).get(n2) is ServerStatus.OFFLINE_SOFT  # draining
        rig.passes(1)
        assert n2 not in rig.in_hostgroup(HG.writer)
        assert n2 in rig.backups
    else:
        assert rig.writers == {n2}
        assert n1 in rig.backups
        assert n1 in rig.readers


# 4 -------------------------------------------------------------------------------------------
def test_reader_killed_then_restarted(rig: Rig, galera: Any, nodes: list[NodeAddress]) -> None:
    n1, _, n3 = nodes
    rig.passes(1)
    galera.kill(3)
    rig.passes(1)
    assert n3 not in rig.readers
    assert n3 not in rig.backups
    assert n3 in rig.offline
    assert rig.writers == {n1}
    galera.start(3)
    rig.passes(1)
    assert n3 in rig.readers
    assert n3 in rig.backups
    assert n3 not in rig.offline


# 5 -------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("mode", "readers"), [(0, {1}), (1, {0, 1}), (2, {1})])
def test_desync_on_a_reader_then_off(
    rig: Rig, galera: Any, nodes: list[NodeAddress], mode: int, readers: set[int]
) -> None:
    n3 = nodes[2]
    rig.write_config(writer_is_also_reader=mode)
    rig.passes(1)
    galera.desync(3, True)
    rig.passes(1)
    assert rig.readers == {nodes[i] for i in readers}
    assert n3 in rig.offline
    galera.desync(3, False)
    wait_until(lambda: galera.node_status(3).synced, 60, "node3 Synced again")
    rig.passes(1)
    assert rig.readers == {nodes[i] for i in READERS[mode]}


def test_desync_on_the_writer_fails_over(rig: Rig, galera: Any, nodes: list[NodeAddress]) -> None:
    n1, n2, _ = nodes
    rig.passes(1)
    galera.desync(1, True)
    rig.passes(1)
    assert rig.writers == {n2}
    assert n1 not in rig.readers


# 6 -------------------------------------------------------------------------------------------
def test_reject_queries_on_the_writer_fails_over_at_once(
    rig: Rig, galera: Any, nodes: list[NodeAddress]
) -> None:
    n1, n2, _ = nodes
    rig.write_config(retry_down=3)
    rig.passes(1)
    galera.reject(1, "ALL")
    result = rig.run()
    assert result.code == 0, result.stderr
    assert rig.writers == {n2}
    assert n1 not in rig.readers


# 7 -------------------------------------------------------------------------------------------
def test_read_only_writer_stops_writing_and_keeps_reading(
    rig: Rig, galera: Any, nodes: list[NodeAddress]
) -> None:
    n1, n2, _ = nodes
    rig.passes(1)
    galera.set_read_only(1, True)
    rig.passes(1)
    assert rig.writers == {n2}
    assert n1 in rig.readers
    assert n1 not in rig.backups
    assert rig.in_hostgroup(HG.writer).get(n1) is ServerStatus.OFFLINE_SOFT
    rig.passes(1)  # drained: no client held a connection
    assert n1 not in rig.in_hostgroup(HG.writer)
    assert n1 in rig.readers


# 8 -------------------------------------------------------------------------------------------
def test_max_writers_two(rig: Rig, nodes: list[NodeAddress]) -> None:
    n1, n2, n3 = nodes
    rig.write_config(max_writers=2)
    rig.passes(1)
    assert rig.writers == {n1, n2}
    assert rig.backups == {n3}


# 9 -------------------------------------------------------------------------------------------
def test_two_nodes_killed_survivor_is_not_routed(
    rig: Rig, galera: Any, nodes: list[NodeAddress]
) -> None:
    n1, n2, n3 = nodes
    rig.passes(1)
    galera.kill(1)
    galera.kill(2)
    wait_until(
        lambda: galera.node_status(3).cluster_status not in (None, "Primary"),
        60,
        "node3 non-Primary",
    )
    rig.passes(1)
    assert rig.writers == set()
    assert rig.readers == set()
    assert rig.backups == set()
    assert rig.offline == {n1, n2, n3}
    galera.ensure_healthy()
    rig.passes(1)
    assert rig.writers == {n1}
    assert rig.readers == {n1, n2, n3}


# 10 ------------------------------------------------------------------------------------------
def test_frozen_writer_pass_still_ends_and_fails_over_after_retry_down(
    rig: Rig, galera: Any, nodes: list[NodeAddress]
) -> None:
    n1, n2, _ = nodes
    rig.write_config(retry_down=2)
    rig.paced = True  # retry_down counts in time: two bad probes one interval apart
    rig.passes(1)
    galera.freeze(1)
    first = rig.run()
    assert first.code == 0, first.stderr  # not cut short by max_runtime_ms
    node_lines = [
        line for line in first.logs if line.get("event") == "node" and line.get("node") == str(n1)
    ]
    assert node_lines and node_lines[0]["verdict"] == "suspect"
    assert rig.writers == {n1}  # one bad probe is tolerated (retry_down=2)
    second = rig.run()
    assert second.code == 0, second.stderr
    assert rig.writers == {n2}
    assert n1 not in rig.in_hostgroup(HG.writer)


def thaw_all(galera: Any) -> None:
    # together, so the nodes resume within each other's suspect timeout; the last one waits
    for n in (1, 2):
        galera.thaw(n, wait=False)
    galera.thaw(3)


def test_every_node_frozen_the_pass_is_blind_and_changes_nothing(
    rig: Rig, galera: Any, nodes: list[NodeAddress]
) -> None:
    n1 = nodes[0]
    rig.write_config(retry_down=0)  # no tolerance: only the blind rule keeps the layout
    rig.passes(1)
    before = snapshot(rig)
    for n in (1, 2, 3):
        galera.freeze(n)
    try:
        blind = rig.run()
    finally:
        thaw_all(galera)
    assert blind.code == 0, blind.stderr
    assert "blind: no node answered within" in blind.summary, blind.summary
    assert "layout kept" in blind.summary
    assert snapshot(rig) == before  # no LOAD, not even of the same rows
    after = rig.run()
    assert after.code == 0, after.stderr
    assert "blind" not in after.summary and "no change" in after.summary, after.summary
    assert rig.writers == {n1}


def test_daemon_started_while_no_node_answers_never_empties_the_writer_hostgroup(
    rig: Rig, galera: Any, nodes: list[NodeAddress]
) -> None:
    n1 = nodes[0]
    rig.write_config(retry_down=0)
    rig.passes(1)
    version = rig.load_version()
    rig.run_settings.update(interval_ms=500, max_runtime_ms=450)
    rig.write_config()
    # the nodes stall the daemon's first connects: more than its whole pass budget
    for n in (1, 2, 3):
        galera.freeze(n)
    daemon = Daemon(rig)
    try:
        try:
            first = daemon.next_pass()
        finally:
            thaw_all(galera)
        seen = [first]
        while seen[-1]["outcome"] == "blind" and len(seen) < 40:
            seen.append(daemon.next_pass())
        seen.append(daemon.next_pass())
    finally:
        code = daemon.stop()
    assert code == 0
    assert first["outcome"] == "blind", first["summary"]
    assert all(p["writers"] == [str(n1)] for p in seen), [p["summary"] for p in seen]
    assert not any(p["loaded"] for p in seen), [p["summary"] for p in seen]
    assert seen[-1]["outcome"] == "unchanged", seen[-1]["summary"]
    assert rig.writers == {n1}
    assert rig.load_version() == version


# 11 ------------------------------------------------------------------------------------------
def test_second_pass_finds_the_lock_busy(rig: Rig) -> None:
    rig.state_dir.mkdir(parents=True, exist_ok=True)
    lock = rig.state_dir / "galera.lab.lock"
    with open(lock, "a+") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        before = snapshot(rig)
        result = rig.run()
        assert result.code == 0
        assert "another pass holds the lock" in result.summary
        assert snapshot(rig) == before


def test_pass_killed_mid_way_leaves_no_stale_lock(
    rig: Rig, galera: Any, nodes: list[NodeAddress]
) -> None:
    rig.passes(1)
    galera.freeze(1)  # the pass now waits on a probe: a window to kill it in
    proc = subprocess.Popen(
        rig.argv("run"), env={}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    lock = rig.state_dir / "galera.lab.lock"
    wait_until(
        lambda: lock.exists() and lock.read_text().strip() == str(proc.pid),
        30,
        "the pass to take its lock",
    )
    proc.kill()
    proc.wait(timeout=PASS_TIMEOUT)
    galera.thaw(1)
    result = rig.run()
    assert result.code == 0, result.stderr
    assert "another pass holds the lock" not in result.summary
    assert rig.writers == {nodes[0]}


# 12 ------------------------------------------------------------------------------------------
def test_admin_down_exits_1(rig: Rig) -> None:
    config = rig.config.read_text().replace(
        f"port = {rig.proxysql.admin_port}", f"port = {free_port()}", 1
    )
    rig.config.write_text(config)
    result = rig.run()
    assert result.code == 1
    assert "unreachable" in result.summary


def test_bad_config_exits_2_and_changes_nothing(rig: Rig) -> None:
    before = snapshot(rig)
    rig.config.write_text(
        rig.config.read_text().replace("[[cluster]]", "[[cluster]]\nretry_donw = 1")
    )
    result = rig.run()
    assert result.code == 2
    assert "cluster[0].retry_donw: unknown key (did you mean retry_down?)" in result.stderr
    assert snapshot(rig) == before


def test_foreign_row_exits_2_and_changes_nothing(rig: Rig) -> None:
    rig.passes(1)
    rig.admin.execute(
        "INSERT INTO mysql_servers (hostgroup_id, hostname, port) VALUES (%s, %s, %s)",
        (HG.reader, "127.0.0.99", 3399),
    )
    rig.admin.execute("LOAD MYSQL SERVERS TO RUNTIME")
    before = snapshot(rig)
    result = rig.run()
    assert result.code == 2
    assert "row (101, 127.0.0.99, 3399)" in result.summary
    assert snapshot(rig) == before


# 13 ------------------------------------------------------------------------------------------
def test_dry_run_changes_nothing_and_its_sql_does_what_run_does(rig: Rig) -> None:
    before = snapshot(rig)
    dry = rig.run("run", "--dry-run")
    assert dry.code == 0, dry.stderr
    assert snapshot(rig) == before
    assert "verdict" in dry.stdout and "synced" in dry.stdout
    sql = [
        line.strip()
        for line in dry.stdout.split("SQL:", 1)[1].splitlines()
        if line.startswith("  ")
    ]
    assert sql and sql[-2:] == ["LOAD MYSQL SERVERS TO RUNTIME;", "SAVE MYSQL SERVERS TO DISK;"]
    for statement in sql:
        rig.admin.execute(statement)
    by_hand = rig.live()
    rig.admin.stage(HG.managed, [])
    rig.admin.execute("LOAD MYSQL SERVERS TO RUNTIME")
    rig.passes(1)
    assert rig.live() == by_hand


# 14 ------------------------------------------------------------------------------------------
def test_operator_offline_hard_row_stays(rig: Rig, nodes: list[NodeAddress]) -> None:
    n3 = nodes[2]
    rig.passes(1)
    rig.admin.execute(
        "UPDATE mysql_servers SET status = 'OFFLINE_HARD' "
        "WHERE hostgroup_id = %s AND hostname = %s AND port = %s",
        (HG.reader, n3.host, n3.port),
    )
    rig.admin.execute("LOAD MYSQL SERVERS TO RUNTIME")
    version = rig.load_version()
    rig.passes(2)
    hard = [r for r in rig.staged() if r.node == n3 and r.hostgroup_id == HG.reader]
    assert [r.status for r in hard] == [ServerStatus.OFFLINE_HARD]
    assert n3 not in rig.readers
    assert rig.load_version() == version


def test_pause_then_resume(rig: Rig, galera: Any, nodes: list[NodeAddress]) -> None:
    n2 = nodes[1]
    rig.passes(1)
    paused = rig.run("pause")
    assert paused.code == 0, paused.stderr
    galera.kill(1)
    before = snapshot(rig)
    result = rig.run()
    assert result.code == 0
    assert "paused" in result.summary
    assert snapshot(rig) == before
    assert rig.run("resume").code == 0
    rig.passes(1)
    assert rig.writers == {n2}


# 15 ------------------------------------------------------------------------------------------
def test_daemon_fails_over_reloads_and_stops(
    rig: Rig, galera: Any, nodes: list[NodeAddress]
) -> None:
    n1, n2, _ = nodes
    rig.run_settings.update(interval_ms=500, max_runtime_ms=450)
    rig.write_config()
    daemon = Daemon(rig)
    try:
        assert daemon.next_pass()["writers"] == [str(n1)]
        galera.kill(1)
        # the pass under way when the node died may have probed it alive; the next one acts
        seen = [daemon.next_pass()["writers"] for _ in range(2)]
        assert [str(n2)] in seen, seen
        assert rig.writers == {n2}

        rig.write_config(writer_is_also_reader=0)
        os.kill(daemon.proc.pid, signal.SIGHUP)
        # reads leave the writer; the backup writer node3 takes them
        wait_until(
            lambda: rig.readers == {nodes[2]},
            30,
            "the reloaded writer_is_also_reader=0 to take effect",
        )
    finally:
        code = daemon.stop()
    assert code == 0


def test_node_in_two_rosters_exits_2_and_changes_nothing(
    rig: Rig, nodes: list[NodeAddress]
) -> None:
    n1 = nodes[0]
    rig.passes(1)
    other = (
        '\n[[cluster]]\nname = "other"\nwriter_hostgroup = 200\nreader_hostgroup = 201\n'
        "backup_writer_hostgroup = 202\noffline_hostgroup = 9200\n"
    )
    rig.config.write_text(rig.config.read_text() + other)
    rig.admin.execute(
        "INSERT INTO mysql_servers (hostgroup_id, hostname, port) VALUES (%s, %s, %s)",
        (8200, n1.host, n1.port),
    )
    rig.admin.execute("LOAD MYSQL SERVERS TO RUNTIME")
    before = snapshot(rig)
    result = rig.run()
    assert result.code == 2
    assert (
        f"{n1} is in the roster of cluster lab (hostgroup 8100) and cluster other (hostgroup 8200)"
        in result.summary
    )
    assert snapshot(rig) == before
    assert rig.admin.execute(
        "SELECT COUNT(*) FROM runtime_mysql_servers WHERE hostgroup_id IN (200, 201, 202, 9200)"
    ) == [("0",)]


def test_first_pass_adopts_an_operators_rows_and_says_so(
    rig: Rig, nodes: list[NodeAddress]
) -> None:
    n1, n2, n3 = nodes
    rig.admin.stage(HG.all, [])  # no templates: only the rows an operator made by hand
    for node, hostgroup in ((n1, HG.writer), (n1, HG.reader), (n2, HG.reader), (n3, HG.reader)):
        rig.admin.execute(
            "INSERT INTO mysql_servers (hostgroup_id, hostname, port, weight) "
            "VALUES (%s, %s, %s, %s)",
            (hostgroup, node.host, node.port, 10),
        )
    rig.admin.execute("LOAD MYSQL SERVERS TO RUNTIME")
    result = rig.run()
    assert result.code == 0, result.stderr
    assert "adopted into empty templates [8100, 8101]" in result.summary
    templates = rig.admin.read_rows(HG.templates).runtime
    assert {r.node for r in templates if r.hostgroup_id == HG.config_writer} == {n1}
    assert {r.node for r in templates if r.hostgroup_id == HG.config_reader} == {n1, n2, n3}
    assert rig.writers == {n1}
    assert rig.readers == {n1, n2, n3}
    assert "adopted" not in rig.run().summary


def test_adopt_command_builds_templates(rig: Rig, nodes: list[NodeAddress]) -> None:
    rig.passes(1)
    live = rig.live()
    rig.admin.stage(HG.templates, [])
    rig.admin.execute("LOAD MYSQL SERVERS TO RUNTIME")
    dry = rig.run("adopt", "--dry-run")
    assert dry.code == 0, dry.stderr
    assert "LOAD MYSQL SERVERS TO RUNTIME;" in dry.stdout
    assert rig.admin.read_rows(HG.templates).runtime == ()
    done = rig.run("adopt")
    assert done.code == 0, done.stderr
    assert "roster of 3 node(s)" in done.stdout
    writer_template = {
        r.node: r.weight
        for r in rig.admin.read_rows(HG.templates).runtime
        if r.hostgroup_id == HG.config_writer
    }
    assert writer_template == {nodes[0]: 1000, nodes[1]: 500, nodes[2]: 100}
    assert "already hold" in rig.run("adopt").stdout
    rig.passes(1)
    assert rig.live() == live


def test_status_prints_the_table_and_changes_nothing(
    rig: Rig, galera: Any, nodes: list[NodeAddress]
) -> None:
    rig.passes(1)
    galera.kill(3)
    before = snapshot(rig)
    result = rig.run("status")
    assert result.code == 0, result.stderr
    assert snapshot(rig) == before
    row = next(line for line in result.stdout.splitlines() if line.startswith(str(nodes[2])))
    assert "down" in row and "unreachable" in row
    assert "SQL:" not in result.stdout


def test_install_scheduler_prints_and_applies_an_idempotent_row(rig: Rig) -> None:
    printed = rig.run("install-scheduler")
    assert printed.code == 0, printed.stderr
    assert printed.stdout.startswith("INSERT INTO scheduler")
    assert f"'--config={rig.config}'" in printed.stdout
    assert "password" not in printed.stdout
    for _ in range(2):
        applied = rig.run("install-scheduler", "--apply")
        assert applied.code == 0, applied.stderr
    rows = rig.admin.execute(
        "SELECT active, interval_ms, filename, arg1, arg2 FROM runtime_scheduler"
    )
    assert rows == [("1", "2000", rig.executable(), f"--config={rig.config}", "run")]


def test_wrong_monitor_password_is_bad_input_not_an_outage(
    rig: Rig, nodes: list[NodeAddress]
) -> None:
    rig.passes(1)
    before = snapshot(rig)
    (rig.tmp / "secrets" / "monitor").write_text("wrong\n")
    result = rig.run()
    assert result.code == 2
    assert "every node refused the monitor account 'monitor'" in result.summary
    assert snapshot(rig) == before
    assert rig.writers == {nodes[0]}
