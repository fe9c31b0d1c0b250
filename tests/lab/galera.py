"""A real 3-node MariaDB Galera cluster on 127.0.0.1 that tests and humans can start and break.

Node N (1..3) serves clients on port 3310+N; its Galera group traffic, IST and SST use ports of
their own (see `GaleraNode`). Everything a node owns lives under lab_dir()/galera/nodeN/. Every
process the lab starts runs in its own session and is tracked by a pid file, and is signalled only
while its command line still names the node's my.cnf: the lab never touches a process it did not
start (other labs share this machine).

    python -m tests.lab galera up | down | status | kill N | stop N | start N | freeze N | thaw N
                              | desync N on|off | reject N NONE|ALL|ALL_KILL | read-only N on|off
                              | sql N "QUERY"
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import signal
import string
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pymysql
import pymysql.cursors

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
from tests.lab.certs import CertSet, make_cert_set
from tests.lab.paths import LOOPBACK, lab_dir

MARIADBD = Path("/usr/sbin/mariadbd")
GALERA_LIBRARIES = (
    Path("/usr/lib/galera/libgalera_smm.so"),
    Path("/usr/lib/galera-4/libgalera_smm.so"),
    Path("/usr/lib64/galera-4/libgalera_smm.so"),
    Path("/usr/lib/libgalera_smm.so"),
)
INSTALL_DB_NAMES = ("mariadb-install-db", "mysql_install_db")

NODE_INDEXES = (1, 2, 3)
CLUSTER_NAME = "checkers_lab_galera"
REJECT_MODES = ("NONE", "ALL", "ALL_KILL")
SYNCED = "Synced"
PRIMARY = "Primary"

# Galera's defaults (5s suspect, 15s inactive) are sized for WANs; on loopback a killed or frozen
# node may leave the view within a few seconds. Galera wants keepalive < suspect <= inactive and
# install <= inactive; suspect stays well above the keepalive so a busy 2-core box is not taken
# for a dead peer.
# evs.suspect_timeout is a GaleraLab argument (SUSPECT_TIMEOUT_S unless given): a benchmark may
# want Galera's own default (5 s) back.
SUSPECT_TIMEOUT_S = 3
PROVIDER_TUNING = (
    "evs.keepalive_period=PT1S",
    "evs.inactive_check_period=PT0.5S",
    "evs.inactive_timeout=PT6S",
    "evs.install_timeout=PT5S",
    "evs.join_retrans_period=PT0.5S",
    "gcache.size=64M",
    # after a whole-cluster crash the bootstrap node can still serve the others by IST
    "gcache.recover=yes",
)

# deadlines (seconds); a join may need a full SST on a busy 2-core machine
START_TIMEOUT = 300.0
STOP_TIMEOUT = 60.0
HELPER_TIMEOUT = 120.0
HEAL_TIMEOUT = 180.0
CLEAN_RESTARTS = 2  # full restarts ensure_healthy tries before it gives up
# the error log's last line when Galera dies reading a torn galera.cache (it says nothing more)
GCACHE_SCAN_LINE = "GCache::RingBuffer initial scan"
PROBE_CONNECT_TIMEOUT = 1.0
PROBE_READ_TIMEOUT = 2.0
SQL_READ_TIMEOUT = 60.0
# a thawed node may still report the view it had when it was stopped; trust what the cluster says
# only once it has held for longer than the failure detector needs to act
THAW_SETTLE = 7.0
# how long a joiner may find no Primary component among the running nodes before the lab gives up
NO_PRIMARY_GRACE = 20.0

Row = tuple[Any, ...]


# --------------------------------------------------------------------------- node records


@dataclass(frozen=True)
class GaleraNode:
    """Where clients reach one lab node."""

    index: int
    host: str
    port: int

    @property
    def name(self) -> str:
        return f"node{self.index}"

    @property
    def gmcast_port(self) -> int:
        return 4567 + 10 * (self.index - 1)

    @property
    def ist_port(self) -> int:
        return self.gmcast_port + 1

    @property
    def sst_port(self) -> int:
        return 4444 + 10 * (self.index - 1)


def galera_node(index: int) -> GaleraNode:
    _check_index(index)
    return GaleraNode(index=index, host=LOOPBACK, port=3310 + index)


def all_nodes() -> list[GaleraNode]:
    return [galera_node(n) for n in NODE_INDEXES]


def _check_index(index: int) -> None:
    if index not in NODE_INDEXES:
        raise ValueError(f"no galera lab node {index}; nodes are {NODE_INDEXES}")


@dataclass(frozen=True)
class NodeStatus:
    """What one node says about itself; the wsrep fields are None when it does not answer."""

    index: int
    port: int
    pid: int | None
    frozen: bool
    wsrep_local_state_comment: str | None = None
    wsrep_cluster_status: str | None = None
    wsrep_cluster_size: int | None = None
    read_only: bool | None = None
    wsrep_desync: bool | None = None
    wsrep_reject_queries: str | None = None
    wsrep_local_recv_queue: int | None = None
    wsrep_last_committed: int | None = None

    @property
    def state(self) -> str | None:
        return self.wsrep_local_state_comment

    @property
    def cluster_status(self) -> str | None:
        return self.wsrep_cluster_status

    @property
    def cluster_size(self) -> int | None:
        return self.wsrep_cluster_size

    @property
    def answered(self) -> bool:
        return self.wsrep_local_state_comment is not None

    @property
    def primary(self) -> bool:
        return self.wsrep_cluster_status == PRIMARY

    @property
    def synced(self) -> bool:
        return self.primary and self.wsrep_local_state_comment == SYNCED

    @property
    def healthy(self) -> bool:
        """The lab's known-good state for one node of the full cluster."""
        return (
            self.synced
            and not self.frozen
            and self.wsrep_cluster_size == len(NODE_INDEXES)
            and self.wsrep_desync is False
            and self.wsrep_reject_queries == "NONE"
            and self.read_only is False
        )


