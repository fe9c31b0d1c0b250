"""A real 3-member single-primary MySQL Group Replication group on 127.0.0.1, to start and break.

Member N (1..3) serves clients on port 3320+N and talks GR (XCom) on 127.0.0.1:33260+N; the
X protocol is off. Everything a member owns (cnf, datadir, socket, pid files, logs) is under
`lab_dir()/gr/nN/`; the binaries come from `mysql_dist.ensure_mysql()`.

GR is tuned so the tests, not the group, decide what happens next:
- member_expel_timeout=0: a killed or frozen member is expelled as soon as XCom suspects it
  (about 5 s), so "the others see 2 members" arrives quickly.
- autorejoin_tries=0: an expelled member goes to ERROR and stays there (exit_state_action
  READ_ONLY keeps its mysqld up) instead of quietly rejoining minutes later behind a test's back.
- unreachable_majority_timeout=0 (the default): a member left in a minority stays ONLINE with
  its peers UNREACHABLE, a stable "partition" state for tests to observe.
- flow_control_mode=DISABLED: the applier backlog the lab builds on purpose must not throttle the
  primary (the default thresholds are 25000, far above the lab's usual 1500, but a test may ask for
  more).
- consistency=EVENTUAL: while a new primary applies its backlog (super_read_only=ON), writes to it
  fail at once; MySQL 8.4+'s default BEFORE_ON_PRIMARY_FAILOVER would hold them for up to
  wait_timeout and hang a test instead.
- distinct member weights (1, then 3, then 2) make automatic elections predictable: when member 1
  fails, member 3 takes over and member 2 stays a secondary, the one to hold for a backlog;
  set_member_weight() lets a test choose who wins the next election.

Applier backlog (for lag and "brownout" tests): hold_applier(n) keeps FLUSH TABLES WITH READ LOCK
open in a tagged session on secondary n. The GR applier then waits for the global read lock
(lock_wait_timeout is a year, so it waits rather than errors) while the member keeps receiving and
certifying transactions, so COUNT_TRANSACTIONS_REMOTE_IN_APPLIER_QUEUE grows with every write on
the primary. Released, the queue drains. A held member elected primary stays super_read_only=ON
until the hold is released and the backlog applied.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, NamedTuple

import pymysql

from tests.lab import process
from tests.lab.accounts import (
    APP_PASSWORD,
    APP_SCHEMA,
    APP_USER,
    MONITOR_PASSWORD,
    MONITOR_USER,
    NODE_ADMIN_PASSWORD,
    NODE_ADMIN_USER,
)
from tests.lab.mysql_dist import MysqlDist, ensure_mysql
from tests.lab.paths import LOOPBACK, lab_dir
from tests.lab.process import LabError, wait_until

INDEXES = (1, 2, 3)
CLIENT_PORT_BASE = 3320
GCS_PORT_BASE = 33260
GROUP_NAME = "5f3d6c2e-8b1a-4c7e-9d2f-0a6b4e8c1d37"
# member 1 first, then 3: member 2 stays a secondary across one failover, ready to be held
DEFAULT_WEIGHTS = {1: 60, 2: 40, 3: 50}
# GR's distributed recovery account; created on every member, never replicated
REPL_USER = "gr_repl"
REPL_PASSWORD = "gr-repl-pw"
# the lab's own table for backlog writes, apart from the application's schema
LAB_SCHEMA = "gr_lab"
TICKS_TABLE = f"{LAB_SCHEMA}.ticks"
# connection attribute of applier-hold sessions, so any process can find and end them
HOLD_PROGRAM = "gr-lab-applier-hold"

STATUS_CONNECT_TIMEOUT = 2.0
STATUS_READ_TIMEOUT = 3.0
ADMIN_READ_TIMEOUT = 180.0
START_TIMEOUT = 120.0
ONLINE_TIMEOUT = 180.0
# a group that has not come together in this time is restarted from scratch (see _form_group)
FORM_TIMEOUT = 90.0
STOP_TIMEOUT = 90.0
INIT_TIMEOUT = 300.0
STOP_GR_TIMEOUT = 60.0

# sun_path holds 108 bytes; mysqld also needs room for its ".lock" file name
SOCKET_PATH_MAX = 100

# the same for every member
SERVER_SETTINGS: list[tuple[str, object]] = [
    ("user", "root"),
    ("bind_address", LOOPBACK),
    ("mysqlx", "OFF"),
    # accounts are 'user'@'127.0.0.1' and 'user'@'localhost'; no DNS lookups on connect
    ("skip_name_resolve", "ON"),
    # three servers share a small machine: keep the big buffers small
    ("innodb_buffer_pool_size", "64M"),
    ("innodb_redo_log_capacity", "64M"),
    ("innodb_log_buffer_size", "8M"),
    ("max_connections", 100),
    # only the process dies in these tests, never the OS, so page-cache durability is enough,
    # and the backlog writes stay fast
    ("innodb_flush_log_at_trx_commit", 2),
    ("sync_binlog", 0),
    ("performance_schema", "ON"),
    ("gtid_mode", "ON"),
    ("enforce_gtid_consistency", "ON"),
    ("log_bin", "binlog"),
    ("log_replica_updates", "ON"),
    # GR replicates InnoDB only; other engines would fail at commit
    ("disabled_storage_engines", "MyISAM,BLACKHOLE,FEDERATED,ARCHIVE,MEMORY"),
    ("plugin_load_add", "group_replication.so"),
]

# loose_: --initialize runs without the plugin and must accept these. Why each value: see the
# module docstring.
GR_SETTINGS: list[tuple[str, object]] = [
    ("loose_group_replication_group_name", GROUP_NAME),
    # the lab decides when a member starts GR, and whether it bootstraps
    ("loose_group_replication_start_on_boot", "OFF"),
    ("loose_group_replication_bootstrap_group", "OFF"),
    ("loose_group_replication_single_primary_mode", "ON"),
    ("loose_group_replication_ip_allowlist", "127.0.0.1/8"),
    # the recovery account uses caching_sha2_password over a plain connection
    ("loose_group_replication_recovery_get_public_key", "ON"),
    ("loose_group_replication_member_expel_timeout", 0),
    ("loose_group_replication_autorejoin_tries", 0),
    ("loose_group_replication_exit_state_action", "READ_ONLY"),
    ("loose_group_replication_unreachable_majority_timeout", 0),
    ("loose_group_replication_flow_control_mode", "DISABLED"),
    ("loose_group_replication_consistency", "EVENTUAL"),
    # the XCom message cache defaults to 1 GiB; 128 MiB is its minimum
    ("loose_group_replication_message_cache_size", 134217728),
]

Row = tuple[Any, ...]


class ViewRow(NamedTuple):
    """One row of a member's replication_group_members."""

    host: str
    port: int
    state: str
    role: str


