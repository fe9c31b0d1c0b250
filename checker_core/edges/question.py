"""A checker's question to a node, in two halves: the SQL it asks, and how it reads the answer.

Every question is written onto the connection PyMySQL opened and logged in, and its answer read
back from the connection's socket by the wire reader (edges/wire.py): here, on a probe's own
thread, and many nodes at once on one thread in the daemon (edges/exchange.py,
edges/held_ask.py). Either way `read` gets the values PyMySQL would have given, and a server's
error as the exception PyMySQL raises for it. PyMySQL's own cursor asks only for an object that
has no socket: a test's stand-in, or a connection already closed (whose cursor says so).
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from checker_core.edges import driver, wire
from checker_core.edges.wire import Rows

# the rounds one question may take on one connection (a first answer that says "ask there")
MAX_ROUNDS = 3
# client-side error codes (CR_*): the connection failed, no server answered
_CLIENT_ERRORS = range(2000, 3000)
_SERVER_ERRORS_FROM = 1000


class Again:
    """What `read` returns when the answer says to ask once more (what `ask` asks changed)."""


AGAIN = Again()


@dataclass(frozen=True, slots=True)
class Answer:
    """Each statement's rows, in order; a statement the server refused is its error, and no
    result follows it."""

    results: tuple[Rows | Exception, ...]

    def rows(self, index: int) -> Rows:
        """The rows of statement `index`; raises its error, or the error that ended the answer
        before it."""
        if index < len(self.results):
            found = self.results[index]
        elif self.results and isinstance(self.results[-1], Exception):
            found = self.results[-1]
        else:
            raise LookupError(f"the answer has no result {index + 1}")
        if isinstance(found, Exception):
            raise found
        return found

    def error(self, index: int) -> Exception | None:
        """The error of statement `index` (or of one before it), None when it has rows."""
        try:
            self.rows(index)
        except LookupError:
            raise
        except Exception as exc:  # the server's error, as PyMySQL raises it
            return exc
        return None


Facts = TypeVar("Facts")


class Question(abc.ABC, Generic[Facts]):
    """A probe: `ask` names the statement(s) and their parameters, `read` turns the answer into
    the checker's facts (or AGAIN). Calling it asks on this thread, on the connection's socket
    within the connection's own timeouts."""

    @abc.abstractmethod
    def ask(self, conn: Any) -> tuple[str, Sequence[object]]:
        """The SQL (%s marks) and its parameters, for this connection."""

    @abc.abstractmethod
    def read(self, conn: Any, answer: Answer) -> Facts | Again:
        """The facts the answer gives, or AGAIN; raises what the answer's error means."""

    def __call__(self, conn: Any) -> Facts:
        sock = driver.socket_of(conn)
        for asked in range(1, MAX_ROUNDS + 1):
            if sock is None:
                sql, params = self.ask(conn)
                got = self.read(conn, answer_by_cursor(conn, sql, params))
            else:
                got = _answered_on(sock, self, conn, asked)
            if not isinstance(got, Again):
                return got
        raise RuntimeError(f"{type(self).__name__}: no answer after {MAX_ROUNDS} rounds")


# a checker's questions are few and fixed (names, never user values): each one's text, as
# PyMySQL's execute would render it, and its packet are made once, found by the identity of the
# statement and parameters a question gives (its cached objects)
_packets_made: wire.MadeOnce[tuple[str, bytes]] = wire.MadeOnce()


def packet_of(question: Question[object], conn: Any) -> tuple[str, bytes]:
    """What `question` asks on `conn`: the statement with its parameters in it, and the packet
    that carries it."""
    sql, params = question.ask(conn)
    return _packets_made.get(sql, params, conn.encoding, lambda: wire.statement(conn, sql, params))


def facts_of(question: Question[Facts], conn: Any, buf: bytes, asked: int) -> Facts | Again | None:
    """What `question` makes of the answer in `buf`: its facts, AGAIN (ask its next statement),
    or None while the answer is not whole. `asked`: how many of its statements were written
    (after MAX_ROUNDS, AGAIN is an error)."""
    raw = wire.read_answer(buf)
    if raw is None:
        return None
    return _facts_from(question, conn, raw, asked)


def _facts_from(
    question: Question[Facts], conn: Any, raw: tuple[wire.RawResult, ...], asked: int
) -> Facts | Again:
    facts = question.read(conn, Answer(tuple(wire.decoded(conn, r) for r in raw)))
    if facts is AGAIN and asked >= MAX_ROUNDS:
        raise RuntimeError(f"no answer after {MAX_ROUNDS} rounds")
    return facts


def _answered_on(sock: Any, question: Question[Facts], conn: Any, asked: int) -> Facts | Again:
    """Write the question's statement and read its answer, blocking within the socket's timeout
    (PyMySQL's read timeout, which it set at connect). Raises as PyMySQL does: the server gone
    when the statement cannot be written, the connection lost (with the OS error, a timeout's
    included, as its cause) when the answer cannot be read."""
    _, packet = packet_of(question, conn)  # type: ignore[arg-type]
    try:
        sock.sendall(packet)
    except OSError as exc:
        raise wire.server_gone(exc) from exc
    try:
        _, raw = wire.answer_read(sock, None)
    except OSError as exc:
        raise wire.lost_connection(str(exc)) from exc
    assert raw is not None  # no last answer to be equal to
    return _facts_from(question, conn, raw, asked)


def answer_by_cursor(conn: Any, sql: str, params: Sequence[object]) -> Answer:
    """Ask through PyMySQL's cursor; a server's refusal is kept in the answer, a connection
    that failed raises."""
    from pymysql.err import MySQLError

    results: list[Rows | Exception] = []
    with conn.cursor() as cur:
        try:
            cur.execute(sql, tuple(params) if params else None)
            results.append(tuple(cur.fetchall()))
            while cur.nextset():
                results.append(tuple(cur.fetchall()))
        except MySQLError as exc:
            code = exc.args[0] if exc.args and isinstance(exc.args[0], int) else None
            if code is None or code < _SERVER_ERRORS_FROM or code in _CLIENT_ERRORS:
                raise
            results.append(exc)
    return Answer(tuple(results))
