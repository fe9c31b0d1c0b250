"""Many simulated Galera nodes behind the MySQL protocol, in one process: the lab's fleet for
the benchmarks and for tests that need more clusters than the real lab runs.

One OS process listens on one port per simulated node (all on a 127.0.0.x address) and answers,
over the MySQL client/server text protocol, exactly what galera_checker.probe asks: the
multi-statement `SHOW GLOBAL STATUS ...; SHOW GLOBAL VARIABLES ...`, the later
`SHOW GLOBAL STATUS ...; SELECT @@global.a, ...` and the watch's one-row
`SELECT @@global.x, ..., (SELECT GROUP_CONCAT(...) FROM information_schema.GLOBAL_STATUS ...)`.
It is built on the standard library alone (selectors, non-blocking sockets, one thread) and
caches each encoded answer per node and query text, so an answer costs the server a few tens of
microseconds: the benchmark measures the checker, not the fleet.

Running it
    python -m tests.lab.simnodes --clusters 10 --nodes 3 [--base-port 40000] [--host 127.0.0.1]
                             [--cpu N]

    --base-port 0 (the default) lets the OS pick every port; otherwise node i (0-based, cluster
    after cluster) listens on base-port + 1 + i. --cpu pins the process to one CPU.

Once every port listens, the process writes one JSON line on stdout:

    {"event": "ready", "pid": 123, "clusters": [{"name": "c1", "state_uuid": "...",
     "conf_id": 11, "nodes": ["127.0.0.1:40001", "127.0.0.1:40002", "127.0.0.1:40003"]}, ...]}

Control channel: newline-delimited JSON commands on stdin, one JSON reply line each on stdout
(`{"ok": true, ...}` or `{"ok": false, "error": "..."}`; an "id" field is echoed). A node is
named "host:port" (a [host, port] list works too); "node" may also be a list of them, or
`"cluster": "c1"` names all nodes of a cluster.

    {"cmd": "set", "node": "127.0.0.1:40001", "mode": "hang"}        modes: ok, hang, down
    {"cmd": "set", "node": ..., "status": {"wsrep_local_state": "2",
                                           "wsrep_local_state_comment": "Donor/Desynced"}}
    {"cmd": "set", "node": ..., "variables": {"read_only": "ON", "pxc_maint_mode": null}}
    {"cmd": "changing", "node": ..., "on": true}
    {"cmd": "reset", "node": ...}        defaults back, mode ok, changing off
    {"cmd": "get", "node": ...}          its mode, status, variables and last query text
    {"cmd": "stats"}                     answers served, connections, "cpu_s" (process_time)
    {"cmd": "stats", "per_node": true}   the same plus per node
    {"cmd": "layout"}                    the ready line's clusters again
    {"cmd": "stop"}

Values are kept as SHOW would spell them (ON/OFF); JSON true/false become ON/OFF, numbers their
decimal text, null removes the variable (a MariaDB node has no pxc_maint_mode). A
`SELECT @@global.X` of a boolean variable answers a LONGLONG 1/0 as a real server does; a
variable the node lacks is absent from SHOW answers and NULL in a SELECT. End of stdin (the
parent died) stops the process too.

Modes: `ok` answers; `hang` accepts and reads but answers nothing, not even the greeting of a
new connection (a stopped mysqld: back to `ok`, it greets and answers what it was sent, like
SIGCONT); `down` closes the node's connections and its listening socket, so connects are
refused, and `ok` or `hang` listen again on the same port. `changing` gives
wsrep_local_recv_queue a new value (0..5, cycling) before every answer that reads the status.

What it is not: no TLS (CLIENT_SSL is not offered), no auth check (any user and password get
OK, no auth switch), no prepared statements; autocommit is always reported on. Statements it
does not know get an OK packet; `SELECT 1`-like literals answer one row.

Cluster models
    python -m tests.lab.simnodes --clusters 0 --galera 2 [--gr N] [--seed S] --nodes 3

A cluster is either static (the above: dicts a command sets, answers cached per node; the
default, what the benchmarks use) or a model (a ClusterModel of tests/lab/sim_model.py): --galera
N serves N tests/lab/sim_galera.GaleraCluster named g1, g2, ...; --gr N serves N
tests/lab/sim_gr.GrCluster named gr1, ... (MODEL_KINDS: module, class, name prefix; a model class
is built as Class(name, addresses, seed) and imported only when asked for). --seed makes the
models' uuids repeatable. Their ready-line entries carry "kind": "galera"/"gr" ("static" for
the others).

The server tells every model the time (time.monotonic()) before each batch of events and on a
timer (10 ms while a statement stalls; otherwise until the next due answer or the earliest
`next_due()` the models give, an optional method: a model without it is ticked every 10 ms).
A model node's port follows `reach`: LISTEN answers; REFUSED closes the listening socket and
resets open connections (RST); HANG accepts connects (the kernel does) but neither greets nor
acts on anything until it is LISTEN again, then answers what it was sent, in order. Every
statement of a COM_QUERY goes to `statement` with the connection's own session variables; None
is answered from `globals` as a static node's would be; a Stall holds that connection only
(the commands behind it wait) and is asked again after every advance; `delay_s` sends each
answer that much later, from a timer queue. Model nodes are never cached.

Control commands that name a model's node (one per command) or `"cluster": "g1"` go to the
model (its command(); a ValueError comes back as ok: false); `get` works on them too:

    {"cmd": "kill", "node": "127.0.0.1:40001"}          and restart, freeze, thaw, cut, uncut,
    {"cmd": "slow", "node": ..., "delay_ms": 300}        isolate, rejoin, donor, undonor
    {"cmd": "desync", "node": ..., "on": true}
    {"cmd": "set", "node": ..., "variables": {"read_only": "ON"}, "status": {...}}
    {"cmd": "configure", "cluster": "g1", "suspect_timeout_s": 1.0, "join_s": 0.5}
    {"cmd": "truth"}                     {"ok": true, "clusters": {"g1": {...truth()...}}}
    {"cmd": "truth", "cluster": "g1"}    that one only

From Python, `SimNodes` (below) starts the process, reads the layout, and wraps the commands;
it names nodes as "host:port" strings and accepts (host, port) tuples as well. With models:
`SimNodes(clusters=0, galera=1, seed=3)`, `sim.act(node_or_cluster, "kill", **fields)`,
`sim.truth()`.
"""

from __future__ import annotations

import argparse
import contextlib
import heapq
import importlib
import ipaddress
import json
import os
import re
import resource
import select
import selectors
import socket
import struct
import subprocess
import sys
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache, partial
from pathlib import Path
from types import TracebackType
from typing import Any, Final, Literal

if not __package__:
    # run by path: the cluster models are modules of the package tests.lab (standard library
    # only, like this one)
    sys.path.append(str(Path(__file__).resolve().parents[2]))
from tests.lab.sim_model import (
    ClusterModel,
    Done,
    Failure,
    Reach,
    Rows,
    Stall,
    apply_values,
    control_values,
)

# -- protocol constants ------------------------------------------------------------------------

