"""Contract of the ProxySQL admin interface as the checkers use it.

These run against whatever the lab provides (a real ProxySQL 2.7 or the lab's emulator) and assert
only what a real ProxySQL 2.7 admin does: the observed behaviour the project's reference records,
and what follows from ProxySQL's admin source. Hostnames end in .invalid so a real ProxySQL's
monitor can never reach, and so never act on, the servers written here.
"""

from __future__ import annotations

import re
import string
from collections.abc import Sequence

import pymysql
import pymysql.cursors
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pymysql.constants import SERVER_STATUS

from checker_core.core.model import ServerRow, sort_rows
from checker_core.core.settings import Endpoint, ProxySQLSettings, Secret, Tls
from checker_core.edges.proxysql import AdminClient
from tests.lab.proxysql import ProxySQLLab, admin_cursor, binary_version

pytestmark = pytest.mark.proxysql

SERVER_COLUMNS = (
    "hostgroup_id",
    "hostname",
    "port",
    "gtid_port",
    "status",
    "weight",
    "compression",
    "max_connections",
    "max_replication_lag",
    "use_ssl",
    "max_latency_ms",
    "comment",
)
COLS = ", ".join(SERVER_COLUMNS)
ORDER = " ORDER BY hostgroup_id, hostname, port"
ADMIN_ERROR = 1045

HOST_A = "db-a.lab.invalid"
HOST_B = "db-b.lab.invalid"
HOST_C = "db-c.lab.invalid"

Row = tuple[str | None, ...]

# What `SHOW CREATE TABLE mysql_servers` prints on ProxySQL 2.7 (the same columns for runtime_ and
# disk.); written out here so the emulator is checked against the reference, not against itself.
MYSQL_SERVERS_DDL_BODY = """ (
    hostgroup_id INT CHECK (hostgroup_id>=0) NOT NULL DEFAULT 0,
    hostname VARCHAR NOT NULL,
    port INT CHECK (port >= 0 AND port <= 65535) NOT NULL DEFAULT 3306,
    gtid_port INT CHECK ((gtid_port <> port OR gtid_port=0) AND gtid_port >= 0 AND gtid_port <= 65535) NOT NULL DEFAULT 0,
    status VARCHAR CHECK (UPPER(status) IN ('ONLINE','SHUNNED','OFFLINE_SOFT', 'OFFLINE_HARD')) NOT NULL DEFAULT 'ONLINE',
    weight INT CHECK (weight >= 0 AND weight <=10000000) NOT NULL DEFAULT 1,
    compression INT CHECK (compression IN(0,1)) NOT NULL DEFAULT 0,
    max_connections INT CHECK (max_connections >=0) NOT NULL DEFAULT 1000,
    max_replication_lag INT CHECK (max_replication_lag >= 0 AND max_replication_lag <= 126144000) NOT NULL DEFAULT 0,
    use_ssl INT CHECK (use_ssl IN(0,1)) NOT NULL DEFAULT 0,
    max_latency_ms INT UNSIGNED CHECK (max_latency_ms>=0) NOT NULL DEFAULT 0,
    comment VARCHAR NOT NULL DEFAULT '',
    PRIMARY KEY (hostgroup_id, hostname, port) )"""  # noqa: E501

POOL_COLUMNS = [
    "hostgroup",
    "srv_host",
    "srv_port",
    "status",
    "ConnUsed",
    "ConnFree",
    "ConnOK",
    "ConnERR",
    "MaxConnUsed",
    "Queries",
    "Queries_GTID_sync",
    "Bytes_data_sent",
    "Bytes_data_recv",
    "Latency_us",
]


def fetch(cur: pymysql.cursors.Cursor, sql: str, params: Sequence[object] = ()) -> list[Row]:
    cur.execute(sql, tuple(params) if params else None)
    return [tuple(row) for row in cur.fetchall()]


def add_server(
    cur: pymysql.cursors.Cursor, hostgroup: int, host: str, port: int = 3306, weight: int = 1
) -> None:
    cur.execute(
        "INSERT INTO mysql_servers (hostgroup_id, hostname, port, weight) VALUES (%s, %s, %s, %s)",
        (hostgroup, host, port, weight),
    )


