"""ProxySQL's rows of a hostgroup set as one packed value, and a one-value answer read as bytes
on the admin connection: the daemon reads the same rows pass after pass, and bytes equal to the
last answer's need neither decoding nor parsing."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from checker_core.core.model import COLUMNS

if TYPE_CHECKING:
    from checker_core.edges import wire

# each column as 'x' and the hex of its text, or 'n' for NULL: no value can hold a separator
_PACKED_COLUMNS = " || '|' || ".join(f"coalesce('x' || hex({name}), 'n')" for name in COLUMNS)


@functools.lru_cache(maxsize=16)
def rows_as_one_value(count: int) -> str:
    """The runtime rows ('r') and the staging rows ('m') of `count` hostgroup parameters, one
    line each, in one value (SQLite's group_concat: ProxySQL's admin and the lab's alike)."""
    marks = ", ".join(["%s"] * count)
    parts = [
        f"SELECT '{tag}|' || {_PACKED_COLUMNS} AS line FROM {table} "  # noqa: S608
        f"WHERE hostgroup_id IN ({marks})"
        for tag, table in (("r", "runtime_mysql_servers"), ("m", "mysql_servers"))
    ]
    return f"SELECT group_concat(line, char(10)) FROM ({' UNION ALL '.join(parts)})"  # noqa: S608


@functools.lru_cache(maxsize=1)
def all_rows_as_one_value() -> str:
    """rows_as_one_value of every hostgroup: the whole of what a LOAD carries."""
    parts = [
        f"SELECT '{tag}|' || {_PACKED_COLUMNS} AS line FROM {table}"  # noqa: S608
        for tag, table in (("r", "runtime_mysql_servers"), ("m", "mysql_servers"))
    ]
    return f"SELECT group_concat(line, char(10)) FROM ({' UNION ALL '.join(parts)})"  # noqa: S608


def unpacked(line: str) -> tuple[str, tuple[str | None, ...]]:
    """One line of rows_as_one_value: its source tag, and its values as the admin's text."""
    source, *packed = line.split("|")
    values = tuple(
        None if value == "n" else bytes.fromhex(value[1:]).decode("utf-8", "replace")
        for value in packed
    )
    return source, values


def answer_bytes(
    sock: Any, packet: bytes, last: bytes | None
) -> tuple[bytes, tuple[wire.RawResult, ...] | None]:
    """Ask on PyMySQL's connection's socket, with its timeout; the answer's bytes and its
    results (None when the bytes are `last`, whole). Raises OSError, wire.ProtocolError, or
    PyMySQL's error for a connection that closed under the question."""
    from checker_core.edges import wire

    sock.sendall(packet)
    return wire.answer_read(sock, last)
