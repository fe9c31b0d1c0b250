"""Rows as ProxySQL returns them, and the staging statements that turn one layout into another."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from checker_core.core.model import (
    COLUMNS,
    BadRow,
    Hostgroups,
    Plan,
    ServerRow,
    ServerStatus,
    sort_rows,
)
from checker_core.core.statements import (
    LOAD_SERVERS,
    SAVE_SERVERS,
    StagingRefused,
    Statement,
    plan_statements,
    staging_statements,
)
from checker_core.edges.proxysql import AdminClient

HG = Hostgroups(
    writer=100, reader=101, backup_writer=102, offline=9100, config_writer=8100, config_reader=8101
)


def admin_values(row: ServerRow) -> list[str]:
    """What ProxySQL's admin sends back: every value as a string."""
    return [str(v) for v in row.values()]


def test_from_admin_round_trip() -> None:
    row = ServerRow(100, "db1", 3311, status=ServerStatus.OFFLINE_SOFT, weight=7, comment="it's")
    assert ServerRow.from_admin(admin_values(row)) == row
    assert len(row.values()) == len(COLUMNS) == 12


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        ({"status": "BROKEN"}, "row (100, db1, 3311): unknown status 'BROKEN'"),
        ({"weight": "heavy"}, "row (100, db1, 3311): weight is not a number: 'heavy'"),
        ({"hostname": ""}, "row (100, , 3311): empty hostname"),
    ],
)
def test_from_admin_rejects_bad_rows(patch: dict[str, str], message: str) -> None:
    values = dict(zip(COLUMNS, admin_values(ServerRow(100, "db1", 3311)), strict=True))
    values.update(patch)
    with pytest.raises(BadRow, match=message.replace("(", r"\(").replace(")", r"\)")):
        ServerRow.from_admin(list(values.values()))


def test_from_admin_accepts_null_comment_and_lowercase_status() -> None:
    values: list[object | None] = list(admin_values(ServerRow(100, "db1", 3311)))
    values[COLUMNS.index("comment")] = None
    values[COLUMNS.index("status")] = "online"
    assert ServerRow.from_admin(values) == ServerRow(100, "db1", 3311)


def test_staging_statements_only_touch_differences() -> None:
    keep = ServerRow(100, "db1", 3311)
    stale = ServerRow(101, "db2", 3312)
    changed_before = ServerRow(102, "db3", 3313)
    changed_after = ServerRow(102, "db3", 3313, status=ServerStatus.OFFLINE_SOFT)
    new = ServerRow(9100, "db4", 3314)
    other_cluster = ServerRow(200, "elsewhere", 3306)
    statements = staging_statements(
        HG.managed, [keep, stale, changed_before, other_cluster], [keep, changed_after, new]
    )
    assert [s.sql.split()[0] for s in statements] == ["DELETE", "REPLACE", "REPLACE"]
    assert statements[0].params == (101, "db2", 3312)
    assert statements[1].params == changed_after.values()
    assert statements[2].params == new.values()


def test_staging_refuses_rows_outside_the_cluster() -> None:
    with pytest.raises(StagingRefused, match="not a managed hostgroup"):
        staging_statements(HG.managed, [], [ServerRow(8100, "db1", 3311)])


def test_plan_statements_load_only_with_changes() -> None:
    row = ServerRow(100, "db1", 3311)
    quiet = Plan(HG, desired=(row,))
    assert plan_statements(quiet, [row], persist=True) == ()
    from checker_core.core.model import Change, ChangeKind

    busy = Plan(HG, desired=(row,), changes=(Change(ChangeKind.ADD, None, row, "writer"),))
    assert plan_statements(busy, [row], persist=True) == (LOAD_SERVERS, SAVE_SERVERS)
    assert plan_statements(busy, [row], persist=False) == (LOAD_SERVERS,)


def test_render_escapes_values() -> None:
    statement = Statement(
        "DELETE FROM mysql_servers WHERE hostname = %s AND port = %s", ("a'b\\c", 3306)
    )
    # ProxySQL's admin runs with NO_BACKSLASH_ESCAPES: quotes doubled, backslashes literal
    expected = "DELETE FROM mysql_servers WHERE hostname = 'a''b\\c' AND port = 3306;"
    assert statement.render() == expected
    assert LOAD_SERVERS.render() == "LOAD MYSQL SERVERS TO RUNTIME;"


