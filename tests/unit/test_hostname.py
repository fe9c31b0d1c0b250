"""Which texts name a server: in the config ([proxysql] host) and in rows read from ProxySQL."""

from __future__ import annotations

import pytest

from checker_core.core.hostname import host_problem
from checker_core.core.model import COLUMNS, BadRow, ServerRow


@pytest.mark.parametrize(
    "host",
    [
        "127.0.0.1",
        "::1",
        "fe80::1",
        "db1",
        "db-1.example.com",
        "db-1.example.com.",
        "galera_node_1",  # container / service names
        "a" * 63 + ".b",
    ],
)
def test_names_and_addresses_are_hosts(host: str) -> None:
    assert host_problem(host) is None
    assert host_problem(host, socket_port=3306) is None


@pytest.mark.parametrize(
    "host",
    [
        "127.0.0.1; DROP TABLE x",
        "db 1",
        "db\n1",
        "-db",
        "db-",
        "db..example",
        "",
        "a" * 64,
        "[::1]",
        "/var/run/mysqld/mysqld.sock",  # no socket outside a mysql_servers row
    ],
)
def test_anything_else_is_refused_in_words(host: str) -> None:
    assert host_problem(host) == f"{host!r} is not a host name or an IP address"


def test_a_socket_path_is_a_host_only_with_port_0() -> None:
    path = "/var/run/mysqld/mysqld.sock"
    assert host_problem(path, socket_port=0) is None
    assert host_problem(path, socket_port=3306) == (
        f"{path!r} is a unix socket path, which needs port 0, not 3306"
    )
    assert host_problem("/tmp/a b.sock", socket_port=0) is not None


def admin_values(hostname: str, port: int) -> list[object]:
    row = ServerRow(100, "x", port).values()
    values: list[object] = [str(v) for v in row]
    values[COLUMNS.index("hostname")] = hostname
    return values


def test_a_row_with_a_hostname_that_is_no_host_is_bad_input_naming_the_row() -> None:
    with pytest.raises(BadRow, match=r"row \(100, db;1, 3306\): hostname 'db;1' is not a host"):
        ServerRow.from_admin(admin_values("db;1", 3306))


def test_a_row_on_a_unix_socket_with_port_0_is_read() -> None:
    row = ServerRow.from_admin(admin_values("/var/run/mysqld/mysqld.sock", 0))
    assert (row.hostname, row.port) == ("/var/run/mysqld/mysqld.sock", 0)
