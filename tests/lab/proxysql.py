"""The lab's ProxySQL admin endpoint: a real `proxysql` when one is installed, else the emulator.

    python -m tests.lab proxysql up|down|status

    python -m tests.lab proxysql which     (one line: which ProxySQL a run would use)

A real ProxySQL is used when PROXYSQL_BIN names one or `proxysql` is on PATH; it gets its own
datadir, a generated config (every listener on its own free 127.0.0.1 port: admin and MySQL, and
on 3.x both PostgreSQL ones, which otherwise listen on all addresses; the lab's admin and monitor
accounts) and runs in the foreground in its own session. Otherwise tests.lab.admin_emulator is
started. Either way the endpoint is recorded in a JSON state file under lab_dir()/proxysql, so
`status`, `down` and the pytest fixtures of another process find it. An endpoint found running
from another binary than the one asked for (PROXYSQL_BIN changed) is an error, never reused.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import re
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias

import pymysql
import pymysql.cursors

from tests.lab import process
from tests.lab.accounts import (
    ADMIN_PASSWORD,
    ADMIN_USER,
    APP_PASSWORD,
    APP_USER,
    MONITOR_PASSWORD,
    MONITOR_USER,
)
from tests.lab.paths import LOOPBACK, lab_dir

KIND_REAL = "real"
KIND_EMULATOR = "emulator"
EMULATOR_MODULE = "tests.lab.admin_emulator"
REPO_ROOT = Path(__file__).resolve().parents[2]

# A real ProxySQL initialises its SQLite files and threads before it listens; the emulator is a
# Python process importing mysql-mimic. Both are normally up in a few seconds.
READY_TIMEOUT_REAL = 60.0
READY_TIMEOUT_EMULATOR = 30.0
STOP_TIMEOUT = 30.0
PORT_RELEASE_TIMEOUT = 10.0
START_ATTEMPTS = 3

if TYPE_CHECKING:
    # PyMySQL's Connection is generic only in its type stubs, not at run time
    AdminConnection: TypeAlias = pymysql.connections.Connection[pymysql.cursors.Cursor]

# What reset() empties: the tables the checkers write, and the ones whose rows would make a
# real ProxySQL act on its own (native Galera/GR monitoring, cluster peers, scheduler jobs).
RESET_TABLES = (
    "mysql_servers",
    "mysql_users",
    "mysql_query_rules",
    "scheduler",
    "mysql_galera_hostgroups",
    "mysql_group_replication_hostgroups",
    "proxysql_servers",
)
RESET_COMMANDS = (
    "LOAD MYSQL SERVERS TO RUNTIME",
    "LOAD MYSQL USERS TO RUNTIME",
    "LOAD MYSQL QUERY RULES TO RUNTIME",
    "LOAD SCHEDULER TO RUNTIME",
    "LOAD PROXYSQL SERVERS TO RUNTIME",
    "SAVE MYSQL SERVERS TO DISK",
    "SAVE SCHEDULER TO DISK",
    "SAVE PROXYSQL SERVERS TO DISK",
)


class StartupExit(process.LabError):
    """The endpoint's process died before its admin port answered."""


@dataclass(frozen=True)
class EndpointState:
    """What `up` recorded about the running endpoint."""

    kind: str
    pid: int
    admin_host: str
    admin_port: int
    mysql_port: int | None
    binary: str | None = None  # the real proxysql's path; None for the emulator
    # 3.x only: the PostgreSQL admin and traffic listeners, each on its own loopback port
    pgsql_ports: tuple[int, int] | None = None


@dataclass(frozen=True)
class ProxySQLStatus:
    running: bool
    kind: str | None = None
    pid: int | None = None
    admin_host: str | None = None
    admin_port: int | None = None
    mysql_port: int | None = None
    version: str | None = None
    binary: str | None = None  # the real proxysql's path; None for the emulator
    mysql_servers: int | None = None
    runtime_mysql_servers: int | None = None