CLIENT_LONG_PASSWORD: Final = 0x1
CLIENT_LONG_FLAG: Final = 0x4
CLIENT_CONNECT_WITH_DB: Final = 0x8
CLIENT_PROTOCOL_41: Final = 0x200
CLIENT_TRANSACTIONS: Final = 0x2000
CLIENT_SECURE_CONNECTION: Final = 0x8000
CLIENT_MULTI_STATEMENTS: Final = 0x10000
CLIENT_MULTI_RESULTS: Final = 0x20000
CLIENT_PLUGIN_AUTH: Final = 0x80000
# no CLIENT_SSL: plain text only; no CLIENT_DEPRECATE_EOF: classic EOF packets, which every
# client reads
SERVER_CAPABILITIES: Final = (
    CLIENT_LONG_PASSWORD
    | CLIENT_LONG_FLAG
    | CLIENT_CONNECT_WITH_DB
    | CLIENT_PROTOCOL_41
    | CLIENT_TRANSACTIONS
    | CLIENT_SECURE_CONNECTION
    | CLIENT_MULTI_STATEMENTS
    | CLIENT_MULTI_RESULTS
    | CLIENT_PLUGIN_AUTH
)
SERVER_STATUS_AUTOCOMMIT: Final = 0x0002
SERVER_MORE_RESULTS_EXISTS: Final = 0x0008

COM_QUIT: Final = 0x01
COM_INIT_DB: Final = 0x02
COM_QUERY: Final = 0x03
COM_PING: Final = 0x0E

TYPE_LONGLONG: Final = 0x08
TYPE_VAR_STRING: Final = 0xFD
CHARSET_UTF8MB4: Final = 45
CHARSET_BINARY: Final = 63
FLAG_BINARY: Final = 0x80

SERVER_VERSION: Final = b"8.0.36-simnodes"
AUTH_PLUGIN: Final = b"mysql_native_password"
MAX_PAYLOAD: Final = 0xFFFFFF
# what a hung node buffers of one connection before it drops it: a client that keeps writing
# into a silent server is a bug of the bench, not something to hold in memory
HANG_BUFFER_LIMIT: Final = 1 << 20
# encoded answers kept per node; the probe's few query texts fit many times over
ANSWER_CACHE_SIZE: Final = 256
PLAN_CACHE_SIZE: Final = 4096
QUEUE_CYCLE: Final = 6

# what SHOW VARIABLES spells ON/OFF and SELECT @@global answers as a LONGLONG 1/0
BOOLEAN_VARIABLES: Final = frozenset(
    {"read_only", "super_read_only", "wsrep_sst_donor_rejects_queries", "wsrep_desync", "wsrep_on"}
)
Mode = Literal["ok", "hang", "down"]
MODES: Final[tuple[Mode, ...]] = ("ok", "hang", "down")
# a model node's port, as a static node's mode
REACH_MODES: Final[dict[Reach, Mode]] = {
    Reach.LISTEN: "ok",
    Reach.REFUSED: "down",
    Reach.HANG: "hang",
}
# how often the loop wakes while a model's statement stalls; how long it may sleep otherwise
TICK_S: Final = 0.01
IDLE_S: Final = 1.0
# the cluster models by kind: module, class (constructed as Class(name, addresses, seed)) and
# the prefix of their clusters' names
MODEL_KINDS: Final = {
    "galera": ("tests.lab.sim_galera", "GaleraCluster", "g"),
    "gr": ("tests.lab.sim_gr", "GrCluster", "gr"),
}


def model_class(kind: str) -> Callable[[str, tuple[str, ...], int], ClusterModel]:
    """The class of a kind's model, imported when first asked for."""
    module, name, _ = MODEL_KINDS[kind]
    made: Callable[[str, tuple[str, ...], int], ClusterModel] = getattr(
        importlib.import_module(module), name
    )
    return made


# -- encoding ---------------------------------------------------------------------------------


def _lenenc_int(n: int) -> bytes:
    if n < 251:
        return bytes((n,))
    if n < 1 << 16:
        return b"\xfc" + n.to_bytes(2, "little")
    if n < 1 << 24:
        return b"\xfd" + n.to_bytes(3, "little")
    return b"\xfe" + n.to_bytes(8, "little")


def _lenenc_str(value: bytes) -> bytes:
    return _lenenc_int(len(value)) + value


def _packets(payloads: Sequence[bytes], seq: int) -> bytes:
    """The payloads as wire packets, numbered from seq; a payload of 16 MiB or more is split."""
    out = bytearray()
    for payload in payloads:
        rest = payload
        while True:
            chunk, rest = rest[:MAX_PAYLOAD], rest[MAX_PAYLOAD:]
            out += len(chunk).to_bytes(3, "little")
            out.append(seq & 0xFF)
            out += chunk
            seq += 1
            if len(chunk) < MAX_PAYLOAD:
                break
    return bytes(out)


def _ok(status: int = SERVER_STATUS_AUTOCOMMIT) -> bytes:
    return b"\x00\x00\x00" + struct.pack("<HH", status, 0)


def _eof(status: int) -> bytes:
    return b"\xfe" + struct.pack("<HH", 0, status)


def _err(code: int, state: bytes, message: str) -> bytes:
    return b"\xff" + struct.pack("<H", code) + b"#" + state + message.encode()


@lru_cache(maxsize=4096)
def _column(label: bytes, type_code: int) -> bytes:
    if type_code == TYPE_LONGLONG:
        charset, length, flags = CHARSET_BINARY, 21, FLAG_BINARY
    else:
        charset, length, flags = CHARSET_UTF8MB4, 4096, 0
    # catalog "def", empty schema, table and org_table, then the name twice
    return (
        b"\x03def\x00\x00\x00"
        + _lenenc_str(label)
        + _lenenc_str(label)
        + struct.pack("<BHIBHBxx", 0x0C, charset, length, type_code, flags, 0)
    )


def _result_set(
    columns: Sequence[tuple[bytes, int]], rows: Sequence[Sequence[bytes | None]], status: int
) -> list[bytes]:
    payloads = [_lenenc_int(len(columns))]
    payloads.extend(_column(label, type_code) for label, type_code in columns)
    payloads.append(_eof(status))
    for row in rows:
        payloads.append(b"".join(b"\xfb" if v is None else _lenenc_str(v) for v in row))
    payloads.append(_eof(status))
    return payloads


OK_RESPONSE: Final = _packets([_ok()], 1)
SHOW_COLUMNS: Final = ((b"Variable_name", TYPE_VAR_STRING), (b"Value", TYPE_VAR_STRING))

# -- what the statements ask ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Show:
    """SHOW [GLOBAL] STATUS|VARIABLES, all of them, the named ones, or those LIKE a pattern."""

    source: Literal["status", "variables"]
    names: frozenset[str] | None
    like: re.Pattern[str] | None


@dataclass(frozen=True, slots=True)
class _VariableColumn:
    label: bytes
    name: str


@dataclass(frozen=True, slots=True)
class _ConcatColumn:
    """(SELECT GROUP_CONCAT(VARIABLE_NAME, '=', VARIABLE_VALUE SEPARATOR s) FROM t WHERE ...)"""

    label: bytes
    source: Literal["status", "variables"]
    names: tuple[str, ...]
    separator: str
    # information_schema spells the names in capitals (MariaDB), performance_schema as they are
    upper: bool


@dataclass(frozen=True, slots=True)
class _LiteralColumn:
    label: bytes
    value: bytes
    type_code: int


_Column = _VariableColumn | _ConcatColumn | _LiteralColumn


@dataclass(frozen=True, slots=True)
class _Select:
    columns: tuple[_Column, ...]


@dataclass(frozen=True, slots=True)
class _Ok:
    pass


@dataclass(frozen=True, slots=True)
class _Error:
    code: int
    state: bytes
    message: str


_Statement = _Show | _Select | _Ok | _Error


@dataclass(frozen=True, slots=True)
class _Plan:
    statements: tuple[_Statement, ...]
    reads_status: bool


