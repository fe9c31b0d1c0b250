"""Probing many backends in parallel under one deadline. A failed or late probe is a value.

Each node is probed on its own daemon thread, so a node that hangs (SIGSTOP, a dead network)
costs the pass nothing beyond the deadline: the thread is abandoned, its connection dropped.
The daemon keeps one connection per node between passes.
"""

from __future__ import annotations

import contextlib
import queue
import select
import threading
import time
from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING, Any

from checker_core.core.model import NodeAddress
from checker_core.core.probes import ProbeFailure, ProbeResult
from checker_core.edges import driver, tls

if TYPE_CHECKING:
    from concurrent.futures import ThreadPoolExecutor

    import pymysql

    from checker_core.core.settings import Endpoint

ProbeFn = Callable[["pymysql.connections.Connection[Any]"], object]


def failure_of(exc: BaseException) -> ProbeFailure:
    """How a probe failed, from PyMySQL's exception and the OS error beneath it (PyMySQL wraps
    socket errors in OperationalError and keeps the original as its context)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, TimeoutError):
            return ProbeFailure.SILENT
        if isinstance(current, ConnectionRefusedError):
            return ProbeFailure.REFUSED
        original = getattr(current, "original_exception", None)
        current = (
            original
            if isinstance(original, BaseException)
            else current.__cause__ or current.__context__
        )
    text = str(exc)
    if "timed out" in text:
        return ProbeFailure.SILENT
    if "Connection refused" in text:
        return ProbeFailure.REFUSED
    return ProbeFailure.ERROR


def describe_error(exc: BaseException) -> str:
    """PyMySQL errors carry (code, message); keep both, drop the noise."""
    if isinstance(exc, tls.TlsError):
        return str(exc)
    args: tuple[object, ...] = exc.args
    if len(args) >= 2 and isinstance(args[0], int):
        return f"{args[1]} (error {args[0]})"
    return f"{type(exc).__name__}: {exc}"


class Prober:
    """Runs a checker's probe function against nodes with the monitor account."""

    def __init__(self, monitor: Endpoint, probe: ProbeFn, persistent: bool) -> None:
        self._monitor = monitor
        self._probe = probe
        self._persistent = persistent
        self._conns: dict[NodeAddress, pymysql.connections.Connection[Any]] = {}
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None

    def _connect(
        self, node: NodeAddress, connect_timeout: float
    ) -> pymysql.connections.Connection[Any]:
        driver.load()
        from pymysql.constants import CLIENT

        monitor = self._monitor
        return tls.connect_node(
            monitor,
            f"node {node}",
            node,
            connect_timeout,
            monitor.read_timeout_ms / 1000,
            client_flag=CLIENT.MULTI_STATEMENTS,
        )

    def _take(self, node: NodeAddress) -> pymysql.connections.Connection[Any] | None:
        with self._lock:
            return self._conns.pop(node, None)

    def _give_back(self, node: NodeAddress, conn: pymysql.connections.Connection[Any]) -> None:
        if not self._persistent:
            _close(conn)
            return
        with self._lock:
            old = self._conns.pop(node, None)
            self._conns[node] = conn
        if old is not None:
            _close(old)

    def probe_one(
        self,
        node: NodeAddress,
        deadline: float,
        probe: ProbeFn | None = None,
        flight: Flight | None = None,
    ) -> ProbeResult:
        """`probe`: another question than the checker's probe (the daemon's watch); `flight`:
        where the probe says how far it got, for a collector whose deadline came first."""
        started = time.monotonic()
        if flight is not None:
            flight.begun = started
        conn = self._take(node)
        try:
            if conn is None:
                remaining = max(0.05, deadline - started)
                conn = self._connect(node, min(self._monitor.connect_timeout_ms / 1000, remaining))
            if flight is not None:
                flight.conn = conn
            facts = (probe or self._probe)(conn)
        except Exception as exc:  # every failure of a probe is data about the node
            if conn is not None:
                _close(conn)
            elapsed = (time.monotonic() - started) * 1000
            return ProbeResult(node, None, describe_error(exc), elapsed, failure_of(exc))
        self._give_back(node, conn)
        return ProbeResult(node, facts, None, (time.monotonic() - started) * 1000)

    def _spawn(
        self,
        node: NodeAddress,
        deadline: float,
        results: queue.Queue[ProbeResult],
        probe: ProbeFn | None = None,
        flight: Flight | None = None,
    ) -> None:
        """Run one probe off this thread: on the daemon's reused workers, or a throwaway thread
        that can never hold the process open (a one-shot pass exits even if a node hangs)."""

        def run() -> None:
            results.put(self.probe_one(node, deadline, probe, flight))

        if self._persistent:
            if self._pool is None:
                # the daemon's only: a one-shot pass need not import concurrent.futures
                from concurrent.futures import ThreadPoolExecutor

                self._pool = ThreadPoolExecutor(max_workers=16, thread_name_prefix="probe")
            self._pool.submit(run)
            return
        threading.Thread(target=run, name=f"probe-{node}", daemon=True).start()

    def start(
        self, nodes: Sequence[NodeAddress], deadline: float, probe: ProbeFn | None = None
    ) -> PendingProbes:
        """Probes of `nodes` under way; their results are gathered by PendingProbes.collect."""
        pending = PendingProbes(tuple(nodes), time.monotonic())
        for node in pending.nodes:
            self._spawn(node, deadline, pending.results, probe, pending.flights[node])
        return pending

    def probe_all(
        self, nodes: Sequence[NodeAddress], deadline: float, probe: ProbeFn | None = None
    ) -> dict[NodeAddress, ProbeResult]:
        """Every node's result by the deadline (monotonic seconds); late ones say so."""
        return self.start(nodes, deadline, probe).collect(deadline)

    def idle(self) -> dict[int, tuple[NodeAddress, object]]:
        """The open connections no probe is using, by socket file descriptor, with the
        connection itself: the daemon watches them between passes (an idle probe connection
        has nothing to read unless its server closed it, reset it or said goodbye)."""
        with self._lock:
            conns = list(self._conns.items())
        found: dict[int, tuple[NodeAddress, object]] = {}
        for node, conn in conns:
            sock = getattr(conn, "_sock", None)
            with contextlib.suppress(OSError, ValueError, AttributeError):
                if sock is not None and sock.fileno() >= 0:
                    found[sock.fileno()] = (node, conn)
        return found

    def still_idle(self, node: NodeAddress, conn: object) -> bool:
        """Whether `conn` is still the node's idle connection: since idle() was asked, a probe
        may have taken it, or a late probe handed back another and closed this one."""
        with self._lock:
            return self._conns.get(node) is conn

    def discard(self, node: NodeAddress) -> None:
        """Drop the node's idle connection: the next probe connects afresh (and a server
        that is gone refuses at once)."""
        conn = self._take(node)
        if conn is not None:
            _close(conn)

    def close(self) -> None:
        if self._pool is not None:
            # a probe still stuck on a hung node ends by its read timeout; do not wait for it
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
        with self._lock:
            conns, self._conns = list(self._conns.values()), {}
        for conn in conns:
            _close(conn)