def find_proxysql_binary() -> str | None:
    """PROXYSQL_BIN if set (it must then be executable), else `proxysql` on PATH, else None."""
    configured = os.environ.get("PROXYSQL_BIN")
    if configured:
        path = shutil.which(configured)
        if path is None:
            raise process.LabError(f"PROXYSQL_BIN={configured!r} is not an executable")
        return os.path.realpath(path)
    found = shutil.which("proxysql")
    return None if found is None else os.path.realpath(found)


_VERSIONS: dict[str, str] = {}


def binary_version(binary: str) -> str:
    """What `proxysql --version` names, e.g. 2.7.2-0-gd752949 (asked once per binary)."""
    if binary not in _VERSIONS:
        try:
            out = subprocess.run(
                [binary, "--version"], capture_output=True, text=True, timeout=30, check=False
            ).stdout
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise process.LabError(f"{binary} --version: {exc}") from None
        found = re.search(r"ProxySQL version (\S+)", out)
        if found is None:
            raise process.LabError(f"{binary} --version printed no version: {out.strip()!r}")
        _VERSIONS[binary] = found.group(1).rstrip(",")
    return _VERSIONS[binary]


def major_version(version: str) -> int:
    found = re.match(r"(\d+)\.", version)
    if found is None:
        raise process.LabError(f"not a ProxySQL version: {version!r}")
    return int(found.group(1))


