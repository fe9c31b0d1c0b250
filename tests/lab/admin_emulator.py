"""The lab's stand-in for a ProxySQL 2.7 admin interface, for machines without a proxysql binary.

    python -m tests.lab.admin_emulator --port P --datadir D --user U --password-file F

It speaks the MySQL protocol through mysql-mimic and keeps its state in SQLite, as ProxySQL's admin
does: `main` (in memory) holds the configuration tables and their runtime_* copies, `disk` is a
file in the datadir that survives restarts, `stats` holds stats_mysql_connection_pool. Statements
go to SQLite verbatim except the few ProxySQL answers itself (LOAD/SAVE, transactions, SET,
SELECT @@..., SHOW ...). The behaviour mirrors the observed ProxySQL 2.7.2 admin interface: no
transactions, errors as 1045 "ProxySQL Admin Error: <SQLite message>", every value a string.

What it does not do: monitor backends, route traffic, run scheduler jobs, validate variables.
Connections clients hold are played by lab statements (LAB HOLD / LAB RELEASE): they show as
ConnUsed, and keep a server a LOAD removed in runtime as OFFLINE_HARD until released.
The password is read from a file (never argv) so it does not show in `ps`.
"""

from __future__ import annotations

import argparse
import asyncio
import enum
import hashlib
import logging
import re
import secrets
import signal
import sqlite3
import ssl
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mysql_mimic import (
    IdentityProvider,
    MysqlServer,
    NativePasswordAuthPlugin,
    ResultColumn,
    ResultSet,
    User,
)
from mysql_mimic import server as mimic_server
from mysql_mimic import stream as mimic_stream
from mysql_mimic.connection import Connection
from mysql_mimic.errors import ErrorCode, MysqlError
from mysql_mimic.session import BaseSession
from mysql_mimic.types import ColumnType, ServerStatus
from mysql_mimic.variables import SYSTEM_VARIABLES, GlobalVariables, SessionVariables

from tests.lab import admin_schema

log = logging.getLogger("admin_emulator")

# What `SELECT version()` answers: 2.7-shaped so version checks pass, and plainly the emulator.
EMULATOR_VERSION = "2.7.2-lab-emulator"
# What the protocol handshake announces. ProxySQL announces a MySQL-like version there; clients
# such as PyMySQL switch features on that number, so it must look like MySQL 5+, not like 2.7.
HANDSHAKE_VERSION = "8.0.11"
DISK_FILE = "proxysql.db"
ERROR_PREFIX = "ProxySQL Admin Error: "

# Names in runtime_checksums_values, created at start with version 1 as a real ProxySQL does.
CHECKSUM_NAMES = (
    "admin_variables",
    "mysql_query_rules",
    "mysql_servers",
    "mysql_servers_v2",
    "mysql_users",
    "mysql_variables",
    "proxysql_servers",
)


# The modules a real ProxySQL lists for each peer in stats_proxysql_servers_checksums, in its order.
PEER_CHECKSUM_NAMES = (
    "admin_variables",
    "mysql_query_rules",
    "mysql_servers",
    "mysql_users",
    "mysql_variables",
    "proxysql_servers",
    "mysql_servers_v2",
)


class AdminError(Exception):
    """A statement failed; the text is what SQLite (or ProxySQL) says, without the prefix."""


class Direction(enum.Enum):
    MEMORY_TO_RUNTIME = "memory_to_runtime"
    RUNTIME_TO_MEMORY = "runtime_to_memory"
    DISK_TO_MEMORY = "disk_to_memory"
    MEMORY_TO_DISK = "memory_to_disk"


# Every spelling ProxySQL 2.7 accepts (lib/Admin_Handler.cpp: the *_FROM_MEMORY/*_TO_MEMORY alias
# vectors and generate_load_save_disk_commands); {m} is the module's words.
_SPELLINGS: dict[Direction, tuple[str, ...]] = {
    Direction.MEMORY_TO_RUNTIME: (
        "LOAD {m} FROM MEMORY",
        "LOAD {m} FROM MEM",
        "LOAD {m} TO RUNTIME",
        "LOAD {m} TO RUN",
    ),
    Direction.RUNTIME_TO_MEMORY: (
        "SAVE {m} TO MEMORY",
        "SAVE {m} TO MEM",
        "SAVE {m} FROM RUNTIME",
        "SAVE {m} FROM RUN",
    ),
    Direction.DISK_TO_MEMORY: ("LOAD {m} TO MEMORY", "LOAD {m} TO MEM", "LOAD {m} FROM DISK"),
    Direction.MEMORY_TO_DISK: ("SAVE {m} FROM MEMORY", "SAVE {m} FROM MEM", "SAVE {m} TO DISK"),
}


@dataclass(frozen=True)
class Module:
    """A unit LOAD/SAVE moves between layers, and the checksums a LOAD to runtime bumps."""

    words: str
    tables: tuple[str, ...]
    variable_prefix: str | None = None
    checksums: tuple[str, ...] = ()


