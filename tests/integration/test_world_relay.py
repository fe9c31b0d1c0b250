"""The world's admin relay fails the statement it is armed for, the way it says, and passes the
rest through: checked with a raw client and an upstream that records what reaches it."""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Iterator

import pytest

from tests.world.admin_relay import AdminRelay

OK_PACKET = b"\x07\x00\x00\x01\x00\x00\x00\x02\x00\x00\x00"


class Upstream:
    """A stand-in for ProxySQL's admin: records every packet, answers each with an OK."""

    def __init__(self) -> None:
        self.answer_after_s = 0.0  # how long it thinks before each answer
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.seen: list[bytes] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            threading.Thread(target=self._conn, args=(conn,), daemon=True).start()

    def _conn(self, conn: socket.socket) -> None:
        with conn:
            while True:
                header = conn.recv(4)
                if len(header) < 4:
                    return
                length = int.from_bytes(header[:3], "little")
                payload = conn.recv(length)
                self.seen.append(payload)
                time.sleep(self.answer_after_s)
                conn.sendall(OK_PACKET)


def query(text: str, seq: int = 0) -> bytes:
    payload = b"\x03" + text.encode()
    return struct.pack("<I", len(payload))[:3] + bytes([seq]) + payload


@pytest.fixture
def road() -> Iterator[tuple[AdminRelay, Upstream]]:
    upstream = Upstream()
    relay = AdminRelay(("127.0.0.1", upstream.port))
    yield relay, upstream
    relay.close()
    upstream.server.close()


def client(relay: AdminRelay) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", relay.port), timeout=5)
    return sock


def test_a_refused_statement_gets_an_error_and_never_reaches_proxysql(
    road: tuple[AdminRelay, Upstream],
) -> None:
    relay, upstream = road
    relay.refuse(r"^LOAD MYSQL SERVERS", 1045, "no")
    with client(relay) as sock:
        sock.sendall(query("SELECT 1"))
        assert sock.recv(64) == OK_PACKET
        sock.sendall(query("LOAD MYSQL SERVERS TO RUNTIME"))
        answer = sock.recv(64)
        assert answer[3] == 1 and answer[4] == 0xFF
        assert struct.unpack("<H", answer[5:7])[0] == 1045
        sock.sendall(query("LOAD MYSQL SERVERS TO RUNTIME"))
        assert sock.recv(64) == OK_PACKET, "armed for one statement only"
    assert [p[1:].decode() for p in upstream.seen] == ["SELECT 1", "LOAD MYSQL SERVERS TO RUNTIME"]


@pytest.mark.parametrize("after", [False, True])
def test_a_dropped_statement_loses_the_connection_before_or_after_proxysql_has_it(
    road: tuple[AdminRelay, Upstream], after: bool
) -> None:
    relay, upstream = road
    relay.drop(r"^UPDATE mysql_servers", after=after)
    with client(relay) as sock:
        sock.sendall(query("UPDATE mysql_servers SET weight = 1"))
        assert sock.recv(64) == b"", "the connection is gone, no answer"
    reached = [p[1:].decode() for p in upstream.seen]
    assert reached == (["UPDATE mysql_servers SET weight = 1"] if after else [])
    assert [what for _, what, _ in relay.done] == ["drop_after" if after else "drop_before"]


def test_an_answer_proxysql_gives_late_marks_the_admin_slow_and_a_prompt_one_does_not(
    road: tuple[AdminRelay, Upstream],
) -> None:
    relay, upstream = road
    with client(relay) as sock:
        sock.sendall(query("SELECT 1"))
        assert sock.recv(64) == OK_PACKET
        assert relay.slow_answers == []
        upstream.answer_after_s = 0.3
        sock.sendall(query("LOAD MYSQL SERVERS TO RUNTIME"))
        assert sock.recv(64) == OK_PACKET
    [(_, took, what)] = relay.slow_answers
    assert took >= 0.3
    assert what == "LOAD MYSQL SERVERS TO"
    assert relay.slow_until > 0