class Flight:
    """How far one probe got: when its thread began, and its connection once it had one. The
    probe's thread writes it; a collector whose deadline came first reads it."""

    __slots__ = ("begun", "conn")

    def __init__(self) -> None:
        self.begun: float | None = None
        self.conn: pymysql.connections.Connection[Any] | None = None


# a collector that woke this much after its deadline (at least) was itself short of CPU
LATE_WAKE_MIN_S = 0.02
LATE_WAKE_SHARE = 0.1


class PendingProbes:
    """Probes started together; collect() waits for them up to the deadline."""

    def __init__(self, nodes: tuple[NodeAddress, ...], started: float) -> None:
        self.nodes = nodes
        self.started = started
        self.results: queue.Queue[ProbeResult] = queue.Queue()
        self.flights = {node: Flight() for node in nodes}

    def collect(
        self, deadline: float, only: Collection[NodeAddress] | None = None
    ) -> dict[NodeAddress, ProbeResult]:
        """Every node's result by the deadline (monotonic seconds); late ones say so. `only`:
        the nodes still wanted; the others' results are taken if they came, never waited for."""
        wanted = [n for n in self.nodes if only is None or n in only]
        done: dict[NodeAddress, ProbeResult] = {}
        while not all(n in done for n in wanted):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            try:
                result = self.results.get(timeout=remaining)
            except queue.Empty:
                break
            done[result.node] = result
        woke = time.monotonic()
        # what came in while this thread waited for the CPU came in time
        with contextlib.suppress(queue.Empty):
            while not all(n in done for n in wanted):
                result = self.results.get_nowait()
                done[result.node] = result
        waited = (woke - self.started) * 1000
        for node in wanted:
            if node not in done:
                own = self.own_lateness(node, deadline, woke)
                done[node] = ProbeResult(
                    node,
                    None,
                    own or f"no answer within the pass deadline ({waited:.0f} ms)",
                    waited,
                    ProbeFailure.UNHEARD if own else ProbeFailure.SILENT,
                )
        return done

    def own_lateness(self, node: NodeAddress, deadline: float, woke: float) -> str | None:
        """Why a probe still out at the deadline says nothing of its node: the checker itself
        lacked CPU. None when the node had its chance and stayed silent."""
        window = max(0.0, deadline - self.started)
        late = woke - deadline
        if late > max(LATE_WAKE_MIN_S, window * LATE_WAKE_SHARE):
            return (
                f"not heard: the checker woke {late * 1000:.0f} ms after its deadline "
                "(short of CPU)"
            )
        flight = self.flights.get(node)
        if flight is None:
            return None
        if flight.begun is None:
            return "not heard: the checker had not started its probe by the deadline (short of CPU)"
        if flight.begun - self.started > window / 2:
            left = (deadline - flight.begun) * 1000
            return (
                f"not heard: the checker started its probe only {max(0.0, left):.0f} ms before "
                "the deadline (short of CPU)"
            )
        if _answer_waiting(flight.conn):
            return "not heard: its answer was waiting unread at the deadline (short of CPU)"
        return None


def _answer_waiting(conn: pymysql.connections.Connection[Any] | None) -> bool:
    """Whether the node's bytes sit in the socket, unread by a probe thread that had no CPU."""
    sock = getattr(conn, "_sock", None)
    if sock is None:
        return False
    try:
        poller = select.poll()
        poller.register(sock.fileno(), select.POLLIN)
        return bool(poller.poll(0))
    except (OSError, ValueError):
        return False


def _close(conn: pymysql.connections.Connection[Any]) -> None:
    # a broken connection is being discarded anyway
    with contextlib.suppress(Exception):
        conn.close()