MODULES: tuple[Module, ...] = (
    Module(
        "MYSQL SERVERS",
        (
            "mysql_servers",
            "mysql_replication_hostgroups",
            "mysql_group_replication_hostgroups",
            "mysql_galera_hostgroups",
            "mysql_hostgroup_attributes",
            "mysql_servers_ssl_params",
        ),
        checksums=("mysql_servers", "mysql_servers_v2"),
    ),
    Module("MYSQL USERS", ("mysql_users",), checksums=("mysql_users",)),
    Module("MYSQL QUERY RULES", ("mysql_query_rules",), checksums=("mysql_query_rules",)),
    Module(
        "MYSQL VARIABLES",
        ("global_variables",),
        variable_prefix="mysql-",
        checksums=("mysql_variables",),
    ),
    Module(
        "ADMIN VARIABLES",
        ("global_variables",),
        variable_prefix="admin-",
        checksums=("admin_variables",),
    ),
    # the scheduler is not synchronised by ProxySQL Cluster, so it has no checksum row
    Module("SCHEDULER", ("scheduler",)),
    Module("PROXYSQL SERVERS", ("proxysql_servers",), checksums=("proxysql_servers",)),
)

COMMANDS: dict[str, tuple[Module, Direction]] = {
    spelling.format(m=module.words): (module, direction)
    for module in MODULES
    for direction, spellings in _SPELLINGS.items()
    for spelling in spellings
}

# SAVEPOINT/RELEASE/END are SQLite's own transaction verbs: left to SQLite they would open a
# transaction on the shared connection that every other session then sits inside.
_TRANSACTION = re.compile(
    r"^(BEGIN|START\s+TRANSACTION|COMMIT|ROLLBACK|END|SAVEPOINT|RELEASE)\b", re.IGNORECASE
)
_SET = re.compile(r"^SET\b", re.IGNORECASE)
_SET_ADMIN_VARIABLE = re.compile(
    r"^SET\s+(?:GLOBAL\s+)?((?:mysql|admin)-\w+)\s*=\s*(.*)$", re.IGNORECASE | re.DOTALL
)
_SYSVAR = r"@@(?:(?:SESSION|GLOBAL)\.)?\w+"
_SELECT_SYSVARS = re.compile(
    rf"^SELECT\s+({_SYSVAR}(?:\s*,\s*{_SYSVAR})*)(?:\s+LIMIT\s+\d+)?$", re.IGNORECASE
)
# The @@variables the admin answers (clients ask for them on connect or in `status`); any other
# one, @@autocommit included, gets a result with no row, as on a real ProxySQL admin.
_KNOWN_SYSVARS = {
    "version": EMULATOR_VERSION,
    "version_comment": EMULATOR_VERSION,
    "character_set_client": "utf8mb4",
    "character_set_connection": "utf8mb4",
    "character_set_server": "utf8mb4",
    "character_set_database": "utf8mb4",
    "character_set_results": "utf8mb4",
}
_SHOW_ALL_VARIABLES = re.compile(r"^SHOW\s+(?:GLOBAL\s+|ALL\s+)?VARIABLES$", re.IGNORECASE)
_SHOW_FILTERED_VARIABLES = re.compile(
    r"^SHOW\s+(?:GLOBAL\s+|SESSION\s+)?VARIABLES\s+(?:LIKE|WHERE)\b", re.IGNORECASE
)
_SHOW_TABLES = re.compile(r"^SHOW\s+TABLES(?:\s+(?:FROM|IN)\s+`?(\w+)`?)?$", re.IGNORECASE)
_SHOW_CREATE_TABLE = re.compile(
    r"^SHOW\s+CREATE\s+TABLE\s+(?:`?(\w+)`?\.)?`?(\w+)`?$", re.IGNORECASE
)
_SHOW_MYSQL_SERVERS = re.compile(r"^SHOW\s+MYSQL\s+SERVERS$", re.IGNORECASE)
# the lab's stand-in for ProxySQL's monitor shunning a server (a real ProxySQL has no such
# statement: the lab drives a real one differently, see ProxySQLLab.shun)
_LAB_SHUN = re.compile(
    r"^LAB\s+(SHUN|UNSHUN)\s+SERVER\s+(\d+)\s+'([^'\s]+)'\s+(\d+)$", re.IGNORECASE
)
# lab-only: clients holding N backend connections to a server of a hostgroup (a real ProxySQL
# gets them from clients in a transaction through its MySQL port, see ProxySQLLab.hold)
_LAB_HOLD = re.compile(
    r"^LAB\s+HOLD\s+(\d+)\s+CONNECTIONS\s+(\d+)\s+'([^'\s]+)'\s+(\d+)$", re.IGNORECASE
)
_LAB_RELEASE = re.compile(
    r"^LAB\s+RELEASE\s+CONNECTIONS(?:\s+(\d+)\s+'([^'\s]+)'\s+(\d+))?$", re.IGNORECASE
)
# lab-only: the test harness plays ProxySQL's cluster checks by writing the stats tables a real
# ProxySQL fills itself (stats_proxysql_servers_checksums, stats_proxysql_servers_metrics)
_LAB_STATS = re.compile(r"^LAB\s+STATS\s+(.+)$", re.IGNORECASE | re.DOTALL)
_SCHEMAS = ("main", "disk", "stats")

