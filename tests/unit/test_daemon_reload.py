"""The daemon's start and reload with several clusters, through run_daemon and real signals, on
fake admins and probers: a reload that changes one cluster never stops another's loop (its
passes go on, on the same runner and connections); a cluster whose nodes hang in its warm-up
delays no other cluster's first pass, at start or at a reload; a removed cluster's loop ends and
closes its connections; a changed cluster gets a runner of its own anew; systemd hears READY
once the reload is taken."""

from __future__ import annotations

import os
import signal
import socket
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, cast

import pytest

from checker_core.core.model import ClusterRows, NodeAddress
from checker_core.core.settings import ClusterSettings, Settings
from checker_core.edges import hangup
from checker_core.edges.backend import Prober
from checker_core.edges.deadline import Deadline
from checker_core.edges.pending import PendingProbes
from checker_core.edges.proxysql import AdminClient
from checker_core.passes.fleet import Fleet
from checker_core.passes.ports import Ports
from checker_core.service import daemon as daemon_module
from checker_core.service.sdnotify import Notifier
from tests.lab.process import wait_until
from tests.unit.config_cases import galera_kind, galera_settings
from tests.unit.fakes import HealthyProber, MemoryAdmin
from tests.unit.galera_cases import N1, cluster_settings, steady, templates

DEADLINE_S = 20.0  # what a test waits for a loop at most (passes run every 100 ms)
HUNG = 3  # a cluster whose retry_down is this has nodes that hang (its prober waits)


class Log:
    """structlog's methods, each line kept as (level, event, fields)."""

    def __init__(self) -> None:
        self.lines: list[tuple[str, str, dict[str, Any]]] = []
        self._lock = threading.Lock()

    def _keep(self, level: str, event: str, fields: dict[str, Any]) -> None:
        with self._lock:
            self.lines.append((level, event, fields))

    def debug(self, event: str, **fields: Any) -> None:
        self._keep("debug", event, fields)

    def info(self, event: str, **fields: Any) -> None:
        self._keep("info", event, fields)

    def warning(self, event: str, **fields: Any) -> None:
        self._keep("warning", event, fields)

    def error(self, event: str, **fields: Any) -> None:
        self._keep("error", event, fields)

    def passes(self, cluster: str) -> int:
        with self._lock:
            return sum(1 for _, e, f in self.lines if e == "pass" and f["cluster"] == cluster)

    def events(self) -> list[tuple[str, dict[str, Any]]]:
        with self._lock:
            return [(e, f) for _, e, f in self.lines]


class Admin(MemoryAdmin):
    def __init__(self) -> None:
        super().__init__([*templates(), *steady(N1)])
        self.closed = False

    def close(self) -> None:
        self.closed = True


class FleetAdmin(Admin):
    """The fleet's own connection. The clusters here share their hostgroups (a test of loops,
    not of rosters): the roster-overlap check reads no roster, and the daemon's shared read of
    every cluster's rows the same rows as each cluster's own admin."""

    def read_rows(self, hostgroups: Iterable[int]) -> ClusterRows:
        return ClusterRows((), ())


class FakeProber(HealthyProber):
    """Healthy nodes; `hold`: an Event its probes (the warm-up's first) wait for."""

    def __init__(self, hold: threading.Event | None = None) -> None:
        self.hold = hold
        self.closed = False
        self.changes = 0

    def start(self, nodes: Sequence[NodeAddress], deadline: float) -> PendingProbes:
        if self.hold is not None:
            self.hold.wait(DEADLINE_S * 2)
        return super().start(nodes, deadline)

    def idle(self) -> dict[int, tuple[NodeAddress, object]]:
        return {}

    def close(self) -> None:
        self.closed = True


@dataclass
class Connections:
    """Every connection each cluster's runners open, by cluster; the fleet's roster-overlap
    check gets an admin with no roster."""

    hold: threading.Event = field(default_factory=threading.Event)
    admins: dict[str, list[Admin]] = field(default_factory=dict)
    probers: dict[str, list[FakeProber]] = field(default_factory=dict)

    def connect(self, settings: Settings, deadline: Deadline | None = None) -> AdminClient:
        if len(settings.clusters) > 1:
            return FleetAdmin()
        admin = Admin()
        self.admins.setdefault(settings.clusters[0].name, []).append(admin)
        return admin

    def new_prober(self, settings: Settings) -> Prober:
        if len(settings.clusters) > 1:
            return cast(Prober, FakeProber())
        (cluster,) = settings.clusters
        prober = FakeProber(self.hold if cluster.retry_down == HUNG else None)
        self.probers.setdefault(cluster.name, []).append(prober)
        return cast(Prober, prober)

    def fleet(self, settings: Settings, kind: Any, persistent: bool = False, **kw: Any) -> Any:
        """The fleet as the daemon makes it, on these fakes."""
        return Fleet(
            settings,
            kind,
            persistent,
            ports=Ports(self.connect, self.new_prober),
            **kw,
        )


def settings_of(tmp_path: Path, *clusters: ClusterSettings) -> Settings:
    base = galera_settings(tmp_path)
    run = replace(base.run, interval_ms=100, max_runtime_ms=60000, watch_interval_ms=0)
    return replace(base, clusters=clusters, run=run)