@dataclass(frozen=True)
class GrMember:
    index: int
    host: str
    port: int


@dataclass(frozen=True)
class MemberStatus:
    """What member `index` says about itself; fields are None when it does not answer."""

    index: int
    port: int
    pid: int | None
    frozen: bool
    member_state: str | None = None
    member_role: str | None = None
    super_read_only: bool | None = None
    read_only: bool | None = None
    applier_queue: int | None = None
    view: list[ViewRow] | None = None
    server_uuid: str | None = None

    @property
    def answered(self) -> bool:
        return self.view is not None


def _say(message: str) -> None:
    print(f"gr-lab {time.strftime('%H:%M:%S')} {message}", file=sys.stderr, flush=True)


class ApplierHold:
    """A session on a secondary holding FLUSH TABLES WITH READ LOCK; release() lets it apply."""

    def __init__(self, member: int, conn: pymysql.connections.Connection[Any]) -> None:
        self.member = member
        self._conn: pymysql.connections.Connection[Any] | None = conn

    @property
    def held(self) -> bool:
        return self._conn is not None

    def release(self) -> None:
        conn, self._conn = self._conn, None
        if conn is None:
            return
        # the member may be dead or frozen by now; closing the session frees the lock either way
        with contextlib.suppress(pymysql.MySQLError, OSError):
            conn.query("UNLOCK TABLES")
        with contextlib.suppress(Exception):
            conn.close()

    def __enter__(self) -> ApplierHold:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()