def main_servers(cur: pymysql.cursors.Cursor) -> list[Row]:
    return fetch(cur, f"SELECT {COLS} FROM mysql_servers{ORDER}")


def as_configured(row: Row) -> Row:
    """A runtime row with SHUNNED read as ONLINE: a real ProxySQL's monitor shuns and lifts
    servers by itself (these hosts never answer it), so that status is not the test's to see."""
    status = SERVER_COLUMNS.index("status")
    return (*row[:status], "ONLINE", *row[status + 1 :]) if row[status] == "SHUNNED" else row


def runtime_servers(cur: pymysql.cursors.Cursor) -> list[Row]:
    return [
        as_configured(row) for row in fetch(cur, f"SELECT {COLS} FROM runtime_mysql_servers{ORDER}")
    ]


def default_row(hostgroup: int, host: str, port: int = 3306, weight: int = 1) -> Row:
    return (
        str(hostgroup),
        host,
        str(port),
        "0",
        "ONLINE",
        str(weight),
        "0",
        "1000",
        "0",
        "0",
        "0",
        "",
    )


def checksum_row(cur: pymysql.cursors.Cursor, name: str) -> tuple[int, int, str]:
    rows = fetch(
        cur, "SELECT version, epoch, checksum FROM runtime_checksums_values WHERE name = %s", [name]
    )
    assert len(rows) == 1, rows
    version, epoch, checksum = rows[0]
    assert version is not None and epoch is not None and checksum is not None
    return int(version), int(epoch), checksum


# --- reading and writing rows ---------------------------------------------------------------------


def test_row_round_trip_fills_defaults_and_returns_text(proxysql_admin: ProxySQLLab) -> None:
    with admin_cursor(proxysql_admin) as cur:
        add_server(cur, 10, HOST_A)
        cur.execute(
            f"INSERT INTO mysql_servers ({COLS}) VALUES "
            "(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
            (11, HOST_B, 3307, 0, "OFFLINE_SOFT", 500, 1, 200, 30, 1, 150, "lab note"),
        )
        cur.execute("SELECT * FROM mysql_servers" + ORDER)
        assert cur.description is not None
        assert tuple(d[0] for d in cur.description) == SERVER_COLUMNS
        rows = [tuple(r) for r in cur.fetchall()]
    assert rows == [
        default_row(10, HOST_A),
        (
            "11",
            HOST_B,
            "3307",
            "0",
            "OFFLINE_SOFT",
            "500",
            "1",
            "200",
            "30",
            "1",
            "150",
            "lab note",
        ),
    ]


def test_one_round_trip_read_of_runtime_and_main(proxysql_admin: ProxySQLLab) -> None:
    with admin_cursor(proxysql_admin) as cur:
        add_server(cur, 10, HOST_A)
        add_server(cur, 11, HOST_B)
        add_server(cur, 99, HOST_C)  # outside the hostgroups asked for
        cur.execute("LOAD MYSQL SERVERS TO RUNTIME")
        # staged, not loaded: main and runtime now differ for HOST_A
        cur.execute(
            "UPDATE mysql_servers SET weight = %s WHERE hostgroup_id = %s AND hostname = %s",
            (7, 10, HOST_A),
        )
        rows = fetch(
            cur,
            f"SELECT 'runtime' AS src, {COLS} FROM runtime_mysql_servers "
            "WHERE hostgroup_id IN (%s, %s) "
            f"UNION ALL SELECT 'main', {COLS} FROM mysql_servers WHERE hostgroup_id IN (%s, %s)",
            [10, 11, 10, 11],
        )
    rows = [r[:1] + as_configured(r[1:]) if r[0] == "runtime" else r for r in rows]
    assert sorted(rows, key=lambda r: tuple(str(v) for v in r)) == sorted(
        [
            ("runtime", *default_row(10, HOST_A)),
            ("runtime", *default_row(11, HOST_B)),
            ("main", *default_row(10, HOST_A, weight=7)),
            ("main", *default_row(11, HOST_B)),
        ],
        key=lambda r: tuple(str(v) for v in r),
    )


