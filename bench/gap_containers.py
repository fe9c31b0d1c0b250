"""The container tier's Galera cluster as the write-gap bench drives it.

Three MariaDB Galera nodes in containers (tests/containers/cluster.py), each reached on
127.0.0.1 through a relay: ProxySQL routes the client's writes there, the checker probes there.
What the host lab cannot do is done in a node's own network namespace: `cut_from_peers` drops
its Galera traffic to and from the other members while ProxySQL and the checker still reach it.

The image holds the accounts (tests/containers/galera/accounts.sql): the monitor's, the
application's, node_admin, and the bench's own, whose password is BENCH_PASSWORD below.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from typing import Any

import pymysql

from tests.lab.paths import LOOPBACK
from tests.lab.process import LabError

# the bench's own statements (its table, row checks, provider options): accounts.sql's
BENCH_USER = "bench"
BENCH_PASSWORD = "bench-pw"
SQL_TIMEOUT_S = 10


class ContainerGalera:
    """Started by up(), removed by down(); `ports` (node -> relay port) is filled by up()."""

    def __init__(self, suspect_timeout_s: int) -> None:
        self.suspect_timeout_s = suspect_timeout_s
        self.ports: dict[int, int] = {}
        self._containers: Any = None  # GaleraContainers once up

    @property
    def containers(self) -> Any:
        if self._containers is None:
            raise LabError("the container cluster is not started")
        return self._containers

    def running(self) -> list[int]:
        return list(self.ports) if self._containers is not None else []

    def up(self) -> None:
        from tests.containers.cluster import GaleraContainers
        from tests.lab.docker_engine import BASE_IMAGE, DockerEngine, build_image
        from tests.lab.docker_fixtures import GALERA_IMAGE, REPO

        # testcontainers' reaper is an image from a registry the lab does not reach; the bench
        # removes what it made itself (down)
        os.environ["TESTCONTAINERS_RYUK_DISABLED"] = "true"
        engine = DockerEngine()
        engine.up()
        engine.ensure_base()
        node_image = REPO / "tests" / "containers" / "galera"
        build_image(node_image, GALERA_IMAGE, {"BASE_IMAGE": BASE_IMAGE})
        self._containers = GaleraContainers(GALERA_IMAGE)
        self._containers.start()
        self.ports.update({n: relay.port for n, relay in self._containers.relays.items()})

    def down(self) -> None:
        if self._containers is not None:
            self._containers.remove()
            self._containers = None
        self.ports.clear()

    def ensure_healthy(self) -> None:
        from tests.containers.cluster import cluster_settled

        cluster_settled(self.containers)

    def apply_suspect_timeout(self) -> None:
        option = f"evs.suspect_timeout=PT{self.suspect_timeout_s}S"
        for n in self.ports:
            self.sql(n, "SET GLOBAL wsrep_provider_options = %s", (option,))

    def cut_from_peers(self, n: int) -> None:
        self.containers.cut_from_peers(n)

    def heal(self, n: int) -> None:
        self.containers.heal(n)

    def kill(self, n: int) -> None:
        raise LabError("the container tier's bench makes network faults only")

    def sql(self, n: int, query: str, args: Sequence[object] | None = None) -> list[Any]:
        """One statement on node n through its relay, as the bench's account."""
        with self.connect(n) as conn, conn.cursor() as cur:
            cur.execute(query, args)
            return [tuple(row) for row in cur.fetchall()]

    @contextlib.contextmanager
    def connect(self, n: int, read_timeout_s: float = SQL_TIMEOUT_S) -> Iterator[Any]:
        """A connection to node n through its relay, as the bench's account."""
        conn = pymysql.connect(
            host=LOOPBACK,
            port=self.ports[n],
            user=BENCH_USER,
            password=BENCH_PASSWORD,
            connect_timeout=SQL_TIMEOUT_S,
            read_timeout=read_timeout_s,
            write_timeout=SQL_TIMEOUT_S,
            autocommit=True,
        )
        try:
            yield conn
        finally:
            # after a read timeout PyMySQL has closed it already
            with contextlib.suppress(pymysql.err.Error):
                conn.close()
