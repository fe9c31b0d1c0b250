"""The answer to a query, read from bytes as the exchange reads it: whole or not yet, each
statement's rows or error, and the values decoded as PyMySQL decodes them."""

from __future__ import annotations

import pymysql
import pytest
from hypothesis import given
from hypothesis import strategies as st

from checker_core.edges import wire
from tests.lab.simnodes import (
    SERVER_MORE_RESULTS_EXISTS,
    SERVER_STATUS_AUTOCOMMIT,
    SHOW_COLUMNS,
    TYPE_LONGLONG,
    _err,
    _ok,
    _packets,
    _result_set,
)

SHOW = _result_set(SHOW_COLUMNS, [(b"wsrep_ready", b"ON"), (b"x", None)], SERVER_STATUS_AUTOCOMMIT)
MORE = SERVER_STATUS_AUTOCOMMIT | SERVER_MORE_RESULTS_EXISTS


class Conn:
    """What decoding needs of a PyMySQL connection."""

    encoding = "utf8"  # PyMySQL keeps the Python codec of its charset here
    use_unicode = True
    decoders = pymysql.converters.decoders


def test_a_result_set_is_read_with_its_rows_and_nulls() -> None:
    answer = wire.read_answer(_packets(SHOW, 1))
    assert answer is not None and len(answer) == 1
    assert answer[0].rows == ((b"wsrep_ready", b"ON"), (b"x", None))
    assert wire.decoded(Conn(), answer[0]) == (("wsrep_ready", "ON"), ("x", None))


def test_an_integer_column_decodes_to_an_int_as_pymysql_gives_it() -> None:
    payloads = _result_set(((b"@@global.read_only", TYPE_LONGLONG),), [(b"1",)], 2)
    answer = wire.read_answer(_packets(payloads, 1))
    assert answer is not None
    assert wire.decoded(Conn(), answer[0]) == ((1,),)


def test_several_statements_then_an_error_end_the_answer() -> None:
    first = _result_set(SHOW_COLUMNS, [(b"a", b"1")], MORE)
    refused = _err(1193, b"HY000", "Unknown system variable 'super_read_only'")
    answer = wire.read_answer(_packets([*first, refused], 1))
    assert answer is not None and len(answer) == 2
    assert answer[0].rows == ((b"a", b"1"),)
    error = wire.server_error(answer[1].error or b"")
    assert isinstance(error, pymysql.err.OperationalError)
    assert error.args == (1193, "Unknown system variable 'super_read_only'")


def test_an_ok_that_says_more_results_follow_waits_for_them() -> None:
    ok_more = _ok(MORE)
    assert wire.read_answer(_packets([ok_more], 1)) is None
    answer = wire.read_answer(_packets([ok_more, *SHOW], 1))
    assert answer is not None and len(answer) == 2 and answer[0].columns == ()


@given(st.data())
def test_no_part_of_an_answer_reads_as_whole(data: st.DataObject) -> None:
    first = _result_set(SHOW_COLUMNS, [(b"a", b"1"), (b"b", b"x" * 300)], MORE)
    whole = _packets([*first, *SHOW], 1)
    cut = data.draw(st.integers(min_value=0, max_value=len(whole) - 1))
    assert wire.read_answer(whole[:cut]) is None
    assert wire.read_answer(whole) is not None


def test_bytes_after_a_whole_answer_are_refused() -> None:
    with pytest.raises(wire.ProtocolError):
        wire.read_answer(_packets(SHOW, 1) + b"\x01")
    with pytest.raises(wire.ProtocolError):
        wire.read_answer(_packets(SHOW, 1) + _packets([_ok()], 9))


def test_a_value_longer_than_one_packet_is_joined() -> None:
    big = b"v" * (wire.MAX_PAYLOAD + 10)
    payloads = _result_set(SHOW_COLUMNS, [(b"wsrep_provider_options", big)], 2)
    answer = wire.read_answer(_packets(payloads, 1))
    assert answer is not None and answer[0].rows == ((b"wsrep_provider_options", big),)


def test_a_query_packet_is_numbered_from_zero_and_split_at_the_limit() -> None:
    assert wire.query_packet(b"SELECT 1") == b"\x09\x00\x00\x00\x03SELECT 1"
    long_sql = b"x" * wire.MAX_PAYLOAD
    packet = wire.query_packet(long_sql)
    assert packet[:4] == b"\xff\xff\xff\x00"
    assert packet[4 + wire.MAX_PAYLOAD : 4 + wire.MAX_PAYLOAD + 4] == b"\x01\x00\x00\x01"


def test_made_once_finds_a_value_by_the_identity_of_what_it_was_made_from() -> None:
    made: list[int] = []
    kept: wire.MadeOnce[int] = wire.MadeOnce(size=2)

    def make() -> int:
        made.append(len(made))
        return made[-1]

    sql, params = "SELECT 1", ("a",)
    assert kept.get(sql, params, "utf8", make) == kept.get(sql, params, "utf8", make) == 0
    assert kept.get(sql, tuple(["a"]), "utf8", make) == 1, "equal, another object: made"
    assert kept.get(sql, params, "latin1", make) == 2, "another plain key: made"
    assert kept.get(sql, params, "utf8", make) == 3, "full, so dropped, and made again"