def test_the_checkers_read_of_rows_in_one_value_is_the_plain_select(
    proxysql_admin: ProxySQLLab,
) -> None:
    """AdminClient.read_rows asks for the rows as one packed value; what it unpacks is what a
    plain SELECT of the same rows gives, whatever a comment holds (the packing's separators,
    quotes, a newline, non-ASCII), and an unchanged answer is the rows read before."""
    odd = "a|b\nc 'q' \\ é n x"
    with admin_cursor(proxysql_admin) as cur:
        add_server(cur, 10, HOST_A)
        add_server(cur, 11, HOST_B, port=3307, weight=9)
        add_server(cur, 99, HOST_C)  # outside the hostgroups asked for
        cur.execute("LOAD MYSQL SERVERS TO RUNTIME")
        cur.execute("UPDATE mysql_servers SET comment = %s WHERE hostgroup_id = %s", (odd, 10))
        plain_main = [
            ServerRow.from_admin(r)
            for r in fetch(cur, f"SELECT {COLS} FROM mysql_servers WHERE hostgroup_id IN (10, 11)")
        ]
    client = AdminClient.connect(
        ProxySQLSettings(
            proxysql_admin.admin_host,
            proxysql_admin.admin_port,
            Endpoint(
                proxysql_admin.admin_user, Secret(proxysql_admin.admin_password), Tls(), 2000, 5000
            ),
        )
    )
    try:
        first = client.read_rows([11, 10])
        again = client.read_rows([10, 11])
        with admin_cursor(proxysql_admin) as cur:
            cur.execute("UPDATE mysql_servers SET weight = %s WHERE hostgroup_id = %s", (4, 11))
        changed = client.read_rows([10, 11])
    finally:
        client.close()
    assert first.staging == sort_rows(plain_main)
    assert {r.comment for r in first.staging} == {odd, ""}
    assert {(r.hostgroup_id, r.hostname) for r in first.runtime} == {(10, HOST_A), (11, HOST_B)}
    assert all(r.comment == "" for r in first.runtime), "the comment was staged, not loaded"
    assert again is first, "the same answer is the rows read before"
    assert {r.hostname: r.weight for r in changed.staging} == {HOST_A: 1, HOST_B: 4}


@pytest.mark.parametrize("verb", ["REPLACE INTO", "INSERT OR REPLACE INTO"])
def test_replace_updates_a_row(proxysql_admin: ProxySQLLab, verb: str) -> None:
    with admin_cursor(proxysql_admin) as cur:
        add_server(cur, 10, HOST_A, weight=5)
        cur.execute(
            f"{verb} mysql_servers (hostgroup_id, hostname, port, weight) VALUES (%s, %s, %s, %s)",
            (10, HOST_A, 3306, 77),
        )
        assert main_servers(cur) == [default_row(10, HOST_A, weight=77)]


def test_quotes_and_backslashes_in_parameters_round_trip(proxysql_admin: ProxySQLLab) -> None:
    """The admin is SQLite, which knows no backslash escapes; ProxySQL tells clients so with
    SERVER_STATUS_NO_BACKSLASH_ESCAPES, and PyMySQL then quotes by doubling quotes. Hand-built
    SQL must quote the same way ('' inside '...', backslashes literal)."""
    comment = "it's the writer \\ C:\\lab"
    conn = proxysql_admin.connect()
    try:
        with conn.cursor() as cur:
            # the first statement on a fresh connection
            cur.execute(
                "INSERT INTO mysql_servers (hostgroup_id, hostname, comment) VALUES (%s, %s, %s)",
                (10, HOST_A, comment),
            )
            # (the PyMySQL type stubs do not declare server_status)
            status = int(getattr(conn, "server_status", 0) or 0)
            assert status & SERVER_STATUS.SERVER_STATUS_NO_BACKSLASH_ESCAPES
            rows = fetch(cur, "SELECT comment FROM mysql_servers WHERE comment = %s", [comment])
            assert rows == [(comment,)]
            assert fetch(
                cur,
                "SELECT comment FROM mysql_servers WHERE comment = 'it''s the writer \\ C:\\lab'",
            ) == [(comment,)]
    finally:
        conn.close()


def test_delete_with_parameters(proxysql_admin: ProxySQLLab) -> None:
    with admin_cursor(proxysql_admin) as cur:
        add_server(cur, 10, HOST_A)
        add_server(cur, 10, HOST_B)
        cur.execute(
            "DELETE FROM mysql_servers WHERE hostgroup_id = %s AND hostname IN (%s)", (10, HOST_A)
        )
        assert main_servers(cur) == [default_row(10, HOST_B)]


