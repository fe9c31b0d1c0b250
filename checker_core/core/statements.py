"""The admin statements a pass makes of its plan, pure: what stages the wanted rows, what
makes them live, and how a dry run prints them (rule S2's order). The edges send them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from checker_core.core.model import COLUMNS, Plan, ServerRow, ServerStatus
from checker_core.core.staging import GuardedWrite

_COLUMN_LIST = ", ".join(COLUMNS)
_PLACEHOLDERS = ", ".join(["%s"] * len(COLUMNS))


class StagingRefused(Exception):
    """A plan names a row outside the hostgroups it manages: nothing is staged."""


@dataclass(frozen=True, slots=True)
class ApplyResult:
    """What applying a plan did: rows staged, LOAD done, SAVE done."""

    staged: int  # statements written to the staging area
    loaded: bool
    saved: bool
    # the change is live but SAVE ... TO DISK failed: a ProxySQL restart would load the old rows
    # from disk until a later pass saves again
    save_error: str | None = None


@dataclass(frozen=True, slots=True)
class Statement:
    """One admin statement with its parameters, kept apart until the driver binds them."""

    sql: str
    params: tuple[object, ...] = ()

    def render(self) -> str:
        """The statement as text a person can paste into the admin interface.

        ProxySQL's admin sessions run with NO_BACKSLASH_ESCAPES (PyMySQL then doubles quotes
        when it binds), so a quote is doubled and a backslash is an ordinary character.
        """
        if not self.params:
            return self.sql + ";"
        return (self.sql % tuple(_literal(p) for p in self.params)) + ";"


def _literal(value: object) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, int):
        return str(value)
    return "'" + str(value).replace("'", "''") + "'"


LOAD_SERVERS = Statement("LOAD MYSQL SERVERS TO RUNTIME")
SAVE_SERVERS = Statement("SAVE MYSQL SERVERS TO DISK")
_DELETE = "DELETE FROM mysql_servers WHERE hostgroup_id = %s AND hostname = %s AND port = %s"
# constant column names only; the values are parameters
_REPLACE = f"REPLACE INTO mysql_servers ({_COLUMN_LIST}) VALUES ({_PLACEHOLDERS})"  # noqa: S608


_KEY_COLUMNS = COLUMNS[:3]
_OTHER_COLUMNS = COLUMNS[3:]
# status compared as ProxySQL's CHECK reads it: a row staged as `online` is ONLINE (and read so)
_HOLDS = " AND ".join(
    f"UPPER({name}) = %s" if name == "status" else f"{name} = %s" for name in COLUMNS
)
_HAS_KEY = " AND ".join(f"{name} = %s" for name in _KEY_COLUMNS)
_SET_OTHERS = ", ".join(f"{name} = %s" for name in _OTHER_COLUMNS)
# constant column names only; the values are parameters
_UPDATE_IF_HOLDS = f"UPDATE mysql_servers SET {_SET_OTHERS} WHERE {_HOLDS}"  # noqa: S608
_DELETE_IF_HOLDS = f"DELETE FROM mysql_servers WHERE {_HOLDS}"  # noqa: S608
_INSERT_IF_ABSENT = (
    f"INSERT INTO mysql_servers ({_COLUMN_LIST}) SELECT {_PLACEHOLDERS} "  # noqa: S608
    f"WHERE NOT EXISTS (SELECT 1 FROM mysql_servers WHERE {_HAS_KEY})"
)


def guarded_statement(write: GuardedWrite) -> Statement:
    """The one statement that makes `write`, and changes no row unless the row still holds
    what it expects (pure). ProxySQL's admin is SQLite underneath, and says how many rows a
    statement changed."""
    if write.expect is None:
        assert write.write is not None, "a guarded write names a row"
        return Statement(_INSERT_IF_ABSENT, (*write.write.values(), *write.write.key))
    if write.write is None:
        return Statement(_DELETE_IF_HOLDS, write.expect.values())
    return Statement(_UPDATE_IF_HOLDS, (*write.write.values()[3:], *write.expect.values()))


def staging_statements(
    hostgroups: Sequence[int],
    staging: Sequence[ServerRow],
    desired: Sequence[ServerRow],
    *,
    writer: int | None = None,
) -> tuple[Statement, ...]:
    """What turns the staging rows of `hostgroups` into exactly `desired` (pure).

    Removals and demotions come before additions, and ONLINE rows of the `writer` hostgroup
    last of all: anyone's LOAD between two of these statements (an operator, another tool, a
    ProxySQL Cluster pull) finds no more ONLINE writers staged than before or after them.
    """
    managed = set(hostgroups)
    for row in desired:
        if row.hostgroup_id not in managed:
            raise StagingRefused(f"refusing to stage {row.describe()}: not a managed hostgroup")
    current = {row.key: row for row in staging if row.hostgroup_id in managed}
    wanted = {row.key: row for row in desired}
    deletes = [Statement(_DELETE, key) for key in sorted(current.keys() - wanted.keys())]

    def phase(row: ServerRow) -> int:
        if row.status is not ServerStatus.ONLINE:
            return 0
        return 2 if row.hostgroup_id == writer else 1

    changed = sorted(
        (row for key, row in wanted.items() if current.get(key) != row),
        key=lambda row: (phase(row), row.key),
    )
    return tuple(deletes + [Statement(_REPLACE, row.values()) for row in changed])


def plan_statements(
    plan: Plan, staging: Sequence[ServerRow], persist: bool, *, save_owed: bool = False
) -> tuple[Statement, ...]:
    """Every statement apply() issues for this plan, in order (what dry-run prints)."""
    hostgroups = plan.hostgroups
    statements = staging_statements(
        hostgroups.managed, staging, plan.desired, writer=hostgroups.writer
    )
    if plan.adopted:
        statements += staging_statements(hostgroups.templates, staging, plan.adopted)
    if plan.needs_load:
        statements += (LOAD_SERVERS, SAVE_SERVERS) if persist else (LOAD_SERVERS,)
    elif persist and save_owed:
        statements += (SAVE_SERVERS,)
    return statements