_STRING = r"'(?:[^'\\]|\\.|'')*'"
_QUOTED = re.compile(_STRING, re.S)
_NAME_COLUMN = r"`?VARIABLE_NAME`?"
_SHOW = re.compile(
    r"SHOW\s+(?:(?:GLOBAL|SESSION|LOCAL)\s+)?(STATUS|VARIABLES)(?:\s+(LIKE|WHERE)\s+(.*))?",
    re.I | re.S,
)
_WHERE_IN = re.compile(rf"{_NAME_COLUMN}\s+IN\s*\((.*)\)", re.I | re.S)
_WHERE_EQ = re.compile(rf"{_NAME_COLUMN}\s*=\s*({_STRING})", re.I | re.S)
_WHERE_LIKE = re.compile(rf"{_NAME_COLUMN}\s+LIKE\s+({_STRING})", re.I | re.S)
_SELECT = re.compile(r"SELECT\s+(.*?)(?:\s+LIMIT\s+\d+)?", re.I | re.S)
_ALIASED = re.compile(r"(.+?)\s+AS\s+`?(\w+)`?", re.I | re.S)
_SYSTEM_VARIABLE = re.compile(r"@@(?:(?:GLOBAL|SESSION|LOCAL)\.)?`?(\w+)`?", re.I)
_CONCAT = re.compile(
    rf"\(\s*SELECT\s+GROUP_CONCAT\s*\(\s*{_NAME_COLUMN}\s*,\s*'='\s*,\s*`?VARIABLE_VALUE`?"
    rf"\s+SEPARATOR\s+({_STRING})\s*\)\s+FROM\s+`?(\w+)`?\.`?(\w+)`?\s+"
    rf"WHERE\s+{_NAME_COLUMN}\s+IN\s*\((.*)\)\s*\)",
    re.I | re.S,
)
_INTEGER = re.compile(r"-?\d+")
_STATUS_SCHEMAS: Final = {"information_schema": True, "performance_schema": False}
_SOURCES: Final[dict[str, Literal["status", "variables"]]] = {
    "global_status": "status",
    "global_variables": "variables",
}


def _unquote(literal: str) -> str:
    body = literal[1:-1].replace("''", "'")
    return re.sub(r"\\(.)", r"\1", body, flags=re.S)


def _names_in(text: str) -> tuple[str, ...]:
    return tuple(_unquote(m.group(0)).lower() for m in _QUOTED.finditer(text))


def _like_pattern(literal: str) -> re.Pattern[str]:
    pattern = "".join(
        ".*" if c == "%" else "." if c == "_" else re.escape(c) for c in _unquote(literal)
    )
    return re.compile(pattern, re.I | re.S)


def _split(text: str, separator: str) -> list[str]:
    """The text cut at each separator outside quotes and parentheses, pieces stripped."""
    pieces: list[str] = []
    start = depth = 0
    quote = ""
    i = 0
    while i < len(text):
        c = text[i]
        if quote:
            if c == "\\" and quote != "`":
                i += 1
            elif c == quote:
                quote = ""  # a doubled quote closes and reopens: the same thing
        elif c in "'\"`":
            quote = c
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif c == separator and depth <= 0:
            pieces.append(text[start:i].strip())
            start = i + 1
        i += 1
    pieces.append(text[start:].strip())
    return pieces


def _show(source_word: str, kind: str | None, clause: str | None) -> _Statement:
    source: Literal["status", "variables"] = (
        "status" if source_word.upper() == "STATUS" else "variables"
    )
    if kind is None or clause is None:
        return _Show(source, None, None)
    clause = clause.strip()
    if kind.upper() == "LIKE":
        if _QUOTED.fullmatch(clause):
            return _Show(source, None, _like_pattern(clause))
    elif (match := _WHERE_IN.fullmatch(clause)) or (match := _WHERE_EQ.fullmatch(clause)):
        return _Show(source, frozenset(_names_in(match.group(1))), None)
    elif match := _WHERE_LIKE.fullmatch(clause):
        return _Show(source, None, _like_pattern(match.group(1)))
    # an honest refusal beats an empty answer the bench would read as "variable absent"
    return _Error(1105, b"HY000", f"simnodes cannot evaluate: {clause[:200]}")


def _select_column(item: str) -> _Column | _Error | None:
    label = item
    if aliased := _ALIASED.fullmatch(item):
        item, label = aliased.group(1).strip(), aliased.group(2)
    if match := _SYSTEM_VARIABLE.fullmatch(item):
        return _VariableColumn(label.encode(), match.group(1).lower())
    if match := _CONCAT.fullmatch(item):
        separator, schema, table, names = match.groups()
        upper = _STATUS_SCHEMAS.get(schema.lower())
        source = _SOURCES.get(table.lower())
        if upper is None or source is None:
            return _Error(1146, b"42S02", f"Table '{schema}.{table}' doesn't exist")
        return _ConcatColumn(label.encode(), source, _names_in(names), _unquote(separator), upper)
    if _INTEGER.fullmatch(item):
        return _LiteralColumn(label.encode(), item.encode(), TYPE_LONGLONG)
    if _QUOTED.fullmatch(item):
        value = _unquote(item)
        return _LiteralColumn(
            (value if label is item else label).encode(), value.encode(), TYPE_VAR_STRING
        )
    return None


def _statement(text: str) -> _Statement:
    if match := _SHOW.fullmatch(text):
        return _show(*match.groups())
    if match := _SELECT.fullmatch(text):
        columns: list[_Column] = []
        for item in _split(match.group(1), ","):
            column = _select_column(item)
            if column is None:
                return _Ok()  # an expression the fleet does not evaluate: an OK, as documented
            if isinstance(column, _Error):
                return column
            columns.append(column)
        return _Select(tuple(columns))
    return _Ok()


def plan(text: str) -> _Plan:
    """What a COM_QUERY text asks, statement by statement, whatever node it goes to."""
    statements = tuple(_statement(s) for s in _split(text, ";") if s) or (_Ok(),)
    reads_status = any(
        (isinstance(s, _Show) and s.source == "status")
        or (
            isinstance(s, _Select)
            and any(isinstance(c, _ConcatColumn) and c.source == "status" for c in s.columns)
        )
        for s in statements
    )
    return _Plan(statements, reads_status)


# -- the nodes --------------------------------------------------------------------------------


def _as_boolean_number(value: str) -> bytes:
    return b"1" if value.strip().upper() in ("ON", "1", "TRUE", "YES") else b"0"


def _encode(value: str | None) -> bytes | None:
    return None if value is None else value.encode()


def answer(
    statements: Sequence[_Statement], status: Mapping[str, str], variables: Mapping[str, str]
) -> list[bytes]:
    """The payloads answering the statements, as a node with that status and variables."""
    payloads: list[bytes] = []
    last = len(statements) - 1
    for index, statement in enumerate(statements):
        flags = SERVER_STATUS_AUTOCOMMIT | (SERVER_MORE_RESULTS_EXISTS if index < last else 0)
        if isinstance(statement, _Error):
            # a real server stops at the first failing statement of a multi-statement text
            payloads.append(_err(statement.code, statement.state, statement.message))
            break
        _answer_one(payloads, statement, status, variables, flags)
    return payloads


