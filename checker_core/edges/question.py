"""A checker's question to a node, in two halves: the SQL it asks, and how it reads the answer.

Split so that the same question can be asked two ways: through PyMySQL's cursor on a probe
thread (a new connection, the scheduler's pass), or written straight onto an open connection
and read back with the answers of every other node on one thread (the daemon: edges/exchange).
Either way `read` gets the same values, decoded as PyMySQL decodes them, and a server's error
as the exception PyMySQL raises for it.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

Rows = tuple[tuple[Any, ...], ...]
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
    the checker's facts (or AGAIN). Calling it asks through PyMySQL on this thread."""

    @abc.abstractmethod
    def ask(self, conn: Any) -> tuple[str, Sequence[object]]:
        """The SQL (%s marks) and its parameters, for this connection."""

    @abc.abstractmethod
    def read(self, conn: Any, answer: Answer) -> Facts | Again:
        """The facts the answer gives, or AGAIN; raises what the answer's error means."""

    def __call__(self, conn: Any) -> Facts:
        for _ in range(MAX_ROUNDS):
            sql, params = self.ask(conn)
            got = self.read(conn, answer_by_cursor(conn, sql, params))
            if not isinstance(got, Again):
                return got
        raise RuntimeError(f"{type(self).__name__}: no answer after {MAX_ROUNDS} rounds")


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
