"""A planned move under a client whose backend connection ProxySQL keeps attached: autocommit
INSERTs into an AUTO_INCREMENT table, back to back on one connection, as most applications write.
A real ProxySQL keeps such a connection attached for mysql-auto_increment_delay_multiplex
statements after every INSERT, so the old writer's ConnUsed never reaches 0 while the client
writes. The switchover says so before it moves anything and changes no ProxySQL variable (the
delay is proxy-wide): the client is cut at the drain timeout exactly as it said, one statement
fails, and every acknowledged row is on the cluster. The emulator routes no client: these run
against a real ProxySQL only."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any

import pymysql
import pytest

from checker_core.core.attached import AUTO_INCREMENT_DELAY, PROCESSLIST_EXTENDED
from checker_core.core.model import NodeAddress
from tests.integration.rig import HG, Rig
from tests.integration.test_galera_checker import snapshot
from tests.lab.accounts import APP_PASSWORD, APP_SCHEMA, APP_USER
from tests.lab.paths import LOOPBACK
from tests.lab.process import wait_until

pytestmark = [pytest.mark.galera, pytest.mark.proxysql]

TABLE = f"`{APP_SCHEMA}`.`switchover_inserts`"
ACKS_BEFORE_MOVE = 50
ACKS_AFTER_MOVE = 50


class Inserter(threading.Thread):
    """Autocommit INSERTs into an AUTO_INCREMENT table, back to back on one connection; a new
    connection after an error."""

    def __init__(self, port: int) -> None:
        super().__init__(name="inserter", daemon=True)
        self.port = port
        self.acked: list[int] = []
        self.errors: list[str] = []
        self._halt = threading.Event()

    def stop(self) -> None:
        self._halt.set()
        self.join(30)

    def run(self) -> None:
        conn: Any = None
        while not self._halt.is_set():
            try:
                if conn is None:
                    conn = pymysql.connect(
                        host=LOOPBACK,
                        port=self.port,
                        user=APP_USER,
                        password=APP_PASSWORD,
                        autocommit=True,
                        connect_timeout=5,
                        read_timeout=30,
                    )
                with conn.cursor() as cur:
                    cur.execute(f"INSERT INTO {TABLE} (at) VALUES (%s)", (time.time(),))
                    self.acked.append(int(cur.lastrowid))
            except (pymysql.MySQLError, OSError) as exc:
                self.errors.append(repr(exc))
                with contextlib.suppress(Exception):
                    conn.close()
                conn = None
                self._halt.wait(0.01)
        with contextlib.suppress(Exception):
            conn.close()


@pytest.fixture
def inserter(rig: Rig, galera: Any) -> Iterator[Inserter]:
    if not rig.proxysql.is_real:
        pytest.skip("the emulator routes no client: a real ProxySQL keeps connections attached")
    galera.sql(
        1,
        f"CREATE TABLE IF NOT EXISTS {TABLE} "
        "(id BIGINT AUTO_INCREMENT PRIMARY KEY, at DOUBLE NOT NULL) ENGINE=InnoDB",
    )
    rig.passes(1)
    client = Inserter(rig.proxysql.route_app_user(HG.writer))
    client.start()
    try:
        wait_until(lambda: len(client.acked) >= ACKS_BEFORE_MOVE, 30, "the client to write")
        yield client
    finally:
        client.stop()


def delay(rig: Rig) -> str:
    return rig.admin.read_runtime_variables([AUTO_INCREMENT_DELAY])[AUTO_INCREMENT_DELAY]


def missing(galera: Any, node: int, acked: list[int]) -> set[int]:
    """Acknowledged ids the node does not have."""
    ids = sorted(acked)
    sql = f"SELECT id FROM {TABLE} WHERE id BETWEEN %s AND %s"
    found = {int(row[0]) for row in galera.sql(node, sql, (ids[0], ids[-1]))}
    return set(ids) - found


def switch(rig: Rig, inserter: Inserter, drain_timeout_ms: int, *args: str) -> str:
    """The switchover with the client writing, and some writes after it; what it said."""
    rig.write_config(drain_timeout_ms=drain_timeout_ms)
    moved = rig.run("switchover", *args)
    count = len(inserter.acked)
    wait_until(lambda: len(inserter.acked) >= count + ACKS_AFTER_MOVE, 30, "writes after it")
    inserter.stop()
    assert moved.code == 0, moved.stdout + moved.stderr
    return moved.stdout


def staged_delay(rig: Rig) -> str:
    rows = rig.admin.execute(
        "SELECT variable_value FROM global_variables WHERE variable_name = %s",
        (AUTO_INCREMENT_DELAY,),
    )
    return str(rows[0][0])


@pytest.mark.parametrize("args", [(), ("--keep-auto-increment-delay",)], ids=["plain", "old-flag"])
def test_a_switchover_under_an_auto_increment_inserter_changes_no_variable_and_says_the_cut(
    rig: Rig, galera: Any, nodes: list[NodeAddress], inserter: Inserter, args: tuple[str, ...]
) -> None:
    """The delay is proxy-wide: the switchover leaves it as it is (the old flag that asked for
    that is still accepted), and says before the move that the client is cut at the drain
    timeout; that one statement fails, and no acknowledged row is lost."""
    n1, n2, _ = nodes
    operators = delay(rig)
    assert operators != "0", "ProxySQL's default keeps the connection attached after an INSERT"
    said = switch(rig, inserter, 1000, f"--to={n2}", *args)
    assert f"1 client session(s) hold a connection to the writer {n1}:" in said
    assert f"lets go after {operators} ({AUTO_INCREMENT_DELAY}) more statement(s)" in said
    assert "never lets go, and is cut when drain_timeout_ms (1000 ms) runs out" in said
    assert "lowered" not in said and "put back" not in said
    assert f"switchover to {n2} done" in said
    assert delay(rig) == staged_delay(rig) == operators
    assert not list(rig.state_dir.glob("*.auto_increment_delay")), "nothing recorded"
    assert len(inserter.errors) == 1, inserter.errors
    assert rig.writers == {n2}
    assert missing(galera, 2, inserter.acked) == set(), "every acknowledged row is on node 2"


def set_variable(rig: Rig, name: str, value: str) -> None:
    rig.admin.execute(
        "UPDATE global_variables SET variable_value = %s WHERE variable_name = %s", (value, name)
    )
    rig.admin.execute("LOAD MYSQL VARIABLES TO RUNTIME")


def test_the_what_if_names_the_clients_that_cannot_move_without_an_error_and_why(
    rig: Rig, nodes: list[NodeAddress]
) -> None:
    if not rig.proxysql.is_real:
        pytest.skip("the emulator routes no client: a real ProxySQL keeps connections attached")
    n1, n2, _ = nodes
    rig.passes(1)
    port = rig.proxysql.route_app_user(HG.writer)
    set_variable(rig, PROCESSLIST_EXTENDED, "1")
    clients = [
        pymysql.connect(
            host=LOOPBACK, port=port, user=APP_USER, password=APP_PASSWORD, autocommit=True
        )
        for _ in range(2)
    ]
    try:
        with clients[0].cursor() as cur:
            cur.execute("SET @kept = 1")  # a user variable: ProxySQL cannot move the session
            cur.execute("SELECT @kept")
        with clients[1].cursor() as cur:
            cur.execute("START TRANSACTION")
            cur.execute("SELECT 1")
        before = snapshot(rig)
        dry = rig.run("switchover", f"--to={n2}", "--dry-run")
    finally:
        for client in clients:
            with contextlib.suppress(Exception):
                client.close()
        set_variable(rig, PROCESSLIST_EXTENDED, "0")
    said = dry.stdout
    assert dry.code == 0, said + dry.stderr
    assert f"2 client session(s) hold a connection to the writer {n1}:" in said
    assert "session state (user variables" in said
    assert "a transaction open" in said
    assert "a transaction moves once it ends; one still open is cut when drain_timeout_ms" in said
    assert "cannot be moved without an error: session" in said
    assert "lowered" not in said, "a lower auto-increment delay frees neither"
    assert snapshot(rig) == before
    assert not (rig.state_dir / "galera.lab.writer").exists()
