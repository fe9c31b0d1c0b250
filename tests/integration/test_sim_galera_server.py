"""The simulated-node server serving a Galera model (--galera 1), through a real client: a kill
refuses, a freeze hangs, a causal read stalls until the survivors drop the silent member, an
evs.evict reaches the other members, a restart comes back Synced under a new uuid, and the
checker's own probe and member query read the model's nodes as a healthy cluster. No lab."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pymysql
import pytest

from checker_core.core.model import NodeAddress
from checker_core.core.verdict import State
from galera_checker.node_calls import EVICT_SQL, MEMBER_QUERIES
from galera_checker.policy import judge
from galera_checker.probe import probe
from tests.lab.simnodes import SimNodes

# short timings, so the test waits seconds, not the lab's
TIMINGS = {"suspect_timeout_s": 1.0, "killed_leave_s": 0.3, "join_s": 0.6, "check_s": 0.1}


@pytest.fixture
def sim() -> Iterator[SimNodes]:
    with SimNodes(clusters=0, nodes=3, galera=1, seed=3, timeout=5.0) as fleet:
        fleet.act("g1", "configure", **TIMINGS)
        yield fleet


def connect(node: str, timeout: float = 3.0) -> pymysql.connections.Connection[Any]:
    conn: pymysql.connections.Connection[Any] = SimNodes.connect(node, timeout)
    return conn


def status(conn: pymysql.connections.Connection[Any], name: str) -> str:
    with conn.cursor() as cur:
        cur.execute("SHOW GLOBAL STATUS WHERE Variable_name = %s", (name,))
        rows = cur.fetchall()
    return str(rows[0][1]) if rows else ""


def truth_of(sim: SimNodes, node: str) -> dict[str, Any]:
    nodes: dict[str, dict[str, Any]] = sim.truth("g1")["g1"]["nodes"]
    return nodes[node]


def until(check: Callable[[], bool], within_s: float = 10.0) -> None:
    deadline = time.monotonic() + within_s
    while not check():
        assert time.monotonic() < deadline, "not within the deadline"
        time.sleep(0.05)


def members(node: str) -> dict[str, str]:
    conn = connect(node)
    try:
        with conn.cursor() as cur:
            cur.execute(MEMBER_QUERIES[0])
            return {str(u): str(a) for u, a in cur.fetchall()}
    finally:
        conn.close()


def test_the_checker_reads_every_node_as_a_healthy_member(sim: SimNodes) -> None:
    (cluster,) = sim.clusters
    assert cluster.kind == "galera"
    uuids = set()
    for node in cluster.nodes:
        conn = connect(node)
        try:
            for _ in range(2):  # the first probe (SHOW) and the later one (one row)
                facts = probe(conn)
                host, port = SimNodes.address(node)
                verdict = judge(NodeAddress(host, port), facts, None, 100, False)
                assert verdict.state is State.HEALTHY, verdict.reason
            assert facts.get("wsrep_cluster_state_uuid") == cluster.state_uuid
            uuids.add(facts.get("wsrep_gcomm_uuid"))
        finally:
            conn.close()
    assert set(members(cluster.nodes[0])) == uuids
    assert sorted(members(cluster.nodes[0]).values()) == sorted(cluster.nodes)


def test_a_killed_node_refuses_and_its_open_connection_is_reset(sim: SimNodes) -> None:
    node = sim.clusters[0].nodes[2]
    conn = connect(node)
    sim.act(node, "kill")
    with pytest.raises(pymysql.err.OperationalError) as refused:
        connect(node)
    assert refused.value.args[0] == 2003
    with pytest.raises(pymysql.err.OperationalError):
        status(conn, "wsrep_ready")
    assert truth_of(sim, node)["reach"] == "REFUSED"


def test_a_frozen_node_hangs_a_connect(sim: SimNodes) -> None:
    node = sim.clusters[0].nodes[2]
    sim.act(node, "freeze")
    with pytest.raises(pymysql.err.OperationalError):
        connect(node, timeout=0.5)
    sim.act(node, "thaw")
    assert status(connect(node), "wsrep_cluster_status") == "Primary"


def test_a_causal_read_stalls_until_the_survivors_drop_the_frozen_member(sim: SimNodes) -> None:
    sim.act("g1", "configure", suspect_timeout_s=3.0)
    survivor, frozen = sim.clusters[0].nodes[0], sim.clusters[0].nodes[2]
    sim.act(frozen, "freeze")
    stalled = connect(survivor, timeout=0.5)
    with stalled.cursor() as cur:
        cur.execute("SET SESSION wsrep_sync_wait = 1")
        with pytest.raises(pymysql.err.OperationalError):
            cur.execute("SELECT 1")  # read_timeout: it waits for the frozen member
    assert frozen in members(survivor).values()  # still in the view: that is why
    until(lambda: frozen not in members(survivor).values())
    conn = connect(survivor)
    with conn.cursor() as cur:
        cur.execute("SET SESSION wsrep_sync_wait = 1")
        cur.execute("SELECT 1")
        assert cur.fetchall() == ((1,),)


def test_an_eviction_reaches_the_others_and_a_restart_comes_back_under_a_new_uuid(
    sim: SimNodes,
) -> None:
    sim.act("g1", "configure", suspect_timeout_s=30.0)
    first, second, frozen = sim.clusters[0].nodes
    old = truth_of(sim, frozen)["identity"]
    sim.act(frozen, "freeze")
    conn = connect(first)
    with conn.cursor() as cur:
        cur.execute(EVICT_SQL, (f"evs.evict={old}",))  # as the checker sends it
    assert status(conn, "wsrep_evs_evict_list") == old
    other = connect(second)
    until(lambda: status(other, "wsrep_evs_evict_list") == old)
    assert old not in members(second)
    sim.act(frozen, "thaw")
    until(lambda: truth_of(sim, frozen)["needs_restart"])
    assert status(connect(frozen), "wsrep_cluster_status") != "Primary"
    restarted = sim.act(frozen, "restart")
    assert restarted["uuid"] != old
    with pytest.raises(pymysql.err.OperationalError):
        connect(frozen)  # its port is closed while it joins
    until(lambda: truth_of(sim, frozen)["state"] == "Synced")
    back = connect(frozen)
    facts = probe(back)
    assert facts.get("wsrep_gcomm_uuid") == restarted["uuid"]
    assert facts.get("wsrep_local_state_comment") == "Synced"
    assert facts.get("wsrep_cluster_status") == "Primary"
    assert status(other, "wsrep_evs_evict_list") == old  # a stale entry never blocked it


def test_commands_the_model_refuses_and_truth_of_one_cluster(sim: SimNodes) -> None:
    node = sim.clusters[0].nodes[0]
    with pytest.raises(Exception, match="not frozen"):
        sim.act(node, "thaw")
    assert set(sim.truth()) == {"g1"}
    assert truth_of(sim, node)["writable"] is True


def test_what_a_frozen_node_was_sent_is_answered_once_it_is_thawed(sim: SimNodes) -> None:
    node = sim.clusters[0].nodes[2]
    conn = connect(node)
    sim.act(node, "freeze")
    answers: list[str] = []
    asking = threading.Thread(target=lambda: answers.append(status(conn, "wsrep_ready")))
    asking.start()
    asking.join(0.3)
    assert asking.is_alive()  # nothing is answered while it is frozen
    sim.act(node, "thaw")
    asking.join(5.0)
    assert answers == ["ON"]
