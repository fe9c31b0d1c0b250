"""The checker's road to ProxySQL's admin interface in the simulated world: a relay on 127.0.0.1
that reads the MySQL protocol the checker sends and can, on the world's word, fail it the way a
real admin interface and a real network do:

- `refuse(pattern, code, message)`: the next statement matching `pattern` is answered with an
  error packet and never reaches ProxySQL (a LOAD refused, a statement that fails);
- `drop(pattern, after)`: the next statement matching `pattern` is dropped with its connection,
  before ProxySQL sees it (`after=False`), or after ProxySQL has it and before its answer
  reaches the checker (`after=True`: the checker cannot know whether it ran);
- `delay`: every answer from ProxySQL is held back that long (a slow admin).

A fault is armed for one statement and lapses after `ARMED_S` unmatched. The relay speaks no TLS:
the world's admin connections are plain.

It measures how long ProxySQL itself takes to answer each statement (from the moment the relay
passes it on to the first bytes back, the relay's own `delay` aside): an answer later than
`SLOW_ANSWER_S` marks the admin slow (`slow_until`, `slow_answers`), as the world's `delay` does.

It also keeps, for every `LOAD MYSQL SERVERS TO RUNTIME` a checker sends, when that connection's
last read of `mysql_servers` went out before it (`loads`): an edit staged between the two is one
the checker could not see and its LOAD carries (ProxySQL loads the whole table, without a
transaction); the world measures that window and tells such an edit from a checker's fault.
"""

from __future__ import annotations

import contextlib
import re
import socket
import struct
import threading
import time
from dataclasses import dataclass
from typing import Any

from tests.containers.relay import Relay

COM_QUERY = 0x03
ARMED_S = 10.0
CHUNK = 65536
LOAD_SERVERS = re.compile(r"^\s*LOAD\s+MYSQL\s+SERVERS\s+TO\s+RUNTIME", re.IGNORECASE)
# ProxySQL's admin answers the checker's statements in a few milliseconds here; one this late
# holds every cluster's apply back (the write gate) the way the world's slow admin does
SLOW_ANSWER_S = 0.1
READS_SERVERS = re.compile(r"^\s*SELECT\b.*\bmysql_servers\b", re.IGNORECASE | re.DOTALL)


@dataclass
class _Armed:
    pattern: re.Pattern[str]
    what: str  # "refuse", "drop_before", "drop_after"
    code: int = 0
    message: str = ""
    until: float = 0.0


class AdminRelay(Relay):
    """127.0.0.1:port -> ProxySQL's admin port (`delay`: seconds every answer is held back)."""

    def __init__(self, target: tuple[str, int]) -> None:
        self._armed: list[_Armed] = []
        self._arm_lock = threading.Lock()
        # what the faults did: (monotonic time, what, the statement's first words)
        self.done: list[tuple[float, str, str]] = []
        # when answers were last held back (monotonic), for a pass that ran through it
        self.slow_until = 0.0
        # (the last read of mysql_servers on its connection, the LOAD): monotonic times at
        # which the relay passed them on
        self.loads: list[tuple[float, float]] = []
        # answers ProxySQL itself gave late: (monotonic time, seconds it took, statement)
        self.slow_answers: list[tuple[float, float, str]] = []
        super().__init__(target)

    # -- the world's word ----------------------------------------------------------------

    def refuse(self, pattern: str, code: int = 1045, message: str = "refused by the world") -> None:
        self._arm(_Armed(re.compile(pattern, re.IGNORECASE), "refuse", code, message))

    def drop(self, pattern: str, *, after: bool) -> None:
        what = "drop_after" if after else "drop_before"
        self._arm(_Armed(re.compile(pattern, re.IGNORECASE), what))

    def loads_after(self, seen: int) -> list[tuple[float, float]]:
        """The LOAD windows (see the module's docstring) after the first `seen`."""
        with self._arm_lock:
            return self.loads[seen:]

    def _arm(self, armed: _Armed) -> None:
        armed.until = time.monotonic() + ARMED_S
        with self._arm_lock:
            self._armed.append(armed)

    def _take(self, text: str) -> _Armed | None:
        now = time.monotonic()
        with self._arm_lock:
            self._armed = [a for a in self._armed if a.until > now]
            for armed in self._armed:
                if armed.pattern.search(text):
                    self._armed.remove(armed)
                    self.done.append((now, armed.what, " ".join(text.split()[:6])))
                    return armed
        return None

    def _serve(self, client: socket.socket) -> None:
        upstream = self._upstream(client)
        if upstream is None:
            return
        # set once a statement's answer is to be lost: the answers' pump forwards nothing more
        cut = threading.Event()
        # the statement ProxySQL has not answered yet: [when it was passed on, its first words]
        asked: list[Any] = [None, ""]
        threading.Thread(
            target=self._answers, args=(upstream, client, cut, asked), daemon=True
        ).start()
        self._questions(client, upstream, cut, asked)

    def _questions(
        self, client: socket.socket, upstream: socket.socket, cut: threading.Event, asked: list[Any]
    ) -> None:
        """The checker's packets, one by one: a COM_QUERY an armed fault matches is failed."""
        last_read: float | None = None
        try:
            while True:
                header = _read_exact(client, 4)
                if header is None:
                    break
                length = header[0] | header[1] << 8 | header[2] << 16
                seq = header[3]
                payload = _read_exact(client, length) if length else b""
                if payload is None:
                    break
                armed = None
                text = ""
                if payload[:1] == bytes([COM_QUERY]):
                    text = payload[1:].decode("utf-8", "replace")
                    armed = self._take(text)
                if armed is None:
                    now = time.monotonic()
                    if READS_SERVERS.search(text):
                        last_read = now
                    elif LOAD_SERVERS.search(text):
                        with self._arm_lock:
                            self.loads.append((now if last_read is None else last_read, now))
                    if text:
                        asked[0], asked[1] = now, " ".join(text.split()[:4])
                    upstream.sendall(header + payload)
                elif armed.what == "refuse":
                    client.sendall(_error(seq + 1, armed.code, armed.message))
                elif armed.what == "drop_before":
                    break
                else:
                    # ProxySQL has it: the checker loses the connection before the answer
                    cut.set()
                    upstream.sendall(header + payload)
                    time.sleep(0.05)
                    break
        except OSError:
            pass
        finally:
            self._close(client, upstream)

    def _answers(
        self, upstream: socket.socket, client: socket.socket, cut: threading.Event, asked: list[Any]
    ) -> None:
        try:
            while True:
                data = upstream.recv(CHUNK)
                if not data or cut.is_set():
                    break
                sent = asked[0]
                if sent is not None:
                    now = time.monotonic()
                    asked[0] = None
                    if now - sent > SLOW_ANSWER_S:
                        with self._arm_lock:
                            self.slow_until = max(self.slow_until, now)
                            self.slow_answers.append((now, now - sent, asked[1]))
                if self.delay > 0:
                    time.sleep(self.delay)
                client.sendall(data)
        except OSError:
            pass
        finally:
            self._close(client, upstream)

    def _close(self, *socks: socket.socket) -> None:
        for sock in socks:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                sock.close()
        with self._lock:
            self._open.difference_update(socks)


def _read_exact(sock: socket.socket, n: int) -> bytes | None:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def _error(seq: int, code: int, message: str) -> bytes:
    payload = b"\xff" + struct.pack("<H", code) + b"#HY000" + message.encode()
    return struct.pack("<I", len(payload))[:3] + bytes([seq & 0xFF]) + payload
