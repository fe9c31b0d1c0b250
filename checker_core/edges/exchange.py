"""Many nodes asked at once on their open connections, on the calling thread.

The daemon keeps a logged-in connection per node. Handing each probe to a thread, and having
PyMySQL read its answer packet by packet, cost most of a pass's CPU (about 0.2 ms a node).
Here the question is written onto every connection first, then the answers are read as they
come in, one poll for all of them, and an answer that is byte for byte the one the node gave
last time is not read again: its facts are the ones it gave then. A node that does not answer
costs nothing but its place in the poll; it is abandoned at the deadline like a probe thread.

The connections stay PyMySQL's: their sockets are made non-blocking only while a question is
out, and put back as they were before the connection is handed back.
"""

from __future__ import annotations

import contextlib
import os
import select
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from checker_core.core.model import NodeAddress
from checker_core.core.probes import ProbeResult
from checker_core.edges import driver, wire
from checker_core.edges.failures import describe_error, failure_of
from checker_core.edges.question import AGAIN, Question, facts_of, packet_of

_READABLE = select.POLLIN | select.POLLPRI | select.POLLERR | select.POLLHUP


@dataclass(frozen=True, slots=True)
class Remembered:
    """A node's last answer to one question on a connection, and the facts read from it."""

    conn: Any
    raw: bytes
    facts: object


def forget(
    memo: dict[tuple[NodeAddress, str], Remembered], lock: threading.Lock, node: NodeAddress
) -> None:
    """Drop what the node answered: its connection is gone."""
    with lock:
        for key in [k for k in memo if k[0] == node]:
            del memo[key]


class _Flight:
    __slots__ = (
        "asked_at",
        "buf",
        "conn",
        "fd",
        "node",
        "question",
        "rounds",
        "sent_at",
        "sock",
        "text",
        "timeout",
        "tls",
    )

    def __init__(
        self, node: NodeAddress, conn: Any, question: Question[object], now: float
    ) -> None:
        self.node = node
        self.conn = conn
        sock = driver.socket_of(conn)
        assert sock is not None, "can_exchange() said it is open"
        self.sock = sock
        self.fd = self.sock.fileno()
        # a plain socket is read and written by its descriptor, already non-blocking (PyMySQL
        # sets a timeout); TLS goes through its SSL object, made non-blocking while out
        self.tls = isinstance(self.sock, ssl.SSLSocket)
        self.question = question
        self.timeout = self.sock.gettimeout()
        self.text = ""
        self.buf = b""
        self.rounds = 0
        self.sent_at = now
        self.asked_at = now  # when its last question was written


def can_exchange(conn: Any, question: object) -> bool:
    """Whether this connection can be asked this question here (an open PyMySQL connection,
    a question in two halves)."""
    return isinstance(question, Question) and driver.socket_of(conn) is not None


