"""Probing many backends in parallel under one deadline. A failed or late probe is a value.

A node without an open connection is probed on its own daemon thread (connect, log in, ask),
so a node that hangs (SIGSTOP, a dead network) costs the pass nothing beyond the deadline: the
thread is abandoned, its connection dropped. The daemon keeps one connection per node between
passes; a node with one is asked on it by the exchange (edges/exchange.py), every such node at
once on the collecting thread, no thread of its own.
"""

from __future__ import annotations

import contextlib
import functools
import queue
import socket
import threading
import time
from collections.abc import Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any

from checker_core.core.model import NodeAddress
from checker_core.core.probes import (
    ProbeFailure,
    ProbeFn,
    ProbeResult,
    ProbeTimeouts,
    whole_timeout,
)
from checker_core.edges import driver, tls
from checker_core.edges.failures import describe_error, failure_of
from checker_core.edges.pending import Flight, PendingProbes

if TYPE_CHECKING:
    from concurrent.futures import ThreadPoolExecutor

    import pymysql

    from checker_core.core.settings import Endpoint
    from checker_core.edges.exchange import Exchange, Remembered
    from checker_core.edges.held_ask import HeldAsk


@functools.cache
def _exchange_module() -> ModuleType:
    """edges/exchange.py, loaded on the daemon's first use: a one-shot pass never needs it, and
    the daemon asks for it on every question (an import statement each time costs more)."""
    from checker_core.edges import exchange

    return exchange


class Prober:
    """Runs a checker's probe function against nodes with the monitor account."""

    def __init__(self, monitor: Endpoint, probe: ProbeFn, persistent: bool) -> None:
        self._monitor = monitor
        self._probe = probe
        self._persistent = persistent
        self._conns: dict[NodeAddress, pymysql.connections.Connection[Any]] = {}
        self._lock = threading.Lock()
        # bumped whenever the open connections change: one is taken, dropped, or handed back in
        # another's place. What idle() said still holds while it is unchanged, but for the
        # connections lent to an exchange (their question's answer is read by whoever polls
        # them), which come back as they were without a bump.
        self.changes = 0
        self._lent: dict[NodeAddress, pymysql.connections.Connection[Any]] = {}
        self._pool: ThreadPoolExecutor | None = None
        # each node's last answer on its open connection: the same bytes are not read again
        self._memo: dict[tuple[NodeAddress, str], Remembered] = {}
        self._memo_lock = threading.Lock()
        self.timeouts = ProbeTimeouts(
            monitor.connect_timeout_ms / 1000, monitor.read_timeout_ms / 1000
        )

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
            self.changes += 1
            return self._conns.pop(node, None)

    def _give_back(self, node: NodeAddress, conn: pymysql.connections.Connection[Any]) -> None:
        if not self._persistent:
            _close(conn)
            return
        with self._lock:
            old = self._conns.pop(node, None)
            self._conns[node] = conn
            if self._lent.pop(node, None) is not conn or old is not None:
                self.changes += 1
        if old is not None:
            _close(old)

    def _lost(self, conn: pymysql.connections.Connection[Any]) -> None:
        """A lent connection that failed under its question: closed, never handed back."""
        with self._lock:
            for node in [n for n, lent in self._lent.items() if lent is conn]:
                del self._lent[node]
            self.changes += 1
        _close(conn)

    def probe_one(
        self, node: NodeAddress, deadline: float, probe: ProbeFn | None = None
    ) -> ProbeResult:
        """One node's probe on this thread (the exchange's when it has an open connection);
        `probe`: another question than the checker's probe (the daemon's watch)."""
        if self._persistent:
            return self.start([node], deadline, probe).collect(deadline)[node]
        return self._probe_here(node, deadline, probe)

    def _probe_here(
        self,
        node: NodeAddress,
        deadline: float,
        probe: ProbeFn | None = None,
        flight: Flight | None = None,
    ) -> ProbeResult:
        """Connect when no connection is open, then ask through PyMySQL, on this thread.
        `flight`: where the probe says how far it got, for a collector whose deadline came
        first."""
        started = time.monotonic()
        if flight is not None:
            flight.begun = started
        conn = self._take(node)
        connect_s, shortened = self.timeouts.connect_s, False
        try:
            if conn is None:
                remaining = max(0.05, deadline - started)
                shortened = remaining < connect_s
                conn = self._connect(node, min(connect_s, remaining))
            if flight is not None:
                flight.conn = conn
                flight.asked = time.monotonic()
            facts = (probe or self._probe)(conn)
        except Exception as exc:  # every failure of a probe is data about the node
            if conn is not None:
                _close(conn)
            ended = time.monotonic()
            elapsed = (ended - started) * 1000
            failure = failure_of(exc)
            cut = (
                whole_timeout(self.timeouts, ended, connecting_since=started)
                if shortened and conn is None and failure is ProbeFailure.SILENT
                else None
            )
            if cut is not None:
                # a connect timeout the deadline shortened: the node never had its own
                return ProbeResult(node, None, cut, elapsed, ProbeFailure.UNHEARD)
            return ProbeResult(node, None, describe_error(exc), elapsed, failure)
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
            results.put(self._probe_here(node, deadline, probe, flight))

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
        """Probes of `nodes` under way; their results are gathered by PendingProbes.collect.
        A node with an open connection is asked on it at once; the others get a thread."""
        question = probe or self._probe
        pending = PendingProbes(tuple(nodes), time.monotonic(), self.timeouts)
        open_conns = self._take_for_exchange(pending.nodes, question)
        for node in pending.nodes:
            conn = open_conns.get(node)
            if conn is None:
                self._spawn(node, deadline, pending.results, probe, pending.flights[node])
                continue
            # asked now, on this thread: it began with the pass, never late
            pending.exchanged.add(node)
            failed = pending.exchange_for(self).ask(node, conn, question)  # type: ignore[arg-type]
            if failed is not None:
                pending.results.put(failed)
        return pending

    def _take_for_exchange(
        self, nodes: Sequence[NodeAddress], question: ProbeFn
    ) -> dict[NodeAddress, pymysql.connections.Connection[Any]]:
        """The open connections of `nodes` the exchange can ask `question` on, taken."""
        if not self._persistent or not self._conns:
            return {}
        # the daemon's only: a one-shot pass never loads the exchange
        can_exchange = _exchange_module().can_exchange
        taken = {}
        with self._lock:
            for node in nodes:
                conn = self._conns.get(node)
                if conn is not None and can_exchange(conn, question):
                    taken[node] = self._lent[node] = self._conns.pop(node)
        return taken

    def ask_open(
        self, nodes: Sequence[NodeAddress], deadline: float, question: ProbeFn | None = None
    ) -> OpenAsk:
        """`question` (the probe by default) written onto the open connections of `nodes`, no
        thread and no wait: the caller polls OpenAsk.fds() with whatever else it polls. A node
        without an open connection is not asked (its result says so)."""
        asked = question or self._probe
        ask = OpenAsk(tuple(nodes), deadline)
        open_conns = self._take_for_exchange(ask.nodes, asked)
        for node in ask.nodes:
            conn = open_conns.get(node)
            if conn is None:
                ask.results[node] = ProbeResult(
                    node, None, "no open connection to ask on", 0.0, ProbeFailure.UNHEARD
                )
                continue
            if ask.exchange is None:
                ask.exchange = self.exchange()
            failed = ask.exchange.ask(node, conn, asked)  # type: ignore[arg-type]
            if failed is not None:
                ask.results[node] = failed
        return ask

    def hold(self, nodes: Sequence[NodeAddress], question: ProbeFn) -> HeldAsk | None:
        """The open connections of `nodes` held for round after round of `question` until
        HeldAsk.give_back (the daemon's watch, while its loop waits); None, nothing taken, when
        one of them is not a plain non-blocking socket (TLS is asked round by round, by the
        exchange)."""
        import ssl  # the daemon's only, as the exchange

        taken = self._take_for_exchange(nodes, question)
        held: dict[NodeAddress, tuple[Any, socket.socket]] = {}
        for node, conn in taken.items():
            sock = driver.socket_of(conn)
            # PyMySQL sets its socket's timeout, which makes it non-blocking underneath
            if sock is None or isinstance(sock, ssl.SSLSocket) or not sock.gettimeout():
                for back, given in taken.items():
                    self._give_back(back, given)
                return None
            held[node] = (conn, sock)
        from checker_core.edges.held_ask import HeldAsk

        return HeldAsk(
            tuple(nodes),
            held,
            question,  # type: ignore[arg-type]
            memo=self._memo,
            memo_lock=self._memo_lock,
            give_back=self._give_back,
            lost=self._lost,
        )

    def exchange(self) -> Exchange:
        """A new exchange on this prober's connections."""
        made: Exchange = _exchange_module().Exchange(
            self._memo, self._give_back, self._lost, self._memo_lock
        )
        return made

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
            sock = driver.socket_of(conn)
            if sock is None:
                continue
            # asked for every watched cluster on every turn of the watch: a plain try, no
            # context manager per connection
            try:
                fd = sock.fileno()
            except (OSError, ValueError, AttributeError):
                continue
            if fd >= 0:
                found[fd] = (node, conn)
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
        if self._memo:
            from checker_core.edges.exchange import forget

            forget(self._memo, self._memo_lock, node)

    def close(self) -> None:
        if self._pool is not None:
            # a probe still stuck on a hung node ends by its read timeout; do not wait for it
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
        with self._lock:
            conns, self._conns = list(self._conns.values()), {}
            self._lent.clear()
            self.changes += 1
        with self._memo_lock:
            self._memo.clear()
        for conn in conns:
            _close(conn)