@dataclass(frozen=True)
class NodeStart:
    """How one node came up: its role, the seconds from launch to Synced, and any repair made."""

    index: int
    role: str
    seconds: float
    repair: str = ""


# --------------------------------------------------------------------------- prerequisites


def galera_library() -> Path | None:
    return next((path for path in GALERA_LIBRARIES if path.is_file()), None)


def install_db() -> Path | None:
    for name in INSTALL_DB_NAMES:
        found = shutil.which(name)
        if found:
            return Path(found)
    return None


def missing_prerequisite() -> str | None:
    """Why the lab cannot run here, or None when it can."""
    if not MARIADBD.is_file():
        return f"{MARIADBD} not found (install mariadb-server)"
    if galera_library() is None:
        return "libgalera_smm.so not found (install galera-4)"
    if install_db() is None:
        return "mariadb-install-db not found (install mariadb-server)"
    if shutil.which("mariabackup") is None:
        return "mariabackup not found (install mariadb-backup): joiners need it for SST"
    if shutil.which("openssl") is None:
        return "openssl not found (install openssl): the nodes' certificates are made with it"
    return None


# --------------------------------------------------------------------------- node files


@dataclass(frozen=True)
class _Files:
    """The files of one node under the lab directory."""

    root: Path

    @property
    def cnf(self) -> Path:
        return self.root / "my.cnf"

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def tmp(self) -> Path:
        return self.root / "tmp"

    @property
    def socket(self) -> Path:
        return self.root / "mysqld.sock"

    @property
    def server_pid(self) -> Path:
        """mariadbd's own pid file: it removes it on a clean shutdown, so the lab keeps its own."""
        return self.root / "mariadbd.pid"

    @property
    def lab_pid(self) -> Path:
        return self.root / "lab-mariadbd.pid"

    @property
    def error_log(self) -> Path:
        return self.root / "mariadbd.err"

    @property
    def stdout_log(self) -> Path:
        return self.root / "mariadbd.out"

    @property
    def helper_pid(self) -> Path:
        return self.root / "lab-helper.pid"

    @property
    def helper_log(self) -> Path:
        return self.root / "helper.out"

    @property
    def recover_log(self) -> Path:
        return self.root / "wsrep-recover.err"

    @property
    def recovered(self) -> Path:
        """Position found by --wsrep-recover, kept until the node next starts."""
        return self.root / "recovered.pos"

    @property
    def initialized(self) -> Path:
        # outside the datadir: an SST wipes whatever it does not know there
        return self.root / "initialized"

    @property
    def grastate(self) -> Path:
        return self.data / "grastate.dat"

    @property
    def gcache(self) -> Path:
        return self.data / "galera.cache"


class _DiedInGCacheScan(process.LabError):
    """A node's mariadbd died while Galera scanned its galera.cache at start."""


@dataclass(frozen=True)
class _GraState:
    uuid: str
    seqno: int
    safe_to_bootstrap: bool


def _read_grastate(path: Path) -> _GraState | None:
    try:
        text = path.read_text()
    except OSError:
        return None
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields[key.strip()] = value.strip()
    try:
        seqno = int(fields.get("seqno", "-1"))
    except ValueError:
        seqno = -1
    return _GraState(
        uuid=fields.get("uuid", ""),
        seqno=seqno,
        safe_to_bootstrap=fields.get("safe_to_bootstrap") == "1",
    )


def _allow_bootstrap(path: Path) -> None:
    """Mark a node as the one to bootstrap from; mariadbd refuses --wsrep-new-cluster otherwise."""
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return  # a fresh datadir has no grastate.dat and bootstraps freely
    lines = [
        "safe_to_bootstrap: 1" if line.startswith("safe_to_bootstrap:") else line for line in lines
    ]
    path.write_text("\n".join(lines) + "\n")


def _seqno(position: str | None) -> int:
    """The seqno of a recovered 'uuid:seqno' position (-1 when unknown)."""
    if not position:
        return -1
    try:
        return int(position.rsplit(":", 1)[1])
    except (IndexError, ValueError):
        return -1


def _recovered_position(log: Path) -> str | None:
    """The last 'WSREP: Recovered position: uuid:seqno' line --wsrep-recover wrote."""
    marker = "WSREP: Recovered position:"
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return None
    found = [line.split(marker, 1)[1].strip() for line in lines if marker in line]
    if not found or _seqno(found[-1]) < 0:
        return None
    return found[-1].split()[0]


def _last_line(path: Path) -> str:
    lines = _tail(path, 1).splitlines()
    return lines[-1] if lines else ""


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return f"({path} missing)"


_MY_CNF = string.Template(
    """\
# Generated by tests/lab/galera.py for lab node $index; rewritten on every lab start.
[client]
port=$port
socket=$socket
user=root

[mysqld]
user=root
basedir=/usr
datadir=$data
tmpdir=$tmp
socket=$socket
pid-file=$server_pid
log-error=$error_log
port=$port
bind-address=$host
skip-name-resolve
server-id=$index
performance_schema=OFF
max_connections=200
default_storage_engine=InnoDB
binlog_format=ROW
innodb_autoinc_lock_mode=2
innodb_buffer_pool_size=128M
innodb_log_file_size=48M
innodb_flush_log_at_trx_commit=2
# client TLS with a certificate from the lab's CA, for 127.0.0.1 and localhost
ssl-ca=$ssl_ca
ssl-cert=$ssl_cert
ssl-key=$ssl_key

wsrep_on=ON
wsrep_provider=$provider
wsrep_cluster_name=$cluster
wsrep_cluster_address=gcomm://$peers
wsrep_node_name=node$index
wsrep_node_address=$host:$gmcast_port
wsrep_node_incoming_address=$host:$port
wsrep_provider_options="$provider_options"
# rsync SST does not work when mariadbd runs as root; mariabackup does
wsrep_sst_method=mariabackup
wsrep_sst_receive_address=$host:$sst_port
"""
)