class Exchange:
    """Questions out on open connections, and their answers as they come."""

    def __init__(
        self,
        memo: dict[tuple[NodeAddress, str], Remembered],
        give_back: Callable[[NodeAddress, Any], None],
        discard: Callable[[Any], None],
        memo_lock: threading.Lock,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._memo = memo
        self._memo_lock = memo_lock
        self._give_back = give_back
        self._discard = discard
        self._monotonic = monotonic
        self._flying: dict[int, _Flight] = {}
        self._poller = select.poll()
        # the nodes whose server closed or reset the connection under the question
        self.closed_by_server: set[NodeAddress] = set()

    @property
    def busy(self) -> bool:
        return bool(self._flying)

    def flying(self) -> frozenset[NodeAddress]:
        return frozenset(f.node for f in self._flying.values())

    def ask(self, node: NodeAddress, conn: Any, question: Question[object]) -> ProbeResult | None:
        """Send the question; None while the answer is awaited, a result when it failed here."""
        flight = _Flight(node, conn, question, self._monotonic())
        try:
            if flight.tls or not flight.timeout:
                flight.sock.settimeout(0.0)
            self._send(flight)
        except Exception as exc:  # the connection failed under the question: data, as a probe's
            return self._failed(flight, exc)
        fd = flight.fd
        self._flying[fd] = flight
        self._poller.register(fd, _READABLE)
        return None

    def step(self, timeout_s: float) -> list[ProbeResult]:
        """Wait up to `timeout_s` for answers; the results of those that came in whole."""
        if not self._flying:
            return []
        events = self._poller.poll(max(0, int(timeout_s * 1000 + 0.999)))
        done: list[ProbeResult] = []
        for fd, _ in events:
            result = self.on_event(fd)
            if result is not None:
                done.append(result)
        return done

    def asked_at(self) -> dict[NodeAddress, float]:
        """When the question each node still owes an answer to was written (its last round's)."""
        return {f.node: f.asked_at for f in self._flying.values()}

    def fds(self) -> tuple[int, ...]:
        """The connections awaiting an answer, for a caller that polls them with others."""
        return tuple(self._flying)

    def on_event(self, fd: int) -> ProbeResult | None:
        """`fd` is readable (or hung up): its node's result once its answer is whole."""
        flight = self._flying.get(fd)
        if flight is None:
            return None
        result = self._on_readable(flight)
        if result is not None:
            self._land(fd)
        return result

    def abandon(self) -> tuple[NodeAddress, ...]:
        """Drop every connection still waiting for its answer (a late answer cannot be told from
        the next one's); the nodes they were for."""
        nodes = []
        for fd, flight in list(self._flying.items()):
            self._land(fd)
            self._close(flight)
            nodes.append(flight.node)
        return tuple(nodes)

    # ---------------------------------------------------------------- one connection

    def _send(self, flight: _Flight) -> None:
        flight.text, packet = packet_of(flight.question, flight.conn)
        flight.rounds += 1
        flight.buf = b""
        flight.asked_at = self._monotonic()
        try:
            sent = flight.sock.send(packet) if flight.tls else os.write(flight.fd, packet)
        except (BlockingIOError, ssl.SSLWantWriteError):
            sent = 0
        except OSError as exc:
            self.closed_by_server.add(flight.node)
            raise wire.server_gone(exc) from exc
        if sent < len(packet):
            # a send buffer with a whole question's room taken: finish it the blocking way
            flight.sock.settimeout(flight.timeout)
            try:
                flight.sock.sendall(packet[sent:])
            except OSError as exc:
                raise wire.server_gone(exc) from exc
            if flight.tls or not flight.timeout:
                flight.sock.settimeout(0.0)

    def _on_readable(self, flight: _Flight) -> ProbeResult | None:
        try:
            if not self._receive(flight):
                return None
            return self._answered(flight)
        except Exception as exc:  # a broken connection or answer: data, as a probe's
            return self._failed(flight, exc)

    def _receive(self, flight: _Flight) -> bool:
        """Read what has come; whether the answer may now be whole."""
        sock, got = flight.sock, False
        while True:
            try:
                chunk = (
                    sock.recv(wire.READ_CHUNK)
                    if flight.tls
                    else os.read(flight.fd, wire.READ_CHUNK)
                )
            except (BlockingIOError, ssl.SSLWantReadError):
                return got
            except OSError as exc:
                self.closed_by_server.add(flight.node)
                raise wire.lost_connection(str(exc)) from exc
            if not chunk:
                self.closed_by_server.add(flight.node)
                raise wire.lost_connection()
            flight.buf += chunk
            got = True
            if not isinstance(sock, ssl.SSLSocket) or not sock.pending():
                return True

    def _answered(self, flight: _Flight) -> ProbeResult | None:
        node, conn, buf = flight.node, flight.conn, flight.buf
        key = (node, flight.text)
        with self._memo_lock:
            last = self._memo.get(key)
        if last is not None and flight.rounds == 1 and last.conn is conn and last.raw == buf:
            # the very answer of last time: the same facts, nothing read again
            return self._done(flight, last.facts)
        facts = facts_of(flight.question, conn, buf, flight.rounds)
        if facts is None:
            return None
        if facts is AGAIN:
            self._send(flight)
            return None
        if flight.rounds == 1:
            with self._memo_lock:
                self._memo[key] = Remembered(conn, buf, facts)
        return self._done(flight, facts)

    def _done(self, flight: _Flight, facts: object) -> ProbeResult:
        if flight.tls or not flight.timeout:
            flight.sock.settimeout(flight.timeout)
        self._give_back(flight.node, flight.conn)
        elapsed = (self._monotonic() - flight.sent_at) * 1000
        return ProbeResult(flight.node, facts, None, elapsed)

    def _failed(self, flight: _Flight, exc: BaseException) -> ProbeResult:
        self._close(flight)
        elapsed = (self._monotonic() - flight.sent_at) * 1000
        return ProbeResult(flight.node, None, describe_error(exc), elapsed, failure_of(exc))

    def _close(self, flight: _Flight) -> None:
        with contextlib.suppress(OSError):
            flight.sock.settimeout(flight.timeout)
        forget(self._memo, self._memo_lock, flight.node)
        self._discard(flight.conn)

    def _land(self, fd: int) -> None:
        # registered exactly while in flight (ask): once per answer, no context manager made
        if self._flying.pop(fd, None) is not None:
            self._poller.unregister(fd)