def cluster(name: str, retry_down: int = 0) -> ClusterSettings:
    """Clusters share the hostgroups (each has its own fake ProxySQL)."""
    return cluster_settings(name=name, retry_down=retry_down)


class Driver:
    """run_daemon in this (the main) thread, as the CLI runs it; a test's steps on another,
    which ends the daemon with SIGTERM whatever happens."""

    def __init__(self, first: Settings, fleet: Connections, log: Log) -> None:
        self.settings = first
        self.fleet = fleet
        self.log = log
        self.failure: BaseException | None = None

    def load(self) -> Settings:
        return self.settings

    def reload(self, settings: Settings) -> None:
        self.settings = settings
        os.kill(os.getpid(), signal.SIGHUP)

    def run(self, steps: Callable[[], None], notifier: Notifier | None = None) -> None:
        def drive() -> None:
            try:
                steps()
            except BaseException as exc:
                self.failure = exc
            finally:
                self.fleet.hold.set()
                os.kill(os.getpid(), signal.SIGTERM)

        thread = threading.Thread(target=drive, name="test-driver", daemon=True)
        thread.start()
        code = daemon_module.run_daemon(
            self.load, galera_kind(), self.log, notifier=notifier or Notifier(None)
        )
        thread.join(DEADLINE_S)
        if self.failure is not None:
            raise self.failure
        assert code == 0


@pytest.fixture
def fleet(monkeypatch: pytest.MonkeyPatch) -> Iterator[Connections]:
    """The daemon's runners on fakes; the signal handlers run_daemon sets, put back after."""
    fleet = Connections()
    monkeypatch.setattr(daemon_module, "Fleet", fleet.fleet)
    handlers = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    try:
        yield fleet
    finally:
        fleet.hold.set()
        for signum, handler in handlers.items():
            signal.signal(signum, handler)


def passes_rise(log: Log, name: str, by: int) -> None:
    start = log.passes(name)
    wait_until(lambda: log.passes(name) >= start + by, DEADLINE_S, f"{by} more passes of {name}")


def test_a_reload_that_changes_b_never_stops_a(tmp_path: Path, fleet: Connections) -> None:
    """B's new settings make its nodes hang in the new loop's warm-up: meanwhile A passes on,
    on the runner, admin connection and prober it had before the reload."""
    log = Log()
    driver = Driver(settings_of(tmp_path, cluster("a"), cluster("b")), fleet, log)

    def steps() -> None:
        passes_rise(log, "a", 2)
        passes_rise(log, "b", 2)
        (admin_a,), (prober_a,) = fleet.admins["a"], fleet.probers["a"]
        (old_b,) = fleet.probers["b"]

        driver.reload(settings_of(tmp_path, cluster("a"), cluster("b", retry_down=HUNG)))
        wait_until(lambda: len(fleet.probers["b"]) == 2, DEADLINE_S, "b's new runner")
        wait_until(lambda: old_b.closed, DEADLINE_S, "b's old loop closed")
        # b's new loop is held in its warm-up: a goes on
        passes_rise(log, "a", 3)
        assert not fleet.hold.is_set()
        b_before = log.passes("b")
        fleet.hold.set()
        wait_until(lambda: log.passes("b") > b_before, DEADLINE_S, "b's first new pass")
        passes_rise(log, "a", 1)

        assert fleet.admins["a"] == [admin_a] and not admin_a.closed
        assert fleet.probers["a"] == [prober_a] and not prober_a.closed
        assert all(a.closed for a in fleet.admins["b"][:-1])
        assert not fleet.probers["b"][-1].closed
        reloads = [f["summary"] for e, f in log.events() if e == "reload"]
        assert len(reloads) == 1 and "unchanged: a" in reloads[0], reloads
        assert "restarted: b" in reloads[0]

    driver.run(steps)
    # the daemon's stop closes every loop's runner
    assert all(p.closed for probers in fleet.probers.values() for p in probers)


class FileChangedWhileStarting(Driver):
    """The command line read `first`; the file said `later` by the time the daemon listened."""

    def __init__(self, first: Settings, later: Settings, fleet: Connections, log: Log) -> None:
        super().__init__(later, fleet, log)
        self.first: list[Settings] = [first]

    def load(self) -> Settings:
        return self.first.pop() if self.first else self.settings


def test_a_sighup_while_the_daemon_starts_is_kept_and_taken_as_a_reload(
    tmp_path: Path, fleet: Connections
) -> None:
    log = Log()
    first = settings_of(tmp_path, cluster("a"))
    later = settings_of(tmp_path, cluster("a"), cluster("b"))
    driver = FileChangedWhileStarting(first, later, fleet, log)
    hangup.hold()  # what the console script does first for `daemon`
    os.kill(os.getpid(), signal.SIGHUP)  # before run_daemon listens: kept, not this process's end

    def steps() -> None:
        passes_rise(log, "b", 1)
        passes_rise(log, "a", 1)

    driver.run(steps)
    said = [f["summary"] for e, f in log.events() if e == "daemon"]
    assert any("SIGHUP came while starting" in line for line in said), said
    assert not hangup.came_early(), "taken once"


