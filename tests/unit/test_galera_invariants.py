"""Invariants over random Galera cluster states (hypothesis).

Whatever ProxySQL had and whatever the probes say: never more writers than max_writers, no
route to a node judged down/offline/maintenance, every roster node placed, rows outside the
cluster untouched, a plan applied once leaves nothing for the next pass, same input same plan.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from checker_core.core.decide import Decision
from checker_core.core.model import NodeAddress, ServerRow, ServerStatus
from checker_core.core.probes import ProbeFailure, ProbeResult
from checker_core.core.verdict import State
from tests.unit.galera_cases import HG, MARIADB_HEALTHY, rows_of, run
from tests.unit.reader_meaning import check_reader_meaning

HOSTS = [NodeAddress("127.0.0.1", 3311 + i) for i in range(5)]
ROUTED = (HG.writer, HG.backup_writer, HG.reader)

fact_variants = st.fixed_dictionaries(
    {},
    optional={
        "wsrep_cluster_status": st.sampled_from(["Primary", "non-Primary", "Disconnected"]),
        "wsrep_ready": st.sampled_from(["ON", "OFF"]),
        "wsrep_local_state": st.sampled_from(["1", "2", "3", "4"]),
        "wsrep_desync": st.sampled_from(["ON", "OFF"]),
        "wsrep_reject_queries": st.sampled_from(["NONE", "ALL", "ALL_KILL"]),
        "read_only": st.sampled_from(["ON", "OFF"]),
        "pxc_maint_mode": st.sampled_from(["DISABLED", "SHUTDOWN", "MAINTENANCE"]),
        "wsrep_local_recv_queue": st.sampled_from(["0", "5", "50", "500"]),
    },
)


@st.composite
def cluster_states(draw: st.DrawFn) -> dict[str, object]:
    nodes = draw(st.lists(st.sampled_from(HOSTS), min_size=1, max_size=5, unique=True))
    weights = {n: draw(st.integers(0, 1000)) for n in nodes}
    live: list[ServerRow] = []
    for node in nodes:
        for hostgroup in draw(st.sets(st.sampled_from(HG.managed), max_size=3)):
            status = draw(st.sampled_from(list(ServerStatus)))
            live.append(
                ServerRow(
                    hostgroup, node.host, node.port, status=status, weight=draw(st.integers(0, 10))
                )
            )
    probes: dict[NodeAddress, ProbeResult] = {}
    for node in nodes:
        if draw(st.booleans()):
            from galera_checker.policy import GaleraFacts

            probes[node] = ProbeResult(
                node, GaleraFacts({**MARIADB_HEALTHY, **draw(fact_variants)}), None, 1.0
            )
        else:
            failure = draw(st.sampled_from(list(ProbeFailure)))
            probes[node] = ProbeResult(node, None, f"no answer ({failure.label})", 1.0, failure)
    return {
        "live": live,
        "weights": weights,
        "probes": probes,
        "max_writers": draw(st.integers(1, 3)),
        "writer_is_also_reader": draw(st.integers(0, 2)),
        "max_transactions_behind": draw(st.sampled_from([0, 10, 100])),
        "fail_back": draw(st.booleans()),
        "kill_demoted_writer_connections": draw(st.booleans()),
    }


def decide_state(state: dict[str, object], live: list[ServerRow] | None = None) -> Decision:
    args = dict(state)
    rows = args.pop("live")
    assert isinstance(rows, list)
    return run(live if live is not None else rows, **args)  # type: ignore[arg-type]


def online(decision: Decision, hostgroup: int) -> set[NodeAddress]:
    return {
        r.node
        for r in decision.plan.desired
        if r.hostgroup_id == hostgroup and r.status is ServerStatus.ONLINE
    }


@settings(max_examples=300, deadline=None)
@given(cluster_states())
def test_invariants(state: dict[str, object]) -> None:
    decision = decide_state(state)
    if decision.blind:
        assert decision.plan.changes == (), "a pass that heard no node changes nothing"
        return
    max_writers = state["max_writers"]
    assert isinstance(max_writers, int)
    assert len(online(decision, HG.writer)) <= max_writers

    bad = {
        n
        for n, v in decision.verdicts.items()
        if v.state in (State.DOWN, State.OFFLINE, State.MAINTENANCE, State.RECOVERING)
    }
    for hostgroup in ROUTED:
        assert not (online(decision, hostgroup) & bad), f"route to a bad node in {hostgroup}"
    for node in online(decision, HG.writer):
        assert decision.verdicts[node].writable or decision.verdicts[node].state.keeps_place

    roster = set(decision.roster.addresses)
    placed = {r.node for r in decision.plan.desired}
    assert placed == roster, "every roster node is placed, nothing else is"
    for node in roster:
        routed = any(node in online(decision, hg) for hg in ROUTED)
        in_offline = node in online(decision, HG.offline)
        operator_parked = any(
            r.node == node
            and r.hostgroup_id == HG.offline
            and r.status is ServerStatus.OFFLINE_HARD
            for r in decision.plan.desired
        )
        assert routed != in_offline or operator_parked

    assert all(r.hostgroup_id in HG.managed for r in decision.plan.desired)
    # operator rows are kept verbatim
    live = state["live"]
    assert isinstance(live, list)
    for row in live:
        if row.status is ServerStatus.OFFLINE_HARD:
            assert row in decision.plan.desired


@settings(max_examples=300, deadline=None)
@given(cluster_states())
def test_writer_is_also_reader_meanings(state: dict[str, object]) -> None:
    mode = state["writer_is_also_reader"]
    assert isinstance(mode, int)
    check_reader_meaning(decide_state(state), mode, HG)


@settings(max_examples=200, deadline=None)
@given(cluster_states())
def test_same_input_same_plan_and_second_pass_is_quiet(state: dict[str, object]) -> None:
    first = decide_state(state)
    assert decide_state(state).plan == first.plan
    # the next pass sees what the first loaded, with the same probes and the memory it kept
    args = dict(state)
    args.pop("live")
    from tests.unit.galera_cases import run as run_again

    second = run_again(list(first.plan.desired), memory=first.memory, drained=(), **args)  # type: ignore[arg-type]
    draining = {r.node for r in first.plan.desired if r.status is ServerStatus.OFFLINE_SOFT}
    if not draining:
        assert second.plan.changes == (), [c.describe() for c in second.plan.changes]


def test_rows_outside_the_cluster_are_not_read_as_ours() -> None:
    foreign = ServerRow(500, "10.0.0.1", 3306)
    rows = rows_of([foreign])
    assert foreign in rows.runtime
    decision = run([foreign])
    assert foreign not in decision.plan.desired
    assert all(c.before != foreign for c in decision.plan.changes)
