"""An operator's staged edit set aside around a LOAD is never overwritten (rules S5, S11).

Every write a set-aside makes to a row of a hostgroup the pass does not manage holds only while
the row is what the pass read or wrote there: an edit the operator makes between the pass's
read and its write-back is what stays staged. Table-driven over the row's kind (edited,
staged-only, live-only) and what the operator does in between, on the pure writes and on the
statements (against SQLite, which ProxySQL's admin is underneath).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import replace

import pytest

from checker_core.core.model import ClusterRows, ServerRow, ServerStatus, sort_rows
from checker_core.core.staging import (
    GuardedWrite,
    changed_while_aside,
    set_aside,
    written_back,
)
from checker_core.core.statements import guarded_statement
from tests.lab.admin_schema import MYSQL_SERVERS

HG = 10040  # a hostgroup the pass does not manage
LIVE = ServerRow(HG, "10.0.0.1", 3306, weight=1)
EDIT = replace(LIVE, weight=518)  # the operator's edit read by the pass
NEWER = replace(LIVE, weight=600)  # the operator's edit made while the row was set aside
ADDED = ServerRow(HG, "10.0.0.2", 3306, comment="being added")  # staged only
OWN = [10]

Rows = dict[tuple[int, str, int], ServerRow]


def apply(staging: Rows, writes: Iterable[GuardedWrite]) -> tuple[GuardedWrite, ...]:
    """The writes made on `staging` as ProxySQL makes the guarded statements; those that went in."""
    went_in = []
    for write in writes:
        now = staging.get(write.key)
        if now != write.expect:
            continue
        if write.write is None:
            del staging[write.key]
        else:
            staging[write.key] = write.write
        went_in.append(write)
    return tuple(went_in)


# (name, live row, staged row read by the pass, the operator between the two steps and the
#  write-back: None leaves the row, else what it then holds ("gone": deleted), what stays staged)
GONE = "gone"
CASES: list[tuple[str, ServerRow | None, ServerRow | None, object, ServerRow | None]] = [
    ("untouched edit written back", LIVE, EDIT, None, EDIT),
    ("edit edited in the window kept", LIVE, EDIT, NEWER, NEWER),
    ("edit deleted in the window not re-inserted", LIVE, EDIT, GONE, None),
    # the live row staged by the operator is the pass's own write to anyone reading staging
    ("edit set to the live row in the window is taken for the pass's", LIVE, EDIT, LIVE, EDIT),
    ("untouched staged-only row re-inserted", None, ADDED, None, ADDED),
    ("staged-only row inserted again in the window kept", None, ADDED, NEWER, NEWER),
    ("untouched live-only row deleted again", LIVE, None, None, None),
    ("live-only row edited in the window kept", LIVE, None, NEWER, NEWER),
    ("live-only row deleted in the window stays deleted", LIVE, None, GONE, None),
]


def _placed(row: ServerRow | None, like: ServerRow | None) -> ServerRow | None:
    """`row`'s values under the key of the case's row."""
    if row is None or like is None:
        return row
    return replace(row, hostname=like.hostname, port=like.port)


@pytest.mark.parametrize(
    ("name", "live", "staged", "operator", "stays"), CASES, ids=[c[0] for c in CASES]
)
def test_an_edit_made_while_set_aside_is_what_stays_staged(
    name: str,
    live: ServerRow | None,
    staged: ServerRow | None,
    operator: object,
    stays: ServerRow | None,
) -> None:
    key_row = staged if staged is not None else live
    assert key_row is not None
    rows = ClusterRows(
        runtime=sort_rows([r for r in (live,) if r]), staging=sort_rows([r for r in (staged,) if r])
    )
    aside = set_aside(rows, OWN)
    assert aside.hostgroups == (HG,)
    staging: Rows = {r.key: r for r in rows.staging}
    went_in = apply(staging, aside.as_live())
    assert staging == {r.key: r for r in aside.live}, "the LOAD carries the live rows"
    if operator is GONE:
        staging.pop(key_row.key, None)
    elif isinstance(operator, ServerRow):
        staging[key_row.key] = _placed(operator, key_row)  # type: ignore[assignment]
    back = written_back(went_in)
    missed = [w for w in back if w not in apply(staging, back)]
    assert staging.get(key_row.key) == _placed(stays, key_row)
    # said once when the operator's newer row was kept, never when all went back as read
    assert (changed_while_aside(missed) is not None) == (operator not in (None, LIVE)), missed


def test_an_edit_made_before_it_is_staged_as_live_is_neither_overwritten_nor_written_back() -> None:
    """The operator edits the row after the pass read it and before it stages it as live: the
    write does not go in (the read-back then fails the LOAD), and nothing of it is put back."""
    rows = ClusterRows(runtime=(LIVE,), staging=(EDIT,))
    aside = set_aside(rows, OWN)
    staging: Rows = {NEWER.key: NEWER}
    went_in = apply(staging, aside.as_live())
    assert went_in == ()
    assert written_back(went_in) == ()
    assert staging == {NEWER.key: NEWER}
    assert changed_while_aside(aside.as_live()) == (
        f"an operator's staged edit of hostgroup {HG} changed while it was set aside: "
        "kept as they wrote it"
    )


def test_the_write_back_removes_and_demotes_before_it_puts_online_rows() -> None:
    soft = replace(LIVE, hostname="10.0.0.3", status=ServerStatus.OFFLINE_SOFT)
    rows = ClusterRows(
        runtime=sort_rows([LIVE, replace(soft, status=ServerStatus.ONLINE)]),
        staging=sort_rows([ADDED, soft]),
    )
    back = written_back(set_aside(rows, OWN).as_live())
    assert [(w.write is None, w.write and w.write.status) for w in back] == [
        (True, None),
        (False, ServerStatus.OFFLINE_SOFT),
        (False, ServerStatus.ONLINE),
    ]


# ------------------------------------------------------------------ the statements, on SQLite


def sqlite_staging(rows: Iterable[ServerRow]) -> sqlite3.Connection:
    db = sqlite3.connect(":memory:")
    db.execute(MYSQL_SERVERS)
    for row in rows:
        marks = ", ".join("?" * len(row.values()))
        db.execute(f"INSERT INTO mysql_servers VALUES ({marks})", row.values())
    return db


def run(db: sqlite3.Connection, write: GuardedWrite) -> bool:
    statement = guarded_statement(write)
    return db.execute(statement.sql.replace("%s", "?"), statement.params).rowcount == 1


def read(db: sqlite3.Connection) -> set[ServerRow]:
    return {
        ServerRow.from_admin([str(v) for v in r]) for r in db.execute("SELECT * FROM mysql_servers")
    }


STATEMENTS: list[tuple[str, GuardedWrite, Sequence[ServerRow], bool, set[ServerRow]]] = [
    ("update of the row as read", GuardedWrite(EDIT, LIVE), [EDIT], True, {LIVE}),
    ("update of a row edited since", GuardedWrite(EDIT, LIVE), [NEWER], False, {NEWER}),
    ("update of a row deleted since", GuardedWrite(EDIT, LIVE), [], False, set()),
    ("delete of the row as read", GuardedWrite(ADDED, None), [ADDED], True, set()),
    (
        "delete of a row edited since",
        GuardedWrite(ADDED, None),
        [replace(ADDED, weight=9)],
        False,
        {replace(ADDED, weight=9)},
    ),
    ("insert where no row is", GuardedWrite(None, ADDED), [], True, {ADDED}),
    (
        "insert where someone put a row since",
        GuardedWrite(None, ADDED),
        [replace(ADDED, weight=9)],
        False,
        {replace(ADDED, weight=9)},
    ),
]


@pytest.mark.parametrize(
    ("name", "write", "before", "went_in", "after"), STATEMENTS, ids=[s[0] for s in STATEMENTS]
)
def test_a_guarded_statement_changes_its_row_only_while_it_holds_what_it_expects(
    name: str,
    write: GuardedWrite,
    before: Sequence[ServerRow],
    went_in: bool,
    after: set[ServerRow],
) -> None:
    db = sqlite_staging(before)
    assert run(db, write) is went_in
    assert read(db) == after


def test_a_status_staged_in_lower_case_is_the_row_as_read() -> None:
    """ProxySQL keeps a status as typed (`online`) and the pass reads it as ONLINE."""
    db = sqlite_staging([])
    db.execute(
        "INSERT INTO mysql_servers (hostgroup_id, hostname, weight) VALUES (?, ?, 518)",
        (HG, LIVE.hostname),
    )
    db.execute("UPDATE mysql_servers SET status = 'online'")
    assert run(db, GuardedWrite(EDIT, LIVE))
    assert read(db) == {LIVE}


def test_values_are_parameters() -> None:
    hostile = replace(ADDED, hostname="h'; DROP TABLE mysql_servers; --", comment="x' OR '1'='1")
    for write in (
        GuardedWrite(None, hostile),
        GuardedWrite(hostile, None),
        GuardedWrite(hostile, replace(hostile, weight=2)),
    ):
        statement = guarded_statement(write)
        assert hostile.hostname not in statement.sql and hostile.comment not in statement.sql
        assert hostile.hostname in statement.params
