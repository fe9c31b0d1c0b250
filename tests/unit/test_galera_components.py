"""One Primary component of one cluster is routed: a minority forced Primary (pc.bootstrap)
beside the real component, or a node of another cluster, is never routed; the moment of a view
change, when nodes name different views of a majority's size, moves nothing."""

from __future__ import annotations

from checker_core.core.decide import Decision
from checker_core.core.model import NodeAddress
from checker_core.core.probes import ProbeFailure, ProbeResult
from checker_core.core.verdict import State
from tests.unit.galera_cases import HG, N1, N2, N3, hostgroup_members, probe_ok, run, steady

CLUSTER = "6f1c0d2a-0000-11ef-9a4b-000000000001"
OTHER = "9e3b7c11-0000-11ef-8c2d-000000000002"


def member(view: str, size: int, state_uuid: str = CLUSTER) -> dict[str, str]:
    return {
        "wsrep_cluster_conf_id": view,
        "wsrep_cluster_size": str(size),
        "wsrep_cluster_state_uuid": state_uuid,
    }


def routed(decision: Decision) -> set[NodeAddress]:
    return hostgroup_members(decision, HG.writer) | hostgroup_members(decision, HG.reader)


def test_a_minority_forced_primary_beside_the_real_component_is_never_routed() -> None:
    probes = {
        N1: probe_ok(N1, **member("12", 2)),
        N2: probe_ok(N2, **member("12", 2)),
        N3: probe_ok(N3, **member("5", 1)),  # SET GLOBAL wsrep_provider_options='pc.bootstrap=1'
    }
    decision = run(steady(N1), probes)
    verdict = decision.verdicts[N3]
    assert verdict.state is State.OFFLINE and verdict.hard
    assert "a second Primary component" in verdict.reason
    assert N3 not in routed(decision)
    assert hostgroup_members(decision, HG.writer) == {N1}


def test_the_forced_primary_writer_is_replaced_at_once() -> None:
    probes = {
        N1: probe_ok(N1, **member("5", 1)),
        N2: probe_ok(N2, **member("12", 2)),
        N3: probe_ok(N3, **member("12", 2)),
    }
    decision = run(steady(N1), probes, retry_down=5)
    assert hostgroup_members(decision, HG.writer) == {N2}


def test_a_node_of_another_cluster_is_never_routed() -> None:
    probes = {
        N1: probe_ok(N1, **member("12", 3)),
        N2: probe_ok(N2, **member("12", 3)),
        N3: probe_ok(N3, **member("3", 3, OTHER)),
    }
    decision = run(steady(N1), probes)
    assert "another cluster" in decision.verdicts[N3].reason
    assert N3 not in routed(decision)


def test_nodes_naming_different_views_of_a_majority_during_a_view_change_stay_routed() -> None:
    dead = ProbeResult(N3, None, "Connection refused (error 2003)", 1.0, ProbeFailure.REFUSED)
    probes = {
        N1: probe_ok(N1, **member("13", 2)),  # installed the view without N3
        N2: probe_ok(N2, **member("12", 3)),  # not yet
        N3: dead,
    }
    decision = run(steady(N1), probes)
    assert decision.verdicts[N1].state is State.HEALTHY
    assert decision.verdicts[N2].state is State.HEALTHY


def test_a_cluster_shrunk_by_clean_leaves_is_one_component() -> None:
    """Two of five nodes shut down cleanly: the three left are a Primary component of 3 of a
    roster of 3 here, and one of 1 after two more leave cleanly: still routed."""
    probes = {
        N1: probe_ok(N1, **member("20", 1)),
        N2: ProbeResult(N2, None, "refused", 1.0, ProbeFailure.REFUSED),
        N3: ProbeResult(N3, None, "refused", 1.0, ProbeFailure.REFUSED),
    }
    decision = run(steady(N1), probes)
    assert decision.verdicts[N1].state is State.HEALTHY
    assert hostgroup_members(decision, HG.writer) == {N1}
