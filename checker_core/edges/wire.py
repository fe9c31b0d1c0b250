"""The MySQL client protocol's answer to one COM_QUERY, read from bytes.

Every question a checker asks a node is written and read this way, on the connection PyMySQL
opened and logged in: on a probe's own thread (edges/question.py), or many nodes at once on one
thread as their answers come (edges/exchange.py, edges/held_ask.py). This module frames those
bytes into packets, says when an answer is whole, and turns it into
the values PyMySQL would have given for it: the same types, decoded the same way, and a
server's error as the exception PyMySQL would have raised.

The bytes are read here only when a caller waits for one answer on a blocking socket
(answer_read); a reader of many sockets at once reads them itself and hands them over.

Only what a text-protocol query answers is understood: OK, ERR, result sets (with EOF packets:
PyMySQL never asks for CLIENT_DEPRECATE_EOF) and several of them after a multi-statement.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

V = TypeVar("V")
# a statement's rows, each a tuple of values as PyMySQL gives them
Rows = tuple[tuple[Any, ...], ...]

# how much of an answer one read of a socket takes at most
READ_CHUNK = 65536
MAX_PAYLOAD = 0xFFFFFF
COM_QUERY = 0x03
SERVER_MORE_RESULTS_EXISTS = 0x0008
BINARY_CHARSET = 63
_OK, _ERR, _EOF, _LOCAL_INFILE, _NULL = 0x00, 0xFF, 0xFE, 0xFB, 0xFB


class ProtocolError(Exception):
    """Bytes that are not an answer this module reads (a LOCAL INFILE request, garbage)."""


def query_packet(sql: bytes) -> bytes:
    """COM_QUERY as the first packet of a command (sequence 0), split as the protocol asks."""
    body = bytes((COM_QUERY,)) + sql
    out = bytearray()
    seq = 0
    while True:
        chunk, body = body[:MAX_PAYLOAD], body[MAX_PAYLOAD:]
        out += len(chunk).to_bytes(3, "little") + bytes((seq,)) + chunk
        seq = (seq + 1) % 256
        if len(chunk) < MAX_PAYLOAD:
            return bytes(out)


def _packets(buf: bytes) -> tuple[list[bytes], bool]:
    """The whole packets at the start of `buf` (a continued packet joined), and whether bytes
    of an unfinished one follow them."""
    found: list[bytes] = []
    at, size = 0, len(buf)
    joined: bytearray | None = None
    while at + 4 <= size:
        length = int.from_bytes(buf[at : at + 3], "little")
        end = at + 4 + length
        if end > size:
            return found, True
        payload = buf[at + 4 : end]
        at = end
        if length == MAX_PAYLOAD:
            joined = (joined or bytearray()) + payload
            continue
        if joined is not None:
            payload, joined = bytes(joined + payload), None
        found.append(payload)
    return found, at < size or joined is not None


def _lenenc(data: bytes, at: int) -> tuple[int | None, int]:
    """A length-encoded integer at `at` (None for the NULL marker), and where it ends."""
    first = data[at]
    if first < 0xFB:
        return first, at + 1
    if first == _NULL:
        return None, at + 1
    width = {0xFC: 2, 0xFD: 3, 0xFE: 8}.get(first)
    if width is None:
        raise ProtocolError(f"bad length-encoded integer 0x{first:02x}")
    return int.from_bytes(data[at + 1 : at + 1 + width], "little"), at + 1 + width


def _is_eof(payload: bytes) -> bool:
    return len(payload) < 9 and payload[:1] == b"\xfe"


@dataclass(frozen=True, slots=True)
class Column:
    """What decoding a column's values needs: its type and character set."""

    type_code: int
    charset: int

    @classmethod
    def from_definition(cls, payload: bytes) -> Column:
        # a column definition ends with fixed fields: 0x0c, charset (2), length (4), type (1),
        # flags (2), decimals (1), filler (2)
        if len(payload) < 13 or payload[-13] != 0x0C:
            raise ProtocolError("bad column definition")
        return cls(payload[-6], payload[-12] | payload[-11] << 8)


