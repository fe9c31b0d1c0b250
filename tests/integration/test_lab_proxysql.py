"""The lab's `proxysql up|status|down` commands.

Each test works in its own LAB_DIR, so it starts and stops its own endpoint and never touches the
session endpoint the contract tests share (nor one a human brought up).
"""

from __future__ import annotations

import importlib.util
import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.lab import process, proxysql
from tests.lab.process import wait_until
from tests.lab.proxysql import (
    ProxySQLLab,
    admin_cursor,
    binary_version,
    find_proxysql_binary,
    port_refuses,
)
from tests.lab.require import unavailable

pytestmark = pytest.mark.proxysql


@pytest.fixture
def own_lab_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    if find_proxysql_binary() is None and importlib.util.find_spec("mysql_mimic") is None:
        unavailable("no proxysql binary and no mysql-mimic for the admin emulator")
    lab_dir = tmp_path / "lab"
    monkeypatch.setenv("LAB_DIR", str(lab_dir))
    try:
        yield lab_dir
    finally:
        # whatever a failed assertion left running in this directory is stopped here
        ProxySQLLab().down()


def test_up_status_down(own_lab_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert proxysql.main(["up"]) == 0
    up_output = capsys.readouterr().out
    assert "started" in up_output

    status = ProxySQLLab().status()
    assert status.running
    assert status.kind in (proxysql.KIND_REAL, proxysql.KIND_EMULATOR)
    assert status.pid is not None and status.admin_port is not None
    assert (status.mysql_port is None) == (status.kind == proxysql.KIND_EMULATOR)
    wanted = find_proxysql_binary()
    assert status.binary == wanted
    # the emulator says it is one (2.7-shaped); a real ProxySQL says the release of its binary
    if wanted is None:
        from tests.lab.admin_emulator import EMULATOR_VERSION as expected
    else:
        expected = binary_version(wanted)
    assert status.version == expected
    assert status.mysql_servers == 0 and status.runtime_mysql_servers == 0
    assert f"kind={status.kind}" in up_output
    assert f"127.0.0.1:{status.admin_port}" in up_output

    assert proxysql.main(["status"]) == 0
    status_output = capsys.readouterr().out
    assert f"kind={status.kind}" in status_output
    assert f"127.0.0.1:{status.admin_port}" in status_output
    assert "user=admin" in status_output

    assert proxysql.main(["down"]) == 0
    assert "stopped" in capsys.readouterr().out
    assert not process.pid_alive(status.pid)
    assert port_refuses("127.0.0.1", status.admin_port)
    assert not (own_lab_dir / "proxysql" / "state.json").exists()

    assert proxysql.main(["status"]) == 1
    assert "down" in capsys.readouterr().out


def test_up_is_idempotent(own_lab_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lab = ProxySQLLab()
    assert lab.up() is True
    first = lab.status()
    capsys.readouterr()

    assert proxysql.main(["up"]) == 0
    assert "already up" in capsys.readouterr().out
    second = ProxySQLLab().status()
    assert (second.pid, second.admin_port) == (first.pid, first.admin_port)

    # a fresh handle (as another process would build) finds and uses the same endpoint
    other = ProxySQLLab()
    assert other.admin_port == first.admin_port
    conn = other.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT COUNT(*) FROM runtime_mysql_servers")
            assert cur.fetchone() == ("0",)
    finally:
        conn.close()

    assert lab.down() is True
    assert lab.down() is False


def listening(pid: int) -> set[tuple[str, int]]:
    """(address, port) of every TCP socket `pid` listens on (IPv4 and IPv6)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        target = os.readlink(fd) if fd.is_symlink() else ""
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    found = set()
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state != "0A" or inode not in inodes:  # 0A: LISTEN
                continue
            address, port = local.split(":")
            raw = bytes.fromhex(address)
            if table == "tcp":
                host = socket.inet_ntop(socket.AF_INET, raw[::-1])
            else:
                words = b"".join(raw[i : i + 4][::-1] for i in range(0, 16, 4))
                host = socket.inet_ntop(socket.AF_INET6, words)
            found.add((host, int(port, 16)))
    return found


def test_every_listener_is_on_loopback_on_ports_of_its_own(own_lab_dir: Path) -> None:
    """3.x listens for PostgreSQL too (by default on 0.0.0.0:6132 and 6133): every listener,
    whatever the version, is on 127.0.0.1, on a port no other endpoint has."""
    first, second = ProxySQLLab(), ProxySQLLab(own_lab_dir / "second")
    first.up()
    second.up()
    try:
        seen = [listening(lab.status().pid or 0) for lab in (first, second)]
        for lab, ports in zip((first, second), seen, strict=True):
            assert ports and all(host == "127.0.0.1" for host, _ in ports), ports
            binary = lab.binary
            if binary is None:
                assert {port for _, port in ports} == {lab.admin_port}
                continue
            wanted = 4 if proxysql.major_version(binary_version(binary)) >= 3 else 2
            assert len({port for _, port in ports}) == wanted, ports
        assert not {port for _, port in seen[0]} & {port for _, port in seen[1]}
    finally:
        second.down()
        first.down()


def test_an_endpoint_of_another_binary_is_refused_not_reused(own_lab_dir: Path) -> None:
    """A run asking for another ProxySQL than the one running (PROXYSQL_BIN changed) is told so;
    the running endpoint is neither tested as the other nor stopped under whoever uses it."""
    running = ProxySQLLab(emulator=True)
    running.up()
    try:
        with pytest.raises(process.LabError, match="runs the emulator, not /bin/true as asked"):
            ProxySQLLab(binary="/bin/true").up()
        assert running.status().running and running.binary is None
    finally:
        running.down()


def test_down_when_nothing_runs(own_lab_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert proxysql.main(["down"]) == 0
    assert "was not running" in capsys.readouterr().out


@pytest.mark.parametrize("argv", [[], ["bogus"], ["up", "extra"]])
def test_bad_usage_exits_2(own_lab_dir: Path, argv: list[str]) -> None:
    assert proxysql.main(argv) == 2


def test_emulator_shuns_as_the_monitor_does(proxysql_admin: ProxySQLLab) -> None:
    """The stand-in for ProxySQL's monitor: runtime only, kept across a LOAD of the same ONLINE
    row, gone with the row. (A real ProxySQL shuns on its own schedule; the lab drives it the
    only way it can, and this test is about the emulator.)"""
    if proxysql_admin.is_real:
        pytest.skip("a real ProxySQL shuns by its own monitor, not by the lab's statement")
    host, port = "127.0.0.1", 3399
    where = "WHERE hostgroup_id = 7 AND hostname = %s AND port = %s"
    conn = proxysql_admin.connect()
    try:
        with conn.cursor() as cur:

            def status(table: str) -> list[tuple[str, ...]]:
                cur.execute(f"SELECT status FROM {table} {where}", (host, port))
                return list(cur.fetchall())

            cur.execute(
                "INSERT INTO mysql_servers (hostgroup_id, hostname, port) VALUES (7, %s, %s)",
                (host, port),
            )
            cur.execute("LOAD MYSQL SERVERS TO RUNTIME")
            cur.execute("SELECT version FROM runtime_checksums_values WHERE name = 'mysql_servers'")
            version = cur.fetchone()
            proxysql_admin.shun(7, host, port)
            assert status("runtime_mysql_servers") == [("SHUNNED",)]
            assert status("mysql_servers") == [("ONLINE",)]
            cur.execute("SELECT version FROM runtime_checksums_values WHERE name = 'mysql_servers'")
            assert cur.fetchone() == version, "a shun is no LOAD"
            cur.execute("LOAD MYSQL SERVERS TO RUNTIME")
            assert status("runtime_mysql_servers") == [("SHUNNED",)]
            proxysql_admin.unshun(7, host, port)
            assert status("runtime_mysql_servers") == [("ONLINE",)]
            proxysql_admin.shun(7, host, port)
            cur.execute(f"DELETE FROM mysql_servers {where}", (host, port))
            cur.execute("LOAD MYSQL SERVERS TO RUNTIME")
            cur.execute(
                "INSERT INTO mysql_servers (hostgroup_id, hostname, port) VALUES (7, %s, %s)",
                (host, port),
            )
            cur.execute("LOAD MYSQL SERVERS TO RUNTIME")
            assert status("runtime_mysql_servers") == [("ONLINE",)], "a new server is not shunned"
    finally:
        conn.close()


@pytest.mark.galera
@pytest.mark.parametrize("how", ["removed", "set OFFLINE_HARD"])
def test_a_server_clients_hold_stays_offline_hard_until_they_let_go(
    proxysql_admin: ProxySQLLab, galera: Any, how: str
) -> None:
    """What ProxySQL 2.7 does, and the emulator must do too: a server a LOAD removes (or sets
    OFFLINE_HARD) while clients hold connections to it stays in runtime_mysql_servers as
    OFFLINE_HARD, its ConnUsed in stats_mysql_connection_pool, until they let go; then it is gone.
    Against a real ProxySQL (PROXYSQL_BIN) the clients are real, through its MySQL port."""
    node = galera.nodes[0]
    host, port, hostgroup = "127.0.0.1", node.port, 77
    key = (hostgroup, host, port)
    where = "WHERE hostgroup_id = %s AND hostname = %s AND port = %s"
    with admin_cursor(proxysql_admin) as cur:

        def runtime() -> list[tuple[str, ...]]:
            cur.execute(f"SELECT status FROM runtime_mysql_servers {where}", key)
            return [tuple(map(str, row)) for row in cur.fetchall()]

        def in_use() -> list[tuple[str, ...]]:
            cur.execute(
                "SELECT status, ConnUsed FROM stats_mysql_connection_pool "
                "WHERE hostgroup = %s AND srv_host = %s AND srv_port = %s",
                key,
            )
            return [tuple(map(str, row)) for row in cur.fetchall()]

        cur.execute(
            "INSERT INTO mysql_servers (hostgroup_id, hostname, port) VALUES (%s, %s, %s)", key
        )
        cur.execute("LOAD MYSQL SERVERS TO RUNTIME")
        try:
            with proxysql_admin.hold(hostgroup, host, port, count=2) as held:
                assert in_use() == [("ONLINE", "2")]
                if how == "removed":
                    cur.execute(f"DELETE FROM mysql_servers {where}", key)
                else:
                    cur.execute(f"UPDATE mysql_servers SET status = 'OFFLINE_HARD' {where}", key)
                cur.execute("LOAD MYSQL SERVERS TO RUNTIME")
                assert runtime() == [("OFFLINE_HARD",)]
                assert in_use() == [("OFFLINE_HARD", "2")]
                cur.execute("LOAD MYSQL SERVERS TO RUNTIME")
                assert runtime() == [("OFFLINE_HARD",)], "still held after another LOAD"
                held.release()
                wait_until(lambda: runtime() == [], 10.0, "the released server leaving runtime")
                assert in_use() == []
        finally:
            cur.execute(f"DELETE FROM mysql_servers {where}", key)
            cur.execute("LOAD MYSQL SERVERS TO RUNTIME")