Rows = list[tuple[str | None, ...]]

# ProxySQL's scheduler keeps argN only while arg1..arg(N-1) are all set (it stops copying at the
# first NULL), so runtime_scheduler shows NULL from the first missing argument on.
_SCHEDULER_RUNTIME_EXPRESSIONS = {
    f"arg{n}": (
        f"CASE WHEN {' OR '.join(f'arg{k} IS NULL' for k in range(1, n))} THEN NULL ELSE arg{n} END"
    )
    for n in range(2, 6)
}


def _as_text(value: object) -> str | None:
    """ProxySQL's admin sends every column as text; NULL stays NULL."""
    if value is None:
        return None
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return str(value)


def _result(columns: Sequence[str], rows: Sequence[Sequence[object]]) -> ResultSet:
    text_rows: Rows = [tuple(_as_text(v) for v in row) for row in rows]
    result_columns = [ResultColumn(name=name, type=ColumnType.VAR_STRING) for name in columns]
    return ResultSet(rows=text_rows, columns=result_columns)


def _checksum_text(parts: Sequence[Sequence[tuple[object, ...]]]) -> str:
    """A 64-bit digest printed the way ProxySQL prints its SpookyHash ("0x%0X%0X" of two halves).

    Only equality matters: the same content always gives the same text. Like ProxySQL, content
    with no rows at all hashes to "0x00".
    """
    if not any(parts):
        return "0x00"
    digest = hashlib.blake2b(digest_size=8)
    for rows in parts:
        # sorted, so the order rows were written in never changes the checksum
        digest.update(repr(sorted(repr(row) for row in rows)).encode())
        digest.update(b"\0")
    value = int.from_bytes(digest.digest(), "little")
    return f"0x{value & 0xFFFFFFFF:X}{value >> 32:X}"


def normalize_command(sql: str) -> str:
    """The statement with trailing semicolons and runs of whitespace folded away, as ProxySQL's
    admin compares commands (it collapses spaces before matching)."""
    text = sql.strip()
    while text.endswith(";"):
        text = text[:-1].rstrip()
    return " ".join(text.split())


