"""The watch's question on connections held for a whole wait (edges/held_ask.py), against the
lab's simulated Galera nodes: what a round reads is what the exchange reads, an unchanged answer
is the facts read before, a hung node is silent at the deadline and its connection dropped, a
server closing a held connection between rounds says so, and the connections go back to their
prober as they were."""

from __future__ import annotations

import select
import time
from collections.abc import Iterator

import pytest

from checker_core.core.model import NodeAddress
from checker_core.core.probes import ProbeFailure, ProbeResult
from checker_core.core.settings import Endpoint, Secret, Tls
from checker_core.edges import driver
from checker_core.edges.backend import Prober
from checker_core.edges.held_ask import HeldAsk
from galera_checker.policy import GaleraFacts
from galera_checker.probe import probe, watch
from tests.lab.simnodes import SimNodes

READ_TIMEOUT_S = 1.0


@pytest.fixture(scope="module")
def sim() -> Iterator[SimNodes]:
    with SimNodes(clusters=1, nodes=3, timeout=5.0) as fleet:
        yield fleet


@pytest.fixture
def prober() -> Iterator[Prober]:
    made = Prober(
        Endpoint("monitor", Secret("x"), Tls(), 1000, int(READ_TIMEOUT_S * 1000)),
        probe,
        persistent=True,
    )
    yield made
    made.close()


def opened(sim: SimNodes, prober: Prober) -> tuple[tuple[str, ...], list[NodeAddress]]:
    names = sim.clusters[0].nodes
    nodes = [NodeAddress(*SimNodes.address(n)) for n in names]
    first = prober.probe_all(nodes, time.monotonic() + 2)
    assert all(r.answered for r in first.values()), first
    return names, nodes


def facts(result: ProbeResult) -> GaleraFacts:
    assert isinstance(result.facts, GaleraFacts), result
    return result.facts


def held_by(prober: Prober, nodes: list[NodeAddress]) -> HeldAsk:
    held = prober.hold(nodes, watch)
    assert held is not None, "plain connections with a timeout are held"
    return held


def round_of(held: HeldAsk, budget_s: float = 2.0) -> dict[NodeAddress, ProbeResult]:
    """One round, polled as the hub polls: until every answer is in or the deadline passed."""
    deadline = time.monotonic() + budget_s
    held.ask(deadline)
    poller = select.poll()
    for fd in held.fds():
        poller.register(fd, select.POLLIN)
    while not held.done and time.monotonic() < deadline:
        for fd, _ in poller.poll(max(1, int((deadline - time.monotonic()) * 1000))):
            held.on_event(fd)
    return dict(held.finish())


def test_a_round_reads_what_the_exchange_reads_and_an_unchanged_answer_is_not_read_again(
    sim: SimNodes, prober: Prober
) -> None:
    names, nodes = opened(sim, prober)
    sim.set_variables(names[0], read_only=True)
    try:
        by_exchange = prober.probe_one(nodes[0], time.monotonic() + 2, watch).facts
        held = held_by(prober, nodes)
        one = round_of(held)
        two = round_of(held)
        sim.set_status(names[0], wsrep_local_state=2, wsrep_local_state_comment="Donor/Desynced")
        three = round_of(held)
        held.give_back()
    finally:
        sim.reset(names[0])
    assert all(r.answered for r in (*one.values(), *two.values(), *three.values()))
    assert isinstance(by_exchange, GaleraFacts)
    assert facts(one[nodes[0]]).values == by_exchange.values
    assert facts(one[nodes[0]]).values["read_only"] == "ON"
    assert two[nodes[0]].facts is one[nodes[0]].facts, "the same bytes are not read again"
    assert facts(three[nodes[0]]).values["wsrep_local_state"] == "2"


def test_connections_go_back_as_they_were_with_what_they_last_answered(
    sim: SimNodes, prober: Prober
) -> None:
    _, nodes = opened(sim, prober)
    listed, at = prober.idle(), prober.changes
    held = held_by(prober, nodes)
    assert prober.idle() == {}, "a held connection is no probe's to take"
    last = round_of(held)
    held.give_back()
    assert prober.idle() == listed and prober.changes == at
    again = prober.probe_all(nodes, time.monotonic() + 2, watch)
    assert all(again[n].facts is last[n].facts for n in nodes), "the exchange knows the answer"


def test_a_hung_node_is_silent_at_the_deadline_its_connection_dropped_the_others_answer(
    sim: SimNodes, prober: Prober
) -> None:
    names, nodes = opened(sim, prober)
    held = held_by(prober, nodes)
    with sim.in_mode(names[2], "hang"):
        results = round_of(held, budget_s=0.3)
        after = round_of(held)
    held.give_back()
    assert results[nodes[0]].answered and results[nodes[1]].answered
    assert results[nodes[2]].how_failed is ProbeFailure.SILENT
    assert after[nodes[2]].how_failed is ProbeFailure.UNHEARD, "not asked again: no connection"
    assert after[nodes[0]].answered
    assert {node for node, _ in prober.idle().values()} == set(nodes[:2])


def test_a_server_closing_a_held_connection_between_rounds_says_so(
    sim: SimNodes, prober: Prober
) -> None:
    names, nodes = opened(sim, prober)
    held = held_by(prober, nodes)
    round_of(held)
    poller = select.poll()
    for fd in held.fds():
        poller.register(fd, select.POLLIN)
    with sim.in_mode(names[1], "down"):
        spoke: list[NodeAddress] = []
        deadline = time.monotonic() + 2
        while not spoke and time.monotonic() < deadline:
            spoke = [n for fd, _ in poller.poll(200) if (n := held.on_event(fd)) is not None]
        assert spoke == [nodes[1]]
        assert held.closed_by_server == {nodes[1]}
        held.give_back()
        assert {node for node, _ in prober.idle().values()} == {nodes[0], nodes[2]}


def test_a_connection_without_a_timeout_is_not_held_and_nothing_is_taken(
    sim: SimNodes, prober: Prober
) -> None:
    _, nodes = opened(sim, prober)
    listed = prober.idle()
    _, conn = next(iter(listed.values()))
    sock = driver.socket_of(conn)
    assert sock is not None
    sock.settimeout(None)  # a blocking socket: a round could wait on it (TLS is refused alike)
    assert prober.hold(nodes, watch) is None
    assert prober.idle() == listed
