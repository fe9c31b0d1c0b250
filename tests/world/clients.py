"""The world's application: one client per cluster on ProxySQL's MySQL port, routed to the
cluster's writer hostgroup, doing what keeps ProxySQL's backend connections attached to a
server (docs/maintenance.md, "What clients see"):

- short transactions (BEGIN, INSERT, COMMIT), ProxySQL free to multiplex between them;
- long ones: a transaction held open for seconds, its backend connection attached all along;
- sessions that set a user variable, which ProxySQL keeps on one backend connection for the
  session's whole life (up to 45 s here, as a pool's connection).

ProxySQL then does what it does on a real day: a server the checker takes out of a hostgroup
stays OFFLINE_HARD in runtime until the client lets go of its connection, and a drained writer
waits for it. The client's errors (no writer for a while, a statement cut by a drain's end) are
the application's lot and counted, not judged. Only a real ProxySQL routes clients: with the
emulator, there are none.
"""

from __future__ import annotations

import contextlib
import random
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pymysql

from tests.lab.paths import LOOPBACK

PASSWORD = "world-app"
# a held transaction lasts up to this long: under every switchover's own bound in the world
HOLD_S = (0.5, 8.0)
# a session pinned by a user variable lives this long: longer than a switchover waits for
# its move to be done, as a pool's connection may
PINNED_S = (5.0, 45.0)


def user_of(cluster: str) -> str:
    return f"app_{cluster}"


@dataclass
class ClientCounts:
    """What one cluster's client did."""

    transactions: int = 0
    held: int = 0  # transactions held open for seconds
    attached_sessions: int = 0  # sessions that pinned their backend with a user variable
    errors: int = 0
    longest_hold_s: float = 0.0
    last_error: str = ""


def users_sql(clusters: Sequence[tuple[str, int]]) -> list[tuple[str, tuple[Any, ...]]]:
    """The statements that give each cluster's client its account, routed to its writer
    hostgroup (transactions stay on one backend: transaction_persistent)."""
    statements: list[tuple[str, tuple[Any, ...]]] = []
    for name, writer in clusters:
        statements.append(("DELETE FROM mysql_users WHERE username = %s", (user_of(name),)))
        statements.append(
            (
                "INSERT INTO mysql_users (username, password, default_hostgroup,"
                " transaction_persistent) VALUES (%s, %s, %s, 1)",
                (user_of(name), PASSWORD, writer),
            )
        )
    statements.append(("LOAD MYSQL USERS TO RUNTIME", ()))
    return statements


@dataclass
class AppClients:
    """One client thread per cluster against ProxySQL's MySQL port, until `stop`."""

    port: int
    clusters: Sequence[str]
    seed: int
    counts: dict[str, ClientCounts] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)

    def start(self) -> None:
        for index, name in enumerate(self.clusters):
            self.counts[name] = ClientCounts()
            thread = threading.Thread(
                target=self._run,
                args=(name, random.Random(self.seed * 7919 + index)),
                name=f"client-{name}",
                daemon=True,
            )
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        """Every client ends its transaction where it can and disconnects."""
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=30)

    def _run(self, name: str, rng: random.Random) -> None:
        counts = self.counts[name]
        while not self._stop.is_set():
            try:
                self._session(name, rng, counts)
            except pymysql.err.MySQLError as exc:
                counts.errors += 1
                counts.last_error = f"{type(exc).__name__}: {exc}"
                self._stop.wait(rng.uniform(0.1, 0.5))

    def _session(self, name: str, rng: random.Random, counts: ClientCounts) -> None:
        """One connection: a few dozen transactions, then it reconnects (a pool's recycling);
        a pinned one lives for up to PINNED_S, as a pool's connection does."""
        conn = pymysql.connect(
            host=LOOPBACK,
            port=self.port,
            user=user_of(name),
            password=PASSWORD,
            connect_timeout=3,
            # ProxySQL waits up to mysql-connect_timeout_server_max (10 s) for a hostgroup with
            # no server: longer than that, and the client gives up on its own
            read_timeout=15,
            write_timeout=15,
            autocommit=True,
        )
        try:
            with conn.cursor() as cur:
                transactions, until = rng.randint(5, 40), float("inf")
                if rng.random() < 0.2:
                    # a user variable: ProxySQL keeps this session on its backend for good
                    cur.execute("SET @world_client = 1")
                    cur.execute("SELECT 1")
                    counts.attached_sessions += 1
                    transactions, until = 10**9, time.monotonic() + rng.uniform(*PINNED_S)
                for _ in range(transactions):
                    if self._stop.is_set() or time.monotonic() > until:
                        return
                    try:
                        self._transaction(cur, rng, counts)
                    except pymysql.err.MySQLError as exc:
                        # a statement refused (the server went read-only, no writer): a pool
                        # keeps its connection and goes on; one that is gone is made again
                        counts.errors += 1
                        counts.last_error = f"{type(exc).__name__}: {exc}"
                        if not conn.open:
                            return
                        with contextlib.suppress(pymysql.err.MySQLError):
                            cur.execute("ROLLBACK")
                        self._stop.wait(rng.uniform(0.1, 0.5))
        finally:
            with contextlib.suppress(Exception):
                conn.close()

    def _transaction(self, cur: Any, rng: random.Random, counts: ClientCounts) -> None:
        cur.execute("BEGIN")
        if rng.random() < 0.15:
            # a long transaction: its backend connection stays attached while it is open
            cur.execute("SELECT 1")
            hold = rng.uniform(*HOLD_S)
            began = time.monotonic()
            self._stop.wait(hold)
            counts.held += 1
            counts.longest_hold_s = max(counts.longest_hold_s, time.monotonic() - began)
        else:
            cur.execute("INSERT INTO world_writes VALUES (1)")
        cur.execute("COMMIT")
        counts.transactions += 1
        self._stop.wait(rng.uniform(0.02, 0.3))