# --- staging area and LOAD ------------------------------------------------------------------------


def test_staged_edits_are_not_live_until_load(proxysql_admin: ProxySQLLab) -> None:
    with admin_cursor(proxysql_admin) as cur:
        add_server(cur, 10, HOST_A)
        add_server(cur, 10, HOST_B)
        cur.execute("LOAD MYSQL SERVERS TO RUNTIME")
        live = runtime_servers(cur)
        assert live == [default_row(10, HOST_A), default_row(10, HOST_B)]

        add_server(cur, 11, HOST_C)
        cur.execute(
            "UPDATE mysql_servers SET status = 'OFFLINE_SOFT', weight = 3 WHERE hostname = %s",
            (HOST_A,),
        )
        cur.execute("DELETE FROM mysql_servers WHERE hostname = %s", (HOST_B,))
        assert runtime_servers(cur) == live, "edits to main must not reach runtime before LOAD"

        cur.execute("LOAD MYSQL SERVERS TO RUNTIME")
        staged = main_servers(cur)
        assert staged == [
            ("10", HOST_A, "3306", "0", "OFFLINE_SOFT", "3", "0", "1000", "0", "0", "0", ""),
            default_row(11, HOST_C),
        ]
        assert runtime_servers(cur) == staged, "LOAD makes every staged edit live at once"


def test_offline_hard_servers_do_not_show_at_runtime(proxysql_admin: ProxySQLLab) -> None:
    """ProxySQL purges OFFLINE_HARD servers that hold no connection before it dumps
    runtime_mysql_servers (MySQL_HostGroups_Manager::dump_table_mysql), so a server written
    OFFLINE_HARD is gone from runtime after LOAD, while main still has it."""
    with admin_cursor(proxysql_admin) as cur:
        add_server(cur, 10, HOST_A)
        add_server(cur, 10, HOST_B)
        cur.execute(
            "UPDATE mysql_servers SET status = 'OFFLINE_HARD' WHERE hostname = %s", (HOST_B,)
        )
        cur.execute("LOAD MYSQL SERVERS TO RUNTIME")
        assert runtime_servers(cur) == [default_row(10, HOST_A)]
        assert [row[1] for row in main_servers(cur)] == [HOST_A, HOST_B]
        pool_hosts = fetch(cur, "SELECT srv_host FROM stats_mysql_connection_pool")
        assert (HOST_B,) not in pool_hosts


# (hostgroup, host, port, status, weight, max_connections, comment); no SHUNNED or OFFLINE_HARD,
# whose runtime form depends on ProxySQL's own decisions
server_rows = st.lists(
    st.tuples(
        st.integers(min_value=0, max_value=50),
        st.sampled_from([HOST_A, HOST_B, HOST_C]),
        st.integers(min_value=1024, max_value=65535),
        st.sampled_from(["ONLINE", "OFFLINE_SOFT"]),
        st.integers(min_value=0, max_value=10_000_000),
        st.integers(min_value=0, max_value=5000),
        st.text(alphabet=string.ascii_letters + string.digits + " -_.:", max_size=24),
    ),
    min_size=1,
    max_size=8,
    unique_by=lambda row: (row[0], row[1], row[2]),
)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=server_rows)
def test_load_mirrors_main_and_checksum_ignores_write_order(
    proxysql_lab: ProxySQLLab, rows: list[tuple[int, str, int, str, int, int, str]]
) -> None:
    """Whatever valid rows the checkers write, in whatever order, LOAD makes runtime equal to
    main, and the same content always yields the same mysql_servers checksum."""
    insert = (
        "INSERT INTO mysql_servers (hostgroup_id, hostname, port, status, weight, "
        "max_connections, comment) VALUES (%s, %s, %s, %s, %s, %s, %s)"
    )
    results: list[tuple[list[Row], str]] = []
    for ordering in (rows, list(reversed(rows))):
        proxysql_lab.reset()
        with admin_cursor(proxysql_lab) as cur:
            for row in ordering:
                cur.execute(insert, row)
            cur.execute("LOAD MYSQL SERVERS TO RUNTIME")
            live = runtime_servers(cur)
            assert live == main_servers(cur)
            results.append((live, checksum_row(cur, "mysql_servers")[2]))
    (first_live, first_checksum), (second_live, second_checksum) = results
    assert len(first_live) == len(rows)
    assert second_live == first_live
    assert second_checksum == first_checksum


