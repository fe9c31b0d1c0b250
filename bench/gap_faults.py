"""The write-gap bench's clusters and faults: one table, one entry per fault.

A fault is injected on the current writer (node or member 1, the heaviest), or on a reader (the
lightest node) where it says so, then undone before the cluster is healed. Adding a fault (a GR
switchover, say) is one entry in FAULTS.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from tests.lab.paths import LOOPBACK

REPO = Path(__file__).resolve().parents[1]
SWITCHOVER_TIMEOUT_S = 90.0
SWITCHOVER_TIMEOUTS = ("monitor.connect_timeout_ms=300", "monitor.read_timeout_ms=500")


class ClusterLab(Protocol):
    """What the bench asks of GaleraLab and GrLab alike."""

    def kill(self, n: int) -> None: ...
    def freeze(self, n: int) -> None: ...
    def ensure_healthy(self) -> None: ...


@dataclass(frozen=True)
class Cluster:
    """One lab cluster as the bench drives it."""

    name: str  # "galera" | "gr"
    package: str  # the checker's package, run as `python -m PACKAGE`
    lab: Any  # GaleraLab | GrLab
    ports: dict[int, int]  # node index -> client port
    writer: int  # the node the checker makes writer on a healthy cluster
    sql: Callable[[int, str, Sequence[object]], list[tuple[Any, ...]]]
    # the server variable a row's trigger stores as the node that took it: the lab's nodes
    # differ by port; the containers all listen on 3306 and differ by server_id (= their index)
    stamp: str = "@@port"

    def port(self, n: int) -> int:
        return self.ports[n]

    def stamped(self, n: int) -> int:
        """What node n's rows say took them."""
        return self.ports[n] if self.stamp == "@@port" else n

    def index_of(self, port: int) -> int:
        return next(n for n, p in self.ports.items() if p == port)

    def thaw(self, n: int) -> None:
        if self.name == "galera":
            self.lab.thaw(n, wait=False)
        else:
            self.lab.thaw(n)


@dataclass
class FaultRun:
    """One injection's context: what the fault needs, what it left running."""

    cluster: Cluster
    config: Path
    env: dict[str, str]
    victim: int  # the writer the fault hits
    target: int  # the node expected to write afterwards
    logs: Path  # where a run's logs stay (the config's directory is new for every run)
    background: list[subprocess.Popen[bytes]] = field(default_factory=list)
    timers: list[threading.Timer] = field(default_factory=list)


@dataclass(frozen=True)
class Fault:
    name: str
    cluster: str
    what: str
    inject: Callable[[FaultRun], None]
    undo: Callable[[FaultRun], None] = lambda run: None
    evictable: bool = False  # the eviction variant applies (a dead mysqld)
    frozen: bool = False  # the unresponsive variant applies (a member that stops answering)
    on_reader: bool = False  # the fault hits a reader; the writer stays where it is
    # a partition: the unresponsive variant applies too, and must evict nobody (every member
    # still answers the checker)
    cut: bool = False


def _reject(run: FaultRun) -> None:
    run.cluster.lab.reject(run.victim, "ALL")


def _desync(run: FaultRun) -> None:
    run.cluster.lab.desync(run.victim, True)


def _read_only(run: FaultRun) -> None:
    run.cluster.lab.set_read_only(run.victim, True)


def _kill(run: FaultRun) -> None:
    run.cluster.lab.kill(run.victim)


def _freeze(run: FaultRun) -> None:
    run.cluster.lab.freeze(run.victim)


def _thaw(run: FaultRun) -> None:
    for timer in run.timers:
        timer.cancel()
    run.cluster.thaw(run.victim)


def _freeze_for(seconds: float) -> Callable[[FaultRun], None]:
    """SIGSTOP now, SIGCONT `seconds` later (a VM pause, a stall that ends by itself)."""

    def freeze(run: FaultRun) -> None:
        run.cluster.lab.freeze(run.victim)
        timer = threading.Timer(seconds, run.cluster.thaw, args=(run.victim,))
        timer.daemon = True
        run.timers.append(timer)
        timer.start()

    return freeze


def _cut_from_peers(run: FaultRun) -> None:
    run.cluster.lab.cut_from_peers(run.victim)


def _heal(run: FaultRun) -> None:
    run.cluster.lab.heal(run.victim)


