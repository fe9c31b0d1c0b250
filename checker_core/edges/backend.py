"""Probing many backends in parallel under one deadline. A failed or late probe is a value.

Each node is probed on its own daemon thread, so a node that hangs (SIGSTOP, a dead network)
costs the pass nothing beyond the deadline: the thread is abandoned, its connection dropped.
The daemon keeps one connection per node between passes.
"""

from __future__ import annotations

import contextlib
import queue
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

    from checker_core.settings.config import Endpoint

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
        self, node: NodeAddress, deadline: float, probe: ProbeFn | None = None
    ) -> ProbeResult:
        """`probe`: another question than the checker's probe (the daemon's watch)."""
        started = time.monotonic()
        conn = self._take(node)
        try:
            if conn is None:
                remaining = max(0.05, deadline - started)
                conn = self._connect(node, min(self._monitor.connect_timeout_ms / 1000, remaining))
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
    ) -> None:
        """Run one probe off this thread: on the daemon's reused workers, or a throwaway thread
        that can never hold the process open (a one-shot pass exits even if a node hangs)."""
        if self._persistent:
            if self._pool is None:
                # the daemon's only: a one-shot pass need not import concurrent.futures
                from concurrent.futures import ThreadPoolExecutor

                self._pool = ThreadPoolExecutor(max_workers=16, thread_name_prefix="probe")
            self._pool.submit(lambda: results.put(self.probe_one(node, deadline, probe)))
            return
        thread = threading.Thread(
            target=lambda: results.put(self.probe_one(node, deadline, probe)),
            name=f"probe-{node}",
            daemon=True,
        )
        thread.start()

    def start(
        self, nodes: Sequence[NodeAddress], deadline: float, probe: ProbeFn | None = None
    ) -> PendingProbes:
        """Probes of `nodes` under way; their results are gathered by PendingProbes.collect."""
        pending = PendingProbes(tuple(nodes), time.monotonic())
        for node in pending.nodes:
            self._spawn(node, deadline, pending.results, probe)
        return pending

    def probe_all(
        self, nodes: Sequence[NodeAddress], deadline: float, probe: ProbeFn | None = None
    ) -> dict[NodeAddress, ProbeResult]:
        """Every node's result by the deadline (monotonic seconds); late ones say so."""
        return self.start(nodes, deadline, probe).collect(deadline)

    def idle(self) -> dict[int, NodeAddress]:
        """The open connections no probe is using, by socket file descriptor: the daemon
        watches them between passes (an idle probe connection has nothing to read unless its
        server closed it, reset it or said goodbye)."""
        with self._lock:
            conns = list(self._conns.items())
        found: dict[int, NodeAddress] = {}
        for node, conn in conns:
            sock = getattr(conn, "_sock", None)
            with contextlib.suppress(OSError, ValueError, AttributeError):
                if sock is not None and sock.fileno() >= 0:
                    found[sock.fileno()] = node
        return found

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


class PendingProbes:
    """Probes started together; collect() waits for them up to the deadline."""

    def __init__(self, nodes: tuple[NodeAddress, ...], started: float) -> None:
        self.nodes = nodes
        self.started = started
        self.results: queue.Queue[ProbeResult] = queue.Queue()

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
        waited = (time.monotonic() - self.started) * 1000
        for node in wanted:
            if node not in done:
                done[node] = ProbeResult(
                    node,
                    None,
                    f"no answer within the pass deadline ({waited:.0f} ms)",
                    waited,
                    ProbeFailure.SILENT,
                )
        return done


def _close(conn: pymysql.connections.Connection[Any]) -> None:
    # a broken connection is being discarded anyway
    with contextlib.suppress(Exception):
        conn.close()