rows_strategy = st.lists(
    st.builds(
        ServerRow,
        hostgroup_id=st.sampled_from(HG.managed),
        hostname=st.sampled_from(["db1", "db2", "db3"]),
        port=st.sampled_from([3311, 3312]),
        status=st.sampled_from(list(ServerStatus)),
        weight=st.integers(0, 1000),
    ),
    max_size=12,
    unique_by=lambda r: r.key,
)


def simulate(staging: list[ServerRow], statements: tuple[Statement, ...]) -> tuple[ServerRow, ...]:
    """Apply DELETE/REPLACE statements to a list of rows as ProxySQL's table would."""
    table = {row.key: row for row in staging}
    for statement in statements:
        if statement.sql.startswith("DELETE"):
            key = statement.params
            table.pop((int(str(key[0])), str(key[1]), int(str(key[2]))), None)
        else:
            row = ServerRow.from_admin([str(v) for v in statement.params])
            table[row.key] = row
    return sort_rows(table.values())


@given(staging=rows_strategy, desired=rows_strategy)
def test_statements_reach_exactly_the_desired_rows(
    staging: list[ServerRow], desired: list[ServerRow]
) -> None:
    statements = staging_statements(HG.managed, staging, desired)
    assert simulate(staging, statements) == sort_rows(desired)
    # a second computation over the result has nothing left to do
    assert staging_statements(HG.managed, list(simulate(staging, statements)), desired) == ()


def packed(answer: Sequence[tuple[object, ...]]) -> str | None:
    """The rows as ProxySQL's SQLite packs them for read_rows: a line a row, its source ('r'
    runtime, 'm' staging), then each value as 'x' and the hex of its text ('n': NULL)."""
    lines = [
        "|".join(
            ["r" if source == "runtime" else "m"]
            + ["n" if v is None else "x" + str(v).encode().hex().upper() for v in values]
        )
        for source, *values in answer
    ]
    return "\n".join(lines) or None


class AnsweringAdmin(AdminClient):
    """The admin client over a fixed answer; counts the rows it parsed."""

    def __init__(self, answer: Sequence[tuple[object, ...]]) -> None:
        super().__init__(None, "test admin")  # type: ignore[arg-type]
        self.answer = answer
        self.parsed = 0

    def execute(self, sql: str, params: Sequence[object] = ()) -> list[tuple[object, ...]]:
        return [(packed(self.answer),)]  # a client's first read

    def _one_value(
        self, sql: str, params: Sequence[object], last: bytes | None = None
    ) -> tuple[bytes, object]:
        value = packed(self.answer)
        raw = (value or "").encode()
        return (raw, None) if raw == last else (raw, value)

    def _row(self, values: tuple[object, ...]) -> ServerRow:
        before = len(self._parsed)
        row = super()._row(values)
        self.parsed += len(self._parsed) - before
        return row


def test_the_same_answer_is_parsed_once_and_a_changed_row_again() -> None:
    rows = [ServerRow(100, "db1", 3311), ServerRow(101, "db2", 3312, weight=5)]
    answer = [("runtime", *admin_values(r)) for r in rows] + [("main", *admin_values(rows[0]))]
    admin = AnsweringAdmin(answer)

    first = admin.read_rows([100, 101])
    again = admin.read_rows([100, 101])

    assert again is first, "the same answer is the rows it gave before"
    assert first.runtime == tuple(rows) and first.staging == (rows[0],)
    assert admin.parsed == 2, "one parse per distinct row"
    shunned = ServerRow(100, "db1", 3311, status=ServerStatus.SHUNNED)
    admin.answer = [("runtime", *admin_values(shunned))]
    assert admin.read_rows([100]).runtime == (shunned,)
    assert admin.parsed == 3


def test_a_bad_row_is_refused_every_time_it_is_read() -> None:
    values = admin_values(ServerRow(100, "db1", 3311))
    values[COLUMNS.index("status")] = "NOT_A_STATUS"
    admin = AnsweringAdmin([("runtime", *values)])
    for _ in range(2):
        with pytest.raises(BadRow, match="unknown status"):
            admin.read_rows([100])