def _answer_one(
    payloads: list[bytes],
    statement: _Statement,
    status: Mapping[str, str],
    variables: Mapping[str, str],
    flags: int,
) -> None:
    """One statement's answer added to the payloads (an _Error is the caller's)."""
    if isinstance(statement, _Error):
        payloads.append(_err(statement.code, statement.state, statement.message))
    elif isinstance(statement, _Ok):
        payloads.append(_ok(flags))
    elif isinstance(statement, _Show):
        values = status if statement.source == "status" else variables
        if statement.names is not None:
            names = sorted(n for n in statement.names if n in values)
        elif statement.like is not None:
            like = statement.like
            names = sorted(n for n in values if like.fullmatch(n))
        else:
            names = sorted(values)
        rows = [(n.encode(), values[n].encode()) for n in names]
        payloads.extend(_result_set(SHOW_COLUMNS, rows, flags))
    else:
        columns: list[tuple[bytes, int]] = []
        row: list[bytes | None] = []
        for column in statement.columns:
            if isinstance(column, _VariableColumn):
                value = variables.get(column.name)
                if column.name in BOOLEAN_VARIABLES:
                    columns.append((column.label, TYPE_LONGLONG))
                    row.append(None if value is None else _as_boolean_number(value))
                else:
                    columns.append((column.label, TYPE_VAR_STRING))
                    row.append(_encode(value))
            elif isinstance(column, _ConcatColumn):
                values = status if column.source == "status" else variables
                pairs = [
                    f"{n.upper() if column.upper else n}={values[n]}"
                    for n in column.names
                    if n in values
                ]
                columns.append((column.label, TYPE_VAR_STRING))
                # GROUP_CONCAT of no rows is NULL
                row.append(column.separator.join(pairs).encode() if pairs else None)
            else:
                columns.append((column.label, column.type_code))
                row.append(column.value)
        payloads.extend(_result_set(columns, [row], flags))


def default_values(cluster: int, node: int, size: int) -> tuple[dict[str, str], dict[str, str]]:
    """A healthy Synced member of a Primary component of `size` nodes: (status, variables)."""
    # derived from the layout, so the same layout gives the same uuids run after run
    status = {
        "wsrep_cluster_status": "Primary",
        "wsrep_ready": "ON",
        "wsrep_connected": "ON",
        "wsrep_local_state": "4",
        "wsrep_local_state_comment": "Synced",
        "wsrep_local_recv_queue": "0",
        "wsrep_cluster_size": str(size),
        "wsrep_cluster_state_uuid": str(uuid.uuid5(uuid.NAMESPACE_URL, f"simnodes:{cluster}")),
        "wsrep_cluster_conf_id": str(10 + cluster),
        "wsrep_gcomm_uuid": str(uuid.uuid5(uuid.NAMESPACE_URL, f"simnodes:{cluster}:{node}")),
        "wsrep_evs_evict_list": "",
    }
    variables = {
        "read_only": "OFF",
        "super_read_only": "OFF",
        "wsrep_reject_queries": "NONE",
        "wsrep_sst_donor_rejects_queries": "OFF",
        "wsrep_desync": "OFF",
        "pxc_maint_mode": "DISABLED",
        "wsrep_provider_options": "evs.suspect_timeout = PT5S; gcache.size = 128M",
        "wsrep_on": "ON",
        # MariaDB's default: what tells a probe its status pairs were not cut short
        "group_concat_max_len": "1048576",
    }
    return status, variables


class _Node:
    __slots__ = (
        "address",
        "answers",
        "cache",
        "changing",
        "cluster",
        "conns",
        "defaults",
        "host",
        "last_query",
        "listener",
        "mode",
        "model",
        "port",
        "status",
        "variables",
    )

    def __init__(
        self, host: str, port: int, cluster: str, defaults: tuple[dict[str, str], dict[str, str]]
    ) -> None:
        self.host = host
        self.port = port
        self.address = f"{host}:{port}"
        self.cluster = cluster
        self.defaults = defaults
        self.status = dict(defaults[0])
        self.variables = dict(defaults[1])
        self.mode: Mode = "ok"
        self.changing = False
        # query text -> (the encoded answer from sequence 1, whether it has several statements)
        self.cache: dict[bytes, tuple[bytes, bool]] = {}
        self.conns: set[_Conn] = set()
        self.listener: socket.socket | None = None
        self.answers = 0
        self.last_query = b""
        # None: a static node (the dicts above answer, from the cache); else what decides
        self.model: ClusterModel | None = None


@dataclass(slots=True)
class _Pending:
    """A model node's COM_QUERY under way: its statements, how far it got, what it answered."""

    statements: list[str]
    index: int
    payloads: list[bytes]
    first_seq: int


class _Conn:
    __slots__ = (
        "closed",
        "held",
        "inbuf",
        "multi",
        "node",
        "outbuf",
        "pending",
        "phase",
        "server",
        "session",
        "sock",
        "waiting",
    )

    def __init__(self, server: _Server, node: _Node, sock: socket.socket) -> None:
        self.server = server
        self.node = node
        self.sock = sock
        self.inbuf = bytearray()
        self.outbuf = bytearray()
        # 0: not greeted yet (a hung node), 1: waiting for the handshake response, 2: commands
        self.phase = 0
        self.multi = False
        self.closed = False
        # a model node's connection: its session variables, a statement stalled, a delayed
        # answer not sent yet, answers due while the node hung (sent once it answers again)
        self.session: dict[str, str] = {}
        self.pending: _Pending | None = None
        self.waiting = False
        self.held = b""

    def on_event(self, mask: int) -> None:
        try:
            if mask & selectors.EVENT_WRITE:
                self._flush()
            if mask & selectors.EVENT_READ and not self.closed:
                self._read()
        except Exception:
            # one connection's surprise must not take the fleet down
            traceback.print_exc(file=sys.stderr)
            self.close()

    def _read(self) -> None:
        try:
            data = self.sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self.close()
            return
        if not data:
            self.close()
            return
        self.inbuf += data
        if self.node.mode == "ok":
            if self.node.model is None:
                self.serve()
            else:
                self.serve_model()
        elif len(self.inbuf) > HANG_BUFFER_LIMIT:
            self.close()

    def greet(self) -> None:
        self.server.thread_ids += 1
        self.phase = 1
        self.send(_packets([self.server.greeting(self.server.thread_ids)], 0))

    def resume(self) -> None:
        """Back from hang: greet if still owed, then answer what arrived meanwhile."""
        if self.phase == 0:
            self.greet()
        if self.closed:
            return
        if self.node.model is None:
            self.serve()
        else:
            self.serve_model()

    def serve_model(self) -> None:
        """A model node's commands, one at a time: a stalled or delayed answer holds back the
        commands behind it, which are answered in order once it is sent."""
        if self.held:
            held, self.held = self.held, b""
            self.send(held)
        buf = self.inbuf
        while len(buf) >= 4 and not self.closed and self.pending is None and not self.waiting:
            if self.node.mode != "ok":
                return
            packet = self.next_packet()
            if packet is None:
                break
            seq, payload = packet
            if self.phase == 1:
                self.send(self.login(payload, seq))
                continue
            reply = self.server.model_command(self, payload, seq)
            if reply is None:
                self.close()
                return
            if reply:
                self.deliver(reply)

    def next_packet(self) -> tuple[int, bytes] | None:
        """The next whole packet read (its sequence number and payload), taken off the input;
        None until one has come in whole."""
        buf = self.inbuf
        if len(buf) < 4:
            return None
        end = 4 + (buf[0] | buf[1] << 8 | buf[2] << 16)
        if len(buf) < end:
            return None
        seq, payload = buf[3], bytes(buf[4:end])
        del buf[:end]
        return seq, payload

    def login(self, payload: bytes, seq: int) -> bytes:
        """The handshake response's OK: any credentials will do; only whether the client may
        send multi-statements matters."""
        flags = int.from_bytes(payload[:4], "little") if len(payload) >= 4 else 0
        self.multi = bool(flags & CLIENT_MULTI_STATEMENTS)
        self.phase = 2
        return _packets([_ok()], seq + 1)

    def deliver(self, reply: bytes) -> None:
        """A model node's answer, now or after its delay (a slow node)."""
        model = self.node.model
        delay = model.delay_s(self.node.address) if model is not None else 0.0
        if delay > 0:
            self.waiting = True
            self.server.later(time.monotonic() + delay, self, reply)
        else:
            self.send(reply)

    def on_due(self, reply: bytes) -> None:
        """A delayed answer's time has come: sent, unless the node hangs now (then held)."""
        self.waiting = False
        if self.closed:
            return
        if self.node.mode == "ok":
            self.send(reply)
            self.serve_model()
        else:
            self.held += reply

    def serve(self) -> None:
        buf = self.inbuf
        replies: list[bytes] = []
        while len(buf) >= 4:
            packet = self.next_packet()
            if packet is None:
                break
            seq, payload = packet
            if self.phase == 1:
                replies.append(self.login(payload, seq))
                continue
            reply = self.server.command(self, payload, seq)
            if reply is None:
                if replies:
                    self.send(b"".join(replies))
                self.close()
                return
            replies.append(reply)
        if replies:
            self.send(replies[0] if len(replies) == 1 else b"".join(replies))

    def send(self, data: bytes) -> None:
        if self.closed:
            return
        if self.outbuf:
            self.outbuf += data
            return
        try:
            sent = self.sock.send(data)
        except (BlockingIOError, InterruptedError):
            sent = 0
        except OSError:
            self.close()
            return
        if sent < len(data):
            self.outbuf += data[sent:]
            self.server.selector.modify(
                self.sock, selectors.EVENT_READ | selectors.EVENT_WRITE, self.on_event
            )

    def _flush(self) -> None:
        try:
            sent = self.sock.send(self.outbuf)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self.close()
            return
        del self.outbuf[:sent]
        if not self.outbuf:
            self.server.selector.modify(self.sock, selectors.EVENT_READ, self.on_event)

    def close(self, reset: bool = False) -> None:
        if self.closed:
            return
        self.closed = True
        with contextlib.suppress(KeyError, ValueError):
            self.server.selector.unregister(self.sock)
        if reset:
            # an RST, as the kernel sends for a process that died
            with contextlib.suppress(OSError):
                self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.sock.close()
        self.node.conns.discard(self)
        self.server.stalled.discard(self)


