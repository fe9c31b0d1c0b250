"""The watch's question asked round after round on connections held for a whole wait.

A round of the watch used to take each writer's connection from its prober, make an exchange,
write the question, read the answer and hand the connection back. At 50 clusters asked every
40 ms that bookkeeping was most of the watch's cost (about 50 µs a question, against 15 µs
for writing a packet, reading the answer and comparing it with the last one). A loop's
connections are not used by its pass while it waits (the pass runs after the loop took them
back), so the hub holds its writers' connections from the first round to the release: each
round writes a packet made once and compares the answer byte for byte with the last one.

While held, a connection is the hold's to follow between rounds too: anything its server says
unasked (a goodbye before it closes, the close itself) is the server closing it.

Plain sockets only (`Prober.hold` says None for a TLS connection, and the watch asks round by
round through the exchange, which reads TLS).
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from checker_core.core.model import NodeAddress
from checker_core.core.probes import ProbeFailure, ProbeResult
from checker_core.edges import wire
from checker_core.edges.exchange import Remembered, forget
from checker_core.edges.failures import describe_error, failure_of
from checker_core.edges.question import AGAIN, Question, facts_of, packet_of


class _Line:
    """One held connection: the packet it is asked, and its last answer and facts."""

    __slots__ = ("buf", "conn", "facts", "fd", "node", "out", "packet", "raw", "sock", "text")

    def __init__(
        self, node: NodeAddress, conn: Any, sock: socket.socket, packet: tuple[str, bytes]
    ) -> None:
        self.node = node
        self.conn = conn
        self.sock = sock
        self.fd = sock.fileno()
        self.text, self.packet = packet
        self.raw = b""  # the last answer to the round's first statement, and its facts
        self.facts: object = None
        self.buf = b""
        self.out = 0  # how many statements this round's question has written (0: none out)


class HeldAsk:
    """A question asked every round on the held connections of some nodes; a node without an
    open connection is not asked (its result says so)."""

    def __init__(
        self,
        nodes: tuple[NodeAddress, ...],
        held: dict[NodeAddress, tuple[Any, socket.socket]],
        question: Question[object],
        *,
        memo: dict[tuple[NodeAddress, str], Remembered],
        memo_lock: threading.Lock,
        give_back: Callable[[NodeAddress, Any], None],
        lost: Callable[[Any], None],
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._question = question
        self._memo = memo
        self._memo_lock = memo_lock
        self._give_back = give_back
        self._lost = lost
        self._monotonic = monotonic
        self._lines: dict[int, _Line] = {}
        for node, (conn, sock) in held.items():
            line = _Line(node, conn, sock, packet_of(question, conn))
            with memo_lock:
                last = memo.get((node, line.text))
            if last is not None and last.conn is conn:
                line.raw, line.facts = last.raw, last.facts
            self._lines[line.fd] = line
        self._nodes = nodes
        self.deadline = 0.0
        self.started = 0.0
        self._results: dict[NodeAddress, ProbeResult] = {}
        self._waiting = 0
        # the nodes whose server closed or reset the connection, asked or not
        self.closed_by_server: set[NodeAddress] = set()
        # the descriptors of connections dropped since the caller last took them: their numbers
        # may be another connection's from now on
        self.dropped: list[int] = []

    def fds(self) -> tuple[int, ...]:
        """Every held connection, followed for the whole hold (not only while asked)."""
        return tuple(self._lines)

    def ask(self, deadline: float) -> HeldAsk:
        """A round: the question written on every held connection."""
        now = self._monotonic()
        self.deadline, self.started = deadline, now
        lines = list(self._lines.values())
        self._results = {}
        if len(lines) < len(self._nodes):
            # never held, or dropped in an earlier round: not asked, as Prober.ask_open says
            have = {line.node for line in lines}
            self._results = {
                n: ProbeResult(n, None, "no open connection to ask on", 0.0, ProbeFailure.UNHEARD)
                for n in self._nodes
                if n not in have
            }
        for line in lines:
            if not line.out:
                self._waiting += 1
            line.out = 0
            self._send(line)
        return self

    @property
    def done(self) -> bool:
        return not self._waiting

    def on_event(self, fd: int) -> NodeAddress | None:
        """`fd` is readable or hung up; its node when its server spoke unasked (it is closing
        the connection, which is dropped)."""
        line = self._lines.get(fd)
        if line is None:
            return None
        if not line.out:
            self.closed_by_server.add(line.node)
            self._drop(line)
            return line.node
        try:
            chunk = os.read(fd, wire.READ_CHUNK)
        except BlockingIOError:
            return None
        except OSError as exc:
            chunk, detail = b"", str(exc)
        else:
            detail = ""
        if not chunk:
            self.closed_by_server.add(line.node)
            self._failed(line, wire.lost_connection(detail))
            return None
        line.buf += chunk
        try:
            self._answered(line)
        except Exception as exc:  # a broken answer, or one its server refused: data, as a probe's
            self._failed(line, exc)
        return None

    def finish(self) -> dict[NodeAddress, ProbeResult]:
        """This round's result of every node; a node still owing its answer is silent, and its
        connection dropped (a late answer cannot be told from the next round's). What came in
        while the hub was late to poll is read first: the hub's lateness is not a silence."""
        for line in [line for line in self._lines.values() if line.out]:
            self.on_event(line.fd)
        waited = (self._monotonic() - self.started) * 1000
        for line in [line for line in self._lines.values() if line.out]:
            self._results[line.node] = ProbeResult(
                line.node, None, f"no answer in {waited:.0f} ms", waited, ProbeFailure.SILENT
            )
            self._drop(line)
        return self._results

    def give_back(self) -> None:
        """The connections back to their prober, with what each last answered; one still owing
        an answer is dropped."""
        for line in list(self._lines.values()):
            if line.out:
                self._drop(line)
                continue
            if line.facts is not None:
                with self._memo_lock:
                    self._memo[(line.node, line.text)] = Remembered(line.conn, line.raw, line.facts)
            del self._lines[line.fd]
            self._give_back(line.node, line.conn)

    def drop(self) -> None:
        """Close every held connection (the hub failed under them)."""
        for line in list(self._lines.values()):
            self._drop(line)

    # ---------------------------------------------------------------- one connection

    def _send(self, line: _Line) -> None:
        """The question's next statement written (its first, or the next after an AGAIN)."""
        line.buf = b""
        line.out += 1
        try:
            sent = os.write(line.fd, line.packet)
        except BlockingIOError:
            sent = 0
        except OSError as exc:
            self.closed_by_server.add(line.node)
            self._failed(line, wire.lost_connection(str(exc)))
            return
        if sent < len(line.packet):
            # a send buffer with a question's room taken: the rest the blocking way, within
            # the connection's own timeout
            try:
                line.sock.sendall(line.packet[sent:])
            except OSError as exc:
                self._failed(line, wire.lost_connection(str(exc)))

    def _answered(self, line: _Line) -> None:
        buf = line.buf
        if line.out == 1 and line.facts is not None and buf == line.raw:
            self._land(line, line.facts)  # the very answer of last time: the same facts
            return
        conn = line.conn
        facts = facts_of(self._question, conn, buf, line.out)
        if facts is None:
            return  # not whole yet
        if facts is AGAIN:
            # asked elsewhere from now on: the question's text changed, and what it answered
            line.text, line.packet = packet_of(self._question, conn)
            line.raw, line.facts = b"", None
            self._send(line)
            return
        if line.out == 1:
            line.raw, line.facts = buf, facts
        self._land(line, facts)

    def _land(self, line: _Line, facts: object) -> None:
        line.out = 0
        self._waiting -= 1
        elapsed = (self._monotonic() - self.started) * 1000
        self._results[line.node] = ProbeResult(line.node, facts, None, elapsed)

    def _failed(self, line: _Line, exc: BaseException) -> None:
        elapsed = (self._monotonic() - self.started) * 1000
        self._results[line.node] = ProbeResult(
            line.node, None, describe_error(exc), elapsed, failure_of(exc)
        )
        self._drop(line)

    def _drop(self, line: _Line) -> None:
        if line.out:
            self._waiting -= 1
            line.out = 0
        self._lines.pop(line.fd, None)
        self.dropped.append(line.fd)
        forget(self._memo, self._memo_lock, line.node)
        self._lost(line.conn)