@dataclass
class GrLab:
    """The lab's GR group. All operations are synchronous: they return once the state holds."""

    root: Path = field(default_factory=lambda: lab_dir() / "gr")
    dist: MysqlDist | None = None
    members: tuple[GrMember, ...] = field(
        default_factory=lambda: tuple(GrMember(n, LOOPBACK, CLIENT_PORT_BASE + n) for n in INDEXES)
    )
    _holds: list[ApplierHold] = field(default_factory=list, repr=False)

    # ---- paths -------------------------------------------------------------------------------

    def member_dir(self, n: int) -> Path:
        return self.root / f"n{n}"

    def _cnf(self, n: int) -> Path:
        return self.member_dir(n) / "my.cnf"

    def _socket(self, n: int) -> Path:
        return self.member_dir(n) / "mysqld.sock"

    def _pid_file(self, n: int) -> Path:
        return self.member_dir(n) / "lab.pid"

    def error_log(self, n: int) -> Path:
        return self.member_dir(n) / "error.log"

    def _port(self, n: int) -> int:
        return self._member(n).port

    def _member(self, n: int) -> GrMember:
        for member in self.members:
            if member.index == n:
                return member
        raise LabError(f"no member {n}; members are {list(INDEXES)}")

    def _index_of_port(self, port: int) -> int | None:
        return next((m.index for m in self.members if m.port == port), None)

    # ---- processes ---------------------------------------------------------------------------

    def pid(self, n: int) -> int | None:
        """The live mysqld pid of member n, if this lab started it."""
        # the cnf path is in the command line and unique per member: a recycled pid is not ours
        return process.tracked_pid(self._pid_file(n), marker=str(self._cnf(n)))

    def _require_pid(self, n: int) -> int:
        pid = self.pid(n)
        if pid is None:
            raise LabError(f"member {n} is not running")
        return pid

    def _dist(self) -> MysqlDist:
        if self.dist is None:
            self.dist = ensure_mysql()
        return self.dist

    def _write_cnf(self, n: int) -> None:
        dist = self._dist()
        home = self.member_dir(n)
        port = self._port(n)
        for sub in ("tmp", "files"):
            (home / sub).mkdir(parents=True, exist_ok=True)
        if len(str(self._socket(n))) > SOCKET_PATH_MAX:
            raise LabError(f"socket path {self._socket(n)} is too long; set a shorter LAB_DIR")
        seeds = ",".join(f"{LOOPBACK}:{GCS_PORT_BASE + i}" for i in INDEXES)
        settings: list[tuple[str, object]] = [
            ("basedir", dist.basedir),
            ("plugin_dir", dist.plugin_dir),
            ("lc_messages_dir", dist.share_dir),
            ("datadir", home / "data"),
            ("socket", self._socket(n)),
            ("pid_file", home / "mysqld.pid"),
            ("log_error", self.error_log(n)),
            ("tmpdir", home / "tmp"),
            # MySQL 9 insists on an existing directory here
            ("secure_file_priv", home / "files"),
            ("port", port),
            ("server_id", n),
            ("report_host", LOOPBACK),
            ("report_port", port),
            ("loose_group_replication_local_address", f"{LOOPBACK}:{GCS_PORT_BASE + n}"),
            ("loose_group_replication_group_seeds", seeds),
            ("loose_group_replication_member_weight", DEFAULT_WEIGHTS[n]),
            *SERVER_SETTINGS,
            *GR_SETTINGS,
        ]
        lines = ["[mysqld]", *(f"{key}={value}" for key, value in settings)]
        self._cnf(n).write_text("\n".join(lines) + "\n")

    def _initialized_marker(self, n: int) -> Path:
        return self.member_dir(n) / "initialized"

    def _initialize(self, members: Sequence[int]) -> None:
        """--initialize-insecure the datadirs that never completed it (in parallel: ~10 s each)."""
        todo = [n for n in members if not self._initialized_marker(n).exists()]
        if not todo:
            return
        mysqld = str(self._dist().mysqld)
        procs: dict[int, subprocess.Popen[bytes]] = {}
        for n in todo:
            data = self.member_dir(n) / "data"
            if data.exists():
                shutil.rmtree(data)
            self.error_log(n).unlink(missing_ok=True)
            _say(f"initializing the datadir of member {n}")
            argv = [mysqld, f"--defaults-file={self._cnf(n)}", "--initialize-insecure"]
            procs[n] = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_until(
                lambda: all(p.poll() is not None for p in procs.values()),
                INIT_TIMEOUT,
                "--initialize-insecure to finish",
                interval=0.5,
            )
        finally:
            for proc in procs.values():
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
        for n, proc in procs.items():
            if proc.returncode != 0:
                raise LabError(f"initializing member {n} failed; see {self.error_log(n)}")
            self._initialized_marker(n).touch()

    def _start_mysqlds(self, members: Sequence[int]) -> None:
        """Start the mysqlds not running yet (GR stays off) and give each the lab's accounts."""
        todo = [n for n in members if self.pid(n) is None]
        for n in todo:
            self._write_cnf(n)
        self._initialize(todo)
        started: dict[int, int] = {}
        for n in todo:
            self._wait_gone(n)
            self._wait_ports_free(n)
            # mysqld refuses to start while the pid in its socket lock file exists, and after a
            # kill -9 that pid may still be a zombie, or already someone else's
            self._socket(n).unlink(missing_ok=True)
            self.member_dir(n).joinpath("mysqld.sock.lock").unlink(missing_ok=True)
            _say(f"starting mysqld of member {n} on port {self._port(n)}")
            argv = [str(self._dist().mysqld), f"--defaults-file={self._cnf(n)}"]
            started[n] = process.spawn(argv, self.member_dir(n) / "mysqld.out", self._pid_file(n))
        for n, pid in started.items():
            self._wait_answering(n, pid)
            self._local_setup(n)

    def _wait_answering(self, n: int, pid: int) -> None:
        wait_until(
            lambda: self._answers_or_died(n, pid), START_TIMEOUT, f"mysqld of member {n} to answer"
        )

    def _wait_gone(self, n: int) -> None:
        """Wait for the last mysqld of member n to be gone, threads and all."""
        try:
            old = int(self._pid_file(n).read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return
        marker = str(self._cnf(n))
        wait_until(
            lambda: not _lingers(old, marker), 30.0, f"old mysqld {old} of member {n} to end"
        )

    def _wait_ports_free(self, n: int) -> None:
        """Wait for n's client and XCom ports to be free.

        A SIGKILLed mysqld counts as dead (zombie) before its last threads have closed its
        sockets, so a quick restart must wait for them; a port that stays taken is not ours.
        """
        ports = (self._port(n), GCS_PORT_BASE + n)
        try:
            wait_until(lambda: not any(_listening(p) for p in ports), 30.0, f"ports {ports} free")
        except LabError as exc:
            raise LabError(
                f"port {ports} taken by a process this lab does not track; member {n} cannot start"
            ) from exc

    def _answers_or_died(self, n: int, pid: int) -> bool:
        if not process.pid_alive(pid):
            raise LabError(f"mysqld of member {n} exited; last log lines:\n{self._log_tail(n)}")
        try:
            self._query(n, "SELECT 1", timeout=STATUS_READ_TIMEOUT)
        except (pymysql.MySQLError, OSError):
            return False
        return True

    def _log_tail(self, n: int, lines: int = 15) -> str:
        try:
            return "\n".join(self.error_log(n).read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no error log)"

    def _local_setup(self, n: int) -> None:
        """The lab's accounts and the recovery channel's credentials, on this member only.

        Run on every mysqld start, so a re-used datadir has them too. Binary logging is off for
        the session: these must not become GTIDs of this member alone, which would stop it from
        (re)joining the group ("more executed transactions than the group").
        """
        # GR is not running yet (start_on_boot=OFF): writing locally cannot diverge the group
        if self._query(n, "SELECT @@super_read_only")[0][0]:
            self._query(n, "SET GLOBAL super_read_only = OFF")
        statements: list[tuple[str, tuple[object, ...]]] = [("SET SESSION sql_log_bin = 0", ())]
        statements += _account(REPL_USER, "127.0.0.1", REPL_PASSWORD)
        statements.append(
            (
                "GRANT REPLICATION SLAVE, BACKUP_ADMIN, CONNECTION_ADMIN, GROUP_REPLICATION_STREAM"
                " ON *.* TO %s@'127.0.0.1'",
                (REPL_USER,),
            )
        )
        statements += _account("root", "127.0.0.1", "")
        statements.append(
            ("GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION", ())
        )
        for host in ("127.0.0.1", "localhost"):
            statements += _account(MONITOR_USER, host, MONITOR_PASSWORD)
            statements.append(
                ("GRANT SELECT ON performance_schema.* TO %s@%s", (MONITOR_USER, host))
            )
            statements.append(
                ("GRANT PROCESS, REPLICATION CLIENT ON *.* TO %s@%s", (MONITOR_USER, host))
            )
            statements += _account(APP_USER, host, APP_PASSWORD)
            statements.append(
                (f"GRANT ALL PRIVILEGES ON `{APP_SCHEMA}`.* TO %s@%s", (APP_USER, host))
            )
        statements += _account(NODE_ADMIN_USER, "127.0.0.1", NODE_ADMIN_PASSWORD)
        statements.append(
            (
                "GRANT GROUP_REPLICATION_ADMIN, SYSTEM_VARIABLES_ADMIN, PROCESS, "
                "REPLICATION CLIENT ON *.* TO %s@'127.0.0.1'",
                (NODE_ADMIN_USER,),
            )
        )
        statements.append(
            ("GRANT SELECT ON performance_schema.* TO %s@'127.0.0.1'", (NODE_ADMIN_USER,))
        )
        statements.append(
            (
                "CHANGE REPLICATION SOURCE TO SOURCE_USER = %s, SOURCE_PASSWORD = %s"
                " FOR CHANNEL 'group_replication_recovery'",
                (REPL_USER, REPL_PASSWORD),
            )
        )
        with self._connection(n) as conn, conn.cursor() as cur:
            for query, params in statements:
                cur.execute(query, params or None)

    # ---- SQL -----------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _connection(
        self,
        n: int,
        timeout: float = ADMIN_READ_TIMEOUT,
        program_name: str | None = None,
    ) -> Iterator[pymysql.connections.Connection[Any]]:
        conn = self._open(n, timeout, program_name)
        try:
            yield conn
        finally:
            with contextlib.suppress(Exception):
                conn.close()

    def _open(
        self, n: int, timeout: float, program_name: str | None = None
    ) -> pymysql.connections.Connection[Any]:
        # root over the unix socket: it exists from --initialize-insecure on, before the lab's
        # TCP accounts do; a frozen server still accepts the connect, hence the read timeout
        return pymysql.connect(
            unix_socket=str(self._socket(n)),
            user="root",
            password="",
            autocommit=True,
            connect_timeout=STATUS_CONNECT_TIMEOUT,
            read_timeout=timeout,
            write_timeout=timeout,
            program_name=program_name,
        )

    def _query(
        self,
        n: int,
        query: str,
        params: Sequence[object] | None = None,
        timeout: float = ADMIN_READ_TIMEOUT,
    ) -> list[Row]:
        with self._connection(n, timeout) as conn, conn.cursor() as cur:
            cur.execute(query, params)
            return list(cur.fetchall())

    def sql(self, n: int, query: str, params: Sequence[object] | None = None) -> list[Row]:
        """Run one statement on member n as root (autocommit); its rows, [] when it has none."""
        try:
            return self._query(n, query, params)
        except pymysql.MySQLError as exc:
            raise LabError(f"member {n}: {query!r} failed: {exc}") from exc

    # ---- status --------------------------------------------------------------------------------

    def status(self) -> list[MemberStatus]:
        """Each member's own view; a down, frozen or silent member gets None fields, fast."""
        return [self.member_status(n) for n in INDEXES]

    def member_status(self, n: int) -> MemberStatus:
        port = self._port(n)
        pid = self.pid(n)
        if pid is None:
            return MemberStatus(index=n, port=port, pid=None, frozen=False)
        if process.pid_frozen(pid):
            return MemberStatus(index=n, port=port, pid=pid, frozen=True)
        try:
            with self._connection(n, STATUS_READ_TIMEOUT) as conn, conn.cursor() as cur:
                cur.execute("SELECT @@server_uuid, @@super_read_only, @@read_only")
                uuid, sro, ro = cur.fetchone() or ("", 0, 0)
                cur.execute(
                    "SELECT MEMBER_ID, MEMBER_HOST, MEMBER_PORT, MEMBER_STATE, MEMBER_ROLE"
                    " FROM performance_schema.replication_group_members"
                )
                members = list(cur.fetchall())
                cur.execute(
                    "SELECT COUNT_TRANSACTIONS_REMOTE_IN_APPLIER_QUEUE"
                    " FROM performance_schema.replication_group_member_stats"
                    " WHERE MEMBER_ID = @@server_uuid"
                )
                queue = cur.fetchone()
        except (pymysql.MySQLError, OSError):
            return MemberStatus(index=n, port=port, pid=pid, frozen=False)
        own = next((row for row in members if row[0] == uuid), None)
        view = [
            ViewRow(str(row[1]), int(row[2] or 0), str(row[3]), str(row[4] or ""))
            for row in members
            if row[1]  # a member whose GR never started lists one row with no host
        ]
        return MemberStatus(
            index=n,
            port=port,
            pid=pid,
            frozen=False,
            member_state=str(own[3]) if own and own[3] else "OFFLINE",
            member_role=str(own[4] or "") if own else "",
            super_read_only=bool(sro),
            read_only=bool(ro),
            applier_queue=int(queue[0]) if queue and queue[0] is not None else 0,
            view=view,
            server_uuid=str(uuid),
        )

    @staticmethod
    def _online_ports(view: Sequence[ViewRow]) -> set[int]:
        return {row.port for row in view if row.state == "ONLINE"}

    @staticmethod
    def _has_majority(st: MemberStatus) -> bool:
        if st.member_state != "ONLINE" or not st.view:
            return False
        return len(GrLab._online_ports(st.view)) * 2 > len(st.view)

    def _reference_view(self, statuses: Sequence[MemberStatus]) -> list[ViewRow] | None:
        """The group's view as its majority sees it, or None.

        A member's own view can be stale (a thawed member still lists the peers that expelled
        it), so a view counts only when every ONLINE member it lists that answers lists the same
        ONLINE set.
        """
        by_port = {st.port: st for st in statuses}
        best: list[ViewRow] | None = None
        for st in statuses:
            if not self._has_majority(st) or st.view is None:
                continue
            online = self._online_ports(st.view)
            agree = all(
                by_port[p].view is None or self._online_ports(by_port[p].view or []) == online
                for p in online
                if p in by_port
            )
            if agree and (best is None or len(online) > len(self._online_ports(best))):
                best = st.view
        return best

    def primary_index(self) -> int | None:
        """The member the group's majority sees as its ONLINE PRIMARY."""
        view = self._reference_view(self.status())
        if view is None:
            return None
        for row in view:
            if row.role == "PRIMARY" and row.state == "ONLINE":
                return self._index_of_port(row.port)
        return None

    def applier_queue(self, n: int) -> int:
        """COUNT_TRANSACTIONS_REMOTE_IN_APPLIER_QUEUE on member n."""
        rows = self.sql(
            n,
            "SELECT COUNT_TRANSACTIONS_REMOTE_IN_APPLIER_QUEUE"
            " FROM performance_schema.replication_group_member_stats"
            " WHERE MEMBER_ID = @@server_uuid",
        )
        return int(rows[0][0]) if rows and rows[0][0] is not None else 0

    def _all_online(self) -> bool:
        statuses = self.status()
        view = self._reference_view(statuses)
        if view is None:
            return False
        own_ok = all(st.member_state == "ONLINE" for st in statuses)
        return own_ok and self._online_ports(view) == {m.port for m in self.members}

    def wait_all_online(self, timeout: float = ONLINE_TIMEOUT) -> None:
        wait_until(self._all_online, timeout, "all 3 members ONLINE", interval=0.5)

    def wait_member_state(
        self, n: int, states: Sequence[str], timeout: float = ONLINE_TIMEOUT
    ) -> None:
        """Poll until member n is in one of `states`; ERROR (terminal until STOP) fails at once."""

        def reached() -> bool:
            state = self.member_status(n).member_state
            if state == "ERROR" and "ERROR" not in states:
                raise LabError(f"member {n} went to ERROR; last log lines:\n{self._log_tail(n)}")
            return state in states

        wait_until(reached, timeout, f"member {n} to be {'/'.join(states)}", interval=0.5)

    # ---- group formation -----------------------------------------------------------------------

    def _group_exists(self, statuses: Sequence[MemberStatus]) -> bool:
        return any(self._has_majority(st) for st in statuses)

    def _bootstrap_candidate(self, members: Sequence[int]) -> int:
        """The member whose executed GTIDs contain everybody else's (member 1 when it qualifies).

        Bootstrapping from a member that misses transactions would lock the others out of the new
        group ("more executed transactions than those present in the group").
        """
        gtids = {n: str(self.sql(n, "SELECT @@gtid_executed")[0][0]) for n in members}
        for candidate in sorted(members):
            others = [gtids[m] for m in members if m != candidate]
            if all(self._has_gtids(candidate, gtid_set) for gtid_set in others):
                return candidate
        raise LabError(
            f"the members' GTID sets diverged ({gtids}); run `python -m tests.lab gr down` and "
            f"remove {self.root} to start afresh"
        )

    def _has_gtids(self, n: int, gtid_set: str) -> bool:
        rows = self.sql(n, "SELECT GTID_SUBSET(%s, @@gtid_executed)", (gtid_set,))
        return bool(rows[0][0])

    def _bootstrap(self, n: int) -> None:
        _say(f"bootstrapping the group on member {n}")
        with self._connection(n) as conn:
            conn.query("SET GLOBAL group_replication_bootstrap_group = ON")
            try:
                conn.query("START GROUP_REPLICATION")
            finally:
                conn.query("SET GLOBAL group_replication_bootstrap_group = OFF")
        self.wait_member_state(n, ["ONLINE"])

    def _start_gr(self, n: int) -> None:
        """START GROUP_REPLICATION on n, bootstrapping when no group with a majority exists."""
        if self._settled_view() is None:
            self._bootstrap(n)
            return
        self._wait_old_incarnation_gone(n)
        _say(f"member {n}: START GROUP_REPLICATION")
        self.sql(n, "START GROUP_REPLICATION")

    def _wait_old_incarnation_gone(self, n: int) -> None:
        """Wait until the group no longer lists n (a killed n stays there until expelled).

        XCom turns a join away while an old incarnation of the same address is still a member,
        and the joiner then retries only after 30 s.
        """
        port = self._port(n)

        def gone() -> bool:
            view = self._reference_view(self.status())
            return view is not None and all(row.port != port for row in view)

        wait_until(gone, 60.0, f"the group to drop member {n}'s previous incarnation", 0.5)

    def _stop_gr(self, n: int) -> None:
        """STOP GROUP_REPLICATION; a member stuck leaving is restarted instead."""
        _say(f"member {n}: STOP GROUP_REPLICATION")
        try:
            self._query(n, "STOP GROUP_REPLICATION", timeout=STOP_GR_TIMEOUT)
        except (pymysql.MySQLError, OSError) as exc:
            _say(f"member {n}: STOP GROUP_REPLICATION failed ({exc}); restarting its mysqld")
            process.kill9(self._require_pid(n))
            self._start_mysqlds([n])

    def _form_group(self) -> None:
        """Make the running members one group: keep a working group, else form a new one; a
        group that does not come together (members thawed into views that never agree again)
        is taken down and bootstrapped afresh, once."""
        try:
            self._join_or_bootstrap(FORM_TIMEOUT)
        except LabError as exc:
            _say(f"the group did not form ({exc}); restarting every member, bootstrapping afresh")
            for n in INDEXES:
                pid = self.pid(n)
                if pid is not None:
                    process.kill9(pid)
            self._start_mysqlds(list(INDEXES))
            self._join_or_bootstrap(ONLINE_TIMEOUT)

    def _join_or_bootstrap(self, timeout: float) -> None:
        view = self._settled_view()
        if view is None:
            self._dissolve(self.status())
            self._bootstrap(self._bootstrap_candidate(list(INDEXES)))
            view = wait_until(
                lambda: self._reference_view(self.status()), timeout, "the group's view"
            )
        self._rejoin_strays(view)
        self.wait_all_online(timeout)

    def _dissolve(self, statuses: Sequence[MemberStatus]) -> None:
        """Take every member of a group without majority out of it, so a new one can form.

        A member stranded ONLINE in a minority is restarted: STOP GROUP_REPLICATION there waits
        30 s for a graceful leave that cannot happen, and group_replication_force_members was
        seen to take 15 s plus slow joins afterwards, while a restart takes about 3 s.
        """
        for st in statuses:
            if st.member_state == "ONLINE":
                _say(f"member {st.index} is stranded in a minority; restarting its mysqld")
                process.kill9(self._require_pid(st.index))
                self._start_mysqlds([st.index])
            elif st.member_state not in (None, "OFFLINE"):
                self._stop_gr(st.index)

    def _rejoin_strays(self, view: Sequence[ViewRow]) -> None:
        """Members the group does not count (ERROR, expelled-but-unaware, OFFLINE) join afresh."""
        in_group = {row.port for row in view if row.state in ("ONLINE", "RECOVERING")}
        for st in self.status():
            if st.member_state in ("ONLINE", "RECOVERING") and st.port in in_group:
                continue
            if st.member_state not in (None, "OFFLINE"):
                self._stop_gr(st.index)
            self._start_gr(st.index)

    def _ensure_lab_schema(self) -> None:
        """Schemas and table created on the primary, binlogged, so every member gets them."""
        primary = wait_until(self.primary_index, ONLINE_TIMEOUT, "a primary")
        wait_until(
            lambda: self.member_status(primary).super_read_only is False,
            ONLINE_TIMEOUT,
            f"primary {primary} to be writable",
        )
        present = self.sql(
            primary,
            "SELECT (SELECT COUNT(*) FROM information_schema.schemata WHERE schema_name = %s)"
            " + (SELECT COUNT(*) FROM information_schema.tables"
            "    WHERE table_schema = %s AND table_name = 'ticks')",
            (APP_SCHEMA, LAB_SCHEMA),
        )
        if present[0][0] == 2:
            return  # each CREATE ... IF NOT EXISTS would still cost a GTID and a round of GR
        self.sql(primary, f"CREATE DATABASE IF NOT EXISTS `{APP_SCHEMA}`")
        self.sql(primary, f"CREATE DATABASE IF NOT EXISTS `{LAB_SCHEMA}`")
        self.sql(
            primary,
            f"CREATE TABLE IF NOT EXISTS {TICKS_TABLE}"
            " (id BIGINT AUTO_INCREMENT PRIMARY KEY, n INT NOT NULL)",
        )

    # ---- lifecycle -----------------------------------------------------------------------------

    def up(self) -> dict[str, float]:
        """Start the 3 members and form the group (member 1 PRIMARY); the seconds each step took."""
        timings: dict[str, float] = {}
        t0 = time.monotonic()
        self._dist()
        timings["dist"] = time.monotonic() - t0
        t1 = time.monotonic()
        self._start_mysqlds(list(INDEXES))
        timings["mysqld"] = time.monotonic() - t1
        t2 = time.monotonic()
        self._form_group()
        self._ensure_lab_schema()
        if self.primary_index() != 1:
            self.primary(1)
        timings["group"] = time.monotonic() - t2
        timings["total"] = time.monotonic() - t0
        return timings

    def down(self) -> None:
        """Shut every member down cleanly (secondaries first), SIGKILL as the fallback."""
        self._release_holds()
        primary = self.primary_index()
        # the secondaries leave together (each leave still has a majority: the primary and the
        # other, still running, secondary); the primary last, so no election happens on the way
        self._stop_together([n for n in INDEXES if n != primary])
        if primary is not None:
            self.stop(primary)
        left = [n for n in INDEXES if self.pid(n) is not None]
        if left:
            raise LabError(f"members {left} still run after down()")

    def _stop_together(self, members: Sequence[int]) -> None:
        pids = {n: self.pid(n) for n in members}
        for n, pid in pids.items():
            if pid is not None:
                _say(f"member {n}: shutting down mysqld {pid}")
                process.send(pid, signal.SIGCONT)
                process.send(pid, signal.SIGTERM)
        for pid in pids.values():
            if pid is not None:
                process.stop(pid, timeout=STOP_TIMEOUT)

    def kill(self, n: int) -> None:
        """kill -9 the mysqld of member n."""
        pid = self._require_pid(n)
        _say(f"member {n}: kill -9 {pid}")
        process.kill9(pid)

    def stop(self, n: int) -> None:
        """Clean shutdown of member n's mysqld (it leaves the group first); no-op when down."""
        pid = self.pid(n)
        if pid is None:
            return
        _say(f"member {n}: shutting down mysqld {pid}")
        process.stop(pid, timeout=STOP_TIMEOUT)

    def start(self, n: int) -> None:
        """Start member n's mysqld if needed and bring it ONLINE (bootstraps when no group)."""
        self._start_mysqlds([n])
        if self.member_status(n).member_state in ("ONLINE", "RECOVERING"):
            self.wait_member_state(n, ["ONLINE"])
            return
        self._start_gr(n)
        self.wait_member_state(n, ["ONLINE"])

    def leave(self, n: int) -> None:
        """STOP GROUP_REPLICATION on member n."""
        self._require_pid(n)
        _say(f"member {n}: STOP GROUP_REPLICATION")
        self.sql(n, "STOP GROUP_REPLICATION")

    def join(self, n: int) -> None:
        """START GROUP_REPLICATION on member n and wait for it to be ONLINE."""
        self._require_pid(n)
        self._start_gr(n)
        self.wait_member_state(n, ["ONLINE"])

    def freeze(self, n: int) -> None:
        """SIGSTOP member n's mysqld: it stops answering, yet its sockets stay open."""
        pid = self._require_pid(n)
        _say(f"member {n}: SIGSTOP {pid}")
        process.send(pid, signal.SIGSTOP)
        wait_until(lambda: process.pid_frozen(pid), 10.0, f"member {n} to be stopped")

    def thaw(self, n: int) -> None:
        """SIGCONT member n's mysqld."""
        pid = self._require_pid(n)
        _say(f"member {n}: SIGCONT {pid}")
        process.send(pid, signal.SIGCONT)
        wait_until(lambda: not process.pid_frozen(pid), 10.0, f"member {n} to run again")

    def primary(self, n: int) -> None:
        """Make member n the primary (group_replication_set_as_primary) and wait until it is."""
        if self.primary_index() == n:
            return
        uuid = self.member_status(n).server_uuid
        if not uuid:
            raise LabError(f"member {n} does not answer; it cannot become primary")
        _say(f"member {n}: group_replication_set_as_primary")
        self.sql(n, "SELECT group_replication_set_as_primary(%s)", (uuid,))
        wait_until(lambda: self.primary_index() == n, ONLINE_TIMEOUT, f"member {n} to be PRIMARY")

    def set_member_weight(self, n: int, weight: int) -> None:
        """group_replication_member_weight of n (0..100): the highest wins the next election."""
        if not 0 <= weight <= 100:
            raise LabError(f"member weight must be 0..100, not {weight}")
        self.sql(n, "SET GLOBAL group_replication_member_weight = %s", (weight,))

    # ---- backlog -------------------------------------------------------------------------------

    def hold_applier(self, n: int) -> ApplierHold:
        """Block member n's GR applier until release(): its applier queue grows with each write.

        Only a secondary can be held (the primary applies nothing remote). The hold survives a
        failover: if n is elected, it stays super_read_only=ON until released and drained.
        """
        st = self.member_status(n)
        if st.member_state != "ONLINE" or st.member_role != "SECONDARY":
            raise LabError(
                f"member {n} is not an ONLINE SECONDARY ({st.member_state}/{st.member_role})"
            )
        # the read timeout only bounds statements; the session may idle as long as the hold lasts
        conn = self._open(n, ADMIN_READ_TIMEOUT, program_name=HOLD_PROGRAM)
        try:
            conn.query("FLUSH TABLES WITH READ LOCK")
        except Exception:
            conn.close()
            raise
        hold = ApplierHold(n, conn)
        self._holds.append(hold)
        _say(f"member {n}: applier held")
        return hold

    def write_transactions(self, count: int, member: int | None = None) -> None:
        """`count` tiny autocommit transactions on `member` (default: the primary), one session."""
        target = member if member is not None else self.primary_index()
        if target is None:
            raise LabError("no primary to write to")
        try:
            with self._connection(target) as conn, conn.cursor() as cur:
                for i in range(count):
                    cur.execute(f"INSERT INTO {TICKS_TABLE} (n) VALUES (%s)", (i,))
        except pymysql.MySQLError as exc:
            raise LabError(f"member {target}: writing transactions failed: {exc}") from exc

    def wait_applier_queue(
        self, n: int, accept: Callable[[int], bool], what: str, timeout: float = 120.0
    ) -> int:
        """Poll member n's applier queue until accept(queue); return that queue length."""

        def probe() -> tuple[int] | None:
            queue = self.applier_queue(n)
            # a 1-tuple: wait_until needs a truthy result, and an empty queue is 0
            return (queue,) if accept(queue) else None

        return wait_until(probe, timeout, f"member {n}: {what}", interval=0.5)[0]

    def _release_holds(self) -> None:
        while self._holds:
            self._holds.pop().release()

    def _end_foreign_holds(self, n: int) -> None:
        """KILL hold sessions any process left on member n (a crashed CLI `backlog`, ...)."""
        rows = self.sql(
            n,
            "SELECT PROCESSLIST_ID FROM performance_schema.session_connect_attrs"
            " WHERE ATTR_NAME = 'program_name' AND ATTR_VALUE = %s",
            (HOLD_PROGRAM,),
        )
        for (session,) in rows:
            with contextlib.suppress(LabError):
                self.sql(n, f"KILL {int(session)}")

    # ---- healing -------------------------------------------------------------------------------

    def ensure_healthy(self) -> None:
        """Back to the known state: all running, thawed, ONLINE, member 1 PRIMARY, no backlog."""
        self._release_holds()
        for n in INDEXES:
            pid = self.pid(n)
            if pid is not None and process.pid_frozen(pid):
                self.thaw(n)
        self._start_mysqlds(list(INDEXES))
        for n in INDEXES:
            self._end_foreign_holds(n)
            self.set_member_weight(n, DEFAULT_WEIGHTS[n])
        self._form_group()
        self._ensure_lab_schema()
        if self.primary_index() != 1:
            self.primary(1)
        self._wait_settled()

    def _settled_view(self) -> list[ViewRow] | None:
        """The reference view; None once no member claims a majority any more.

        Right after a kill the survivors still list the dead as ONLINE for ~5 s, so a majority
        may be claimed while the views disagree: poll until they agree or the claim is gone.
        """

        def probe() -> tuple[list[ViewRow] | None] | None:
            statuses = self.status()
            view = self._reference_view(statuses)
            if view is not None or not self._group_exists(statuses):
                return (view,)  # a 1-tuple: "no group" is an answer too
            return None

        try:
            return wait_until(probe, 30.0, "the members' views to agree", interval=0.5)[0]
        except LabError:
            return None

    def _wait_settled(self) -> None:
        def settled() -> bool:
            statuses = self.status()
            queues_empty = all(st.applier_queue == 0 for st in statuses)
            writable = any(
                st.member_role == "PRIMARY" and st.super_read_only is False for st in statuses
            )
            return queues_empty and writable

        wait_until(settled, ONLINE_TIMEOUT, "empty applier queues and a writable primary")


