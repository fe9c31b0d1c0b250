"""Running a checker against the lab the way ProxySQL does, and reading what it left live."""

from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from checker_core.core.model import ClusterRows, Hostgroups, NodeAddress, ServerRow, ServerStatus
from checker_core.core.settings import Endpoint, ProxySQLSettings, Secret, Tls
from checker_core.edges.proxysql import AdminClient
from checker_core.edges.proxysql_peers import read_checksum
from tests.lab.accounts import (
    MONITOR_PASSWORD,
    MONITOR_USER,
    NODE_ADMIN_PASSWORD,
    NODE_ADMIN_USER,
)

HG = Hostgroups(
    writer=100, reader=101, backup_writer=102, offline=9100, config_writer=8100, config_reader=8101
)
PASS_TIMEOUT = 60.0  # a hung checker fails the test instead of hanging the suite


def admin_for(lab: Any) -> AdminClient:
    endpoint = Endpoint(lab.admin_user, Secret(lab.admin_password), Tls(), 2000, 5000)
    return AdminClient.connect(ProxySQLSettings(lab.admin_host, lab.admin_port, endpoint))


INTERVAL_MS = 2000  # the rig's run.interval_ms, unless a test sets its own


@dataclass
class PassRun:
    """One finished checker process: exit code, output, and its parsed JSON log lines."""

    code: int
    stdout: str
    stderr: str
    logs: list[dict[str, Any]] = field(default_factory=list)

    @property
    def summary(self) -> str:
        passes = [line for line in self.logs if line.get("event") == "pass"]
        return " | ".join(str(p.get("summary")) for p in passes) or self.stderr.strip()


