"""Which client sessions a drain can move without an error, read from what ProxySQL's
stats_mysql_processlist shows (extended_info as a real ProxySQL 2.7 fills it)."""

from __future__ import annotations

import json

import pytest

from checker_core.core.attached import (
    AUTO_INCREMENT_DELAY,
    AUTO_INCREMENT_DELAY_TIMEOUT,
    AttachedSession,
    Hold,
    cannot_move,
    holds_of,
    may_be_held_by_the_delay,
    session_of,
    what_clients_see,
)
from checker_core.core.model import NodeAddress

N1 = NodeAddress("127.0.0.1", 3311)
AUTOCOMMIT = 0x2  # MySQL's SERVER_STATUS_AUTOCOMMIT
IN_TRANS = 0x1


def extended(token: int = 0, server_status: int = AUTOCOMMIT, **flags: bool) -> str:
    status = {flag: False for flag in ("user_variable", "temporary_table", "get_lock")}
    status.update(flags)
    conn = {
        "auto_increment_delay_token": token,
        "MultiplexDisabled": bool(token) or any(flags.values()),
        "status": status,
        "mysql": {"server_status": server_status},
    }
    return json.dumps({"active_transactions": 0, "backends": [{"hostgroup": 100, "conn": conn}]})


@pytest.mark.parametrize(
    ("info", "holds"),
    [
        (None, (Hold.UNKNOWN,)),
        ("", (Hold.UNKNOWN,)),
        ("not json", (Hold.UNKNOWN,)),
        (extended(), ()),
        (extended(token=5), (Hold.AUTO_INCREMENT,)),
        (extended(server_status=AUTOCOMMIT | IN_TRANS), (Hold.TRANSACTION,)),
        (extended(user_variable=True), (Hold.SESSION_STATE,)),
        (
            extended(token=3, server_status=IN_TRANS, temporary_table=True),
            (Hold.TRANSACTION, Hold.AUTO_INCREMENT, Hold.SESSION_STATE),
        ),
    ],
)
def test_what_holds_a_session_is_read_from_its_extended_info(
    info: str | None, holds: tuple[Hold, ...]
) -> None:
    assert holds_of(info)[0] == holds


def test_the_details_name_the_token_and_the_state() -> None:
    _, details = holds_of(extended(token=5, get_lock=True))
    assert details == ("5 statement(s) to go", "GET_LOCK")


def row(
    srv_host: object = "127.0.0.1", srv_port: object = "3311", info: str | None = None
) -> tuple[object, ...]:
    return ("7", "app", "10.0.0.9", "50123", "100", srv_host, srv_port, "Sleep", info)


def test_a_processlist_row_without_a_backend_is_no_attached_session() -> None:
    assert session_of(row(srv_host=None, srv_port=None)) is None
    assert session_of(row(srv_host="", srv_port="0")) is None
    found = session_of(row(info=extended(token=5)))
    assert found == AttachedSession(
        7,
        "app",
        "10.0.0.9:50123",
        100,
        N1,
        "Sleep",
        (Hold.AUTO_INCREMENT,),
        ("5 statement(s) to go",),
    )
    idle = session_of(row(info=extended()))
    assert idle is not None and idle.holds == (), "nothing holds it: ProxySQL retries elsewhere"


def session(*holds: Hold, command: str = "Sleep") -> AttachedSession:
    return AttachedSession(1, "app", "10.0.0.9:1", 100, N1, command, holds)


def test_only_the_delay_or_the_unknown_may_hold_a_session_by_the_delay() -> None:
    assert may_be_held_by_the_delay((session(Hold.AUTO_INCREMENT),))
    assert may_be_held_by_the_delay((session(Hold.UNKNOWN),))
    assert not may_be_held_by_the_delay((session(Hold.TRANSACTION),))
    assert not may_be_held_by_the_delay(())
    assert cannot_move((session(Hold.SESSION_STATE), session(Hold.TRANSACTION))) == (
        session(Hold.SESSION_STATE),
    )


DELAY = {AUTO_INCREMENT_DELAY: "5", AUTO_INCREMENT_DELAY_TIMEOUT: "10000"}


def test_the_what_if_says_before_the_move_which_client_fails() -> None:
    none = what_clients_see(N1, (), drain_timeout_ms=1000, delay=DELAY)
    assert none == [f"no client session holds a connection to the writer {N1} now"]
    held = (session(Hold.AUTO_INCREMENT), session(Hold.SESSION_STATE))
    said = what_clients_see(N1, held, drain_timeout_ms=1000, delay=DELAY)
    assert said[0] == f"2 client session(s) hold a connection to the writer {N1}:"
    assert (
        f"  a session held by the auto-increment delay lets go after 5 ({AUTO_INCREMENT_DELAY}) "
        f"more statement(s) without a new INSERT, or once idle for "
        f"{AUTO_INCREMENT_DELAY_TIMEOUT} (10000 ms); a client that inserts without pause never "
        "lets go, and is cut when drain_timeout_ms (1000 ms) runs out: its next statement fails"
    ) in said
    assert any(line.startswith("  cannot be moved without an error: session 1") for line in said)
    assert not any("lowered" in line for line in said), "the checker changes no variable"
    open_trx = what_clients_see(N1, (session(Hold.TRANSACTION),), drain_timeout_ms=1000)
    assert any("a transaction moves once it ends" in line for line in open_trx)
    assert not any("auto-increment" in line for line in open_trx)


@pytest.mark.parametrize(
    ("delay", "says"),
    [
        (
            None,
            f"after {AUTO_INCREMENT_DELAY} more statement(s) without a new INSERT, or once "
            f"idle for {AUTO_INCREMENT_DELAY_TIMEOUT};",
        ),
        (
            {AUTO_INCREMENT_DELAY: "3", AUTO_INCREMENT_DELAY_TIMEOUT: "0"},
            f"after 3 ({AUTO_INCREMENT_DELAY}) more statement(s) without a new INSERT (never by "
            f"idling: {AUTO_INCREMENT_DELAY_TIMEOUT} is 0);",
        ),
    ],
)
def test_the_delay_is_named_with_the_values_read_or_by_its_variables(
    delay: dict[str, str] | None, says: str
) -> None:
    said = what_clients_see(N1, (session(Hold.UNKNOWN),), drain_timeout_ms=500, delay=delay)
    assert any(says in line for line in said), said