class AdminStore:
    """The SQLite side: one connection shared by all sessions, in autocommit mode.

    The asyncio server runs every statement on one thread, one at a time, so a write is visible to
    every other session as soon as it returns: exactly ProxySQL's "no transactions" behaviour.
    """

    def __init__(self, datadir: Path, admin_iface: str, admin_user: str) -> None:
        # the rows the last statement changed (0 when it wrote none, or read)
        self.changed = 0
        datadir.mkdir(parents=True, exist_ok=True)
        self._started = time.monotonic()
        self._db = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        # MySQL functions clients call on the admin (the mariadb client's `status` among them)
        self._db.create_function("version", 0, lambda: EMULATOR_VERSION, deterministic=True)
        self._db.create_function("database", 0, lambda: "main", deterministic=True)
        self._db.create_function("user", 0, lambda: admin_user, deterministic=True)
        self._db.execute("ATTACH DATABASE ? AS disk", (str(datadir / DISK_FILE),))
        self._db.execute("ATTACH DATABASE ':memory:' AS stats")
        fresh_disk = self._create_tables()
        defaults = admin_schema.default_global_variables(admin_iface)
        if fresh_disk:
            self._insert_variables("main.global_variables", defaults, replace=False)
            for module in MODULES:
                self._copy(module, Direction.MEMORY_TO_DISK)
        else:
            for module in MODULES:
                self._copy(module, Direction.DISK_TO_MEMORY)
            # defaults added since the disk copy was written still show up, as after an upgrade
            self._insert_variables("main.global_variables", defaults, replace=False)
        # the interface really listened on wins over whatever an older disk copy recorded
        self._insert_variables(
            "main.global_variables", {"admin-mysql_ifaces": admin_iface}, replace=True
        )
        # servers "the monitor" shunned: runtime only, kept across LOADs of the same ONLINE row
        self._shunned: set[tuple[int, str, int]] = set()
        # backend connections clients hold, per (hostgroup, host, port): ConnUsed
        self._held: dict[tuple[int, str, int], int] = {}
        now = int(time.time())
        for module in MODULES:
            self._copy(module, Direction.MEMORY_TO_RUNTIME)
        for name in CHECKSUM_NAMES:
            self._db.execute(
                "INSERT INTO runtime_checksums_values VALUES (?, 1, ?, ?)",
                (name, now, self._content_checksum(name)),
            )

    def close(self) -> None:
        self._db.close()

    # --- schema -------------------------------------------------------------------------------

    def _create_tables(self) -> bool:
        """Create main, runtime, stats and (if missing or outdated) disk tables.

        Returns True when the disk file held no configuration yet.
        """
        for name, ddl in admin_schema.MAIN_TABLES.items():
            self._db.execute(ddl)
            self._db.execute(admin_schema.runtime_ddl(name))
        self._db.execute(admin_schema.RUNTIME_CHECKSUMS_VALUES)
        for ddl in admin_schema.STATS_TABLES:
            self._db.execute(admin_schema.qualified_ddl(ddl, "stats"))
        existing = dict(
            self._db.execute("SELECT name, sql FROM disk.sqlite_master WHERE type='table'")
        )
        fresh = not any(name in existing for name in admin_schema.MAIN_TABLES)
        for name, ddl in admin_schema.MAIN_TABLES.items():
            if existing.get(name) == ddl:
                continue
            if name in existing:
                # a disk file from an emulator with other columns: start that table afresh
                log.warning("disk.%s has an outdated definition; recreating it empty", name)
                self._db.execute(f"DROP TABLE disk.{name}")
            self._db.execute(admin_schema.qualified_ddl(ddl, "disk"))
        return fresh

    def _insert_variables(self, table: str, values: dict[str, str], replace: bool) -> None:
        verb = "INSERT OR REPLACE" if replace else "INSERT OR IGNORE"
        self._db.executemany(f"{verb} INTO {table} VALUES (?, ?)", sorted(values.items()))

    # --- LOAD / SAVE ----------------------------------------------------------------------------

    @staticmethod
    def _location(table: str, layer: str) -> str:
        if layer == "runtime":
            return f"main.runtime_{table}"
        return f"{layer}.{table}"

    def _columns(self, table: str) -> list[str]:
        return [str(row[1]) for row in self._db.execute(f"PRAGMA main.table_info({table})")]

    def _copy(self, module: Module, direction: Direction) -> None:
        source, target = {
            Direction.MEMORY_TO_RUNTIME: ("main", "runtime"),
            Direction.RUNTIME_TO_MEMORY: ("runtime", "main"),
            Direction.DISK_TO_MEMORY: ("disk", "main"),
            Direction.MEMORY_TO_DISK: ("main", "disk"),
        }[direction]
        if self._db.in_transaction:
            # only raw SQL could have opened one (the transaction verbs are intercepted); close it
            # so the copy below is atomic on its own
            self._db.execute("COMMIT")
        # one SQLite transaction per command, so a failed copy leaves no half-copied layer
        self._db.execute("BEGIN IMMEDIATE")
        try:
            for table in module.tables:
                self._copy_table(table, self._location(table, source), target, module)
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    def _copy_table(self, table: str, source: str, target_layer: str, module: Module) -> None:
        target = self._location(table, target_layer)
        if module.variable_prefix is not None:
            # variables are merged per prefix: a layer keeps the other module's variables
            pattern = module.variable_prefix + "%"
            self._db.execute(
                f"INSERT OR REPLACE INTO {target} SELECT * FROM {source} "
                "WHERE variable_name LIKE ?",
                (pattern,),
            )
            return
        columns = self._columns(table)
        select = ", ".join(columns)
        order = ""
        where = ""
        leaving: dict[tuple[int, str, int], tuple[object, ...]] = {}
        if table == "mysql_servers":
            order = " ORDER BY hostgroup_id, hostname, port"
            if target_layer == "runtime":
                # runtime reports the status enum ProxySQL parsed, always upper case
                select = ", ".join("UPPER(status)" if c == "status" else c for c in columns)
                # ProxySQL purges OFFLINE_HARD servers that hold no connection before it dumps
                # runtime_mysql_servers (MySQL_HostGroups_Manager::dump_table_mysql); held
                # ones are put back below
                where = " WHERE UPPER(status) <> 'OFFLINE_HARD'"
                leaving = self._held_rows(columns)
        if table == "scheduler" and target_layer == "runtime":
            select = ", ".join(_SCHEDULER_RUNTIME_EXPRESSIONS.get(c, c) for c in columns)
        self._db.execute(f"DELETE FROM {target}")
        self._db.execute(
            f"INSERT INTO {target} ({', '.join(columns)}) "
            f"SELECT {select} FROM {source}{where}{order}"
        )
        if table == "mysql_servers" and target_layer == "runtime":
            self._keep_held(columns, leaving)
            self._apply_shuns()

    def _held_rows(self, columns: Sequence[str]) -> dict[tuple[int, str, int], tuple[object, ...]]:
        """Runtime rows of the servers clients hold connections to, before a LOAD."""
        held: dict[tuple[int, str, int], tuple[object, ...]] = {}
        for row in self._rows(f"SELECT {', '.join(columns)} FROM main.runtime_mysql_servers"):
            key = (int(str(row[0])), str(row[1]), int(str(row[2])))
            if self._held.get(key, 0) > 0:
                held[key] = row
        return held

    def _keep_held(
        self, columns: Sequence[str], before: dict[tuple[int, str, int], tuple[object, ...]]
    ) -> None:
        """As ProxySQL 2.7 does: a server a LOAD removed (or set OFFLINE_HARD) while clients
        hold connections to it stays in runtime as OFFLINE_HARD until they let go."""
        status_at = columns.index("status")
        for key, row in sorted(before.items()):
            if self._rows(
                "SELECT 1 FROM main.runtime_mysql_servers "
                "WHERE hostgroup_id = ? AND hostname = ? AND port = ?",
                key,
            ):
                continue
            staged = self._rows(
                f"SELECT {', '.join(columns)} FROM main.mysql_servers "
                "WHERE hostgroup_id = ? AND hostname = ? AND port = ?",
                key,
            )
            kept = list(staged[0] if staged else row)
            kept[status_at] = "OFFLINE_HARD"
            marks = ", ".join("?" * len(columns))
            self._db.execute(
                f"INSERT INTO main.runtime_mysql_servers ({', '.join(columns)}) VALUES ({marks})",
                kept,
            )

    def _lab_hold(self, count: int, key: tuple[int, str, int]) -> None:
        if not self._rows(
            "SELECT 1 FROM main.runtime_mysql_servers WHERE hostgroup_id = ? AND hostname = ? "
            "AND port = ? AND status = 'ONLINE'",
            key,
        ):
            raise AdminError(f"no ONLINE server {key[1]}:{key[2]} in hostgroup {key[0]}")
        self._held[key] = self._held.get(key, 0) + count

    def _lab_release(self, key: tuple[int, str, int] | None) -> None:
        """Clients let go: a server kept only for them leaves runtime."""
        released = sorted(self._held) if key is None else [key]
        for each in released:
            self._held.pop(each, None)
            self._db.execute(
                "DELETE FROM main.runtime_mysql_servers WHERE hostgroup_id = ? AND hostname = ? "
                "AND port = ? AND status = 'OFFLINE_HARD'",
                each,
            )

    def _apply_shuns(self) -> None:
        """A LOAD does not lift a shun (the server is the same to ProxySQL); a server that left
        runtime is forgotten."""
        present = set()
        for key in sorted(self._shunned):
            cursor = self._db.execute(
                "UPDATE main.runtime_mysql_servers SET status = 'SHUNNED' "
                "WHERE hostgroup_id = ? AND hostname = ? AND port = ? AND status = 'ONLINE'",
                key,
            )
            found = self._rows(
                "SELECT 1 FROM main.runtime_mysql_servers "
                "WHERE hostgroup_id = ? AND hostname = ? AND port = ?",
                key,
            )
            if cursor.rowcount or found:
                present.add(key)
        self._shunned = present

    def _lab_shun(self, verb: str, key: tuple[int, str, int]) -> None:
        if verb.upper() == "SHUN":
            self._shunned.add(key)
            self._apply_shuns()
            return
        self._shunned.discard(key)
        self._db.execute(
            "UPDATE main.runtime_mysql_servers SET status = 'ONLINE' "
            "WHERE hostgroup_id = ? AND hostname = ? AND port = ? AND status = 'SHUNNED'",
            key,
        )

    def _rows(self, sql: str, params: Sequence[object] = ()) -> list[tuple[object, ...]]:
        return [tuple(row) for row in self._db.execute(sql, params)]

    def _content_checksum(self, name: str) -> str:
        servers_module = MODULES[0]
        if name in ("mysql_servers", "mysql_servers_v2"):
            layer = "runtime" if name == "mysql_servers" else "main"
            parts = []
            for table in servers_module.tables:
                parts.append(self._rows(f"SELECT * FROM {self._location(table, layer)}"))
            return _checksum_text(parts)
        if name in ("mysql_variables", "admin_variables"):
            prefix = "mysql-" if name == "mysql_variables" else "admin-"
            return _checksum_text(
                [
                    self._rows(
                        "SELECT * FROM main.runtime_global_variables "
                        "WHERE variable_name LIKE ? ORDER BY variable_name",
                        (prefix + "%",),
                    )
                ]
            )
        return _checksum_text([self._rows(f"SELECT * FROM main.runtime_{name}")])

    def _bump_checksums(self, module: Module) -> None:
        """A LOAD to runtime always bumps the version and epoch, even when nothing changed; the
        checksum itself depends only on the content."""
        now = int(time.time())
        for name in module.checksums:
            self._db.execute(
                "UPDATE runtime_checksums_values SET version = version + 1, epoch = ?, "
                "checksum = ? WHERE name = ?",
                (now, self._content_checksum(name), name),
            )

    def _run_command(self, module: Module, direction: Direction) -> None:
        log.info("%s: %s", module.words, direction.value)
        self._copy(module, direction)
        if direction is Direction.MEMORY_TO_RUNTIME:
            self._bump_checksums(module)
            if "proxysql_servers" in module.tables:
                self._list_unreached_peers()

    def _list_unreached_peers(self) -> None:
        """As a real ProxySQL does the moment its peers are loaded: a row for every listed peer
        in both cluster stats tables, with nothing yet learnt from it (uptime 0, empty
        checksums), and no rows left for a peer no longer listed. The emulator never reaches a
        peer; the lab's harness writes what a check would have learnt (LAB STATS)."""
        listed = self._rows(
            "SELECT hostname, port, weight, comment FROM main.runtime_proxysql_servers"
        )
        peers = [(str(host), int(str(port))) for host, port, _, _ in listed]
        for table in ("stats_proxysql_servers_metrics", "stats_proxysql_servers_checksums"):
            for host, port in self._rows(f"SELECT DISTINCT hostname, port FROM stats.{table}"):
                if (str(host), int(str(port))) not in peers:
                    self._db.execute(
                        f"DELETE FROM stats.{table} WHERE hostname = ? AND port = ?", (host, port)
                    )
        # a never-checked peer's last check is ProxySQL's monotonic clock in ms
        never = int(time.monotonic() * 1000)
        for host, port, weight, comment in listed:
            self._db.execute(
                "INSERT OR IGNORE INTO stats.stats_proxysql_servers_metrics "
                "VALUES (?, ?, ?, ?, 0, 0, ?, 0, 0, 0)",
                (host, port, weight, comment, never),
            )
            for name in PEER_CHECKSUM_NAMES:
                self._db.execute(
                    "INSERT OR IGNORE INTO stats.stats_proxysql_servers_checksums "
                    "VALUES (?, ?, ?, 0, 0, '', 0, 0, 0)",
                    (host, port, name),
                )

    # --- statements -----------------------------------------------------------------------------

    def execute(self, sql: str) -> ResultSet | None:
        """Run one statement; return its result set, or None for an OK packet."""
        try:
            return self._execute(sql)
        except (sqlite3.Error, sqlite3.Warning) as exc:
            raise AdminError(str(exc)) from exc

    def _execute(self, sql: str) -> ResultSet | None:
        self.changed = 0
        text = normalize_command(sql)
        if not text:
            return None
        command = COMMANDS.get(text.upper())
        if command is not None:
            self._run_command(*command)
            return None
        if _TRANSACTION.match(text):
            # ProxySQL's admin has no transactions: every statement is already durable
            return None
        if _SET.match(text):
            self._set(text)
            return None
        stats = _LAB_STATS.match(sql.strip().rstrip(";"))
        if stats is not None:
            return self._sqlite(stats.group(1))
        hold = _LAB_HOLD.match(text)
        if hold is not None:
            count, hostgroup, host, port = hold.groups()
            self._lab_hold(int(count), (int(hostgroup), host, int(port)))
            return None
        release = _LAB_RELEASE.match(text)
        if release is not None:
            hostgroup, host, port = release.groups()
            key = None if hostgroup is None else (int(hostgroup), host, int(port))
            self._lab_release(key)
            return None
        shun = _LAB_SHUN.match(text)
        if shun is not None:
            verb, hostgroup, host, port = shun.groups()
            self._lab_shun(verb, (int(hostgroup), host, int(port)))
            return None
        handled = self._answer_builtin(text)
        if handled is not None:
            return handled
        return self._sqlite(sql)

    def _set(self, text: str) -> None:
        """SET on an admin or mysql variable edits global_variables in main; other SETs (what
        client libraries send) are accepted and ignored."""
        match = _SET_ADMIN_VARIABLE.match(text)
        if match is None:
            return
        name, value = match.group(1).lower(), match.group(2).strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        self._db.execute(
            "UPDATE main.global_variables SET variable_value = ? WHERE variable_name = ?",
            (value, name),
        )

    def _answer_builtin(self, text: str) -> ResultSet | None:
        match = _SELECT_SYSVARS.match(text)
        if match is not None:
            columns = [part.strip() for part in match.group(1).split(",")]
            names = [column.rsplit(".", 1)[-1].lstrip("@").lower() for column in columns]
            if all(name in _KNOWN_SYSVARS for name in names):
                return _result(columns, [tuple(_KNOWN_SYSVARS[name] for name in names)])
            return _result(columns, [])
        if _SHOW_ALL_VARIABLES.match(text):
            rows = self._rows(
                "SELECT variable_name, variable_value FROM main.global_variables "
                "ORDER BY variable_name"
            )
            return _result(["Variable_name", "Value"], rows)
        if _SHOW_FILTERED_VARIABLES.match(text):
            return _result(["Variable_name", "Value"], [])
        match = _SHOW_TABLES.match(text)
        if match is not None:
            schema = (match.group(1) or "main").lower()
            if schema not in _SCHEMAS:
                raise AdminError(f"unknown database {schema}")
            rows = self._rows(
                f"SELECT name FROM {schema}.sqlite_master WHERE type='table' "
                "AND name NOT IN ('sqlite_sequence') ORDER BY name"
            )
            return _result(["tables"], rows)
        match = _SHOW_CREATE_TABLE.match(text)
        if match is not None:
            schema = (match.group(1) or "main").lower()
            if schema not in _SCHEMAS:
                raise AdminError(f"unknown database {schema}")
            rows = self._rows(
                f"SELECT name, sql FROM {schema}.sqlite_master WHERE type='table' AND name = ?",
                (match.group(2),),
            )
            return _result(["table", "Create Table"], rows)
        if _SHOW_MYSQL_SERVERS.match(text):
            return self._sqlite("SELECT * FROM mysql_servers ORDER BY hostgroup_id, hostname, port")
        return None

    def _refresh_global(self) -> None:
        """stats_mysql_global as a query finds it: ProxySQL_Uptime counts from the start."""
        uptime = int(time.monotonic() - self._started)
        self._db.execute(
            "INSERT OR REPLACE INTO stats.stats_mysql_global VALUES ('ProxySQL_Uptime', ?)",
            (str(uptime),),
        )

    def _refresh_stats(self) -> None:
        """Rebuild stats_mysql_connection_pool from runtime, as ProxySQL does when a query names
        it; ConnUsed (and MaxConnUsed) are the connections the lab's clients hold."""
        self._db.execute("DELETE FROM stats.stats_mysql_connection_pool")
        for hostgroup, host, port, status in self._rows(
            "SELECT hostgroup_id, hostname, port, status FROM main.runtime_mysql_servers "
            "ORDER BY hostgroup_id, hostname, port"
        ):
            used = self._held.get((int(str(hostgroup)), str(host), int(str(port))), 0)
            self._db.execute(
                "INSERT INTO stats.stats_mysql_connection_pool "
                "VALUES (?, ?, ?, ?, ?, 0, ?, 0, ?, 0, 0, 0, 0, 0)",
                (hostgroup, host, port, status, used, used, used),
            )

    def _refresh_processlist(self) -> None:
        """One idle session of the lab's application account per connection its clients
        hold, as ProxySQL lists them with mysql-show_processlist_extended off."""
        self._db.execute("DELETE FROM stats.stats_mysql_processlist")
        session = 0
        for (hostgroup, host, port), count in sorted(self._held.items()):
            for _ in range(count):
                session += 1
                self._db.execute(
                    "INSERT INTO stats.stats_mysql_processlist VALUES "
                    "(0, ?, 'app', 'information_schema', '127.0.0.1', ?, ?, '127.0.0.1', 0, "
                    "?, ?, 'Sleep', 0, NULL, 0, NULL)",
                    (session, 40000 + session, hostgroup, host, port),
                )

    def _sqlite(self, sql: str) -> ResultSet | None:
        statement = sql.strip()
        while statement.endswith(";"):
            statement = statement[:-1].rstrip()
        lowered = statement.lower()
        if "stats_mysql_connection_pool" in lowered:
            self._refresh_stats()
        if "stats_mysql_processlist" in lowered:
            self._refresh_processlist()
        if "stats_mysql_global" in lowered:
            self._refresh_global()
        cursor = self._db.execute(statement)
        if cursor.description is None:
            # the rows an INSERT, UPDATE or DELETE changed, as ProxySQL's OK packet says them
            self.changed = max(cursor.rowcount, 0)
            return None
        columns = [str(d[0]) for d in cursor.description]
        return _result(columns, cursor.fetchall())