class ControlError(Exception):
    """A control command the server refuses; its message goes back in the reply."""


class _Server:
    def __init__(
        self,
        clusters: int,
        nodes: int,
        host: str,
        base_port: int,
        *,
        models: Sequence[tuple[str, int]] = (),
        seed: int = 0,
    ) -> None:
        self.selector = selectors.DefaultSelector()
        self.host = host
        # no real authentication, so one scramble serves every greeting; printable, no NUL
        scramble = bytes(0x21 + b % 94 for b in os.urandom(20))
        self._greeting_head = b"\x0a" + SERVER_VERSION + b"\x00"
        self._greeting_tail = (
            scramble[:8]
            + b"\x00"
            + struct.pack(
                "<HBHHB",
                SERVER_CAPABILITIES & 0xFFFF,
                CHARSET_UTF8MB4,
                SERVER_STATUS_AUTOCOMMIT,
                SERVER_CAPABILITIES >> 16,
                21,
            )
            + bytes(10)
            + scramble[8:]
            + b"\x00"
            + AUTH_PLUGIN
            + b"\x00"
        )
        self.thread_ids = 0
        self.plans: dict[bytes, _Plan] = {}
        self.answers = 0
        self.commands = 0
        self.accepted = 0
        self.cache_hits = 0
        self.running = True
        self._control_buffer = b""
        self.clusters: list[tuple[str, list[_Node]]] = []
        # the model clusters by name; answers due later (due, order, connection, bytes); the
        # connections whose statement stalls
        self.models: dict[str, ClusterModel] = {}
        self.timers: list[tuple[float, int, _Conn, bytes]] = []
        self._timer_order = 0
        self.stalled: set[_Conn] = set()
        index = 0
        for c in range(clusters):
            name = f"c{c + 1}"
            members = []
            for n in range(nodes):
                port = base_port + 1 + index if base_port else 0
                index += 1
                node = _Node(host, port, name, default_values(c, n, nodes))
                self.listen(node)
                members.append(node)
            self.clusters.append((name, members))
        for kind, count in models:
            make = model_class(kind)
            prefix = MODEL_KINDS[kind][2]
            for c in range(count):
                name = f"{prefix}{c + 1}"
                members = []
                for _ in range(nodes):
                    port = base_port + 1 + index if base_port else 0
                    index += 1
                    # the static defaults only for `reset`'s sake; the model answers
                    node = _Node(host, port, name, default_values(0, 0, nodes))
                    self.listen(node)
                    members.append(node)
                # the seed and the cluster's place: the same command line, the same uuids
                model = make(name, tuple(n.address for n in members), seed * 1000 + index)
                for node in members:
                    node.model = model
                self.models[name] = model
                self.clusters.append((name, members))
        self.nodes = {n.address: n for _, members in self.clusters for n in members}
        self.tick()

    def greeting(self, thread_id: int) -> bytes:
        return self._greeting_head + struct.pack("<I", thread_id & 0xFFFFFFFF) + self._greeting_tail

    def listen(self, node: _Node) -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            # the port comes back after `down` while the closed connections sit in TIME_WAIT
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((node.host, node.port))
            sock.listen(1024)
            sock.setblocking(False)
        except OSError:
            sock.close()
            raise
        if node.port == 0:
            node.port = sock.getsockname()[1]
            node.address = f"{node.host}:{node.port}"
        node.listener = sock
        self.selector.register(sock, selectors.EVENT_READ, partial(self._accept, node))

    # -- the models ---------------------------------------------------------------------

    def tick(self) -> None:
        """Time moves on for every model: their nodes' ports follow what the models say, due
        answers are sent, and stalled statements are asked again."""
        if not self.models:
            return
        now = time.monotonic()
        for model in self.models.values():
            model.advance(now)
        for name, members in self.clusters:
            if name not in self.models:
                continue
            for node in members:
                mode = REACH_MODES[self.models[name].reach(node.address)]
                if mode != node.mode:
                    try:
                        self._set_mode(node, mode)
                    except ControlError as exc:  # the port taken meanwhile: tried next tick
                        print(f"simnodes: {exc}", file=sys.stderr)
        timers = self.timers
        while timers and timers[0][0] <= now:
            _, _, conn, reply = heapq.heappop(timers)
            conn.on_due(reply)
        for conn in list(self.stalled):
            self._retry(conn)

    def wait_s(self) -> float | None:
        """How long the loop may sleep: until the next due answer or model transition, 10 ms
        while a statement stalls; forever with no model."""
        if not self.models:
            return None
        if self.stalled:
            return TICK_S
        now = time.monotonic()
        due = [self.timers[0][0]] if self.timers else []
        for model in self.models.values():
            next_due: Callable[[], float | None] | None = getattr(model, "next_due", None)
            if next_due is None:
                return TICK_S  # a model that cannot say when: ticked
            at = next_due()
            if at is not None:
                due.append(at)
        return max(0.0, min(min(due) - now, IDLE_S)) if due else IDLE_S

    def later(self, due: float, conn: _Conn, reply: bytes) -> None:
        self._timer_order += 1
        heapq.heappush(self.timers, (due, self._timer_order, conn, reply))

    def model_command(self, conn: _Conn, payload: bytes, seq: int) -> bytes | None:
        """A model node's reply to one command packet: b"" when it comes later (stalled),
        None to close the connection."""
        code = payload[0] if payload else -1
        if code != COM_QUERY:
            return self.command(conn, payload, seq)
        self.commands += 1
        node = conn.node
        self.answers += 1
        node.answers += 1
        text = payload[1:]
        node.last_query = text
        statements = [s for s in _split(text.decode("utf-8", "replace"), ";") if s] or [""]
        if len(statements) > 1 and not conn.multi:
            return _packets(
                [_err(1064, b"42000", "multi-statements not enabled by the client")], seq + 1
            )
        pending = _Pending(statements, 0, [], seq + 1)
        reply = self._run(conn, pending)
        if reply is None:
            conn.pending = pending
            self.stalled.add(conn)
            return b""
        return reply

    def _run(self, conn: _Conn, pending: _Pending) -> bytes | None:
        """The statements' answer from where `pending` stopped; None while one stalls."""
        node = conn.node
        model = node.model
        assert model is not None
        last = len(pending.statements) - 1
        while pending.index <= last:
            sql = pending.statements[pending.index]
            flags = SERVER_STATUS_AUTOCOMMIT | (
                SERVER_MORE_RESULTS_EXISTS if pending.index < last else 0
            )
            result = model.statement(node.address, conn.session, sql)
            if isinstance(result, Stall):
                return None
            pending.index += 1
            payloads = pending.payloads
            if result is None:
                status, variables = model.globals(node.address)
                statement = plan(sql).statements[0]
                _answer_one(payloads, statement, status, variables, flags)
                if isinstance(statement, _Error):
                    break
            elif isinstance(result, Rows):
                columns = [(c.encode(), TYPE_VAR_STRING) for c in result.columns]
                rows = [[_encode(v) for v in row] for row in result.rows]
                payloads.extend(_result_set(columns, rows, flags))
            elif isinstance(result, Done):
                payloads.append(_ok(flags))
            elif isinstance(result, Failure):
                payloads.append(_err(result.code, result.state.encode(), result.message))
                break
        return _packets(pending.payloads, pending.first_seq)

    def _retry(self, conn: _Conn) -> None:
        if conn.closed or conn.pending is None:
            self.stalled.discard(conn)
            return
        if conn.node.mode != "ok":
            return  # a hung node acts on nothing
        reply = self._run(conn, conn.pending)
        if reply is None:
            return
        self.stalled.discard(conn)
        conn.pending = None
        conn.deliver(reply)
        conn.serve_model()

    def _unlisten(self, node: _Node) -> None:
        if node.listener is not None:
            self.selector.unregister(node.listener)
            node.listener.close()
            node.listener = None

    def _accept(self, node: _Node, mask: int) -> None:
        listener = node.listener
        while listener is not None:
            try:
                sock, _ = listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                print(f"simnodes: accept on {node.address}: {exc}", file=sys.stderr)
                return
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn = _Conn(self, node, sock)
            node.conns.add(conn)
            self.accepted += 1
            self.selector.register(sock, selectors.EVENT_READ, conn.on_event)
            if node.mode == "ok":
                conn.greet()

    def command(self, conn: _Conn, payload: bytes, seq: int) -> bytes | None:
        """The encoded reply to one command packet; None to close the connection."""
        self.commands += 1
        code = payload[0] if payload else -1
        if code == COM_QUERY:
            return self._query(conn, payload[1:], seq + 1)
        if code in (COM_PING, COM_INIT_DB):
            return OK_RESPONSE if seq == 0 else _packets([_ok()], seq + 1)
        if code == COM_QUIT:
            return None
        return _packets([_err(1047, b"08S01", "Unknown command")], seq + 1)

    def _query(self, conn: _Conn, text: bytes, first_seq: int) -> bytes:
        node = conn.node
        self.answers += 1
        node.answers += 1
        node.last_query = text
        # commands start at sequence 0, so the cached answer numbered from 1 is the one to send
        if first_seq == 1:
            cached = node.cache.get(text)
            if cached is not None and (conn.multi or not cached[1]):
                self.cache_hits += 1
                return cached[0]
        query_plan = self.plans.get(text)
        if query_plan is None:
            if len(self.plans) >= PLAN_CACHE_SIZE:
                self.plans.clear()
            query_plan = plan(text.decode("utf-8", "replace"))
            self.plans[text] = query_plan
        several = len(query_plan.statements) > 1
        if several and not conn.multi:
            return _packets(
                [_err(1064, b"42000", "multi-statements not enabled by the client")], first_seq
            )
        if node.changing and query_plan.reads_status:
            queue = node.status.get("wsrep_local_recv_queue", "0")
            nxt = int(queue) + 1 if queue.isdigit() else 0
            node.status["wsrep_local_recv_queue"] = str(nxt % QUEUE_CYCLE)
            node.cache.clear()
            return _packets(answer(query_plan.statements, node.status, node.variables), first_seq)
        reply = _packets(answer(query_plan.statements, node.status, node.variables), first_seq)
        if first_seq == 1:
            if len(node.cache) >= ANSWER_CACHE_SIZE:
                node.cache.clear()
            node.cache[text] = (reply, several)
        return reply

    # -- control --------------------------------------------------------------------------

    def layout(self) -> list[dict[str, object]]:
        described: list[dict[str, object]] = []
        for name, members in self.clusters:
            model = self.models.get(name)
            status = (
                members[0].defaults[0] if model is None else model.globals(members[0].address)[0]
            )
            described.append(
                {
                    "name": name,
                    "kind": "static" if model is None else model.kind,
                    "state_uuid": status.get("wsrep_cluster_state_uuid", ""),
                    "conf_id": int(status.get("wsrep_cluster_conf_id", "0")),
                    "nodes": [n.address for n in members],
                }
            )
        return described

    def on_control(self, fd: int, mask: int) -> None:
        data = os.read(fd, 65536)
        if not data:
            self.running = False
            return
        self._control_buffer += data
        while b"\n" in self._control_buffer:
            line, _, self._control_buffer = self._control_buffer.partition(b"\n")
            if line.strip():
                reply = self.control(line)
                sys.stdout.write(json.dumps(reply) + "\n")
                sys.stdout.flush()

    def control(self, line: bytes) -> dict[str, object]:
        try:
            message = json.loads(line)
        except ValueError as exc:
            return {"ok": False, "error": f"not JSON: {exc}"}
        if not isinstance(message, dict):
            return {"ok": False, "error": "a command is a JSON object"}
        try:
            reply = self._dispatch(message)
        except ControlError as exc:
            reply = {"ok": False, "error": str(exc)}
        except Exception as exc:
            traceback.print_exc(file=sys.stderr)
            reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        if "id" in message:
            reply["id"] = message["id"]
        return reply

    def _dispatch(self, message: dict[str, Any]) -> dict[str, object]:
        cmd = message.get("cmd")
        if cmd == "stats":
            return self._stats(bool(message.get("per_node")))
        if cmd == "layout":
            return {"ok": True, "clusters": self.layout()}
        if cmd == "stop":
            self.running = False
            return {"ok": True}
        if cmd == "truth":
            return self._truth(message.get("cluster"))
        model = self._model_of(message)
        if model is not None and cmd != "get":
            try:
                done = model.command(message)
            except ValueError as exc:
                raise ControlError(str(exc)) from exc
            self.tick()
            return {"ok": True, **done}
        nodes = self._targets(message)
        if cmd == "set":
            self._set(nodes, message)
        elif cmd == "changing":
            self._set(nodes, {"changing": message.get("on", True)})
        elif cmd == "reset":
            for node in nodes:
                node.status, node.variables = dict(node.defaults[0]), dict(node.defaults[1])
                node.changing = False
                node.cache.clear()
                self._set_mode(node, "ok")
        elif cmd == "get":
            return {"ok": True, "nodes": [self._describe(n) for n in nodes]}
        else:
            raise ControlError(f"unknown command {cmd!r}")
        return {"ok": True}

    def _truth(self, cluster: object) -> dict[str, object]:
        if cluster is not None and cluster not in self.models:
            raise ControlError(f"no model cluster {cluster!r}")
        return {
            "ok": True,
            "clusters": {
                name: model.truth()
                for name, model in self.models.items()
                if cluster is None or name == cluster
            },
        }

    def _model_of(self, message: dict[str, Any]) -> ClusterModel | None:
        """The model a command names (its node put as "host:port"); None for static nodes."""
        if "cluster" in message:
            return self.models.get(message["cluster"])
        given = message.get("node")
        if isinstance(given, list) and len(given) == 2 and isinstance(given[1], int):
            given = f"{given[0]}:{given[1]}"
        if isinstance(given, str):
            node = self.nodes.get(given)
            if node is not None and node.model is not None:
                message["node"] = given
                return node.model
        elif isinstance(given, list) and any(
            isinstance(g, str) and g in self.nodes and self.nodes[g].model for g in given
        ):
            raise ControlError("a model's node is named alone, one per command")
        return None

    def _targets(self, message: Mapping[str, Any]) -> list[_Node]:
        if "cluster" in message:
            for name, members in self.clusters:
                if name == message["cluster"]:
                    return members
            raise ControlError(f"no cluster {message['cluster']!r}")
        given = message.get("node")
        if given is None:
            raise ControlError("name a node or a cluster")
        is_pair = isinstance(given, list) and len(given) == 2 and isinstance(given[1], int)
        names = [given] if isinstance(given, str) or is_pair else given
        if not isinstance(names, list):
            raise ControlError(f"not a node: {given!r}")
        found = []
        for name in names:
            key = f"{name[0]}:{name[1]}" if isinstance(name, list) and len(name) == 2 else name
            if not isinstance(key, str) or key not in self.nodes:
                raise ControlError(f"no node {name!r}")
            found.append(self.nodes[key])
        return found

    def _set(self, nodes: list[_Node], message: Mapping[str, Any]) -> None:
        # everything checked before anything changes, so a refused command changes nothing
        mode = message.get("mode")
        if mode is not None and mode not in MODES:
            raise ControlError(f"mode is one of {', '.join(MODES)}, not {mode!r}")
        try:
            updates = {
                key: control_values(message.get(key), key) for key in ("status", "variables")
            }
        except ValueError as exc:
            raise ControlError(str(exc)) from exc
        changing = message.get("changing")
        if changing is not None and not isinstance(changing, bool):
            raise ControlError("changing is true or false")
        for node in nodes:
            for key, values in updates.items():
                apply_values(node.status if key == "status" else node.variables, values)
            if changing is not None:
                node.changing = changing
            node.cache.clear()
            if mode is not None:
                self._set_mode(node, mode)

    def _set_mode(self, node: _Node, mode: Mode) -> None:
        if mode == node.mode:
            return
        if mode == "down":
            for conn in list(node.conns):
                conn.close(reset=node.model is not None)
            self._unlisten(node)
        elif node.mode == "down":
            try:
                self.listen(node)
            except OSError as exc:
                raise ControlError(f"cannot listen again on {node.address}: {exc}") from exc
        node.mode = mode
        if mode == "ok":
            for conn in list(node.conns):
                conn.resume()

    def _describe(self, node: _Node) -> dict[str, object]:
        status, variables = (
            (node.status, node.variables)
            if node.model is None
            else node.model.globals(node.address)
        )
        return {
            "node": node.address,
            "cluster": node.cluster,
            "mode": node.mode,
            "changing": node.changing,
            "status": dict(status),
            "variables": dict(variables),
            "connections": len(node.conns),
            "answers": node.answers,
            "last_query": node.last_query.decode("utf-8", "replace"),
        }

    def _stats(self, per_node: bool) -> dict[str, object]:
        reply: dict[str, object] = {
            "ok": True,
            "answers": self.answers,
            "commands": self.commands,
            "cache_hits": self.cache_hits,
            "connections": sum(len(n.conns) for n in self.nodes.values()),
            "accepted": self.accepted,
            "cpu_s": time.process_time(),
        }
        if per_node:
            reply["nodes"] = {
                n.address: {"mode": n.mode, "answers": n.answers, "connections": len(n.conns)}
                for n in self.nodes.values()
            }
        return reply

    def run(self, control_fd: int) -> None:
        self.selector.register(
            control_fd, selectors.EVENT_READ, partial(self.on_control, control_fd)
        )
        select_events = self.selector.select
        if not self.models:
            while self.running:
                for key, mask in select_events():
                    key.data(mask)
                    if not self.running:
                        break
        tick = self.tick
        while self.running:
            events = select_events(self.wait_s())
            tick()
            for key, mask in events:
                key.data(mask)
                if not self.running:
                    break
        for node in self.nodes.values():
            for conn in list(node.conns):
                conn.close()
            self._unlisten(node)
        self.selector.close()