@dataclass(frozen=True, slots=True)
class RawResult:
    """One result of an answer: a result set's columns and rows (each row a tuple of raw values,
    None for NULL), an OK (no columns), or a server error (its ERR payload)."""

    columns: tuple[Column, ...] = ()
    rows: tuple[tuple[bytes | None, ...], ...] = ()
    error: bytes | None = None


def read_answer(buf: bytes) -> tuple[RawResult, ...] | None:
    """The answer in `buf` when it is whole (None while more is to come). Raises ProtocolError
    for bytes that are no answer, or bytes past the end of a whole one."""
    packets, partial = _packets(buf)
    results: list[RawResult] = []
    at, count = 0, len(packets)
    while at < count:
        first = packets[at]
        at += 1
        if not first:
            raise ProtocolError("empty packet")
        if first[0] == _ERR:
            results.append(RawResult(error=first))
            return _whole(results, at, count, partial)
        if first[0] == _OK:
            results.append(RawResult())
            if not _more_after_ok(first):
                return _whole(results, at, count, partial)
            continue
        if first[0] == _LOCAL_INFILE:
            raise ProtocolError("LOCAL INFILE is not asked for")
        read = _result_set(packets, at, first, results)
        if read is None:
            return None
        at, more = read
        if not more:
            return _whole(results, at, count, partial)
    return None


def _result_set(
    packets: list[bytes], at: int, first: bytes, results: list[RawResult]
) -> tuple[int, bool] | None:
    """A result set whose first packet is `first` (its rows from `at` on), added to `results`:
    where the packet after it is and whether more results follow; None while incomplete."""
    count = len(packets)
    width, _ = _lenenc(first, 0)
    if width is None or at + width >= count:
        return None
    columns = _columns(packets[at : at + width])
    at += width
    if not _is_eof(packets[at]):
        raise ProtocolError("no EOF after the column definitions")
    at += 1
    rows: list[tuple[bytes | None, ...]] = []
    while at < count:
        packet = packets[at]
        at += 1
        if packet[:1] == b"\xff":
            # an error part way through the rows ends the answer
            results.append(RawResult(columns, tuple(rows)))
            results.append(RawResult(error=packet))
            return at, False
        if _is_eof(packet):
            results.append(RawResult(columns, tuple(rows)))
            status = int.from_bytes(packet[3:5], "little") if len(packet) >= 5 else 0
            return at, bool(status & SERVER_MORE_RESULTS_EXISTS)
        rows.append(_row(packet, width))
    return None


def answer_read(sock: Any, last: bytes | None) -> tuple[bytes, tuple[RawResult, ...] | None]:
    """The answer to the statement just written on `sock`, read within the socket's own
    timeout: its bytes, and its results (None when the bytes are `last`, whole). Raises
    OSError, ProtocolError, or the lost connection when the server closes it."""
    buf = b""
    while True:
        chunk = sock.recv(READ_CHUNK)
        if not chunk:
            raise lost_connection()
        buf += chunk
        if buf == last:
            return buf, None
        if (answer := read_answer(buf)) is not None:
            return buf, answer


def statement(conn: Any, sql: str, params: Any) -> tuple[str, bytes]:
    """`sql` with `params` in it as PyMySQL's execute renders it on `conn` (no parameters: as
    it is), and the query packet that carries it."""
    text = conn.cursor().mogrify(sql, params) if params else sql
    return text, query_packet(text.encode(conn.encoding))


class MadeOnce(Generic[V]):
    """Values made once and found again (at most `size`, all dropped when full): by a key of
    plain values (`extra`), and by the identity of up to two objects they were made from. Those
    objects stay alive with their entry, so an id is never taken for another object's."""

    def __init__(self, size: int = 256) -> None:
        self._size = size
        self._found: dict[tuple[int, int, Hashable], tuple[object, object, V]] = {}
        self._lock = threading.Lock()

    def get(self, first: object, second: object, extra: Hashable, make: Callable[[], V]) -> V:
        key = (id(first), id(second), extra)
        with self._lock:
            found = self._found.get(key)
        if found is None or found[0] is not first or found[1] is not second:
            found = (first, second, make())
            with self._lock:
                if len(self._found) >= self._size:
                    self._found.clear()
                self._found[key] = found
        return found[2]