@pytest.mark.parametrize(
    "command",
    [
        "LOAD MYSQL SERVERS TO RUNTIME",
        "LOAD MYSQL SERVERS TO RUN",
        "LOAD MYSQL SERVERS FROM MEMORY",
        "LOAD MYSQL SERVERS FROM MEM",
        "load mysql servers to runtime",
    ],
)
def test_load_to_runtime_spellings(proxysql_admin: ProxySQLLab, command: str) -> None:
    with admin_cursor(proxysql_admin) as cur:
        add_server(cur, 10, HOST_A)
        assert runtime_servers(cur) == []
        cur.execute(command)
        assert runtime_servers(cur) == [default_row(10, HOST_A)]


def test_load_bumps_version_even_without_changes(proxysql_admin: ProxySQLLab) -> None:
    with admin_cursor(proxysql_admin) as cur:
        add_server(cur, 10, HOST_A)
        cur.execute("LOAD MYSQL SERVERS TO RUNTIME")
        version1, epoch1, checksum1 = checksum_row(cur, "mysql_servers")

        cur.execute("LOAD MYSQL SERVERS TO RUNTIME")
        version2, epoch2, checksum2 = checksum_row(cur, "mysql_servers")
        assert version2 == version1 + 1
        assert epoch2 >= epoch1
        assert checksum2 == checksum1, "same content, same checksum"

        cur.execute("UPDATE mysql_servers SET weight = 9 WHERE hostname = %s", (HOST_A,))
        cur.execute("LOAD MYSQL SERVERS TO RUNTIME")
        version3, _, checksum3 = checksum_row(cur, "mysql_servers")
        assert version3 == version2 + 1
        assert checksum3 != checksum2


# --- disk and memory ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    ["SAVE MYSQL SERVERS TO DISK", "SAVE MYSQL SERVERS FROM MEMORY", "SAVE MYSQL SERVERS FROM MEM"],
)
def test_save_to_disk_copies_main(proxysql_admin: ProxySQLLab, command: str) -> None:
    with admin_cursor(proxysql_admin) as cur:
        add_server(cur, 10, HOST_A)
        add_server(cur, 11, HOST_B, port=3307, weight=20)
        cur.execute(command)
        on_disk = fetch(cur, f"SELECT {COLS} FROM disk.mysql_servers{ORDER}")
        assert on_disk == main_servers(cur)
        assert len(on_disk) == 2


@pytest.mark.parametrize(
    "command",
    ["LOAD MYSQL SERVERS FROM DISK", "LOAD MYSQL SERVERS TO MEMORY", "LOAD MYSQL SERVERS TO MEM"],
)
def test_load_from_disk_replaces_main(proxysql_admin: ProxySQLLab, command: str) -> None:
    with admin_cursor(proxysql_admin) as cur:
        add_server(cur, 10, HOST_A)
        cur.execute("SAVE MYSQL SERVERS TO DISK")
        cur.execute("DELETE FROM mysql_servers WHERE hostname = %s", (HOST_A,))
        add_server(cur, 11, HOST_B)
        cur.execute(command)
        assert main_servers(cur) == [default_row(10, HOST_A)]


@pytest.mark.parametrize(
    "command",
    [
        "SAVE MYSQL SERVERS TO MEMORY",
        "SAVE MYSQL SERVERS TO MEM",
        "SAVE MYSQL SERVERS FROM RUNTIME",
        "SAVE MYSQL SERVERS FROM RUN",
    ],
)
def test_save_to_memory_copies_runtime_into_main(proxysql_admin: ProxySQLLab, command: str) -> None:
    with admin_cursor(proxysql_admin) as cur:
        add_server(cur, 10, HOST_A, weight=4)
        cur.execute("LOAD MYSQL SERVERS TO RUNTIME")
        cur.execute("DELETE FROM mysql_servers")
        add_server(cur, 11, HOST_B)
        cur.execute(command)
        assert main_servers(cur) == [default_row(10, HOST_A, weight=4)]
        assert main_servers(cur) == runtime_servers(cur)