def _loopback(host: str) -> str:
    try:
        address = ipaddress.ip_address(host)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not an IP address: {host}") from exc
    if address.version != 4 or not address.is_loopback:
        raise argparse.ArgumentTypeError(f"keep the fleet on 127.0.0.x, not {host}")
    return host


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.lab.simnodes", description=__doc__.split("\n")[0] if __doc__ else None
    )
    parser.add_argument("--clusters", type=int, default=1, help="static clusters")
    parser.add_argument("--galera", type=int, default=0, help="Galera model clusters")
    parser.add_argument("--gr", type=int, default=0, help="Group Replication model clusters")
    parser.add_argument("--seed", type=int, default=0, help="the models' uuids come from it")
    parser.add_argument("--nodes", type=int, default=3, help="nodes per cluster")
    parser.add_argument("--base-port", type=int, default=0, help="0: the OS picks the ports")
    parser.add_argument("--host", type=_loopback, default="127.0.0.1")
    parser.add_argument("--cpu", type=int, default=None, help="pin the process to this CPU")
    args = parser.parse_args(argv)
    models = [(kind, getattr(args, kind)) for kind in MODEL_KINDS if getattr(args, kind)]
    every = args.clusters + sum(count for _, count in models)
    if args.clusters < 0 or args.galera < 0 or args.gr < 0 or every < 1 or args.nodes < 1:
        parser.error("at least one cluster (--clusters, --galera, --gr) of at least 1 node")
    if args.base_port and args.base_port + every * args.nodes > 65535:
        parser.error("the ports would run past 65535")
    for kind, _ in models:
        try:
            model_class(kind)
        except (ImportError, AttributeError) as exc:
            module, name, _ = MODEL_KINDS[kind]
            print(f"simnodes: --{kind} needs {module}.{name}: {exc}", file=sys.stderr)
            return 2
    if args.cpu is not None:
        os.sched_setaffinity(0, {args.cpu})
    # a listener per node and a socket per client connection: the default 1024 runs out early
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    try:
        server = _Server(
            args.clusters, args.nodes, args.host, args.base_port, models=models, seed=args.seed
        )
    except OSError as exc:
        print(f"simnodes: cannot listen: {exc}", file=sys.stderr)
        return 1
    ready = {"event": "ready", "pid": os.getpid(), "clusters": server.layout()}
    sys.stdout.write(json.dumps(ready) + "\n")
    sys.stdout.flush()
    server.run(sys.stdin.fileno())
    return 0