# a node answers the same question with the same column definitions every time: they are read
# once, and the same tuple of columns (whose decoders are kept by its identity) given again
_columns_made: MadeOnce[tuple[Column, ...]] = MadeOnce()


def _columns(definitions: list[bytes]) -> tuple[Column, ...]:
    return _columns_made.get(
        None,
        None,
        b"\0".join(definitions),
        lambda: tuple(Column.from_definition(p) for p in definitions),
    )


def _whole(results: list[RawResult], at: int, count: int, partial: bool) -> tuple[RawResult, ...]:
    if at != count or partial:
        raise ProtocolError("bytes after the end of the answer")
    return tuple(results)


def _more_after_ok(payload: bytes) -> bool:
    _, at = _lenenc(payload, 1)  # affected rows
    _, at = _lenenc(payload, at)  # last insert id
    status = int.from_bytes(payload[at : at + 2], "little")
    return bool(status & SERVER_MORE_RESULTS_EXISTS)


def _row(packet: bytes, width: int) -> tuple[bytes | None, ...]:
    values: list[bytes | None] = []
    at = 0
    for _ in range(width):
        length, at = _lenenc(packet, at)
        if length is None:
            values.append(None)
            continue
        values.append(packet[at : at + length])
        at += length
    return tuple(values)


Decoder = tuple[str | None, Callable[[Any], Any] | None]


def decoders(conn: Any, columns: Sequence[Column]) -> tuple[Decoder, ...]:
    """How PyMySQL decodes these columns on `conn`: the text's encoding, then its converter."""
    from pymysql import converters
    from pymysql.connections import TEXT_TYPES
    from pymysql.constants import FIELD_TYPE

    found: list[Decoder] = []
    for column in columns:
        if not conn.use_unicode:
            encoding: str | None = None
        elif column.type_code == FIELD_TYPE.JSON:
            encoding = conn.encoding
        elif column.type_code in TEXT_TYPES:
            encoding = None if column.charset == BINARY_CHARSET else conn.encoding
        else:
            encoding = "ascii"
        converter = conn.decoders.get(column.type_code)
        found.append((encoding, None if converter is converters.through else converter))
    return tuple(found)


def server_error(payload: bytes) -> Exception:
    """The exception PyMySQL raises for this ERR packet."""
    from pymysql import err

    try:
        err.raise_mysql_exception(payload)
    except err.MySQLError as exc:
        return exc
    return err.InternalError(payload)  # raise_mysql_exception always raises


def server_gone(exc: OSError) -> Exception:
    """What PyMySQL raises when a query cannot be written."""
    from pymysql import err
    from pymysql.constants import CR

    return err.OperationalError(CR.CR_SERVER_GONE_ERROR, f"MySQL server has gone away ({exc!r})")


def lost_connection(detail: str = "") -> Exception:
    """What PyMySQL raises when the server closes or resets the connection under a query."""
    from pymysql import err
    from pymysql.constants import CR

    said = f" ({detail})" if detail else ""
    message = f"Lost connection to MySQL server during query{said}"
    return err.OperationalError(CR.CR_SERVER_LOST, message)


# each set of columns' decoders on a connection's settings, by the identity of the columns and
# of the connection's converters
_decoders_made: MadeOnce[tuple[Decoder, ...]] = MadeOnce()


def decoded(conn: Any, raw: RawResult) -> Rows | Exception:
    """A result's rows as PyMySQL gives them on this connection, or its error."""
    if raw.error is not None:
        return server_error(raw.error)
    columns = raw.columns
    found = _decoders_made.get(
        columns,
        conn.decoders,
        (conn.encoding, conn.use_unicode),
        lambda: decoders(conn, columns),
    )
    return tuple(_decoded_row(values, found) for values in raw.rows)


def _decoded_row(values: tuple[bytes | None, ...], found: tuple[Decoder, ...]) -> tuple[Any, ...]:
    out: list[Any] = []
    for value, (encoding, converter) in zip(values, found, strict=False):
        if value is None:
            out.append(None)
            continue
        data: Any = value.decode(encoding) if encoding is not None else value
        out.append(converter(data) if converter is not None else data)
    return tuple(out)