def which_line() -> str:
    """One line saying which ProxySQL the lab gives this run, printed at its start."""
    binary = find_proxysql_binary()
    if binary is not None:
        return f"proxysql: real ProxySQL {binary_version(binary)} ({binary})"
    if importlib.util.find_spec("mysql_mimic") is None:
        return "proxysql: none (no proxysql binary, no mysql-mimic): ProxySQL tests skip"
    return "proxysql: the lab's emulator (no PROXYSQL_BIN, no proxysql on PATH)"


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def port_refuses(host: str, port: int) -> bool:
    """True when nothing accepts TCP connections on host:port."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(1.0)
        try:
            sock.connect((host, port))
        except ConnectionRefusedError:
            return True
        except OSError:
            # a timeout or reset is not a refusal: something may still hold the port
            return False
        return False


class ProxySQLLab:
    """Start, find, reset and stop the lab's ProxySQL admin endpoint."""

    def __init__(
        self, directory: Path | None = None, *, emulator: bool = False, binary: str | None = None
    ) -> None:
        # another directory: an endpoint of its own (on free ports), apart from the lab's
        self.dir = directory if directory is not None else lab_dir() / "proxysql"
        # what `up` starts: the emulator when asked for, else `binary`, else what
        # find_proxysql_binary() names (PROXYSQL_BIN, PATH), else the emulator
        self._emulator = emulator
        self._binary = binary
        self.state_path = self.dir / "state.json"
        self.pid_path = self.dir / "proxysql.pid"
        self.log_path = self.dir / "proxysql.log"
        self.password_path = self.dir / "admin-password"
        self.config_path = self.dir / "proxysql.cnf"
        self.real_datadir = self.dir / "data"
        self.emulator_datadir = self.dir / "emulator-data"
        self._lock_path = self.dir / ".lock"

    # --- state ----------------------------------------------------------------------------------

    @property
    def _marker(self) -> str:
        # both kinds carry a path under this directory on their command line (datadir or config),
        # so a recycled pid of an unrelated program is never signalled
        return str(self.dir)

    def _read_state(self) -> EndpointState | None:
        try:
            data = json.loads(self.state_path.read_text())
            pgsql = data.get("pgsql_ports")
            return EndpointState(
                kind=str(data["kind"]),
                pid=int(data["pid"]),
                admin_host=str(data["admin_host"]),
                admin_port=int(data["admin_port"]),
                mysql_port=None if data["mysql_port"] is None else int(data["mysql_port"]),
                binary=None if data.get("binary") is None else str(data["binary"]),
                pgsql_ports=None if pgsql is None else (int(pgsql[0]), int(pgsql[1])),
            )
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def _write_state(self, state: EndpointState) -> None:
        tmp = self.state_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(state), indent=2) + "\n")
        tmp.replace(self.state_path)

    def _live_state(self) -> EndpointState | None:
        """The recorded endpoint if its process still runs."""
        state = self._read_state()
        if state is None:
            return None
        if process.tracked_pid(self.pid_path, self._marker) != state.pid:
            return None
        return state

    def _require_state(self) -> EndpointState:
        state = self._live_state()
        if state is None:
            raise process.LabError(
                "the ProxySQL admin endpoint is not up (python -m tests.lab proxysql up)"
            )
        return state

    def _locked(self) -> contextlib.AbstractContextManager[None]:
        """Serialise up/down across processes (a test run and a human at the CLI)."""
        return process.locked(self._lock_path)

    # --- properties -----------------------------------------------------------------------------

    @property
    def admin_host(self) -> str:
        return self._require_state().admin_host

    @property
    def admin_port(self) -> int:
        return self._require_state().admin_port

    @property
    def admin_user(self) -> str:
        return ADMIN_USER

    @property
    def admin_password(self) -> str:
        return ADMIN_PASSWORD

    @property
    def mysql_port(self) -> int | None:
        """ProxySQL's MySQL (traffic) interface; None for the emulator, which has none."""
        return self._require_state().mysql_port

    @property
    def is_real(self) -> bool:
        return self._require_state().kind == KIND_REAL

    @property
    def binary(self) -> str | None:
        """The running real proxysql's path; None for the emulator."""
        return self._require_state().binary

    # --- connections ----------------------------------------------------------------------------

    def _connect_to(self, host: str, port: int) -> AdminConnection:
        return pymysql.connect(
            host=host,
            port=port,
            user=ADMIN_USER,
            password=ADMIN_PASSWORD,
            connect_timeout=5,
            read_timeout=60,
            write_timeout=60,
        )

    def connect(self) -> AdminConnection:
        """A new PyMySQL connection (default options) to the admin interface."""
        state = self._require_state()
        return self._connect_to(state.admin_host, state.admin_port)

    def _answers(self, state: EndpointState) -> bool:
        try:
            conn = self._connect_to(state.admin_host, state.admin_port)
        except (pymysql.err.Error, OSError):
            return False
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT COUNT(*) FROM mysql_servers")
                return cur.fetchone() is not None
        except (pymysql.err.Error, OSError):
            return False
        finally:
            conn.close()

    def _wait_ready(self, state: EndpointState, timeout: float) -> None:
        def probe() -> bool:
            if not process.pid_alive(state.pid):
                raise StartupExit(
                    f"ProxySQL ({state.kind}) exited while starting; log {self.log_path}:\n"
                    + _tail(self.log_path)
                )
            return self._answers(state)

        process.wait_until(
            probe, timeout, f"the ProxySQL admin ({state.kind}) on port {state.admin_port}"
        )

    # --- up / down ------------------------------------------------------------------------------

    def wanted_binary(self) -> str | None:
        """The real proxysql `up` starts; None: the emulator."""
        if self._emulator:
            return None
        return self._binary or find_proxysql_binary()

    def up(self) -> bool:
        """Start the endpoint unless it is already up; True when this call started it."""
        with self._locked():
            binary = self.wanted_binary()
            state = self._live_state()
            if state is not None:
                if state.binary != binary:
                    # never tested against another ProxySQL than asked for, and never stopped
                    # under a run (or a person) that uses it
                    running = state.binary or (
                        "the emulator" if state.kind == KIND_EMULATOR else "an unrecorded proxysql"
                    )
                    raise process.LabError(
                        f"the ProxySQL endpoint in {self.dir} runs {running}, not "
                        f"{binary or 'the emulator'} as asked: stop it first "
                        "(python -m tests.lab proxysql down)"
                    )
                timeout = READY_TIMEOUT_REAL if state.kind == KIND_REAL else READY_TIMEOUT_EMULATOR
                self._wait_ready(state, timeout)
                return False
            self._stop_leftovers()
            failure: StartupExit | None = None
            for _attempt in range(START_ATTEMPTS):
                try:
                    self._start_and_wait(binary)
                    return True
                except StartupExit as exc:
                    # the free port may have been taken between choosing and binding it;
                    # another pair of ports usually works
                    failure = exc
            raise process.LabError(f"gave up after {START_ATTEMPTS} starts: {failure}")

    def _start_and_wait(self, binary: str | None) -> None:
        if binary is not None:
            state = self._start_real(binary)
            timeout = READY_TIMEOUT_REAL
        else:
            state = self._start_emulator()
            timeout = READY_TIMEOUT_EMULATOR
        self._write_state(state)
        try:
            self._wait_ready(state, timeout)
            if state.kind == KIND_EMULATOR:
                self._configure_emulator()
        except BaseException:
            self._stop_pid(state.pid)
            self._remove_files()
            raise

    def _stop_leftovers(self) -> None:
        """A process of ours from a crashed `up` (pid file, no usable state) must not linger."""
        pid = process.tracked_pid(self.pid_path, self._marker)
        if pid is not None:
            self._stop_pid(pid)
        self._remove_files()

    def _write_secret(self, path: Path, text: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(text)

    def _start_emulator(self, port: int | None = None) -> EndpointState:
        port = port or process.free_port(LOOPBACK)
        self._write_secret(self.password_path, ADMIN_PASSWORD + "\n")
        argv = [
            sys.executable,
            "-m",
            EMULATOR_MODULE,
            "--host",
            LOOPBACK,
            "--port",
            str(port),
            "--datadir",
            str(self.emulator_datadir),
            "--user",
            ADMIN_USER,
            "--password-file",
            str(self.password_path),
        ]
        pid = process.spawn(argv, self.log_path, self.pid_path, cwd=REPO_ROOT)
        return EndpointState(KIND_EMULATOR, pid, LOOPBACK, port, None)

    def _configure_emulator(self) -> None:
        """Give the emulator the lab's monitor account, as the real one gets it from its config."""
        conn = self.connect()
        try:
            with conn.cursor() as cur:
                for name, value in (
                    ("mysql-monitor_username", MONITOR_USER),
                    ("mysql-monitor_password", MONITOR_PASSWORD),
                ):
                    cur.execute(
                        "UPDATE global_variables SET variable_value = %s WHERE variable_name = %s",
                        (value, name),
                    )
                cur.execute("LOAD MYSQL VARIABLES TO RUNTIME")
                cur.execute("SAVE MYSQL VARIABLES TO DISK")
        finally:
            conn.close()

    def _start_real(self, binary: str) -> EndpointState:
        # 3.x listens for PostgreSQL too, by default on 0.0.0.0:6132 and 0.0.0.0:6133: two
        # instances would collide there, and the machine would listen on all addresses
        pgsql = major_version(binary_version(binary)) >= 3
        ports = process.free_ports(LOOPBACK, 4 if pgsql else 2)
        admin_port, mysql_port = ports[0], ports[1]
        pgsql_ports = (ports[2], ports[3]) if pgsql else None
        self.real_datadir.mkdir(parents=True, exist_ok=True)
        for value in (ADMIN_USER, ADMIN_PASSWORD, MONITOR_USER, MONITOR_PASSWORD):
            if '"' in value or "\\" in value:
                raise process.LabError("lab credentials must not hold quotes or backslashes")
        admin_pgsql = (
            "" if pgsql_ports is None else f'    pgsql_ifaces="{LOOPBACK}:{pgsql_ports[0]}"\n'
        )
        pgsql_section = (
            ""
            if pgsql_ports is None
            else "pgsql_variables=\n{\n"
            "    threads=1\n"
            f'    interfaces="{LOOPBACK}:{pgsql_ports[1]}"\n'
            "}\n"
        )
        config = (
            f'datadir="{self.real_datadir}"\n'
            "admin_variables=\n{\n"
            f'    admin_credentials="{ADMIN_USER}:{ADMIN_PASSWORD}"\n'
            f'    mysql_ifaces="{LOOPBACK}:{admin_port}"\n'
            f"{admin_pgsql}"
            "}\n"
            "mysql_variables=\n{\n"
            "    threads=2\n"
            f'    interfaces="{LOOPBACK}:{mysql_port}"\n'
            f'    monitor_username="{MONITOR_USER}"\n'
            f'    monitor_password="{MONITOR_PASSWORD}"\n'
            "}\n"
            f"{pgsql_section}"
        )
        self._write_secret(self.config_path, config)
        # --initial: the ports are new on every `up`, so the config file must win over the
        # proxysql.db an earlier run left in the datadir
        argv = [
            binary,
            "-f",
            "--initial",
            "-c",
            str(self.config_path),
            "-D",
            str(self.real_datadir),
        ]
        pid = process.spawn(argv, self.log_path, self.pid_path, cwd=self.real_datadir)
        return EndpointState(KIND_REAL, pid, LOOPBACK, admin_port, mysql_port, binary, pgsql_ports)

    def _restart_real(self, binary: str, state: EndpointState) -> EndpointState:
        """Same ports, and no --initial: it starts from the proxysql.db it saved, as a real
        restart does."""
        argv = [binary, "-f", "-c", str(self.config_path), "-D", str(self.real_datadir)]
        pid = process.spawn(argv, self.log_path, self.pid_path, cwd=self.real_datadir)
        return EndpointState(
            KIND_REAL,
            pid,
            LOOPBACK,
            state.admin_port,
            state.mysql_port,
            binary,
            state.pgsql_ports,
        )

    @contextlib.contextmanager
    def outage(self) -> Iterator[None]:
        """The endpoint stopped, its port refusing connections, for the duration of the block;
        then started again on the same port from the configuration it saved to disk."""
        with self._locked():
            state = self._require_state()
            self._stop_pid(state.pid)
            process.wait_until(
                lambda: port_refuses(state.admin_host, state.admin_port),
                PORT_RELEASE_TIMEOUT,
                f"admin port {state.admin_port} to close",
            )
        try:
            yield
        finally:
            with self._locked():
                if state.binary is not None:
                    again = self._restart_real(state.binary, state)
                    timeout = READY_TIMEOUT_REAL
                else:
                    again = self._start_emulator(state.admin_port)
                    timeout = READY_TIMEOUT_EMULATOR
                self._write_state(again)
                self._wait_ready(again, timeout)

    def _stop_pid(self, pid: int) -> None:
        process.stop(pid, timeout=STOP_TIMEOUT)

    def _remove_files(self) -> None:
        for path in (self.state_path, self.pid_path, self.password_path, self.config_path):
            path.unlink(missing_ok=True)

    def down(self) -> bool:
        """Stop the endpoint and forget it; True when a process was stopped. Data dirs stay."""
        with self._locked():
            state = self._read_state()
            pid = process.tracked_pid(self.pid_path, self._marker)
            if pid is not None:
                self._stop_pid(pid)
            if pid is not None and state is not None:
                process.wait_until(
                    lambda: port_refuses(state.admin_host, state.admin_port),
                    PORT_RELEASE_TIMEOUT,
                    f"admin port {state.admin_port} to close",
                )
            self._remove_files()
            return pid is not None

    # --- inspection and per-test state ----------------------------------------------------------

    def status(self) -> ProxySQLStatus:
        state = self._live_state()
        if state is None:
            return ProxySQLStatus(running=False)
        conn = self._connect_to(state.admin_host, state.admin_port)
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT version()")
                version_row = cur.fetchone()
                cur.execute("SELECT COUNT(*) FROM mysql_servers")
                main_row = cur.fetchone()
                cur.execute("SELECT COUNT(*) FROM runtime_mysql_servers")
                runtime_row = cur.fetchone()
        finally:
            conn.close()
        return ProxySQLStatus(
            running=True,
            kind=state.kind,
            pid=state.pid,
            admin_host=state.admin_host,
            admin_port=state.admin_port,
            mysql_port=state.mysql_port,
            version=None if version_row is None else str(version_row[0]),
            binary=state.binary,
            mysql_servers=None if main_row is None else int(main_row[0]),
            runtime_mysql_servers=None if runtime_row is None else int(runtime_row[0]),
        )

    def shun(self, hostgroup: int, host: str, port: int) -> None:
        """Make a live server SHUNNED as ProxySQL's monitor does: runtime only, mysql_servers
        untouched, and a LOAD of the same ONLINE row does not lift it.

        The emulator takes a lab-only statement. A real ProxySQL has none, and its monitor shuns
        on its own schedule, so there the row is loaded SHUNNED from mysql_servers and staging is
        put back to ONLINE: runtime shows SHUNNED until ProxySQL lifts it by itself.
        """
        with admin_cursor(self) as cur:
            if not self.is_real:
                cur.execute("LAB SHUN SERVER %s %s %s", (hostgroup, host, port))
                return
            where = "WHERE hostgroup_id = %s AND hostname = %s AND port = %s"
            key = (hostgroup, host, port)
            cur.execute(f"UPDATE mysql_servers SET status = 'SHUNNED' {where}", key)
            cur.execute("LOAD MYSQL SERVERS TO RUNTIME")
            cur.execute(f"UPDATE mysql_servers SET status = 'ONLINE' {where}", key)

    def unshun(self, hostgroup: int, host: str, port: int) -> None:
        """Lift a shun made by `shun` (the emulator only; a real ProxySQL lifts it by itself)."""
        if self.is_real:
            return
        with admin_cursor(self) as cur:
            cur.execute("LAB UNSHUN SERVER %s %s %s", (hostgroup, host, port))

    @contextlib.contextmanager
    def hold(self, hostgroup: int, host: str, port: int, count: int = 1) -> Iterator[Held]:
        """Clients holding `count` backend connections to host:port in `hostgroup`, each inside
        an open transaction, as a pooled application does, until `release` or the block's end.

        A real ProxySQL gets them from clients of its MySQL port (the lab's application account,
        its default hostgroup set to `hostgroup`, which must route to host:port alone); the
        emulator, which routes nothing, takes a lab-only statement.
        """
        held = Held(self, (hostgroup, host, port), emulated=not self.is_real)
        try:
            if not held.emulated:
                held.clients = self._real_clients(hostgroup, port, count)
            else:
                with admin_cursor(self) as cur:
                    cur.execute("LAB HOLD %s CONNECTIONS %s %s %s", (count, hostgroup, host, port))
            yield held
        finally:
            held.release()

    def route_app_user(self, hostgroup: int) -> int:
        """The lab's application account routed to `hostgroup` by default; the MySQL port its
        clients connect to."""
        mysql_port = self.mysql_port
        if mysql_port is None:
            raise process.LabError("this ProxySQL has no MySQL interface")
        with admin_cursor(self) as cur:
            cur.execute("DELETE FROM mysql_users WHERE username = %s", (APP_USER,))
            cur.execute(
                "INSERT INTO mysql_users (username, password, default_hostgroup, "
                "transaction_persistent) VALUES (%s, %s, %s, 1)",
                (APP_USER, APP_PASSWORD, hostgroup),
            )
            cur.execute("LOAD MYSQL USERS TO RUNTIME")
        return mysql_port

    def _real_clients(self, hostgroup: int, port: int, count: int) -> list[AdminConnection]:
        mysql_port = self.route_app_user(hostgroup)
        clients: list[AdminConnection] = []
        try:
            for _ in range(count):
                client = pymysql.connect(
                    host=LOOPBACK,
                    port=mysql_port,
                    user=APP_USER,
                    password=APP_PASSWORD,
                    connect_timeout=5,
                    read_timeout=30,
                )
                clients.append(client)
                with client.cursor() as cur:
                    cur.execute("START TRANSACTION")
                    cur.execute("SELECT @@port")
                    row = cur.fetchone()
                if row is None or int(row[0]) != port:
                    raise process.LabError(f"hostgroup {hostgroup} routed to {row}, not {port}")
        except BaseException:
            for client in clients:
                with contextlib.suppress(Exception):
                    client.close()
            raise
        return clients

    def reset(self) -> None:
        """Known empty state through SQL only (so it works on a real ProxySQL too): no servers, no
        scheduler jobs, no Galera/GR hostgroups, no cluster peers, in main, runtime and disk."""
        if not self.is_real:
            with admin_cursor(self) as cur:
                cur.execute("LAB RELEASE CONNECTIONS")
        with admin_cursor(self) as cur:
            for table in RESET_TABLES:
                cur.execute(f"DELETE FROM {table}")
            for command in RESET_COMMANDS:
                cur.execute(command)


@dataclass
class Held:
    """Connections the lab's clients hold to one server of a hostgroup (ProxySQLLab.hold)."""

    lab: ProxySQLLab
    key: tuple[int, str, int]
    emulated: bool  # the emulator's lab statement, not real clients
    clients: list[AdminConnection] = field(default_factory=list)
    released: bool = False

    def release(self) -> None:
        """The clients end their transactions and disconnect."""
        if self.released:
            return
        self.released = True
        for client in self.clients:
            with contextlib.suppress(Exception):
                client.rollback()
            with contextlib.suppress(Exception):
                client.close()
        if self.emulated:
            with admin_cursor(self.lab) as cur:
                cur.execute("LAB RELEASE CONNECTIONS %s %s %s", self.key)


@contextlib.contextmanager
def admin_cursor(lab: ProxySQLLab) -> Iterator[pymysql.cursors.Cursor]:
    """A cursor on a new admin connection to `lab`, the connection closed after the block."""
    conn = lab.connect()
    try:
        with conn.cursor() as cur:
            yield cur
    finally:
        conn.close()


# --- CLI ------------------------------------------------------------------------------------------


def _describe(status: ProxySQLStatus) -> str:
    mysql = "none" if status.mysql_port is None else f"{LOOPBACK}:{status.mysql_port}"
    return (
        f"ProxySQL admin endpoint: kind={status.kind} pid={status.pid} "
        f"admin={status.admin_host}:{status.admin_port} mysql={mysql} version={status.version}\n"
        f"  binary: {status.binary or '(the emulator)'}\n"
        f"  credentials: user={ADMIN_USER} password={ADMIN_PASSWORD}\n"
        f"  connect: mariadb -h{status.admin_host} -P{status.admin_port} -u{ADMIN_USER} -p\n"
        f"  mysql_servers: {status.mysql_servers} rows, "
        f"runtime_mysql_servers: {status.runtime_mysql_servers} rows"
    )


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.lab proxysql",
        description="The lab's ProxySQL admin endpoint (real proxysql if installed, else emulator)",
    )
    parser.add_argument("command", choices=("up", "down", "status", "which"))
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        # argparse exits 2 on bad usage (0 for --help); hand the code back to the dispatcher
        return int(exc.code) if isinstance(exc.code, int) else 2
    lab = ProxySQLLab()
    try:
        if args.command == "which":
            print(which_line())
            return 0
        if args.command == "up":
            started = lab.up()
            print("started" if started else "already up")
            print(_describe(lab.status()))
            return 0
        if args.command == "down":
            stopped = lab.down()
            print("stopped" if stopped else "was not running")
            return 0
        status = lab.status()
        if not status.running:
            print("ProxySQL admin endpoint: down")
            return 1
        print(_describe(status))
        return 0
    except (process.LabError, pymysql.err.Error, OSError) as exc:
        # a process that runs but does not answer (or answers wrongly) is reported, not traced
        print(f"error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