def test_hung_warm_up_delays_no_other_clusters_first_pass_at_start(
    tmp_path: Path, fleet: Connections
) -> None:
    log = Log()
    hung, fine = cluster("hung", retry_down=HUNG), cluster("fine")
    driver = Driver(settings_of(tmp_path, hung, fine), fleet, log)

    def steps() -> None:
        passes_rise(log, "fine", 3)
        assert log.passes("hung") == 0 and not fleet.hold.is_set()
        fleet.hold.set()
        passes_rise(log, "hung", 1)

    driver.run(steps)


def test_a_removed_clusters_loop_ends_and_closes_its_connections(
    tmp_path: Path, fleet: Connections
) -> None:
    log = Log()
    driver = Driver(settings_of(tmp_path, cluster("a"), cluster("b")), fleet, log)

    def steps() -> None:
        passes_rise(log, "b", 1)
        passes_rise(log, "a", 1)
        (admin_a,), (admin_b,) = fleet.admins["a"], fleet.admins["b"]
        driver.reload(settings_of(tmp_path, cluster("a")))
        wait_until(lambda: admin_b.closed, DEADLINE_S, "b's admin connection closed")
        assert fleet.probers["b"][0].closed
        after = log.passes("b")
        passes_rise(log, "a", 3)
        assert log.passes("b") == after, "b passed after its loop ended"
        assert fleet.admins["a"] == [admin_a] and not admin_a.closed
        assert len(fleet.admins["b"]) == 1

    driver.run(steps)


def test_a_cluster_added_by_a_reload_warms_up_on_its_own(
    tmp_path: Path, fleet: Connections
) -> None:
    """The lone cluster the daemon started with passes on while the added one's nodes hang."""
    log = Log()
    driver = Driver(settings_of(tmp_path, cluster("a")), fleet, log)

    def steps() -> None:
        passes_rise(log, "a", 2)
        (admin_a,) = fleet.admins["a"]
        driver.reload(settings_of(tmp_path, cluster("a"), cluster("new", retry_down=HUNG)))
        wait_until(lambda: "new" in fleet.probers, DEADLINE_S, "the added cluster's runner")
        passes_rise(log, "a", 3)
        assert log.passes("new") == 0
        fleet.hold.set()
        passes_rise(log, "new", 1)
        assert fleet.admins["a"] == [admin_a] and not admin_a.closed

    driver.run(steps)


def test_a_shared_setting_restarts_every_cluster_at_once(
    tmp_path: Path, fleet: Connections
) -> None:
    """[monitor] changed: both clusters get new runners; the one whose nodes hang holds up
    only its own first pass."""
    log = Log()
    driver = Driver(settings_of(tmp_path, cluster("a"), cluster("b")), fleet, log)

    def steps() -> None:
        passes_rise(log, "a", 1)
        passes_rise(log, "b", 1)
        first = driver.settings
        monitor = replace(first.monitor, read_timeout_ms=first.monitor.read_timeout_ms + 1)
        again = settings_of(tmp_path, cluster("a"), cluster("b", retry_down=HUNG))
        driver.reload(replace(again, monitor=monitor))
        wait_until(lambda: len(fleet.probers["a"]) == 2, DEADLINE_S, "a's new runner")
        passes_rise(log, "a", 2)
        assert fleet.admins["a"][0].closed
        assert len(fleet.admins["a"]) == 2

    driver.run(steps)


def test_systemd_hears_ready_once_the_reload_is_taken(tmp_path: Path, fleet: Connections) -> None:
    """READY follows RELOADING while the changed cluster's nodes still hang; the watchdog
    goes on meanwhile."""
    log = Log()
    driver = Driver(settings_of(tmp_path, cluster("a"), cluster("b")), fleet, log)
    address = str(tmp_path / "notify")
    heard: list[str] = []
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(address)
        sock.settimeout(0.05)

        def listen() -> list[str]:
            try:
                while True:
                    heard.append(sock.recv(4096).decode())
            except TimeoutError:
                return heard

        def steps() -> None:
            wait_until(lambda: any("READY=1" in m for m in listen()), DEADLINE_S, "READY")
            driver.reload(settings_of(tmp_path, cluster("a"), cluster("b", retry_down=HUNG)))
            wait_until(lambda: any("RELOADING=1" in m for m in listen()), DEADLINE_S, "RELOADING")
            at = next(i for i, m in enumerate(heard) if "RELOADING=1" in m)
            wait_until(
                lambda: any("READY=1" in m for m in listen()[at:]), DEADLINE_S, "READY again"
            )
            dogs = sum("WATCHDOG=1" in m for m in heard)
            wait_until(
                lambda: sum("WATCHDOG=1" in m for m in listen()) > dogs + 2,
                DEADLINE_S,
                "watchdog pings during b's warm-up",
            )
            assert not fleet.hold.is_set(), "b's warm-up is still held"

        driver.run(steps, Notifier(address, watchdog_usec=30_000_000))