# -- the bench's handle -----------------------------------------------------------------------

NodeName = str | tuple[str, int]


@dataclass(frozen=True, slots=True)
class SimCluster:
    name: str
    state_uuid: str
    conf_id: int
    nodes: tuple[str, ...]  # "host:port"
    kind: str = "static"  # or a model's: "galera", "gr"


@dataclass(frozen=True, slots=True)
class SimStats:
    answers: int  # COM_QUERY answers served since start
    commands: int  # every command packet, queries included
    cache_hits: int
    connections: int  # open now
    accepted: int  # since start
    cpu_seconds: float  # the server process's CPU time (user + system) since start


class SimNodesError(RuntimeError):
    """The fleet process failed to start, refused a command, or went silent."""


STATUS_AND_VARIABLES = ("status", "variables")


class SimNodes:
    """The simulated fleet in its own process, as a context manager.

    Nodes come out as "host:port" strings (`addresses`, `clusters[i].nodes`); every method takes
    such a string or a (host, port) tuple. Each call waits at most `timeout` seconds.
    """

    def __init__(
        self,
        clusters: int = 1,
        nodes: int = 3,
        *,
        base_port: int = 0,
        host: str = "127.0.0.1",
        cpu: int | None = None,
        timeout: float = 10.0,
        galera: int = 0,
        gr: int = 0,
        seed: int = 0,
    ) -> None:
        self._argv = [
            sys.executable,
            # by path: the fleet needs the standard library only, whatever the working directory
            str(Path(__file__).resolve()),
            "--clusters",
            str(clusters),
            "--nodes",
            str(nodes),
            "--base-port",
            str(base_port),
            "--host",
            host,
        ]
        if cpu is not None:
            self._argv += ["--cpu", str(cpu)]
        if galera or gr:
            self._argv += ["--galera", str(galera), "--gr", str(gr), "--seed", str(seed)]
        self._timeout = timeout
        self._proc: subprocess.Popen[bytes] | None = None
        self._buffer = b""
        self._lock = threading.Lock()
        self._clusters: tuple[SimCluster, ...] = ()
        self.pid = 0

    def __enter__(self) -> SimNodes:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def start(self) -> None:
        root = Path(__file__).resolve().parents[1]
        # its own session: a Ctrl-C meant for the bench does not hit the fleet mid-measure
        self._proc = subprocess.Popen(
            self._argv,
            cwd=root,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            bufsize=0,
            start_new_session=True,
        )
        try:
            ready = self._read_reply()
        except BaseException:
            self.close()
            raise
        self.pid = int(ready["pid"])
        self._clusters = tuple(
            SimCluster(
                c["name"],
                c["state_uuid"],
                int(c["conf_id"]),
                tuple(c["nodes"]),
                c.get("kind", "static"),
            )
            for c in ready["clusters"]
        )

    @property
    def clusters(self) -> tuple[SimCluster, ...]:
        return self._clusters

    @property
    def addresses(self) -> tuple[str, ...]:
        return tuple(n for c in self._clusters for n in c.nodes)

    @staticmethod
    def address(node: NodeName) -> tuple[str, int]:
        if isinstance(node, tuple):
            return node
        host, _, port = node.rpartition(":")
        return host, int(port)

    @staticmethod
    def connect(node: NodeName, timeout: float = 2.0) -> Any:
        """A client's connection to a node (multi-statements on: the probe asks several)."""
        import pymysql
        from pymysql.constants import CLIENT

        host, port = SimNodes.address(node)
        return pymysql.connect(
            host=host,
            port=port,
            user="monitor",
            password="x",
            client_flag=CLIENT.MULTI_STATEMENTS,
            connect_timeout=timeout,
            read_timeout=timeout,
            write_timeout=timeout,
        )

    def command(self, message: Mapping[str, object]) -> dict[str, Any]:
        """Send one command, return its reply; raises SimNodesError when it says ok: false."""
        with self._lock:
            proc = self._proc
            if proc is None or proc.stdin is None:
                raise SimNodesError("the fleet is not running")
            try:
                proc.stdin.write(json.dumps(message).encode() + b"\n")
            except OSError as exc:
                raise SimNodesError(f"the fleet process is gone: {exc}") from exc
            reply = self._read_reply()
        if not reply.get("ok"):
            raise SimNodesError(str(reply.get("error", reply)))
        return reply

    def act(self, target: NodeName, cmd: str, **fields: object) -> dict[str, Any]:
        """A command to a model cluster's node ("host:port" or a tuple) or to a model cluster
        (its name): kill, restart, freeze, thaw, ..., configure; the reply's fields."""
        names = {c.name for c in self._clusters}
        where = (
            {"cluster": target}
            if isinstance(target, str) and target in names
            else {"node": _name(target)}
        )
        return self.command({"cmd": cmd, **where, **fields})

    def truth(self, cluster: str | None = None) -> dict[str, Any]:
        """Every model cluster's truth() by name (or the one named)."""
        message: dict[str, object] = {"cmd": "truth"}
        if cluster is not None:
            message["cluster"] = cluster
        clusters: dict[str, Any] = self.command(message)["clusters"]
        return clusters

    def set_mode(self, node: NodeName, mode: Mode) -> None:
        self.command({"cmd": "set", "node": _name(node), "mode": mode})

    @contextlib.contextmanager
    def in_mode(self, node: NodeName, mode: Mode) -> Iterator[None]:
        """The node in `mode` for the block, answering again (`ok`) after it, however it ends."""
        self.set_mode(node, mode)
        try:
            yield
        finally:
            self.set_mode(node, "ok")

    def set_status(self, node: NodeName, **values: str | int | bool | None) -> None:
        self.command({"cmd": "set", "node": _name(node), "status": values})

    def set_variables(self, node: NodeName, **values: str | int | bool | None) -> None:
        self.command({"cmd": "set", "node": _name(node), "variables": values})

    def changing(self, node: NodeName, on: bool) -> None:
        self.command({"cmd": "changing", "node": _name(node), "on": on})

    def reset(self, node: NodeName) -> None:
        self.command({"cmd": "reset", "node": _name(node)})

    def get(self, node: NodeName) -> dict[str, Any]:
        described: dict[str, Any] = self.command({"cmd": "get", "node": _name(node)})["nodes"][0]
        return described

    def stats(self) -> SimStats:
        r = self.command({"cmd": "stats"})
        return SimStats(
            int(r["answers"]),
            int(r["commands"]),
            int(r["cache_hits"]),
            int(r["connections"]),
            int(r["accepted"]),
            float(r["cpu_s"]),
        )

    def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=3)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()

    def _read_reply(self) -> dict[str, Any]:
        proc = self._proc
        assert proc is not None and proc.stdout is not None
        fd = proc.stdout.fileno()
        deadline = time.monotonic() + self._timeout
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise SimNodesError(f"no answer from the fleet within {self._timeout} s")
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                raise SimNodesError(f"the fleet process ended (exit code {proc.poll()})")
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        reply = json.loads(line)
        if not isinstance(reply, dict):
            raise SimNodesError(f"not a reply: {line!r}")
        return reply


def _name(node: NodeName) -> str:
    return f"{node[0]}:{node[1]}" if isinstance(node, tuple) else node


if __name__ == "__main__":
    sys.exit(main())
