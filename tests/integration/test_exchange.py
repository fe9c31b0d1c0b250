"""The daemon's probes on open connections (edges/exchange.py), against the lab's simulated
Galera nodes: what they read is what PyMySQL reads on its own connection, an unchanged answer
is the facts read before, and a node that hangs or dies is what a probe thread made of it. The
watch's question on connections held for a whole wait (edges/held_ask.py) the same, and a
server closing a held connection between rounds says so."""

from __future__ import annotations

import select
import time
from collections.abc import Callable, Iterator
from typing import Any

import pymysql
import pytest

from checker_core.core.model import NodeAddress
from checker_core.core.probes import ProbeFailure, ProbeResult
from checker_core.core.settings import Endpoint, Secret, Tls
from checker_core.edges import driver
from checker_core.edges.backend import Prober
from checker_core.edges.held_ask import HeldAsk
from checker_core.service.watch_hub import WatchHub
from checker_core.service.watcher import Watcher
from galera_checker.policy import GaleraFacts
from galera_checker.probe import probe, watch
from tests.integration.through_cursor import ThroughCursor
from tests.lab.simnodes import SimNodes


@pytest.fixture(scope="module")
def sim() -> Iterator[SimNodes]:
    with SimNodes(clusters=1, nodes=3, timeout=5.0) as fleet:
        yield fleet


# a node is silent only once it had its whole read timeout (rule S12): the hung node's probe
# waits past it
READ_TIMEOUT_S = 1.0


def a_prober() -> Prober:
    return Prober(
        Endpoint("monitor", Secret("x"), Tls(), 1000, int(READ_TIMEOUT_S * 1000)),
        probe,
        persistent=True,
    )


@pytest.fixture
def prober() -> Iterator[Prober]:
    made = a_prober()
    yield made
    made.close()


def address(node: str) -> NodeAddress:
    return NodeAddress(*SimNodes.address(node))


def opened(sim: SimNodes, prober: Prober) -> tuple[tuple[str, ...], list[NodeAddress]]:
    """The cluster's nodes by name and by address, each probed once: its connection open."""
    names = sim.clusters[0].nodes
    nodes = [address(n) for n in names]
    prober.probe_all(nodes, time.monotonic() + 2)
    return names, nodes


def own_connection(node: str) -> pymysql.connections.Connection[Any]:
    conn: pymysql.connections.Connection[Any] = SimNodes.connect(node)
    return conn


def facts(result: object) -> GaleraFacts:
    assert isinstance(result, GaleraFacts), result
    return result


def by_pymysql(node: str, twice: bool = True) -> GaleraFacts:
    """The probe through PyMySQL's cursor: a second probe on a connection selects @@global."""
    conn = ThroughCursor(own_connection(node))
    try:
        first = probe(conn)
        return probe(conn) if twice else first
    finally:
        conn.close()


def test_the_exchange_reads_what_pymysql_reads(sim: SimNodes, prober: Prober) -> None:
    node = sim.clusters[0].nodes[0]
    sim.set_variables(node, read_only=True, wsrep_desync=False)
    sim.set_status(node, wsrep_local_recv_queue=7)
    try:
        nodes = [address(node)]
        deadline = time.monotonic() + 2
        first = prober.probe_all(nodes, deadline)[nodes[0]]  # a thread: connect, SHOW VARIABLES
        assert first.answered and len(prober.idle()) == 1
        later = prober.probe_all(nodes, time.monotonic() + 2)[nodes[0]]  # on the open one
        watched = prober.probe_one(nodes[0], time.monotonic() + 2, watch)
        assert later.answered and watched.answered
        assert facts(later.facts).values == by_pymysql(node).values
        assert facts(later.facts).values["read_only"] == "ON", "1 from @@global reads as ON"
        assert facts(later.facts).recv_queue == 7
        conn = ThroughCursor(own_connection(node))
        try:
            probe(conn)
            assert facts(watched.facts).values == watch(conn).values
        finally:
            conn.close()
    finally:
        sim.reset(node)


def test_an_unchanged_answer_is_the_facts_read_before(sim: SimNodes, prober: Prober) -> None:
    node = sim.clusters[0].nodes[1]
    nodes = [address(node)]
    try:
        prober.probe_all(nodes, time.monotonic() + 2)
        one = prober.probe_all(nodes, time.monotonic() + 2)[nodes[0]].facts
        two = prober.probe_all(nodes, time.monotonic() + 2)[nodes[0]].facts
        sim.set_status(node, wsrep_local_state=2, wsrep_local_state_comment="Donor/Desynced")
        three = prober.probe_all(nodes, time.monotonic() + 2)[nodes[0]].facts
    finally:
        sim.reset(node)
    assert two is one, "the same bytes are not read again"
    assert three is not one
    assert facts(three).get("wsrep_local_state_comment") == "Donor/Desynced"