class AdminIdentity(IdentityProvider):  # type: ignore[misc]
    """Only the configured admin account, with mysql_native_password (PyMySQL's default)."""

    def __init__(self, user: str, password: str) -> None:
        self._user = user
        self._auth_string = NativePasswordAuthPlugin.create_auth_string(password)

    def get_plugins(self) -> Sequence[Any]:
        return [NativePasswordAuthPlugin()]

    async def get_user(self, username: str) -> Any:
        # an unknown account gets a credential nobody knows, so the client sees 1045
        # "Access denied" as on a real ProxySQL rather than mysql-mimic's 3162
        known = username == self._user
        auth_string = self._auth_string if known else secrets.token_hex(20)
        return User(
            name=username, auth_string=auth_string, auth_plugin=NativePasswordAuthPlugin.name
        )


class AdminConnection(Connection):  # type: ignore[misc]
    """The status flags a ProxySQL admin sends (lib/MySQL_Protocol.cpp).

    Its handshake says only AUTOCOMMIT; every OK and EOF packet of an admin session adds
    NO_BACKSLASH_ESCAPES, because SQLite does not know backslash escapes. Clients read that flag:
    PyMySQL (whose default connect answers the handshake's AUTOCOMMIT with SET AUTOCOMMIT = 0)
    then quotes string parameters by doubling quotes, which SQLite understands.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.status_flags = ServerStatus.SERVER_STATUS_AUTOCOMMIT

    def ok(self, **kwargs: Any) -> bytes:
        """An OK packet; after a statement that wrote, with the rows it changed (mysql-mimic
        says 0 of every statement)."""
        session = self.session
        if isinstance(session, AdminSession) and session.changed:
            kwargs.setdefault("affected_rows", session.changed)
            session.changed = 0
        packet: bytes = super().ok(**kwargs)
        return packet

    async def authenticate(self, *args: Any, **kwargs: Any) -> None:
        # called once the handshake is out; the OK that ends the login already carries the flag
        self.status_flags = (
            ServerStatus.SERVER_STATUS_AUTOCOMMIT | ServerStatus.SERVER_STATUS_NO_BACKSLASH_ESCAPES
        )
        await super().authenticate(*args, **kwargs)


def _session_variables() -> SessionVariables:
    schema = dict(SYSTEM_VARIABLES)
    schema["version"] = (str, HANDSHAKE_VERSION, False)
    schema["version_comment"] = (str, EMULATOR_VERSION, False)
    return SessionVariables(GlobalVariables(schema))


class AdminSession(BaseSession):  # type: ignore[misc]
    """One client connection; statements go to the shared store as raw SQL (never to sqlglot,
    which does not know LOAD/SAVE)."""

    def __init__(self, store: AdminStore) -> None:
        self.variables = _session_variables()
        self.username: str | None = None
        self.database: str | None = None
        self._store = store
        self.changed = 0

    async def handle_query(self, sql: str, attrs: dict[str, str]) -> ResultSet | None:
        if self.username is None:
            # mysql-mimic reports a failed login but keeps reading; refuse anything after it
            raise MysqlError("Access denied", code=ErrorCode.ACCESS_DENIED_ERROR)
        log.debug("query: %s", sql)
        try:
            found = self._store.execute(sql)
            # taken by AdminConnection.ok(), which answers this statement next
            self.changed = self._store.changed
            return found
        except AdminError as exc:
            # ProxySQL's admin reports every failure as 1045 with the SQLite message
            raise MysqlError(ERROR_PREFIX + str(exc), code=ErrorCode.ACCESS_DENIED_ERROR) from exc


async def _start_tls(stream: Any, context: ssl.SSLContext) -> None:
    """mysql-mimic's STARTTLS, without its race: a client sends its TLS hello right after the
    SSLRequest packet, and when both arrive in one read the hello sits in the plain-text reader's
    buffer, where the TLS layer never sees it (the handshake then stalls). The buffered bytes are
    handed to the TLS layer once it is in place."""
    reader, writer = stream.reader, stream.writer
    pending = bytes(reader._buffer)
    reader._buffer.clear()
    transport = writer.transport
    loop = asyncio.get_running_loop()

    def feed() -> None:
        # start_tls has installed its protocol and queued connection_made: feed after that
        loop.call_soon(feed_tls)

    def feed_tls() -> None:
        tls_protocol = transport.get_protocol()
        buffer = tls_protocol.get_buffer(len(pending))
        buffer[: len(pending)] = pending
        tls_protocol.buffer_updated(len(pending))

    if pending:
        loop.call_soon(feed)
    new_transport = await loop.start_tls(
        transport, transport.get_protocol(), context, server_side=True
    )
    writer._transport = new_transport
    reader._transport = new_transport


async def serve(
    store: AdminStore,
    host: str,
    port: int,
    user: str,
    password: str,
    *,
    tls: ssl.SSLContext | None = None,
) -> None:
    """Answer on host:port until SIGTERM or SIGINT; TLS offered when `tls` is given."""
    # mysql-mimic builds each connection from this module-level name and offers no other hook
    # before the handshake; this process serves nothing else, so replacing it here is contained.
    # The contract test quoting a parameter on a fresh connection fails if this stops working.
    mimic_server.Connection = AdminConnection
    mimic_stream.MysqlStream.start_tls = _start_tls
    server = MysqlServer(
        session_factory=lambda: AdminSession(store),
        identity_provider=AdminIdentity(user, password),
        ssl=tls,
    )
    await server.start_server(host=host, port=port)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    log.info("ProxySQL admin emulator %s listening on %s:%d", EMULATOR_VERSION, host, port)
    await stop.wait()
    log.info("stopping")
    server.close()
    await server.wait_closed()


def _loopback(value: str) -> str:
    if not value.startswith("127."):
        raise argparse.ArgumentTypeError("the lab listens on loopback addresses only")
    return value


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.lab.admin_emulator", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--host", type=_loopback, default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--datadir", type=Path, required=True)
    parser.add_argument("--user", required=True)
    parser.add_argument("--password-file", type=Path, required=True)
    parser.add_argument("--log-level", default="INFO")
    parser.add_argument("--ssl-cert", type=Path, help="offer TLS with this certificate")
    parser.add_argument("--ssl-key", type=Path, help="the key of --ssl-cert")
    args = parser.parse_args(argv)
    tls: ssl.SSLContext | None = None
    if args.ssl_cert is not None:
        tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        tls.load_cert_chain(args.ssl_cert, args.ssl_key)
    logging.basicConfig(
        level=args.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    password = args.password_file.read_text().rstrip("\n")
    store = AdminStore(args.datadir, f"{args.host}:{args.port}", args.user)
    try:
        asyncio.run(serve(store, args.host, args.port, args.user, password, tls=tls))
    except OSError as exc:
        log.error("cannot listen on %s:%d: %s", args.host, args.port, exc)
        return 1
    finally:
        store.close()
    log.info("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