def _lingers(pid: int, marker: str) -> bool:
    """pid is still our process, or a zombie whose other threads have not finished exiting."""
    proc = Path(f"/proc/{pid}")
    try:
        cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        threads = len(os.listdir(proc / "task"))
    except (OSError, IndexError):
        return False
    if marker in cmdline:
        return True
    return state in ("Z", "X") and threads > 1


def _listening(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(1.0)
        return sock.connect_ex((LOOPBACK, port)) == 0


def _account(user: str, host: str, password: str) -> list[tuple[str, tuple[object, ...]]]:
    # ALTER as well: an account left by an older run must get today's password
    return [
        ("CREATE USER IF NOT EXISTS %s@%s IDENTIFIED BY %s", (user, host, password)),
        ("ALTER USER %s@%s IDENTIFIED BY %s", (user, host, password)),
    ]


# ---- CLI -----------------------------------------------------------------------------------------


def _print_status(lab: GrLab) -> None:
    header = (
        "member",
        "port",
        "pid",
        "MEMBER_STATE",
        "MEMBER_ROLE",
        "super_read_only",
        "applier_queue",
    )
    rows = [header]
    for st in lab.status():
        if st.pid is None:
            state = "(down)"
        elif st.frozen:
            state = "(frozen)"
        else:
            state = st.member_state or "(no answer)"
        rows.append(
            (
                str(st.index),
                str(st.port),
                str(st.pid or "-"),
                state,
                st.member_role or "-",
                "-" if st.super_read_only is None else ("ON" if st.super_read_only else "OFF"),
                "-" if st.applier_queue is None else str(st.applier_queue),
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    for row in rows:
        print(
            "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        )


def _cmd_backlog(lab: GrLab, n: int, count: int) -> None:
    hold = lab.hold_applier(n)
    try:
        with ThreadPoolExecutor(max_workers=1) as pool:
            writer = pool.submit(lab.write_transactions, count)

            def grown(queue: int) -> bool:
                print(f"member {n} applier queue: {queue}", flush=True)
                return writer.done() and queue >= count

            lab.wait_applier_queue(n, grown, f"queue past {count}", timeout=600.0)
            writer.result()
        hold.release()
        print(f"member {n}: hold released", flush=True)

        def drained(queue: int) -> bool:
            print(f"member {n} applier queue: {queue}", flush=True)
            return queue == 0

        lab.wait_applier_queue(n, drained, "queue drained to 0", timeout=600.0)
    finally:
        hold.release()


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, not {text!r}")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m tests.lab gr",
        description="A 3-member MySQL Group Replication group on 127.0.0.1 (ports 3321-3323).",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, text in (
        ("fetch", "download and unpack MySQL (once)"),
        ("up", "start the members and form the group"),
        ("down", "shut every member down"),
        ("status", "one row per member"),
        ("healthy", "restore the healthy state (3 ONLINE, member 1 PRIMARY)"),
    ):
        sub.add_parser(name, help=text)
    for name, text in (
        ("kill", "kill -9 member N"),
        ("stop", "clean shutdown of member N"),
        ("start", "start member N and bring it ONLINE"),
        ("leave", "STOP GROUP_REPLICATION on member N"),
        ("join", "START GROUP_REPLICATION on member N"),
        ("freeze", "SIGSTOP member N"),
        ("thaw", "SIGCONT member N"),
        ("primary", "make member N the primary"),
    ):
        sub.add_parser(name, help=text).add_argument("n", type=int, choices=INDEXES, metavar="N")
    sql = sub.add_parser("sql", help='run "QUERY" on member N')
    sql.add_argument("n", type=int, choices=INDEXES, metavar="N")
    sql.add_argument("query", metavar="QUERY")
    backlog = sub.add_parser("backlog", help="hold member N's applier, write COUNT, release")
    backlog.add_argument("n", type=int, choices=INDEXES, metavar="N")
    backlog.add_argument("count", type=_positive, metavar="COUNT")
    return parser


def _run(args: argparse.Namespace) -> None:
    if args.command == "fetch":
        dist = ensure_mysql()
        print(f"MySQL {dist.version}: {dist.mysqld}")
        return
    lab = GrLab()
    if args.command == "up":
        timings = lab.up()
        print("up: " + ", ".join(f"{k} {v:.1f}s" for k, v in timings.items()))
        _print_status(lab)
    elif args.command == "down":
        lab.down()
        print("down: no member running")
    elif args.command == "status":
        _print_status(lab)
    elif args.command == "healthy":
        lab.ensure_healthy()
        _print_status(lab)
    elif args.command == "sql":
        for row in lab.sql(args.n, args.query):
            print("\t".join("NULL" if v is None else str(v) for v in row))
    elif args.command == "backlog":
        _cmd_backlog(lab, args.n, args.count)
    else:
        action: Callable[[int], None] = getattr(lab, args.command)
        action(args.n)
        _print_status(lab)


def main(argv: list[str]) -> int:
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse reports bad usage by exiting 2
        return exc.code if isinstance(exc.code, int) else 2
    try:
        _run(args)
    except LabError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