def test_a_hung_node_is_silent_at_the_deadline_and_the_others_answer(
    sim: SimNodes, prober: Prober
) -> None:
    names, nodes = opened(sim, prober)
    assert len(prober.idle()) == 3
    with sim.in_mode(names[2], "hang"):
        # past the read timeout (1000 ms): the hung node had its whole time to answer
        results = prober.probe_all(nodes, time.monotonic() + READ_TIMEOUT_S + 0.3)
        open_after = {node for node, _ in prober.idle().values()}
    assert results[nodes[0]].answered and results[nodes[1]].answered
    assert results[nodes[2]].how_failed is ProbeFailure.SILENT
    assert "no answer within the pass deadline" in (results[nodes[2]].error or "")
    assert open_after == {nodes[0], nodes[1]}, "a connection mid-answer is dropped"
    again = prober.probe_all(nodes, time.monotonic() + 2)
    assert all(r.answered for r in again.values()), "the next probe connects afresh"


def test_a_node_that_died_is_an_error_as_pymysql_says_it(sim: SimNodes, prober: Prober) -> None:
    node = sim.clusters[0].nodes[2]
    nodes = [address(node)]
    prober.probe_all(nodes, time.monotonic() + 2)
    with sim.in_mode(node, "down"):
        dead = prober.probe_all(nodes, time.monotonic() + 2)[nodes[0]]
    assert dead.how_failed is ProbeFailure.ERROR
    assert "Lost connection to MySQL server during query" in (dead.error or "")
    assert prober.idle() == {}


def test_a_connection_lent_and_handed_back_keeps_the_idle_listing_and_a_lost_one_changes_it(
    sim: SimNodes, prober: Prober
) -> None:
    names, nodes = opened(sim, prober)
    listed, at = prober.idle(), prober.changes

    answered = prober.probe_all(nodes[:1], time.monotonic() + 2, watch)
    assert answered[nodes[0]].answered
    assert prober.changes == at, "the same connection back where it was is no change"
    assert prober.idle() == listed

    with sim.in_mode(names[0], "hang"):
        silent = prober.probe_all(nodes[:1], time.monotonic() + READ_TIMEOUT_S + 0.2, watch)
    assert silent[nodes[0]].how_failed is ProbeFailure.SILENT
    assert prober.changes != at, "a connection dropped under its question changes the listing"
    assert {node for node, _ in prober.idle().values()} == set(nodes[1:])


# ---------------------------------------------------------------- held for a whole wait
# (edges/held_ask.py: the watch's question round after round on connections the hub holds)


def facts_of(result: ProbeResult) -> GaleraFacts:
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
    assert facts_of(one[nodes[0]]).values == by_exchange.values
    assert facts_of(one[nodes[0]]).values["read_only"] == "ON"
    assert two[nodes[0]].facts is one[nodes[0]].facts, "the same bytes are not read again"
    assert facts_of(three[nodes[0]]).values["wsrep_local_state"] == "2"


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


def test_an_answer_in_before_the_round_ends_but_never_polled_is_an_answer(
    sim: SimNodes, prober: Prober
) -> None:
    """The hub late to poll (short of CPU): the answers that came meanwhile are read when the
    round ends, not taken for silence."""
    _, nodes = opened(sim, prober)
    held = held_by(prober, nodes)
    held.ask(time.monotonic() + 2)
    poller = select.poll()
    for fd in held.fds():
        poller.register(fd, select.POLLIN)
    ready: set[int] = set()

    def all_in() -> bool:
        ready.update(fd for fd, _ in poller.poll(10))
        return len(ready) == len(nodes)

    until(all_in, "every answer in")
    results = held.finish()  # the hub's first look at them
    held.give_back()
    assert all(results[n].answered for n in nodes), results
    assert {node for node, _ in prober.idle().values()} == set(nodes)


def until(done: Callable[[], bool], what: str) -> None:
    for _ in range(500):
        if done():
            return
        time.sleep(0.01)
    raise AssertionError(f"not within 5 s: {what}")


def test_a_held_connection_dropped_leaves_its_number_to_the_next_connection(
    sim: SimNodes, prober: Prober
) -> None:
    """A writer silent under the watch's question has its held connection dropped; the next
    connection made takes the same descriptor number, and its server closing it is heard by
    the watcher that now listens on it, not taken for the old one's."""
    names, nodes = opened(sim, prober)
    hub = WatchHub()
    other = a_prober()
    asking = Watcher(
        prober,
        writers=(nodes[2],),
        question=watch,
        every_s=0.02,
        answer_budget_s=0.2,
        judge=lambda answers: None,  # asks on, whatever it hears
    )
    try:
        with sim.in_mode(names[2], "hang"):
            hub.watch(asking)
            until(lambda: asking.held is not None and bool(asking.held.fds()), "held")
            assert asking.held is not None
            (held_fd,) = asking.held.fds()
            until(lambda: asking.held is not None and not asking.held.fds(), "dropped")
            assert other.probe_all([nodes[0]], time.monotonic() + 2)[nodes[0]].answered
            ((fd, _),) = other.idle().items()
            assert fd == held_fd, "a new socket takes the lowest free number"
            listener = Watcher(
                other,
                writers=(),
                question=None,
                every_s=0,
                answer_budget_s=0.2,
                judge=lambda answers: None,
            )
            hub.watch(listener)
            until(lambda: fd in hub._idle, "the listener's connection listed")
            with sim.in_mode(names[0], "down"):
                assert listener.heard.wait(5), "its server closed it: heard"
            assert listener.closed == (nodes[0],)
            hub.release(listener)
            hub.release(asking)
    finally:
        hub.close()
        other.close()