def _render_cnf(
    node: GaleraNode, files: _Files, provider: Path, certs: CertSet, suspect_timeout_s: int
) -> str:
    options = [
        f"gmcast.listen_addr=tcp://{node.host}:{node.gmcast_port}",
        f"ist.recv_addr={node.host}:{node.ist_port}",
        f"evs.suspect_timeout=PT{suspect_timeout_s}S",
        *PROVIDER_TUNING,
    ]
    return _MY_CNF.substitute(
        index=node.index,
        host=node.host,
        port=node.port,
        socket=files.socket,
        data=files.data,
        tmp=files.tmp,
        server_pid=files.server_pid,
        error_log=files.error_log,
        provider=provider,
        cluster=CLUSTER_NAME,
        peers=",".join(f"{peer.host}:{peer.gmcast_port}" for peer in all_nodes()),
        gmcast_port=node.gmcast_port,
        sst_port=node.sst_port,
        provider_options="; ".join(options),
        ssl_ca=certs.ca,
        ssl_cert=certs.cert,
        ssl_key=certs.key,
    )


def _quote_ident(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _as_bool(value: object) -> bool | None:
    if value is None:
        return None
    if isinstance(value, int):
        return value != 0
    text = value.decode() if isinstance(value, bytes) else str(value)
    return text.upper() not in ("0", "OFF", "NO", "FALSE")


def _as_int(value: object) -> int | None:
    try:
        return int(str(value.decode() if isinstance(value, bytes) else value))
    except (TypeError, ValueError):
        return None


def _as_str(value: object) -> str | None:
    if value is None:
        return None
    return value.decode() if isinstance(value, bytes) else str(value)


# --------------------------------------------------------------------------- the lab


class GaleraLab:
    """Start, break and repair the lab's 3-node Galera cluster."""

    def __init__(
        self, base: Path | None = None, suspect_timeout_s: int = SUSPECT_TIMEOUT_S
    ) -> None:
        self.base = base if base is not None else lab_dir() / "galera"
        # evs.suspect_timeout of the my.cnf this lab writes (it must stay <= inactive_timeout)
        self.suspect_timeout_s = suspect_timeout_s

    # ----------------------------------------------------------------- small queries

    @property
    def nodes(self) -> list[GaleraNode]:
        return all_nodes()

    @property
    def monitor_credentials(self) -> tuple[str, str]:
        return MONITOR_USER, MONITOR_PASSWORD

    def node(self, n: int) -> GaleraNode:
        return galera_node(n)

    @property
    def certs(self) -> CertSet:
        """The lab's CA and the certificate every node serves (made on first use)."""
        return make_cert_set(self.base / "tls")

    def pid(self, n: int) -> int | None:
        """The live mariadbd the lab started for node n, or None."""
        files = self._files(n)
        return process.tracked_pid(files.lab_pid, marker=str(files.cnf))

    def running(self) -> list[int]:
        return [n for n in NODE_INDEXES if self.pid(n) is not None]

    def error_log(self, n: int) -> Path:
        return self._files(n).error_log

    def status(self) -> list[NodeStatus]:
        """One record per node; never blocks long on a frozen or dying node."""
        return [self._probe(n) for n in NODE_INDEXES]

    def node_status(self, n: int) -> NodeStatus:
        _check_index(n)
        return self._probe(n)

    def sql(self, n: int, query: str, args: Sequence[object] | None = None) -> list[Row]:
        """Run one statement on node n as root (through its unix socket); return its rows."""
        with self._connect(n, SQL_READ_TIMEOUT) as conn, conn.cursor() as cur:
            cur.execute(query, args)
            return [tuple(row) for row in cur.fetchall()]

    # ----------------------------------------------------------------- whole cluster

    def up(self) -> list[NodeStart]:
        """Bring all three nodes up and Synced; bootstrap only when none runs."""
        self._prepare()
        if self.running() and not self._make_primary():
            # the stopped nodes hold newer data than the survivors: restart from the newest
            self.down()
        starts: list[NodeStart] = []
        if not self.running():
            starts += self._start_nodes([self._choose_bootstrap()], bootstrap=True)
        starts += self._start_nodes([n for n in NODE_INDEXES if self.pid(n) is None])
        self._ensure_accounts()
        return starts

    def down(self) -> None:
        """Stop every node cleanly (SIGKILL after a deadline), last node 1 so it may bootstrap."""
        for n in reversed(NODE_INDEXES):
            self._stop_node(n)
        # a mariadbd whose pid file was lost (crashed lab run) still names our my.cnf
        for pid in self._stray_pids():
            process.stop(pid, timeout=STOP_TIMEOUT)

    def wait_synced(self, nodes: Iterable[int], timeout: float = START_TIMEOUT) -> None:
        """Wait until every given node is Synced in a Primary component."""
        wanted = list(nodes)
        for n in wanted:
            _check_index(n)

        def all_synced() -> bool:
            return all(self._probe_running(n).synced for n in wanted)

        process.wait_until(all_synced, timeout, f"nodes {wanted} to be Synced", interval=0.3)

    def wait_cluster(self, nodes: Iterable[int], timeout: float = START_TIMEOUT) -> None:
        """Wait until exactly the given nodes form the cluster, each Synced and seeing them all."""
        wanted = list(nodes)

        def formed() -> bool:
            probes = [self._probe_running(n) for n in wanted]
            return all(p.synced and p.wsrep_cluster_size == len(wanted) for p in probes)

        process.wait_until(formed, timeout, f"a cluster of nodes {wanted}", interval=0.3)

    def ensure_healthy(self) -> None:
        """Restore the known-good state: 3 nodes running, thawed, Synced, Primary, size 3,
        desync OFF, reject NONE, read_only OFF. Cheap when already there."""
        if self._thaw_all():
            self._wait_steady(THAW_SETTLE)
        if self._all_healthy():
            return
        # a node left rejecting queries refuses the table reads up() makes: switch that off first
        for probe in self.status():
            if probe.answered and not probe.frozen:
                self._reset_settings(probe)
        try:
            self.up()
            self._wait_healthy(HEAL_TIMEOUT)
        except process.LabError:
            self._restart_clean()

    def _restart_clean(self) -> None:
        """A clean full restart from the newest node, which repairs whatever the state was;
        tried again once, for a start that failed on a loaded machine (a bootstrap node that
        exited at once, a joiner the others kept suspecting)."""
        for attempt in range(1, CLEAN_RESTARTS + 1):
            self.down()
            try:
                self.up()
                self._wait_healthy(HEAL_TIMEOUT)
                return
            except process.LabError:
                if attempt == CLEAN_RESTARTS:
                    raise

    def ensure_tls(self) -> None:
        """Every node serving TLS with the lab's certificate: a node started from an older
        my.cnf (without it) is restarted, one at a time, so the cluster keeps its quorum."""
        self.ensure_healthy()
        self._prepare()
        for n in NODE_INDEXES:
            [(have_ssl, cert)] = self.sql(n, "SELECT @@have_ssl, @@ssl_cert")
            if have_ssl == "YES" and cert == str(self.certs.cert):
                continue
            self.stop(n)
            self.start(n)
        self._wait_healthy(HEAL_TIMEOUT)

    # ----------------------------------------------------------------- one node

    def start(self, n: int) -> NodeStart:
        """Start node n and wait until Synced: as a joiner when others run, else bootstrap it."""
        _check_index(n)
        self._prepare()
        if self.pid(n) is not None:
            return NodeStart(index=n, role="running", seconds=0.0)
        bootstrap = not self.running()
        if not bootstrap and not self._make_primary():
            raise process.LabError(
                f"the running nodes lost their Primary component and a stopped node holds newer "
                f"data; run `up` to restart the cluster from the newest node before node{n}"
            )
        [started] = self._start_nodes([n], bootstrap=bootstrap)
        if bootstrap:
            self._ensure_accounts()
        return started

    def stop(self, n: int) -> None:
        """Clean shutdown of node n (SIGKILL if it will not go)."""
        _check_index(n)
        self._stop_node(n)

    def kill(self, n: int) -> None:
        """SIGKILL node n: a crash, leaving grastate.dat with seqno -1."""
        process.kill9(self._require_pid(n))

    def freeze(self, n: int) -> None:
        """SIGSTOP node n: it keeps its sockets but answers nothing."""
        pid = self._require_pid(n)
        process.send(pid, signal.SIGSTOP)
        process.wait_until(lambda: process.pid_frozen(pid), 10.0, f"node{n} to stop")

    def thaw(self, n: int, wait: bool = True) -> None:
        """SIGCONT node n; with wait, until it is back in a cluster of every running node."""
        pid = self._require_pid(n)
        if not process.pid_frozen(pid):
            return
        # once the others have dropped the node, only its real return can make them count it
        # again; before that, what the thawed node says may be the view it was frozen in
        dropped = self._dropped_by_others(n)
        process.send(pid, signal.SIGCONT)
        process.wait_until(lambda: not process.pid_frozen(pid), 10.0, f"node{n} to resume")
        if wait:
            self._settle_after_thaw(0.0 if dropped else THAW_SETTLE)

    def desync(self, n: int, on: bool) -> None:
        self.sql(n, "SET GLOBAL wsrep_desync = %s", ("ON" if on else "OFF",))

    def reject(self, n: int, mode: str) -> None:
        """SET GLOBAL wsrep_reject_queries = NONE | ALL | ALL_KILL on node n."""
        wanted = mode.upper()
        if wanted not in REJECT_MODES:
            raise ValueError(f"reject mode must be one of {REJECT_MODES}, not {mode!r}")
        self.sql(n, "SET GLOBAL wsrep_reject_queries = %s", (wanted,))

    def set_read_only(self, n: int, on: bool) -> None:
        self.sql(n, "SET GLOBAL read_only = %s", ("ON" if on else "OFF",))

    def apply_suspect_timeout(self) -> None:
        """Give this lab's evs.suspect_timeout to the running nodes (a provider option Galera
        takes at run time) and to their my.cnf (a node started later reads it there)."""
        self._prepare()
        option = f"evs.suspect_timeout=PT{self.suspect_timeout_s}S"
        for n in self.running():
            self.sql(n, "SET GLOBAL wsrep_provider_options = %s", (option,))

    # ----------------------------------------------------------------- internals: files

    def _files(self, n: int) -> _Files:
        _check_index(n)
        return _Files(self.base / f"node{n}")

    def _prepare(self) -> None:
        """Write every node's my.cnf and initialise the datadirs never initialised before."""
        provider = galera_library()
        if provider is None:
            raise process.LabError("libgalera_smm.so not found (install galera-4)")
        for node in self.nodes:
            files = self._files(node.index)
            files.tmp.mkdir(parents=True, exist_ok=True)
            text = _render_cnf(node, files, provider, self.certs, self.suspect_timeout_s)
            if not files.cnf.is_file() or files.cnf.read_text() != text:
                files.cnf.write_text(text)
        fresh = [n for n in NODE_INDEXES if not self._files(n).initialized.exists()]
        if fresh:
            self._install(fresh)

    def _install(self, nodes: list[int]) -> None:
        tool = install_db()
        if tool is None:
            raise process.LabError("mariadb-install-db not found (install mariadb-server)")
        for n in nodes:
            if self.pid(n) is not None:
                raise process.LabError(f"node{n} runs but its datadir was never initialised")
            files = self._files(n)
            # an interrupted earlier install leaves a partial datadir behind
            shutil.rmtree(files.data, ignore_errors=True)
            argv = [
                str(tool),
                "--no-defaults",
                f"--datadir={files.data}",
                "--user=root",
                "--skip-test-db",
                "--auth-root-authentication-method=socket",
                "--innodb-log-file-size=48M",
                "--innodb-buffer-pool-size=64M",
                # the node's own: in the shared /tmp a temporary table of the bootstrap went
                # missing under it once, and the install left half its system tables
                f"--tmpdir={files.tmp}",
            ]
            files.helper_log.unlink(missing_ok=True)  # this install's words only, below
            self._spawn_helper(n, argv)
        self._wait_helpers(nodes, "mariadb-install-db")
        for n in nodes:
            files = self._files(n)
            said = files.helper_log.read_text(errors="replace") if files.helper_log.exists() else ""
            failed = "Installation of system tables failed" in said
            if failed or not (files.data / "mysql" / "global_priv.frm").is_file():
                raise process.LabError(
                    f"mariadb-install-db failed for node{n}:\n{_tail(files.helper_log)}"
                )
            files.initialized.write_text("ok\n")

    def _spawn_helper(self, n: int, argv: list[str]) -> int:
        files = self._files(n)
        return process.spawn(argv, log_path=files.helper_log, pid_path=files.helper_pid)

    def _helper_pid(self, n: int) -> int | None:
        return process.tracked_pid(self._files(n).helper_pid)

    def _wait_helpers(self, nodes: list[int], what: str) -> None:
        """Wait for the one-shot helpers of these nodes to exit; kill them at the deadline."""
        try:
            process.wait_until(
                lambda: all(self._helper_pid(n) is None for n in nodes),
                HELPER_TIMEOUT,
                f"{what} on nodes {nodes}",
            )
        finally:
            for n in nodes:
                pid = self._helper_pid(n)
                if pid is not None:
                    process.stop(pid, timeout=10.0)

    # ----------------------------------------------------------------- internals: positions

    def _needs_recovery(self, n: int) -> bool:
        """True after a crash: grastate.dat then says seqno -1 and only InnoDB knows more."""
        state = _read_grastate(self._files(n).grastate)
        return state is not None and state.seqno < 0

    def _recover(self, nodes: list[int]) -> dict[int, str | None]:
        """Recovered 'uuid:seqno' per node via --wsrep-recover, run in parallel, cached per stop."""
        todo = [n for n in nodes if not self._files(n).recovered.is_file()]
        for n in todo:
            files = self._files(n)
            files.recover_log.unlink(missing_ok=True)
            argv = [
                str(MARIADBD),
                f"--defaults-file={files.cnf}",
                "--wsrep-recover",
                f"--log-error={files.recover_log}",
            ]
            self._spawn_helper(n, argv)
        if todo:
            self._wait_helpers(todo, "--wsrep-recover")
        for n in todo:
            files = self._files(n)
            position = _recovered_position(files.recover_log)
            if position is not None:
                files.recovered.write_text(position + "\n")
        return {n: self._cached_position(n) for n in nodes}

    def _cached_position(self, n: int) -> str | None:
        try:
            return self._files(n).recovered.read_text().strip() or None
        except OSError:
            return None

    def _stopped_seqno(self, n: int) -> int:
        """The last seqno a stopped node committed (-1 when unknown or never started)."""
        state = _read_grastate(self._files(n).grastate)
        if state is None:
            return -1
        if state.seqno >= 0:
            return state.seqno
        return _seqno(self._recover([n])[n])

    def _choose_bootstrap(self) -> int:
        """The node to start a new cluster from when none runs."""
        states = {n: _read_grastate(self._files(n).grastate) for n in NODE_INDEXES}
        for n, state in states.items():
            if state is not None and state.safe_to_bootstrap:
                return n  # Galera marked it: it left the last Primary component last
        known = [n for n, state in states.items() if state is not None]
        if not known:
            return NODE_INDEXES[0]  # fresh datadirs
        self._recover([n for n in known if self._needs_recovery(n)])
        return max(known, key=lambda n: (self._stopped_seqno(n), -n))

    # ----------------------------------------------------------------- internals: start/stop

    def _start_nodes(self, nodes: list[int], bootstrap: bool = False) -> list[NodeStart]:
        """Start these stopped nodes one after the other, each waited for until Synced.

        Joiners launched together first meet each other outside the Primary component and take
        seconds to merge; one at a time is quicker.
        """
        nodes = [n for n in nodes if self.pid(n) is None]
        positions = self._recover([n for n in nodes if self._needs_recovery(n)])
        role = "bootstrap" if bootstrap else "joiner"
        starts: list[NodeStart] = []
        for n in nodes:
            extra: list[str] = []
            if bootstrap:
                _allow_bootstrap(self._files(n).grastate)
                extra.append("--wsrep-new-cluster")
            position = positions.get(n)
            if position:
                # lets a crashed node rejoin by IST instead of a full SST
                extra.append(f"--wsrep_start_position={position}")
            since = time.monotonic()
            repair = ""
            try:
                self._wait_launched(n, self._launch(n, extra), bootstrap)
            except _DiedInGCacheScan as died:
                # Galera can die scanning a galera.cache a crash left torn, before it logs a
                # word; without the cache the node still joins by IST or SST from a peer
                self._files(n).gcache.unlink(missing_ok=True)
                repair = f"{died}; started again without it"
                self._wait_launched(n, self._launch(n, extra), bootstrap)
            seconds = time.monotonic() - since
            starts.append(NodeStart(index=n, role=role, seconds=seconds, repair=repair))
        return starts

    def _launch(self, n: int, extra: list[str]) -> int:
        files = self._files(n)
        files.recovered.unlink(missing_ok=True)  # the next stop needs a fresh recovery
        files.server_pid.unlink(missing_ok=True)
        argv = [str(MARIADBD), f"--defaults-file={files.cnf}", *extra]
        return process.spawn(argv, log_path=files.stdout_log, pid_path=files.lab_pid)

    def _wait_launched(self, n: int, launched: int, bootstrap: bool) -> None:
        log = self._files(n).error_log
        lost_since = time.monotonic()

        def synced() -> bool:
            nonlocal lost_since
            # its own child's collected status says it died, and how; a pid file is not needed
            ended = process.ended(launched)
            if ended is not None:
                if GCACHE_SCAN_LINE in _last_line(log):
                    raise _DiedInGCacheScan(f"node{n} died scanning its galera.cache ({ended})")
                raise process.LabError(
                    f"node{n} exited while starting ({ended}); {log}:\n{_tail(log)}"
                )
            if self._probe(n).synced:
                return True
            # a joiner waits forever for a Primary component that nobody holds; say so early
            if bootstrap or self._others_primary(n):
                lost_since = time.monotonic()
            elif time.monotonic() - lost_since > NO_PRIMARY_GRACE:
                raise process.LabError(f"node{n} cannot join: no other node is Primary")
            return False

        process.wait_until(synced, START_TIMEOUT, f"node{n} to reach Synced (see {log})", 0.3)

    def _others_primary(self, n: int) -> bool:
        return any(self._probe(m).primary for m in self.running() if m != n)

    def _stop_node(self, n: int) -> None:
        files = self._files(n)
        pid = self.pid(n)
        if pid is not None:
            process.stop(pid, timeout=STOP_TIMEOUT)
        files.lab_pid.unlink(missing_ok=True)

    def _require_pid(self, n: int) -> int:
        pid = self.pid(n)
        if pid is None:
            raise process.LabError(f"node{n} is not running")
        return pid

    def _stray_pids(self) -> list[int]:
        """Live processes whose command line names one of this lab's my.cnf files."""
        markers = [f"--defaults-file={self._files(n).cnf}" for n in NODE_INDEXES]
        found: list[int] = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                args = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
            except OSError:
                continue
            if any(marker in args for marker in markers) and process.pid_alive(int(entry.name)):
                found.append(int(entry.name))
        return found

    def _thaw_all(self) -> list[int]:
        thawed: list[int] = []
        for n in NODE_INDEXES:
            pid = self.pid(n)
            if pid is not None and process.pid_frozen(pid):
                process.send(pid, signal.SIGCONT)
                thawed.append(n)
        return thawed

    # ----------------------------------------------------------------- internals: recovery

    def _make_primary(self) -> bool:
        """Give the running nodes a Primary component again if they lost it.

        False when a stopped node holds newer data than every survivor: bootstrapping a survivor
        would then throw transactions away, so the caller restarts from the newest node instead.
        """
        probes = self._answering_probes()
        if any(p.primary for p in probes):
            return True
        best = max(probes, key=lambda p: (p.wsrep_last_committed or -1, -p.index))
        stopped = [n for n in NODE_INDEXES if self.pid(n) is None]
        newest_stopped = max((self._stopped_seqno(n) for n in stopped), default=-1)
        if newest_stopped > (best.wsrep_last_committed or -1):
            return False
        # the survivors stay non-Primary by design (no quorum); tell the best one it is the cluster
        self.sql(best.index, "SET GLOBAL wsrep_provider_options = 'pc.bootstrap=YES'")
        process.wait_until(
            lambda: self._probe_running(best.index).primary,
            60.0,
            f"node{best.index} to become Primary after pc.bootstrap",
        )
        return True

    def _answering_probes(self) -> list[NodeStatus]:
        """Status of the running nodes that answer (a node still starting gets time to)."""

        def answering() -> list[NodeStatus] | None:
            probes = [self._probe(n) for n in self.running()]
            if not probes:
                raise process.LabError("no galera lab node runs any more")
            live = [p for p in probes if p.answered]
            return live if len(live) == len(probes) or any(p.primary for p in live) else None

        return process.wait_until(answering, 60.0, "running nodes to answer", interval=0.5)

    def _ensure_accounts(self) -> None:
        """Create the lab's accounts once; they replicate to every node."""
        n = next((n for n in NODE_INDEXES if self._probe(n).primary), None)
        if n is None:
            raise process.LabError("no Primary node to create the lab accounts on")
        wanted = _accounts()
        pairs = " OR ".join("(User = %s AND Host = %s)" for _ in wanted)
        args = [part for user, host, _ in wanted for part in (user, host)]
        [(count,)] = self.sql(n, f"SELECT COUNT(*) FROM mysql.global_priv WHERE {pairs}", args)
        if int(count) == len(wanted):
            return
        with self._connect(n, SQL_READ_TIMEOUT) as conn, conn.cursor() as cur:
            for user, host, password in wanted:
                if password:
                    cur.execute(
                        "CREATE USER IF NOT EXISTS %s@%s IDENTIFIED BY %s", (user, host, password)
                    )
                else:
                    cur.execute("CREATE USER IF NOT EXISTS %s@%s", (user, host))
            for host in ("127.0.0.1", "localhost"):
                cur.execute(
                    "GRANT USAGE, PROCESS, REPLICATION CLIENT ON *.* TO %s@%s",
                    (MONITOR_USER, host),
                )
            # evs.evict is set through SET GLOBAL wsrep_provider_options: SUPER on MariaDB
            cur.execute(
                "GRANT SUPER, PROCESS, REPLICATION CLIENT ON *.* TO %s@%s",
                (NODE_ADMIN_USER, "127.0.0.1"),
            )
            cur.execute(
                "GRANT SELECT ON mysql.wsrep_cluster_members TO %s@%s",
                (NODE_ADMIN_USER, "127.0.0.1"),
            )
            schema = _quote_ident(APP_SCHEMA)
            cur.execute(f"CREATE DATABASE IF NOT EXISTS {schema}")
            for host in ("127.0.0.1", "%"):
                cur.execute(f"GRANT ALL PRIVILEGES ON {schema}.* TO %s@%s", (APP_USER, host))
            cur.execute(
                "GRANT ALL PRIVILEGES ON *.* TO %s@%s WITH GRANT OPTION", ("root", "127.0.0.1")
            )

    # ----------------------------------------------------------------- internals: health

    def _wait_steady(self, hold: float) -> None:
        """Wait until no node's view changes for `hold` seconds (or give up after a minute).

        A thawed node first repeats the view it was frozen in; only once the failure detector
        has had time to act does what the nodes say describe the cluster.
        """
        last: tuple[tuple[object, ...], ...] = ()
        since = time.monotonic()

        def steady() -> bool:
            nonlocal last, since
            views = tuple(
                (p.pid, p.wsrep_local_state_comment, p.wsrep_cluster_status, p.wsrep_cluster_size)
                for p in self.status()
            )
            if views != last:
                last, since = views, time.monotonic()
            return time.monotonic() - since >= hold

        with contextlib.suppress(process.LabError):
            process.wait_until(steady, hold + 60.0, "the nodes' views to settle", interval=0.5)

    def _dropped_by_others(self, n: int) -> bool:
        """True when every other answering node already has a view without node n."""
        others = [self._probe(m) for m in self.running() if m != n]
        live = [p for p in others if p.answered]
        return bool(live) and all((p.wsrep_cluster_size or 0) <= len(others) for p in live)

    def _settle_after_thaw(self, hold: float) -> None:
        """Wait until every running, unfrozen node agrees on one Synced cluster of them all,
        for `hold` seconds in a row."""
        since = time.monotonic()

        def steady() -> bool:
            nonlocal since
            members = [p for p in self.status() if p.pid is not None and not p.frozen]
            formed = all(p.synced and p.wsrep_cluster_size == len(members) for p in members)
            if not formed:
                since = time.monotonic()
            return formed and time.monotonic() - since >= hold

        process.wait_until(steady, HEAL_TIMEOUT, "the thawed node to rejoin", interval=0.5)

    def _all_healthy(self) -> bool:
        return all(p.healthy for p in self.status())

    def _wait_healthy(self, timeout: float) -> None:
        """Wait for the full healthy cluster, switching off any leftover desync/reject/read_only
        on the nodes that answer (those settings keep a node from looking healthy)."""

        def healthy() -> bool:
            probes = self.status()
            for p in probes:
                if p.answered and not p.frozen:
                    self._reset_settings(p)
            return all(p.healthy for p in probes)

        process.wait_until(healthy, timeout, "a healthy 3-node cluster", interval=0.5)

    def _reset_settings(self, probe: NodeStatus) -> None:
        fixes: list[Callable[[], None]] = []
        if probe.wsrep_desync:
            fixes.append(lambda: self.desync(probe.index, False))
        if probe.wsrep_reject_queries not in (None, "NONE"):
            fixes.append(lambda: self.reject(probe.index, "NONE"))
        if probe.read_only:
            fixes.append(lambda: self.set_read_only(probe.index, False))
        for fix in fixes:
            # a node busy changing state may refuse; the next poll retries
            with contextlib.suppress(pymysql.MySQLError, OSError):
                fix()

    # ----------------------------------------------------------------- internals: probing

    def _connect(
        self, n: int, read_timeout: float
    ) -> pymysql.connections.Connection[pymysql.cursors.Cursor]:
        return pymysql.connect(
            unix_socket=str(self._files(n).socket),
            user="root",
            ssl_disabled=True,
            connect_timeout=PROBE_CONNECT_TIMEOUT,
            read_timeout=read_timeout,
            write_timeout=read_timeout,
            autocommit=True,
        )

    def _probe_running(self, n: int) -> NodeStatus:
        probe = self._probe(n)
        if probe.pid is None:
            raise process.LabError(f"node{n} is not running; {self._files(n).error_log}")
        return probe

    def _probe(self, n: int) -> NodeStatus:
        pid = self.pid(n)
        frozen = pid is not None and process.pid_frozen(pid)
        empty = NodeStatus(index=n, port=galera_node(n).port, pid=pid, frozen=frozen)
        if pid is None or frozen:
            return empty  # a stopped process would only run the probe into its timeout
        try:
            with self._connect(n, PROBE_READ_TIMEOUT) as conn, conn.cursor() as cur:
                cur.execute("SHOW GLOBAL STATUS LIKE 'wsrep%%'")
                wsrep = {str(name).lower(): value for name, value in cur.fetchall()}
                cur.execute("SELECT @@read_only, @@wsrep_desync, @@wsrep_reject_queries")
                variables = cur.fetchone()
        except (pymysql.MySQLError, OSError):
            return empty
        if variables is None:
            return empty
        read_only, desync, reject = variables
        return NodeStatus(
            index=n,
            port=empty.port,
            pid=pid,
            frozen=False,
            wsrep_local_state_comment=_as_str(wsrep.get("wsrep_local_state_comment")),
            wsrep_cluster_status=_as_str(wsrep.get("wsrep_cluster_status")),
            wsrep_cluster_size=_as_int(wsrep.get("wsrep_cluster_size")),
            read_only=_as_bool(read_only),
            wsrep_desync=_as_bool(desync),
            wsrep_reject_queries=_as_str(reject),
            wsrep_local_recv_queue=_as_int(wsrep.get("wsrep_local_recv_queue")),
            wsrep_last_committed=_as_int(wsrep.get("wsrep_last_committed")),
        )


def _accounts() -> list[tuple[str, str, str]]:
    """(user, host, password) of every lab account; root over TCP has no password."""
    return [
        (MONITOR_USER, "127.0.0.1", MONITOR_PASSWORD),
        (MONITOR_USER, "localhost", MONITOR_PASSWORD),
        (APP_USER, "127.0.0.1", APP_PASSWORD),
        (APP_USER, "%", APP_PASSWORD),
        (NODE_ADMIN_USER, "127.0.0.1", NODE_ADMIN_PASSWORD),
        ("root", "127.0.0.1", ""),
    ]


# --------------------------------------------------------------------------- CLI

STATUS_HEADER = (
    "node",
    "port",
    "pid",
    "state_comment",
    "cluster_status",
    "size",
    "read_only",
    "desync",
    "reject_queries",
    "recv_queue",
)


def _cell(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "ON" if value else "OFF"
    return str(value)


def _status_row(probe: NodeStatus) -> tuple[str, ...]:
    if probe.frozen:
        state = "(frozen)"
    elif probe.pid is None:
        state = "(down)"
    else:
        state = probe.wsrep_local_state_comment or "(no answer)"
    return (
        f"node{probe.index}",
        str(probe.port),
        _cell(probe.pid),
        state,
        _cell(probe.wsrep_cluster_status),
        _cell(probe.wsrep_cluster_size),
        _cell(probe.read_only),
        _cell(probe.wsrep_desync),
        _cell(probe.wsrep_reject_queries),
        _cell(probe.wsrep_local_recv_queue),
    )


def format_status(probes: Sequence[NodeStatus]) -> str:
    rows = [STATUS_HEADER, *(_status_row(p) for p in probes)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(STATUS_HEADER))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in rows
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m tests.lab galera",
        description="Drive the lab's 3-node MariaDB Galera cluster on 127.0.0.1 (ports 3311-3313).",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    sub.add_parser("up", help="start all nodes (bootstrap when none runs) and wait until Synced")
    sub.add_parser("down", help="clean shutdown of every node")
    sub.add_parser("status", help="one row per node")
    for name, text in (
        ("kill", "SIGKILL node N"),
        ("stop", "clean shutdown of node N"),
        ("start", "start node N and wait until Synced"),
        ("freeze", "SIGSTOP node N"),
        ("thaw", "SIGCONT node N and wait until it rejoined"),
    ):
        _with_node(sub.add_parser(name, help=text))
    _with_switch(_with_node(sub.add_parser("desync", help="SET GLOBAL wsrep_desync")))
    reject = _with_node(sub.add_parser("reject", help="SET GLOBAL wsrep_reject_queries"))
    reject.add_argument("mode", type=str.upper, choices=REJECT_MODES)
    _with_switch(_with_node(sub.add_parser("read-only", help="SET GLOBAL read_only")))
    sql = _with_node(sub.add_parser("sql", help="run one statement as root on node N"))
    sql.add_argument("query")
    return parser


def _with_node(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument("node", type=int, choices=NODE_INDEXES, metavar="N", help="1, 2 or 3")
    return parser


def _with_switch(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument("state", type=str.lower, choices=("on", "off"))
    return parser


def _cmd_up(lab: GaleraLab, _: argparse.Namespace) -> int:
    since = time.monotonic()
    starts = lab.up()
    for started in starts:
        _print_start(started)
    if not starts:
        print("all nodes were already running")
    print(f"total {time.monotonic() - since:.1f}s")
    return 0


def _cmd_down(lab: GaleraLab, _: argparse.Namespace) -> int:
    lab.down()
    print("all galera lab nodes stopped")
    return 0


def _cmd_status(lab: GaleraLab, _: argparse.Namespace) -> int:
    print(format_status(lab.status()))
    return 0


def _cmd_start(lab: GaleraLab, args: argparse.Namespace) -> int:
    started = lab.start(args.node)
    if started.role == "running":
        print(f"node{started.index} was already running")
    else:
        _print_start(started)
    return 0


def _print_start(started: NodeStart) -> None:
    print(f"node{started.index}: {started.role} Synced after {started.seconds:.1f}s")
    if started.repair:
        print(f"node{started.index}: {started.repair}")


def _cmd_sql(lab: GaleraLab, args: argparse.Namespace) -> int:
    rows = lab.sql(args.node, args.query)
    for row in rows:
        print("\t".join(_cell(value) for value in row))
    return 0


def _cmd_reject(lab: GaleraLab, args: argparse.Namespace) -> int:
    lab.reject(args.node, args.mode)
    return 0


def _node_action(action: Callable[[GaleraLab, int], None]) -> Callable[..., int]:
    def run(lab: GaleraLab, args: argparse.Namespace) -> int:
        action(lab, args.node)
        return 0

    return run


def _switch_action(action: Callable[[GaleraLab, int, bool], None]) -> Callable[..., int]:
    def run(lab: GaleraLab, args: argparse.Namespace) -> int:
        action(lab, args.node, args.state == "on")
        return 0

    return run


_COMMANDS: dict[str, Callable[[GaleraLab, argparse.Namespace], int]] = {
    "up": _cmd_up,
    "down": _cmd_down,
    "status": _cmd_status,
    "start": _cmd_start,
    "sql": _cmd_sql,
    "kill": _node_action(GaleraLab.kill),
    "stop": _node_action(GaleraLab.stop),
    "freeze": _node_action(GaleraLab.freeze),
    "thaw": _node_action(lambda lab, n: lab.thaw(n)),
    "desync": _switch_action(GaleraLab.desync),
    "read-only": _switch_action(GaleraLab.set_read_only),
    "reject": _cmd_reject,
}


def main(argv: list[str]) -> int:
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        # argparse has printed the usage error (or the help); report its code, do not exit
        return exc.code if isinstance(exc.code, int) else 2
    lab = GaleraLab()
    try:
        return _COMMANDS[args.command](lab, args)
    except (process.LabError, pymysql.MySQLError) as exc:
        print(f"galera lab: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