def _switchover(run: FaultRun, *extra: str) -> None:
    to = f"{LOOPBACK}:{run.cluster.port(run.target)}"
    argv = [sys.executable, "-m", run.cluster.package, "--config", str(run.config)]
    # an operator's one-off command: a new process (its first connects, TLS) is given the time
    # a 200 ms daemon's passes are not (the default cadence's), lest a slow first probe refuse
    # the move
    generous = ["--set", "run.interval_ms=2000", "--set", "run.max_runtime_ms=1800"] + [
        arg for key in SWITCHOVER_TIMEOUTS for arg in ("--set", key)
    ]
    with open(run.logs / "switchover.log", "wb") as log:
        child = subprocess.Popen(
            [*argv, "switchover", *generous, "--to", to, *extra],
            env=run.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    run.background.append(child)


def _switchover_keeping_the_delay(run: FaultRun) -> None:
    """The move as it was before the switchover lowered the auto-increment delay."""
    _switchover(run, "--keep-auto-increment-delay")


def _switchover_done(run: FaultRun) -> None:
    for child in run.background:
        try:
            child.wait(timeout=SWITCHOVER_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait(timeout=10)


def _gr_switchover_done(run: FaultRun) -> None:
    """The command's end, then the group's primary given back to the bench's writer (the next
    run starts from it; the checker follows the group)."""
    _switchover_done(run)
    [(uuid,)] = run.cluster.sql(run.victim, "SELECT @@server_uuid", ())
    run.cluster.sql(run.victim, "SELECT group_replication_set_as_primary(%s)", (uuid,))


FAULTS: tuple[Fault, ...] = (
    Fault("reject", "galera", "SET GLOBAL wsrep_reject_queries = ALL", _reject),
    Fault("desync", "galera", "SET GLOBAL wsrep_desync = ON", _desync),
    Fault("read_only", "galera", "SET GLOBAL read_only = ON", _read_only),
    Fault("kill9", "galera", "kill -9 of mysqld", _kill, evictable=True),
    Fault("sigstop", "galera", "SIGSTOP of mysqld (SIGCONT after)", _freeze, _thaw, frozen=True),
    Fault(
        "sigstop_3s",
        "galera",
        "SIGSTOP of the writer's mysqld, SIGCONT 3 s later",
        _freeze_for(3.0),
        _thaw,
        frozen=True,
    ),
    Fault(
        "sigstop_10s",
        "galera",
        "SIGSTOP of the writer's mysqld, SIGCONT 10 s later",
        _freeze_for(10.0),
        _thaw,
        frozen=True,
    ),
    Fault(
        "reader_sigstop",
        "galera",
        "SIGSTOP of a reader's mysqld (SIGCONT after); the writer stays",
        _freeze,
        _thaw,
        frozen=True,
        on_reader=True,
    ),
    Fault(
        "switchover",
        "galera",
        "galera-checker switchover --to the next node",
        _switchover,
        _switchover_done,
    ),
    Fault(
        "switchover_keep",
        "galera",
        "galera-checker switchover --to the next node --keep-auto-increment-delay",
        _switchover_keeping_the_delay,
        _switchover_done,
    ),
    Fault(
        "partition",
        "galera-containers",
        "the writer cut off from the other members (iptables DROP in its namespace); the "
        "checker and ProxySQL still reach it",
        _cut_from_peers,
        _heal,
        cut=True,
    ),
    Fault("kill9", "gr", "kill -9 of the primary's mysqld", _kill),
    Fault(
        "switchover",
        "gr",
        "gr-checker switchover --to the member the group would elect",
        _switchover,
        _gr_switchover_done,
    ),
)


def faults_of(cluster: str) -> dict[str, Fault]:
    return {f.name: f for f in FAULTS if f.cluster == cluster}


def galera_cluster(suspect_timeout_s: int) -> Cluster:
    from tests.lab.galera import GaleraLab

    lab = GaleraLab(suspect_timeout_s=suspect_timeout_s)
    ports = {node.index: node.port for node in lab.nodes}
    return Cluster("galera", "galera_checker", lab, ports, 1, lab.sql)


def containers_cluster(suspect_timeout_s: int) -> Cluster:
    """The container tier's Galera cluster (started by the bench's labs(): its relay ports are
    known once it runs)."""
    from bench.gap_containers import ContainerGalera

    lab = ContainerGalera(suspect_timeout_s)
    return Cluster(
        "galera-containers", "galera_checker", lab, lab.ports, 1, lab.sql, stamp="@@server_id"
    )


def gr_cluster() -> Cluster:
    from tests.lab.gr import GrLab

    lab = GrLab()
    ports = {member.index: member.port for member in lab.members}
    return Cluster("gr", "gr_checker", lab, ports, 1, lab.sql)


def reader_of(cluster: Cluster) -> int:
    """The node a reader fault hits: the lightest (Galera's weight 100, node 3)."""
    return max(cluster.ports)


def expected_target(cluster: Cluster, victim: int) -> int:
    """Who writes next: the next heaviest node (Galera's weights 1000/500/100 -> node 2), the
    member GR elects by its member weights (60/40/50 -> member 3)."""
    if cluster.name == "gr":
        return 3
    return 2 if victim != 2 else 1