@dataclass
class Rig:
    """A config file for one checker and one cluster, and the admin connection to check on it."""

    command: str
    tmp: Path
    proxysql: Any
    cluster: dict[str, object] = field(default_factory=dict)
    run_settings: dict[str, object] = field(default_factory=dict)
    hostgroups: Hostgroups = HG
    # extra keys of [proxysql] and [monitor] (TLS)
    proxysql_settings: dict[str, object] = field(default_factory=dict)
    monitor_settings: dict[str, object] = field(default_factory=dict)
    # a [node_admin] section (the account the lab grants; a GR switchover runs as it)
    node_admin: bool = False
    # `run` passes start one run.interval_ms apart, as ProxySQL's scheduler starts them: what a
    # test of retry_down / retry_up needs, since those count in time as well as in probes
    paced: bool = False
    _last_pass: float | None = None

    def __post_init__(self) -> None:
        self.state_dir = self.tmp / "state"
        self.config = self.tmp / "checker.toml"
        self.admin = admin_for(self.proxysql)
        self.write_config()

    def close(self) -> None:
        self.admin.close()

    # ------------------------------------------------------------ configuration

    def write_config(self, **cluster: object) -> Path:
        self.cluster.update(cluster)
        secrets = self.tmp / "secrets"
        secrets.mkdir(exist_ok=True)
        (secrets / "admin").write_text(self.proxysql.admin_password + "\n")
        (secrets / "monitor").write_text(MONITOR_PASSWORD + "\n")
        (secrets / "node_admin").write_text(NODE_ADMIN_PASSWORD + "\n")
        node_admin = [
            "[node_admin]",
            f'user = "{NODE_ADMIN_USER}"',
            f'password_file = "{secrets / "node_admin"}"',
        ]
        run = {
            "interval_ms": INTERVAL_MS,
            "max_runtime_ms": 1800,
            "state_dir": str(self.state_dir),
            "log_format": "json",
            "log_level": "debug",
            **self.run_settings,
        }
        keys: dict[str, object] = {
            "name": "lab",
            "writer_hostgroup": HG.writer,
            "reader_hostgroup": HG.reader,
            "backup_writer_hostgroup": HG.backup_writer,
            "offline_hostgroup": HG.offline,
            **self.cluster,
        }
        lines = [
            "[proxysql]",
            f'host = "{self.proxysql.admin_host}"',
            f"port = {self.proxysql.admin_port}",
            f'user = "{self.proxysql.admin_user}"',
            f'password_file = "{secrets / "admin"}"',
            *(f"{k} = {_toml(v)}" for k, v in self.proxysql_settings.items()),
            "[monitor]",
            f'user = "{MONITOR_USER}"',
            f'password_file = "{secrets / "monitor"}"',
            "connect_timeout_ms = 400",
            "read_timeout_ms = 600",
            *(f"{k} = {_toml(v)}" for k, v in self.monitor_settings.items()),
            *(node_admin if self.node_admin else []),
            "[run]",
            *(f"{k} = {_toml(v)}" for k, v in run.items()),
            "[[cluster]]",
            *(f"{k} = {_toml(v)}" for k, v in keys.items()),
        ]
        self.config.write_text("\n".join(lines) + "\n")
        self.config.chmod(0o600)
        return self.config

    # ------------------------------------------------------------ ProxySQL side

    def seed(self, writer_weights: Mapping[NodeAddress, int], reader_weight: int = 100) -> None:
        """The roster in the template hostgroups, live; the managed hostgroups empty."""
        rows = [
            ServerRow(HG.config_writer, n.host, n.port, weight=w) for n, w in writer_weights.items()
        ]
        rows += [
            ServerRow(HG.config_reader, n.host, n.port, weight=reader_weight)
            for n in writer_weights
        ]
        self.admin.stage(HG.all, rows)
        self.admin.execute("LOAD MYSQL SERVERS TO RUNTIME")

    def live(self) -> tuple[ServerRow, ...]:
        """The live rows, ProxySQL's own SHUNNED read as the ONLINE it stands for."""
        return as_configured(self.live_raw())

    def live_raw(self) -> tuple[ServerRow, ...]:
        return self.admin.read_rows(HG.managed).runtime

    def staged(self) -> tuple[ServerRow, ...]:
        return self.admin.read_rows(HG.managed).staging

    def members(
        self, hostgroup: int, status: ServerStatus = ServerStatus.ONLINE
    ) -> set[NodeAddress]:
        return {r.node for r in self.live() if r.hostgroup_id == hostgroup and r.status is status}

    def in_hostgroup(self, hostgroup: int) -> dict[NodeAddress, ServerStatus]:
        return {r.node: r.status for r in self.live() if r.hostgroup_id == hostgroup}

    @property
    def writers(self) -> set[NodeAddress]:
        return self.members(HG.writer)

    @property
    def readers(self) -> set[NodeAddress]:
        return self.members(HG.reader)

    @property
    def backups(self) -> set[NodeAddress]:
        return self.members(HG.backup_writer)

    @property
    def offline(self) -> set[NodeAddress]:
        return self.members(HG.offline)

    def load_version(self) -> int:
        checksum = read_checksum(self.admin)
        assert checksum is not None
        return checksum.version

    # ------------------------------------------------------------ running the checker

    def executable(self) -> str:
        found = shutil.which(self.command)
        assert found is not None, f"{self.command} is not installed (pip install -e .)"
        return str(Path(found).resolve())

    def argv(self, *args: str) -> list[str]:
        return [self.executable(), f"--config={self.config}", *args]

    def run(self, *args: str, env: Mapping[str, str] | None = None) -> PassRun:
        """Run a command as ProxySQL's scheduler would: absolute path, empty environment."""
        if self.paced and not args:
            self._pace()
        done = subprocess.run(
            self.argv(*(args or ("run",))),
            env=child_env(env),
            capture_output=True,
            text=True,
            timeout=PASS_TIMEOUT,
            check=False,
        )
        return PassRun(done.returncode, done.stdout, done.stderr, parse_logs(done.stderr))

    def _pace(self) -> None:
        interval_s = int(str(self.run_settings.get("interval_ms", INTERVAL_MS))) / 1000
        if self._last_pass is not None:
            time.sleep(max(0.0, self._last_pass + interval_s - time.monotonic()))
        self._last_pass = time.monotonic()

    def passes(self, count: int) -> list[PassRun]:
        results = [self.run() for _ in range(count)]
        for result in results:
            assert result.code == 0, result.stderr
        return results


