"""One round trip per Galera node: wsrep status and the variables the rules need.

`SHOW GLOBAL STATUS/VARIABLES WHERE ...` works on MariaDB Galera 10.x and on Percona XtraDB
Cluster 5.7/8.x alike; a variable one flavour lacks (pxc_maint_mode and super_read_only on
MariaDB) is simply absent from the answer. Both statements go in one multi-statement query.

That SHOW VARIABLES walks every variable of the server. A connection's first probe learns which
of ours the server has; later probes on it (the daemon keeps its connections) read just those
with `SELECT @@global....`, which costs the server a fraction of it, and the status in the same
row as `name=value` pairs from the server's status table. One row is what the daemon reads on
every pass of a busy cluster, whose queues change each time: parsing a row per status cost a
60-node pass most of its CPU. A server whose status table is not there (or is empty), or whose
pairs reach group_concat_max_len, is asked with SHOW STATUS from then on.
"""

from __future__ import annotations

import functools
import threading
import weakref
from collections.abc import Sequence
from typing import Any

from checker_core.edges.question import AGAIN, Again, Answer, Question
from galera_checker.policy import GaleraFacts

STATUS_NAMES = (
    "wsrep_cluster_status",
    "wsrep_ready",
    "wsrep_connected",
    "wsrep_local_state",
    "wsrep_local_state_comment",
    "wsrep_local_recv_queue",
    "wsrep_cluster_size",
    # which cluster and which view of it: survivors evict only as one Primary component
    "wsrep_cluster_state_uuid",
    "wsrep_cluster_conf_id",
    # who the node is in the group, and whom it evicted: for cluster.evict_dead_nodes
    "wsrep_gcomm_uuid",
    "wsrep_evs_evict_list",
)
VARIABLE_NAMES = (
    "read_only",
    "super_read_only",
    "wsrep_reject_queries",
    "wsrep_sst_donor_rejects_queries",
    "wsrep_desync",
    "pxc_maint_mode",
    "wsrep_provider_options",
    "wsrep_on",
)
# SHOW VARIABLES spells these ON/OFF, SELECT @@global gives 1/0: the facts are the same either way
BOOLEAN_VARIABLES = frozenset(
    {"read_only", "super_read_only", "wsrep_sst_donor_rejects_queries", "wsrep_desync", "wsrep_on"}
)


def _marks(count: int) -> str:
    return ", ".join(["%s"] * count)


STATUS_SQL = f"SHOW GLOBAL STATUS WHERE Variable_name IN ({_marks(len(STATUS_NAMES))})"
PROBE_SQL = (
    f"{STATUS_SQL}; SHOW GLOBAL VARIABLES WHERE Variable_name IN ({_marks(len(VARIABLE_NAMES))})"
)
PROBE_PARAMS = STATUS_NAMES + VARIABLE_NAMES


@functools.lru_cache(maxsize=64)
def later_probe_sql(names: tuple[str, ...]) -> str:
    """The status, then the named variables in one row (names from VARIABLE_NAMES only)."""
    if not names:
        return STATUS_SQL
    unknown = set(names) - set(VARIABLE_NAMES)
    if unknown:
        raise ValueError(f"not a probed variable: {', '.join(sorted(unknown))}")
    return f"{STATUS_SQL}; SELECT " + ", ".join(f"@@global.{name}" for name in names)


# where a server keeps its status as a table: MariaDB, then MySQL 5.7+/PXC
STATUS_TABLES = ("information_schema.GLOBAL_STATUS", "performance_schema.global_status")


@functools.lru_cache(maxsize=64)
def one_row_sql(names: tuple[str, ...], status_count: int, table: str) -> str:
    """The named variables, the status (`status_count` names, as parameters) as name=value
    pairs from `table`, and group_concat_max_len, which tells pairs cut short: one row."""
    unknown = set(names) - set(VARIABLE_NAMES)
    if unknown or table not in STATUS_TABLES:
        raise ValueError(f"not a probed variable or status table: {unknown or table}")
    columns = [f"@@global.{name}" for name in names]
    # the table is one of STATUS_TABLES (checked above); the names go as parameters
    columns.append(
        "(SELECT GROUP_CONCAT(VARIABLE_NAME, '=', VARIABLE_VALUE SEPARATOR ';') "  # noqa: S608
        f"FROM {table} WHERE VARIABLE_NAME IN ({_marks(status_count)}))"
    )
    columns.append("@@session.group_concat_max_len")
    return "SELECT " + ", ".join(columns)


def _one_row_values(names: tuple[str, ...], answer: Answer) -> dict[str, str] | None:
    """The values of one_row_sql's answer; None when its status cannot be read from it (the
    table held none of it, or the pairs may be cut short)."""
    rows = answer.rows(0)
    row = rows[0] if rows else ()
    if len(row) != len(names) + 2:
        return None
    pairs, longest = row[len(names)], row[len(names) + 1]
    text = pairs.decode() if isinstance(pairs, bytes) else str(pairs or "")
    if not text or len(text.encode()) >= int(str(longest)):
        return None
    values = {n: _variable_text(n, v) for n, v in zip(names, row, strict=False)}
    for pair in text.split(";"):
        name, sep, value = pair.partition("=")
        if sep:
            values[name.strip().lower()] = value
    return values


