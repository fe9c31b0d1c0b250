"""The exchange on real servers. Between its connects the daemon asks each node on the connection
it kept, through the exchange (edges/exchange.py), which reads the answer from the connection's
socket itself, and so does a probe on a connection of its own (the scheduler's). On MariaDB (the
Galera lab) and MySQL (the Group Replication lab), in plain text and over TLS, both read what
PyMySQL's cursor reads. The simulated nodes of test_exchange.py speak plain text only.
"""

from __future__ import annotations

import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from pymysql.constants.CLIENT import MULTI_STATEMENTS

from checker_core.core.model import NodeAddress
from checker_core.core.schema import SslMode
from checker_core.core.settings import Endpoint, Secret, Tls
from checker_core.edges import driver, tls
from checker_core.edges.backend import Prober
from checker_core.edges.question import Question
from galera_checker.policy import GaleraFacts
from galera_checker.probe import probe as galera_probe
from gr_checker.policy import GrFacts
from gr_checker.probe import probe as gr_probe
from tests.integration.rig import addresses
from tests.integration.through_cursor import ThroughCursor
from tests.lab.accounts import MONITOR_PASSWORD, MONITOR_USER

DEADLINE_S = 10


def galera_identity(facts: object) -> tuple[object, ...]:
    """What a healthy, idle Galera node says the same way every time it is asked."""
    assert isinstance(facts, GaleraFacts)
    return (
        facts.get("wsrep_cluster_state_uuid"),
        facts.get("wsrep_gcomm_uuid"),
        facts.get("wsrep_local_state"),
        facts.get("wsrep_provider_options"),
        facts.read_only,
    )


def gr_identity(facts: object) -> tuple[object, ...]:
    """What a healthy group's member says the same way every time it is asked (its queues'
    counters may move)."""
    assert isinstance(facts, GrFacts)
    return (
        facts.server_uuid,
        facts.super_read_only,
        facts.read_only,
        facts.single_primary,
        facts.members,
        facts.expel_timeout_s,
    )


@dataclass(frozen=True)
class Servers:
    """A lab's nodes, the question the checker asks them, and what of the answer must match."""

    nodes: list[NodeAddress]
    question: Question[Any]
    identity: Callable[[object], tuple[object, ...]]


@pytest.fixture(
    params=[
        pytest.param("mariadb", marks=pytest.mark.galera),
        pytest.param("mysql", marks=pytest.mark.gr),
    ]
)
def servers(request: pytest.FixtureRequest) -> Servers:
    if request.param == "mariadb":
        galera = request.getfixturevalue("galera")
        galera.ensure_tls()  # MariaDB serves TLS once given a certificate (MySQL makes its own)
        return Servers(addresses(galera.nodes), galera_probe, galera_identity)
    gr = request.getfixturevalue("gr")
    return Servers(addresses(gr.members), gr_probe, gr_identity)


def kept_connections(prober: Prober) -> dict[NodeAddress, object]:
    return {node: conn for node, conn in prober.idle().values()}


def over_tls(conn: object) -> bool:
    """Whether an open connection's socket is TLS (a closed one has none)."""
    return isinstance(driver.socket_of(conn), ssl.SSLSocket)


def by_cursor(question: Question[Any], monitor: Endpoint, node: NodeAddress) -> object:
    """The question through PyMySQL's cursor, on a connection of its own opened as the prober
    opens its connections."""
    conn = tls.connect_node(monitor, f"node {node}", node, 5, 5, client_flag=MULTI_STATEMENTS)
    try:
        return question(ThroughCursor(conn))
    finally:
        conn.close()


@pytest.mark.parametrize("mode", [SslMode.DISABLED, SslMode.REQUIRED])
def test_the_wire_reader_reads_what_pymysql_reads_on_new_and_kept_connections(
    servers: Servers, mode: SslMode
) -> None:
    monitor = Endpoint(MONITOR_USER, Secret(MONITOR_PASSWORD), Tls(mode, None), 5000, 5000)
    prober = Prober(monitor, servers.question, persistent=True)
    nodes = servers.nodes
    oracle = {node: by_cursor(servers.question, monitor, node) for node in nodes}
    try:
        first = prober.probe_all(nodes, time.monotonic() + DEADLINE_S)  # each connects, asks
        kept = kept_connections(prober)
        encrypted = {node: over_tls(conn) for node, conn in kept.items()}
        later = prober.probe_all(nodes, time.monotonic() + DEADLINE_S)  # the exchange
        after = kept_connections(prober)
    finally:
        prober.close()
    assert set(kept) == set(nodes)
    assert encrypted == dict.fromkeys(nodes, mode is not SslMode.DISABLED)
    # asked on the very connections it kept: no new connect
    assert all(after[node] is kept[node] for node in nodes)
    for node in nodes:
        assert first[node].answered, first[node].error
        assert later[node].answered, later[node].error
        expected = servers.identity(oracle[node])
        assert servers.identity(first[node].facts) == expected
        assert servers.identity(later[node].facts) == expected