@contextmanager
def seeded_rig(tmp: Path, proxysql: Any, nodes: list[NodeAddress]) -> Iterator[Rig]:
    """A galera-checker rig on `proxysql`, its roster nodes 1, 2, 3 with writer weights 1000,
    500, 100 and the managed hostgroups empty; its admin connection closed after the block."""
    rig = Rig("galera-checker", tmp, proxysql)
    try:
        n1, n2, n3 = nodes
        rig.seed({n1: 1000, n2: 500, n3: 100})
        yield rig
    finally:
        rig.close()


class Daemon:
    """The daemon as a child process (empty environment but for `env`); its JSON log lines
    arrive on a queue."""

    def __init__(self, rig: Rig, env: Mapping[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(
            rig.argv("daemon"),
            env=child_env(env),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: queue.Queue[dict[str, Any]] = queue.Queue()
        self.output: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.output.append(line)
            for entry in parse_logs(line):
                self.lines.put(entry)

    def next_event(self, event: str, timeout: float = 30.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                entry = self.lines.get(timeout=0.2)
            except queue.Empty:
                if self.proc.poll() is not None and self.lines.empty():
                    break
                continue
            if entry.get("event") == event:
                return entry
        state = "running" if self.proc.poll() is None else f"exited {self.proc.returncode}"
        raise AssertionError(
            f"no {event!r} line from the daemon ({state}):\n{''.join(self.output)}"
        )

    def next_pass(self, timeout: float = 30.0) -> dict[str, Any]:
        return self.next_event("pass", timeout)

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=PASS_TIMEOUT)


def as_configured(rows: Iterable[ServerRow]) -> tuple[ServerRow, ...]:
    """Rows with SHUNNED read as ONLINE. A real ProxySQL's monitor shuns a server by itself
    (after a restart, ping failures linger) and lifts it by itself: the status of an ONLINE row
    is ProxySQL's to change, so no test may assume it stays as written."""
    return tuple(
        row.moved(row.hostgroup_id, ServerStatus.ONLINE)
        if row.status is ServerStatus.SHUNNED
        else row
        for row in rows
    )


def rows_as_written(rows: ClusterRows) -> tuple[tuple[ServerRow, ...], tuple[ServerRow, ...]]:
    """A hostgroup set's runtime rows (as_configured: the monitor's SHUN left out) and its
    staging rows: what a test may hold unchanged while the checker does nothing."""
    return as_configured(rows.runtime), rows.staging


def child_env(env: Mapping[str, str] | None) -> dict[str, str]:
    """The checker's environment: what the test gives, as ProxySQL gives none; PYTHONPATH is
    kept so that a checkout run with PYTHONPATH tests its own code, not an installed copy."""
    child = dict(env or {})
    if "PYTHONPATH" in os.environ:
        child.setdefault("PYTHONPATH", os.environ["PYTHONPATH"])
    return child


def parse_logs(text: str) -> list[dict[str, Any]]:
    found = []
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("{"):
            try:
                found.append(json.loads(line))
            except ValueError:
                continue
    return found


def _toml(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    return json.dumps(str(value))


def addresses(nodes: Iterable[Any]) -> list[NodeAddress]:
    return [NodeAddress(n.host, n.port) for n in nodes]


def messages_until(sock: socket.socket, wanted: str) -> list[dict[str, str]]:
    """systemd notify messages read from `sock` until one carries `wanted`."""
    seen: list[dict[str, str]] = []
    for _ in range(1000):  # bounded; each recv has its own 30 s timeout
        text = sock.recv(4096).decode()
        fields = dict(line.split("=", 1) for line in text.splitlines())
        seen.append(fields)
        if wanted in fields:
            return seen
    raise AssertionError(f"no {wanted} in {seen}")