class OpenAsk:
    """A question out on some nodes' open connections (Prober.ask_open), read by whoever polls
    its connections: each answer as it comes, the rest given up at the deadline."""

    def __init__(self, nodes: tuple[NodeAddress, ...], deadline: float) -> None:
        self.nodes = nodes
        self.deadline = deadline
        self.started = time.monotonic()
        self.exchange: Exchange | None = None
        self.results: dict[NodeAddress, ProbeResult] = {}

    def fds(self) -> tuple[int, ...]:
        return self.exchange.fds() if self.exchange is not None else ()

    def on_event(self, fd: int) -> None:
        if self.exchange is not None:
            result = self.exchange.on_event(fd)
            if result is not None:
                self.results[result.node] = result

    @property
    def done(self) -> bool:
        return self.exchange is None or not self.exchange.busy

    @property
    def closed_by_server(self) -> frozenset[NodeAddress]:
        """The nodes whose server closed or reset its connection under the question."""
        return frozenset(self.exchange.closed_by_server) if self.exchange else frozenset()

    def finish(self) -> dict[NodeAddress, ProbeResult]:
        """Every node's result: the answers in, the rest silent (their connections dropped)."""
        if self.exchange is not None:
            for result in self.exchange.step(0):
                self.results[result.node] = result
            self.exchange.abandon()
        waited = (time.monotonic() - self.started) * 1000
        for node in self.nodes:
            if node not in self.results:
                self.results[node] = ProbeResult(
                    node, None, f"no answer in {waited:.0f} ms", waited, ProbeFailure.SILENT
                )
        return self.results


def _close(conn: pymysql.connections.Connection[Any]) -> None:
    # a broken connection is being discarded anyway
    with contextlib.suppress(Exception):
        conn.close()
