"""The write-gap bench's observers: a client writing through ProxySQL, a sampler of its writers.

Both run on threads of their own and record what they saw with time.monotonic() stamps, the
clock the bench stamps its faults with.
"""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias

import pymysql
import pymysql.cursors

from tests.lab.accounts import APP_PASSWORD, APP_SCHEMA, APP_USER
from tests.lab.paths import LOOPBACK

if TYPE_CHECKING:
    Connection: TypeAlias = pymysql.connections.Connection[pymysql.cursors.Cursor]


@dataclass(frozen=True)
class Table:
    """Where the client writes: `plain` has a natural key; `autoinc` an AUTO_INCREMENT one, as
    most applications' tables do: after every INSERT a real ProxySQL keeps the client's backend
    connection attached (mysql-auto_increment_delay_multiplex), so a drain cannot move it."""

    client: str
    name: str
    create: str
    trigger: str  # with {stamp}: Cluster.stamp
    insert: str


def _table(client: str, name: str, key: str) -> Table:
    qualified = f"`{APP_SCHEMA}`.`{name}`"
    return Table(
        client,
        qualified,
        f"CREATE TABLE IF NOT EXISTS {qualified} ({key}run VARCHAR(64) NOT NULL, "
        "seq INT NOT NULL, node INT NOT NULL, client_ts DOUBLE NOT NULL, "
        "UNIQUE KEY run_seq (run, seq)) ENGINE=InnoDB",
        # The node that took a row is set by a trigger, not named in the INSERT: a statement
        # that reads @@port would make ProxySQL pin the client's backend connection (no
        # multiplexing). Replicas apply row events without running triggers.
        # {stamp}: the server variable that tells the nodes apart (the lab's @@port)
        f"CREATE TRIGGER IF NOT EXISTS `{APP_SCHEMA}`.`{name}_node` BEFORE INSERT ON "
        f"{qualified} FOR EACH ROW SET NEW.node = {{stamp}}",
        f"INSERT INTO {qualified} (run, seq, node, client_ts) VALUES (%s, %s, 0, %s)",  # noqa: S608
    )


TABLES = {
    "plain": _table("plain", "write_gap_plain", ""),
    "autoinc": _table("autoinc", "write_gap_autoinc", "id BIGINT AUTO_INCREMENT PRIMARY KEY, "),
}

# An application's own limits: a statement that hangs (a frozen backend) is given up after
# READ_TIMEOUT_S; it is longer than ProxySQL's mysql-connect_timeout_server_max (10 s), so the
# client sees ProxySQL's own 9001 when a hostgroup stays empty.
CONNECT_TIMEOUT_S = 2.0
READ_TIMEOUT_S = 12.0
RECONNECT_PAUSE_S = 0.005  # after an error, so a refusing proxy is not spun on
SAMPLE_PERIOD_S = 0.005
CLIENT_ERROR = -1  # an exception that carried no MySQL error code


@dataclass(frozen=True)
class Statement:
    """One INSERT as the client saw it: 0 for acknowledged, else the MySQL error code."""

    seq: int
    started: float
    ended: float
    code: int


@dataclass(frozen=True)
class Sample:
    """The ONLINE rows of the writer hostgroup in runtime_mysql_servers at one moment."""

    at: float
    online: tuple[int, ...]  # ports


def error_code(exc: BaseException) -> int:
    if isinstance(exc, pymysql.err.MySQLError) and exc.args and isinstance(exc.args[0], int):
        return int(exc.args[0])
    return CLIENT_ERROR


class Writer(threading.Thread):
    """Autocommit INSERTs back to back as the lab's app user through ProxySQL's MySQL port;
    a new connection after every error."""

    def __init__(self, mysql_port: int, run_id: str, table: Table) -> None:
        super().__init__(name="write-gap-writer", daemon=True)
        self.mysql_port = mysql_port
        self.run_id = run_id
        self.table = table
        self.statements: list[Statement] = []
        self._halt = threading.Event()
        self._conn: Connection | None = None

    def stop(self) -> None:
        self._halt.set()

    def run(self) -> None:
        seq = 0
        while not self._halt.is_set():
            seq += 1
            started = time.monotonic()
            code = self._insert(seq)
            self.statements.append(Statement(seq, started, time.monotonic(), code))
            if code != 0:
                self._drop()
                self._halt.wait(RECONNECT_PAUSE_S)
        self._drop()

    def _insert(self, seq: int) -> int:
        try:
            if self._conn is None:
                self._conn = self._connect()
            with self._conn.cursor() as cur:
                cur.execute(self.table.insert, (self.run_id, seq, time.time()))
            return 0
        except (pymysql.err.MySQLError, OSError) as exc:
            return error_code(exc)

    def _connect(self) -> Connection:
        return pymysql.connect(
            host=LOOPBACK,
            port=self.mysql_port,
            user=APP_USER,
            password=APP_PASSWORD,
            autocommit=True,
            connect_timeout=CONNECT_TIMEOUT_S,
            read_timeout=READ_TIMEOUT_S,
            write_timeout=READ_TIMEOUT_S,
        )

    def _drop(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.close()
            self._conn = None


class Sampler(threading.Thread):
    """Polls ProxySQL admin's runtime_mysql_servers for the writer hostgroup every few ms."""

    def __init__(self, connect: Any, writer_hostgroup: int) -> None:
        super().__init__(name="write-gap-sampler", daemon=True)
        self._connect = connect
        self.hostgroup = writer_hostgroup
        self.samples: list[Sample] = []
        self._halt = threading.Event()

    def stop(self) -> None:
        self._halt.set()

    def run(self) -> None:
        conn: Connection = self._connect()
        sql = "SELECT port FROM runtime_mysql_servers WHERE hostgroup_id = %s AND status = 'ONLINE'"
        try:
            while not self._halt.is_set():
                started = time.monotonic()
                with conn.cursor() as cur:
                    cur.execute(sql, (self.hostgroup,))
                    ports = tuple(sorted(int(row[0]) for row in cur.fetchall()))
                self.samples.append(Sample(started, ports))
                self._halt.wait(max(0.0, SAMPLE_PERIOD_S - (time.monotonic() - started)))
        finally:
            conn.close()