# --- errors --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sql", "params", "message"),
    [
        (
            "INSERT INTO mysql_servers (hostgroup_id, hostname, weight) VALUES (%s, %s, %s)",
            [10, HOST_A, -1],
            "CHECK constraint failed: weight >= 0 AND weight <=10000000",
        ),
        (
            "INSERT INTO mysql_servers (hostgroup_id, hostname, status) VALUES (%s, %s, %s)",
            [10, HOST_A, "BROKEN"],
            "CHECK constraint failed: UPPER(status) IN "
            "('ONLINE','SHUNNED','OFFLINE_SOFT', 'OFFLINE_HARD')",
        ),
        ("SELECT * FROM nonexisting_table", [], "no such table: nonexisting_table"),
    ],
    ids=["bad-weight", "bad-status", "unknown-table"],
)
def test_errors_are_1045_with_the_sqlite_message(
    proxysql_admin: ProxySQLLab, sql: str, params: list[object], message: str
) -> None:
    with admin_cursor(proxysql_admin) as cur:
        with pytest.raises(pymysql.err.OperationalError) as caught:
            cur.execute(sql, tuple(params) if params else None)
        assert caught.value.args == (ADMIN_ERROR, "ProxySQL Admin Error: " + message)
        # the connection stays usable and the failed write left nothing behind
        assert main_servers(cur) == []


def test_duplicate_primary_key_is_rejected(proxysql_admin: ProxySQLLab) -> None:
    with admin_cursor(proxysql_admin) as cur:
        add_server(cur, 10, HOST_A)
        with pytest.raises(pymysql.err.OperationalError) as caught:
            add_server(cur, 10, HOST_A, weight=2)
        assert caught.value.args == (
            ADMIN_ERROR,
            "ProxySQL Admin Error: UNIQUE constraint failed: mysql_servers.hostgroup_id, "
            "mysql_servers.hostname, mysql_servers.port",
        )
        assert main_servers(cur) == [default_row(10, HOST_A)]


@pytest.mark.parametrize("table", ["mysql_galera_hostgroups", "mysql_group_replication_hostgroups"])
def test_hostgroup_pairs_reject_reader_equal_to_writer(
    proxysql_admin: ProxySQLLab, table: str
) -> None:
    insert = (
        f"INSERT INTO {table} (writer_hostgroup, backup_writer_hostgroup, reader_hostgroup, "
        "offline_hostgroup) VALUES (%s, %s, %s, %s)"
    )
    with admin_cursor(proxysql_admin) as cur:
        with pytest.raises(pymysql.err.OperationalError) as caught:
            cur.execute(insert, (10, 11, 10, 13))
        assert caught.value.args == (
            ADMIN_ERROR,
            "ProxySQL Admin Error: CHECK constraint failed: reader_hostgroup<>writer_hostgroup "
            "AND backup_writer_hostgroup<>reader_hostgroup AND reader_hostgroup>0",
        )
        # a consistent quadruple is accepted (staged only: a LOAD would start ProxySQL's own
        # cluster monitoring on a real ProxySQL)
        cur.execute(insert, (10, 11, 12, 13))
        rows = fetch(cur, f"SELECT * FROM {table}")
        assert rows == [("10", "11", "12", "13", "1", "1", "0", "0", None)]


# --- no transactions ------------------------------------------------------------------------------


def test_transactions_are_accepted_and_ignored(proxysql_admin: ProxySQLLab) -> None:
    writer = proxysql_admin.connect()
    reader = proxysql_admin.connect()
    try:
        writer.begin()
        with writer.cursor() as cur:
            add_server(cur, 10, HOST_A)
        with reader.cursor() as other:
            assert main_servers(other) == [default_row(10, HOST_A)], (
                "another session sees the row before any COMMIT"
            )
        writer.rollback()
        with reader.cursor() as other:
            assert main_servers(other) == [default_row(10, HOST_A)], "ROLLBACK undoes nothing"
        with writer.cursor() as cur:
            for statement in ("START TRANSACTION", "COMMIT", "BEGIN", "ROLLBACK"):
                cur.execute(statement)
            assert main_servers(cur) == [default_row(10, HOST_A)]
    finally:
        writer.close()
        reader.close()


# --- scheduler, variables, stats ------------------------------------------------------------------