def _next_table(conn: Any) -> None:
    """The status is to be read elsewhere on this connection from now on."""
    with _known_lock:
        names, table = _known[conn]
        _known[conn] = (names, table + 1)


# per open connection, what its first probe learnt: the variables of VARIABLE_NAMES its server
# has, and which of STATUS_TABLES answered (an index into it; past its end, none did and the
# status is asked with SHOW STATUS)
_known: weakref.WeakKeyDictionary[Any, tuple[tuple[str, ...], int]] = weakref.WeakKeyDictionary()
_known_lock = threading.Lock()
_NOT_YET = (None, 0)


def _learnt(conn: Any) -> tuple[tuple[str, ...] | None, int]:
    """The connection's variables (None before its first probe) and its status table."""
    with _known_lock:
        return _known.get(conn, _NOT_YET)


def learnt_names(conn: Any) -> tuple[str, ...] | None:
    return _learnt(conn)[0]


class GaleraProbe(Question[GaleraFacts]):
    """The whole probe: SHOW VARIABLES on a connection's first, SELECT @@global after."""

    def ask(self, conn: Any) -> tuple[str, Sequence[object]]:
        names, table = _learnt(conn)
        if names is None:
            return PROBE_SQL, PROBE_PARAMS
        if table < len(STATUS_TABLES):
            return one_row_sql(names, len(STATUS_NAMES), STATUS_TABLES[table]), STATUS_NAMES
        return later_probe_sql(names), STATUS_NAMES

    def read(self, conn: Any, answer: Answer) -> GaleraFacts | Again:
        names, table = _learnt(conn)
        if names is not None and table < len(STATUS_TABLES):
            in_row = _read_one_row(conn, names, answer)
            return in_row if isinstance(in_row, Again) else GaleraFacts(in_row)
        values: dict[str, str] = {}
        _add_rows(values, answer.rows(0))
        if names is None:
            _add_rows(values, answer.rows(1))
            with _known_lock:
                _known[conn] = (tuple(n for n in VARIABLE_NAMES if n in values), 0)
        elif names:
            row = answer.rows(1)[:1]
            for name, value in zip(names, row[0] if row else (), strict=False):
                values[name] = _variable_text(name, value)
        return GaleraFacts(values)


probe = GaleraProbe()


# the daemon's watch between passes asks a writer only what says whether it may still write:
# one SELECT, one row (a tenth of a probe's parsing), on a connection a probe already used
WATCH_STATUS = (
    "wsrep_cluster_status",
    "wsrep_ready",
    "wsrep_connected",
    "wsrep_local_state",
    "wsrep_cluster_size",
)
WATCH_VARIABLES = (
    "wsrep_reject_queries",
    "wsrep_desync",
    "read_only",
    "super_read_only",
    "pxc_maint_mode",
)


@functools.lru_cache(maxsize=64)
def watch_sql(names: tuple[str, ...], table: str) -> str:
    """The watch's question: the named variables, then the status as name=value pairs."""
    unknown = set(names) - set(WATCH_VARIABLES)
    if unknown:
        raise ValueError(f"not a watched variable: {unknown}")
    return one_row_sql(names, len(WATCH_STATUS), table)


class GaleraWatch(Question[GaleraFacts]):
    """What the watch needs of a writer; the whole probe on a connection not yet probed, or
    whose server keeps no status table to read in one row."""

    def ask(self, conn: Any) -> tuple[str, Sequence[object]]:
        names, table = _learnt(conn)
        if names is None or table >= len(STATUS_TABLES):
            return probe.ask(conn)
        return watch_sql(_asked(names), STATUS_TABLES[table]), WATCH_STATUS

    def read(self, conn: Any, answer: Answer) -> GaleraFacts | Again:
        names, table = _learnt(conn)
        if names is None or table >= len(STATUS_TABLES):
            return probe.read(conn, answer)
        in_row = _read_one_row(conn, _asked(names), answer)
        return in_row if isinstance(in_row, Again) else GaleraFacts(in_row)


@functools.lru_cache(maxsize=64)
def _asked(names: tuple[str, ...]) -> tuple[str, ...]:
    """The watched variables a server has (made once per set of names: asked every round)."""
    return tuple(n for n in WATCH_VARIABLES if n in names)


def _read_one_row(conn: Any, names: tuple[str, ...], answer: Answer) -> dict[str, str] | Again:
    """one_row_sql's values; AGAIN, asked elsewhere from now on, when this server's status
    cannot be read from the table it was asked in."""
    from pymysql.err import OperationalError, ProgrammingError

    failed = answer.error(0)
    values = None if failed is not None else _one_row_values(names, answer)
    if values is None:
        if failed is not None and not isinstance(failed, OperationalError | ProgrammingError):
            raise failed
        _next_table(conn)
        return AGAIN
    return values


watch = GaleraWatch()


def _add_rows(values: dict[str, str], rows: Any) -> None:
    for name, value in rows:
        values[str(name).lower()] = "" if value is None else str(value)


def _variable_text(name: str, value: object) -> str:
    """A variable's value as SHOW VARIABLES would have spelt it."""
    if value is None:
        return ""
    if name in BOOLEAN_VARIABLES and isinstance(value, int):
        return "ON" if value else "OFF"
    if isinstance(value, bytes):
        return value.decode()
    return str(value)
