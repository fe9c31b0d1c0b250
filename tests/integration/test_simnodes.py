"""The lab's simulated Galera fleet (tests.lab.simnodes), read by the project's real probe: a
default node is a healthy Synced member, and what the control channel sets is what the next
probe reads; hang, down and back to ok behave as a stopped, a dead and a revived server do."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pymysql
import pytest

from checker_core.core.model import NodeAddress
from checker_core.core.verdict import State
from galera_checker.policy import GaleraFacts, judge
from galera_checker.probe import probe, watch
from tests.lab.simnodes import SimNodes, SimNodesError


@pytest.fixture(scope="module")
def sim() -> Iterator[SimNodes]:
    with SimNodes(clusters=2, nodes=3, timeout=5.0) as fleet:
        yield fleet


def connect(node: str, timeout: float = 2.0) -> pymysql.connections.Connection[Any]:
    conn: pymysql.connections.Connection[Any] = SimNodes.connect(node, timeout)
    return conn


def verdict_of(node: str, facts: GaleraFacts) -> State:
    host, port = SimNodes.address(node)
    return judge(NodeAddress(host, port), facts, None, 100, False).state


def assert_healthy(facts: GaleraFacts, state_uuid: str) -> None:
    assert facts.get("wsrep_cluster_status") == "Primary"
    assert facts.get("wsrep_local_state") == "4"
    assert facts.get("wsrep_local_state_comment") == "Synced"
    assert facts.get("wsrep_ready") == "ON"
    assert facts.get("wsrep_connected") == "ON"
    assert facts.get("wsrep_cluster_size") == "3"
    assert facts.get("wsrep_cluster_state_uuid") == state_uuid
    assert facts.recv_queue == 0
    assert not facts.read_only


def test_layout_two_clusters_of_three(sim: SimNodes) -> None:
    assert [len(c.nodes) for c in sim.clusters] == [3, 3]
    assert len(set(sim.addresses)) == 6
    assert len({c.state_uuid for c in sim.clusters}) == 2
    assert all(SimNodes.address(n)[0] == "127.0.0.1" for n in sim.addresses)


def test_probe_later_probe_and_watch_read_a_healthy_synced_node(sim: SimNodes) -> None:
    cluster = sim.clusters[0]
    node = cluster.nodes[0]
    conn = connect(node)
    try:
        first = probe(conn)
        assert sim.get(node)["last_query"].startswith("SHOW GLOBAL STATUS")
        assert "SHOW GLOBAL VARIABLES" in sim.get(node)["last_query"]
        later = probe(conn)
        assert "SELECT @@global.read_only" in sim.get(node)["last_query"]
        watched = watch(conn)
        assert "GROUP_CONCAT" in sim.get(node)["last_query"]
    finally:
        conn.close()
    assert_healthy(first, cluster.state_uuid)
    # the booleans came as 1/0 the second time and read the same as SHOW's ON/OFF
    assert later.values == first.values
    assert first.get("wsrep_on") == "ON"
    assert first.get("pxc_maint_mode") == "DISABLED"
    assert watched.watch_key == first.watch_key
    assert verdict_of(node, first) is State.HEALTHY
    gcomm = {sim.get(n)["status"]["wsrep_gcomm_uuid"] for n in sim.addresses}
    assert len(gcomm) == 6


def test_what_is_set_is_what_the_next_probe_reads(sim: SimNodes) -> None:
    node = sim.clusters[0].nodes[1]
    conn = connect(node)
    try:
        assert verdict_of(node, probe(conn)) is State.HEALTHY
        sim.set_status(node, wsrep_local_state_comment="Donor/Desynced", wsrep_local_state=2)
        sim.set_variables(node, read_only="ON")
        later = probe(conn)  # SELECT @@global...: read_only comes as 1
        watched = watch(conn)
    finally:
        conn.close()
        fresh = connect(node)
        try:
            first = probe(fresh)  # SHOW GLOBAL VARIABLES: read_only comes as ON
        finally:
            fresh.close()
            sim.reset(node)
    for facts in (later, first):
        assert facts.get("wsrep_local_state_comment") == "Donor/Desynced"
        assert facts.get("wsrep_local_state") == "2"
        assert facts.get("read_only") == "ON"
        assert facts.read_only
        assert verdict_of(node, facts) is State.LAST_RESORT
    assert watched.get("read_only") == "ON"
    assert watched.get("wsrep_local_state") == "2"


def test_a_variable_the_node_lacks(sim: SimNodes) -> None:
    node = sim.clusters[1].nodes[2]
    sim.set_variables(node, pxc_maint_mode=None, super_read_only=None)
    conn = connect(node)
    try:
        first = probe(conn)
        later = probe(conn)
        with conn.cursor() as cur:
            cur.execute("SELECT @@global.super_read_only, @@global.read_only")
            row = cur.fetchone()
    finally:
        conn.close()
        sim.reset(node)
    assert first.get("pxc_maint_mode") is None
    assert later.values == first.values
    assert row == (None, 0)


def test_hang_then_ok(sim: SimNodes) -> None:
    node = sim.clusters[1].nodes[0]
    sim.set_mode(node, "hang")
    try:
        with pytest.raises(pymysql.err.OperationalError):
            connect(node, timeout=0.3)
    finally:
        sim.set_mode(node, "ok")
    conn = connect(node)
    try:
        assert probe(conn).get("wsrep_local_state_comment") == "Synced"
        sim.set_mode(node, "hang")
        try:
            with pytest.raises(pymysql.err.OperationalError):
                connect(node, timeout=0.3)
        finally:
            sim.set_mode(node, "ok")
    finally:
        conn.close()


def test_a_probe_on_an_open_connection_of_a_hung_node_times_out(sim: SimNodes) -> None:
    node = sim.clusters[1].nodes[1]
    conn = connect(node, timeout=0.3)
    try:
        probe(conn)
        sim.set_mode(node, "hang")
        with pytest.raises(pymysql.err.OperationalError):
            probe(conn)
    finally:
        conn.close()
        sim.set_mode(node, "ok")


def test_down_refuses_then_ok_answers_again(sim: SimNodes) -> None:
    node = sim.clusters[0].nodes[2]
    conn = connect(node)
    try:
        probe(conn)
        sim.set_mode(node, "down")
        with pytest.raises(pymysql.err.OperationalError):
            probe(conn)  # the open connection was closed under it
        with pytest.raises(pymysql.err.OperationalError) as refused:
            connect(node, timeout=0.3)
        assert isinstance(
            getattr(refused.value, "original_exception", None), ConnectionRefusedError
        )
    finally:
        conn.close()
        sim.set_mode(node, "ok")
    again = connect(node)
    try:
        assert probe(again).get("wsrep_local_state_comment") == "Synced"
    finally:
        again.close()


def test_changing_queue_differs_probe_to_probe(sim: SimNodes) -> None:
    node = sim.clusters[1].nodes[2]
    conn = connect(node)
    sim.changing(node, True)
    try:
        queues = [probe(conn).recv_queue for _ in range(3)]
        sim.changing(node, False)
        steady = [probe(conn).recv_queue for _ in range(2)]
    finally:
        conn.close()
        sim.reset(node)
    assert queues[0] != queues[1] != queues[2]
    assert steady[0] == steady[1]


def test_other_statements_answer_without_harm(sim: SimNodes) -> None:
    node = sim.clusters[0].nodes[0]
    conn = connect(node)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT 1")
            assert cur.fetchall() == ((1,),)
            for sql in ("SET SESSION wait_timeout = 5", "ROLLBACK", "COMMIT", "SELECT NOW()"):
                cur.execute(sql)
                assert not cur.fetchall()
        conn.ping(reconnect=False)
        conn.select_db("mysql")
        assert probe(conn).get("wsrep_cluster_status") == "Primary"
    finally:
        conn.close()


def test_multi_statements_need_the_client_flag(sim: SimNodes) -> None:
    host, port = SimNodes.address(sim.clusters[0].nodes[0])
    conn = pymysql.connect(
        host=host, port=port, user="monitor", password="x", connect_timeout=2, read_timeout=2
    )
    try:
        with conn.cursor() as cur, pytest.raises(pymysql.err.ProgrammingError):
            cur.execute("SELECT 1; SELECT 2")
    finally:
        conn.close()


def test_control_refuses_what_it_cannot_do(sim: SimNodes) -> None:
    with pytest.raises(SimNodesError, match="no node"):
        sim.set_mode("127.0.0.1:1", "ok")
    with pytest.raises(SimNodesError, match="mode is one of"):
        sim.command({"cmd": "set", "node": sim.addresses[0], "mode": "asleep"})
    stats = sim.stats()
    assert stats.answers > 0
    assert stats.cpu_seconds > 0