def test_scheduler_row_reaches_runtime_on_load(proxysql_admin: ProxySQLLab) -> None:
    columns = "active, interval_ms, filename, arg1, arg2, comment"
    with admin_cursor(proxysql_admin) as cur:
        # inactive and harmless: a real ProxySQL must not run anything because of this test
        cur.execute(
            "INSERT INTO scheduler (active, interval_ms, filename, arg1, comment) "
            "VALUES (%s, %s, %s, %s, %s)",
            (0, 100000000, "/bin/true", "--lab-contract", "lab contract test"),
        )
        assert fetch(cur, f"SELECT {columns} FROM runtime_scheduler") == []
        cur.execute("LOAD SCHEDULER TO RUNTIME")
        assert fetch(cur, f"SELECT {columns} FROM runtime_scheduler") == [
            ("0", "100000000", "/bin/true", "--lab-contract", None, "lab contract test")
        ]


@pytest.mark.parametrize(
    "name",
    [
        "mysql-connect_timeout_server_max",
        "mysql-monitor_galera_healthcheck_interval",
        "mysql-monitor_galera_healthcheck_timeout",
        "admin-cluster_check_interval_ms",
    ],
)
def test_global_variables_hold_the_timeouts_the_checkers_read(
    proxysql_admin: ProxySQLLab, name: str
) -> None:
    with admin_cursor(proxysql_admin) as cur:
        rows = fetch(
            cur, "SELECT variable_value FROM global_variables WHERE variable_name = %s", [name]
        )
    assert len(rows) == 1
    value = rows[0][0]
    assert value is not None and value.isdigit(), value


@pytest.mark.parametrize(
    "table", ["stats_mysql_connection_pool", "stats.stats_mysql_connection_pool"]
)
def test_connection_pool_stats_are_selectable(proxysql_admin: ProxySQLLab, table: str) -> None:
    with admin_cursor(proxysql_admin) as cur:
        cur.execute(f"SELECT * FROM {table}")
        assert cur.description is not None
        assert [d[0] for d in cur.description] == POOL_COLUMNS
        for row in cur.fetchall():
            assert all(value is None or isinstance(value, str) for value in row)


# --- session-level answers ------------------------------------------------------------------------


def test_version_is_the_release_running(proxysql_admin: ProxySQLLab) -> None:
    """2.7 or 3.x (the lines users run), and for a real ProxySQL the very release its binary
    names: version() and @@version_comment say the same."""
    with admin_cursor(proxysql_admin) as cur:
        (version,) = fetch(cur, "SELECT version()")[0]
        (comment,) = fetch(cur, "SELECT @@version_comment")[0]
    assert version is not None and re.match(r"^(2\.7|3\.\d+)\.\d+", version), version
    assert comment == version
    binary = proxysql_admin.binary
    if binary is not None:
        assert version == binary_version(binary)


def test_autocommit_and_show_variables_answer_with_no_row(proxysql_admin: ProxySQLLab) -> None:
    with admin_cursor(proxysql_admin) as cur:
        assert fetch(cur, "SELECT @@autocommit") == []
        assert fetch(cur, "SHOW VARIABLES LIKE 'x'") == []


@pytest.mark.parametrize(
    ("table", "name"),
    [
        ("mysql_servers", "mysql_servers"),
        ("runtime_mysql_servers", "runtime_mysql_servers"),
        ("disk.mysql_servers", "mysql_servers"),
    ],
)
def test_show_create_table_prints_the_ddl(
    proxysql_admin: ProxySQLLab, table: str, name: str
) -> None:
    with admin_cursor(proxysql_admin) as cur:
        rows = fetch(cur, f"SHOW CREATE TABLE {table}")
    assert rows == [(name, f"CREATE TABLE {name}" + MYSQL_SERVERS_DDL_BODY)]


def test_wrong_admin_password_is_refused(proxysql_admin: ProxySQLLab) -> None:
    with pytest.raises(pymysql.err.OperationalError) as caught:
        pymysql.connect(
            host=proxysql_admin.admin_host,
            port=proxysql_admin.admin_port,
            user=proxysql_admin.admin_user,
            password=proxysql_admin.admin_password + "-wrong",
            connect_timeout=5,
        )
    assert caught.value.args[0] == ADMIN_ERROR
