"""Group Replication rules R2-R6, and invariants over random group states."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from checker_core.core.decide import Decision, decide, view_of
from checker_core.core.hysteresis import NodeMemory
from checker_core.core.model import ClusterRows, NodeAddress, ServerRow, ServerStatus, sort_rows
from checker_core.core.probes import ProbeFailure, ProbeResult
from checker_core.core.verdict import State
from checker_core.core.whatif import Assumed
from checker_core.passes.result import Outcome, PassResult
from checker_core.report import summary
from gr_checker.policy import GrFacts, GroupReplicationPolicy, Member
from tests.unit.galera_cases import HG, cluster_settings, templates
from tests.unit.reader_meaning import check_reader_meaning

M1, M2, M3 = (NodeAddress("127.0.0.1", p) for p in (3321, 3322, 3323))
MEMBERS = (M1, M2, M3)
UUID = {M1: "uuid-1", M2: "uuid-2", M3: "uuid-3"}
WEIGHTS = {M1: 100, M2: 100, M3: 100}


def view(
    primary: NodeAddress | None,
    states: Mapping[NodeAddress, str] | None = None,
    multi: bool = False,
) -> tuple[Member, ...]:
    states = states or {}
    return tuple(
        Member(
            UUID[n],
            n.host,
            n.port,
            states.get(n, "ONLINE"),
            "PRIMARY" if multi or n == primary else "SECONDARY",
        )
        for n in MEMBERS
    )


def facts(
    node: NodeAddress,
    members: tuple[Member, ...],
    *,
    sro: bool | None = None,
    queue: int = 0,
    multi: bool = False,
) -> ProbeResult:
    me = next(m for m in members if m.member_id == UUID[node])
    super_ro = (me.role != "PRIMARY") if sro is None else sro
    gr = GrFacts(UUID[node], super_ro, super_ro, not multi, members, queue, 0, 1000)
    return ProbeResult(node, gr, None, 1.0)


def healthy_group(primary: NodeAddress = M1) -> dict[NodeAddress, ProbeResult]:
    members = view(primary)
    return {n: facts(n, members) for n in MEMBERS}


def at(node: NodeAddress, hostgroup: int) -> ServerRow:
    return ServerRow(hostgroup, node.host, node.port, weight=100)


def steady(writer: NodeAddress = M1) -> list[ServerRow]:
    return [at(writer, HG.writer), *(at(n, HG.reader) for n in MEMBERS)]


def run(
    live: list[ServerRow],
    probes: Mapping[NodeAddress, ProbeResult],
    memory: Mapping[NodeAddress, NodeMemory] | None = None,
    **cluster: Any,
) -> Decision:
    runtime = sort_rows([*templates(WEIGHTS), *live])
    settings = cluster_settings(**cluster)
    return decide(
        GroupReplicationPolicy(),
        view_of(ClusterRows(runtime, runtime), settings),
        probes,
        memory=memory or {},
        cluster=settings,
        in_use={},
        now=100.0,
    )


def online(decision: Decision, hostgroup: int) -> set[NodeAddress]:
    return {
        r.node
        for r in decision.plan.desired
        if r.hostgroup_id == hostgroup and r.status is ServerStatus.ONLINE
    }


def test_steady_single_primary() -> None:
    decision = run(steady(), healthy_group())
    assert online(decision, HG.writer) == {M1}
    assert online(decision, HG.backup_writer) == set()  # secondaries are super_read_only
    assert online(decision, HG.reader) == {M1, M2, M3}
    assert decision.plan.changes == ()


@pytest.mark.parametrize(("mode", "readers"), [(0, {M2, M3}), (1, {M1, M2, M3}), (2, {M2, M3})])
def test_writer_is_also_reader(mode: int, readers: set[NodeAddress]) -> None:
    assert online(run([], healthy_group(), writer_is_also_reader=mode), HG.reader) == readers


# R2
@pytest.mark.parametrize("state", ["RECOVERING", "OFFLINE", "ERROR", "UNREACHABLE"])
def test_not_online_is_offline_at_once(state: str) -> None:
    members = view(M1, {M3: state})
    probes = {n: facts(n, members) for n in MEMBERS}
    decision = run(steady(), probes, retry_down=5)
    verdict = decision.verdicts[M3]
    assert verdict.state is State.OFFLINE
    assert M3 not in online(decision, HG.reader)


# R3
def test_minority_member_is_offline_at_once_and_majority_view_wins() -> None:
    # M3 was cut off: it sees the others UNREACHABLE; they see it UNREACHABLE too
    cut = view(M1, {M1: "UNREACHABLE", M2: "UNREACHABLE"})
    majority = view(M1, {M3: "UNREACHABLE"})
    probes = {M1: facts(M1, majority), M2: facts(M2, majority), M3: facts(M3, cut)}
    decision = run(steady(), probes, retry_down=5)
    assert decision.verdicts[M3].state is State.OFFLINE
    assert "minority: 1 of 3" in decision.verdicts[M3].reason
    assert M3 not in online(decision, HG.reader)


# R3
def test_member_the_majority_does_not_see_is_not_routed() -> None:
    # M3 believes all is well, but M1 and M2 (a majority) do not list it ONLINE
    majority = view(M1, {M3: "UNREACHABLE"})
    probes = {M1: facts(M1, majority), M2: facts(M2, majority), M3: facts(M3, view(M1))}
    decision = run(steady(), probes)
    assert decision.verdicts[M3].state is State.OFFLINE
    assert "majority does not see it ONLINE" in decision.verdicts[M3].reason


# R4
def test_new_primary_followed_and_old_leaves() -> None:
    members = view(M2, {M1: "UNREACHABLE"})
    probes = {
        M1: ProbeResult(M1, None, "Can't connect (error 2003)", 1.0),
        M2: facts(M2, members),
        M3: facts(M3, members),
    }
    decision = run(steady(M1), probes)
    assert online(decision, HG.writer) == {M2}
    assert M1 not in {r.node for r in decision.plan.desired if r.hostgroup_id == HG.writer}


def test_switchover_removes_old_primary_without_drain() -> None:
    decision = run(steady(M1), healthy_group(M2))
    assert online(decision, HG.writer) == {M2}
    # the old primary is super_read_only now: its writes fail with 1290, nothing to drain
    assert M1 not in {r.node for r in decision.plan.desired if r.hostgroup_id == HG.writer}
    assert M1 in online(decision, HG.reader)


def brownout_probes(queue: int) -> dict[NodeAddress, ProbeResult]:
    members = view(M2, {M1: "UNREACHABLE"})
    return {
        M1: ProbeResult(M1, None, "Can't connect (error 2003)", 1.0),
        M2: facts(M2, members, sro=True, queue=queue),
        M3: facts(M3, members),
    }


# R5
def test_brownout_hold_keeps_writer_hostgroup_empty() -> None:
    decision = run(steady(M1), brownout_probes(1200))
    assert decision.verdicts[M2].state is State.BROWNOUT
    assert online(decision, HG.writer) == set()
    assert decision.assignment.why_writers.startswith("brownout: holding writes")


# R5
def test_brownout_route_adds_it_at_once() -> None:
    decision = run(steady(M1), brownout_probes(1200), brownout="route")
    assert online(decision, HG.writer) == {M2}


def test_brownout_report_rate_and_time_left() -> None:
    first = run(steady(M1), brownout_probes(1200))
    later = run(
        [r for r in first.plan.desired],
        brownout_probes(800),
        memory={
            n: replace(m, queue_samples=tuple((t - 2.0, q) for t, q in m.queue_samples))
            for n, m in first.memory.items()
        },
    )
    result = PassResult("lab", "p", Outcome.UNCHANGED, 1.0, "", decision=later)
    (report,) = result.brownouts()
    assert (report.queue, report.rate_per_s, report.seconds_left) == (800, 200.0, 4.0)
    assert "applier queue 800, draining 200/s, about 4.0 s left" in summary(result)


def test_writable_after_brownout_becomes_writer() -> None:
    members = view(M2, {M1: "UNREACHABLE"})
    probes = {
        M1: ProbeResult(M1, None, "down", 1.0),
        M2: facts(M2, members, sro=False),
        M3: facts(M3, members),
    }
    assert online(run([], probes), HG.writer) == {M2}


# R6
def test_lagging_secondary_out_of_readers_until_half() -> None:
    members = view(M1)
    lagging = {M1: facts(M1, members), M2: facts(M2, members, queue=150), M3: facts(M3, members)}
    first = run(steady(), lagging, max_transactions_behind=100)
    assert M2 not in online(first, HG.reader)
    still = {**lagging, M2: facts(M2, members, queue=60)}
    assert M2 not in online(
        run(steady(), still, first.memory, max_transactions_behind=100), HG.reader
    )
    back = {**lagging, M2: facts(M2, members, queue=40)}
    assert M2 in online(run(steady(), back, first.memory, max_transactions_behind=100), HG.reader)


# R4
def test_multi_primary_writers_up_to_max() -> None:
    members = view(None, multi=True)
    probes = {n: facts(n, members, sro=False, multi=True) for n in MEMBERS}
    decision = run([], probes, max_writers=2)
    assert len(online(decision, HG.writer)) == 2
    assert len(online(decision, HG.backup_writer)) == 1


# ------------------------------------------------------------------------------- invariants

ROUTED = (HG.writer, HG.backup_writer, HG.reader)
HELD_STATUSES = (ServerStatus.ONLINE, ServerStatus.SHUNNED)

member_state = st.sampled_from(
    ["ONLINE", "ONLINE", "ONLINE", "RECOVERING", "UNREACHABLE", "ERROR", "OFFLINE"]
)


@st.composite
def group_states(
    draw: st.DrawFn,
) -> tuple[list[ServerRow], dict[NodeAddress, ProbeResult], dict[str, object]]:
    multi = draw(st.booleans())
    primary = draw(st.sampled_from(MEMBERS))
    probes: dict[NodeAddress, ProbeResult] = {}
    for node in MEMBERS:
        if draw(st.integers(0, 4)) == 0:
            failure = draw(st.sampled_from(list(ProbeFailure)))
            probes[node] = ProbeResult(node, None, f"no answer ({failure.label})", 1.0, failure)
            continue
        states = {n: draw(member_state) for n in MEMBERS}
        members = view(primary, states, multi)
        probes[node] = facts(
            node, members, sro=draw(st.booleans()), queue=draw(st.integers(0, 300)), multi=multi
        )
    live = [
        ServerRow(hg, n.host, n.port, status=draw(st.sampled_from(list(ServerStatus))))
        for n in MEMBERS
        for hg in draw(st.sets(st.sampled_from(HG.managed), max_size=2))
    ]
    cluster = {
        "max_writers": draw(st.integers(1, 3)),
        "writer_is_also_reader": draw(st.integers(0, 2)),
        "max_transactions_behind": draw(st.sampled_from([0, 100])),
        "brownout": draw(st.sampled_from(["hold", "route"])),
    }
    return live, probes, cluster


@settings(max_examples=300, deadline=None)
@given(group_states())
def test_gr_invariants(
    state: tuple[list[ServerRow], dict[NodeAddress, ProbeResult], dict[str, Any]],
) -> None:
    live, probes, cluster = state
    decision = run(live, probes, **cluster)
    if decision.blind:
        assert decision.plan.changes == (), "a pass that heard no member changes nothing"
        return
    routed_before = {r.node for r in live if r.hostgroup_id in ROUTED and r.status in HELD_STATUSES}
    writers = online(decision, HG.writer)
    assert len(writers) <= int(str(cluster["max_writers"]))
    for node in writers:
        gr = probes[node].facts
        if gr is None:
            # silent while most members were: kept where it was, never promoted
            assert decision.verdicts[node].state.keeps_place and node in routed_before
            continue
        assert isinstance(gr, GrFacts)
        if cluster["brownout"] == "hold":
            assert not gr.super_read_only, "never a super_read_only node in the writer hostgroup"
    for hostgroup in ROUTED:
        for node in online(decision, hostgroup):
            gr = probes[node].facts
            if gr is None:
                assert decision.verdicts[node].state.keeps_place and node in routed_before
                continue
            assert isinstance(gr, GrFacts)
            assert gr.has_quorum, "never a route to a minority / non-ONLINE member"
    assert {r.node for r in decision.plan.desired} == set(MEMBERS)
    check_reader_meaning(decision, int(str(cluster["writer_is_also_reader"])), HG)
    again = run(list(decision.plan.desired), probes, decision.memory, **cluster)
    if not any(r.status is ServerStatus.OFFLINE_SOFT for r in decision.plan.desired):
        assert again.plan.changes == ()
    assert run(live, probes, **cluster).plan == decision.plan


def test_a_writable_members_queue_is_no_state_for_the_watch() -> None:
    """Every writer of a multi-primary group under writes has an applier queue that empties and
    fills: the watch must not start a pass for each flicker."""
    members = view(None, multi=True)
    idle = facts(M1, members, sro=False, queue=0, multi=True).facts
    busy = facts(M1, members, sro=False, queue=7, multi=True).facts
    assert isinstance(idle, GrFacts) and isinstance(busy, GrFacts)
    assert idle.watch_key == busy.watch_key


def test_a_held_primary_draining_its_queue_is_a_state_for_the_watch() -> None:
    members = view(M2)
    held = facts(M2, members, sro=True, queue=40).facts
    drained = facts(M2, members, sro=True, queue=0).facts
    assert isinstance(held, GrFacts) and isinstance(drained, GrFacts)
    assert held.watch_key != drained.watch_key


# ------------------------------------------------ members whose MEMBER_HOST is a hostname

HOSTNAMES = {M1: "db1.internal", M2: "db2.internal", M3: "db3.internal"}


def named_view(primary: NodeAddress) -> tuple[Member, ...]:
    """replication_group_members without report_host: the servers' hostnames, not the roster's
    addresses."""
    return tuple(
        Member(UUID[n], HOSTNAMES[n], 3306, "ONLINE", "PRIMARY" if n == primary else "SECONDARY")
        for n in MEMBERS
    )


def named_group(primary: NodeAddress = M1) -> dict[NodeAddress, ProbeResult]:
    members = named_view(primary)
    found = {}
    for node in MEMBERS:
        me = UUID[node]
        super_ro = node != primary
        gr = GrFacts(me, super_ro, super_ro, True, members, 0, 0, 1000)
        found[node] = ProbeResult(node, gr, None, 1.0)
    return found


def test_one_timeout_of_a_primary_named_by_hostname_is_tolerated_by_retry_down() -> None:
    first = run(steady(M1), named_group(M1), retry_down=2)
    assert first.memory[M1].identity == UUID[M1]
    probes = named_group(M1)
    probes[M1] = ProbeResult(M1, None, "timed out (no answer within 500 ms)", 500.0)
    blip = run(steady(M1), probes, memory=first.memory, retry_down=2)
    assert blip.verdicts[M1].state is State.SUSPECT, blip.verdicts[M1].reason
    assert online(blip, HG.writer) == {M1}


def test_a_silent_member_never_probed_and_found_by_no_address_counts_on_its_own_probe() -> None:
    probes = named_group(M1)
    probes[M3] = ProbeResult(M3, None, "timed out (no answer within 500 ms)", 500.0)
    decision = run(steady(M1), probes, retry_down=2)
    verdict = decision.verdicts[M3]
    assert verdict.state is State.SUSPECT, verdict.reason
    assert "report_host" in verdict.reason


def test_a_member_the_views_no_longer_hold_is_out_at_once_by_its_server_uuid() -> None:
    first = run(steady(M1), named_group(M1), retry_down=3)
    expelled = tuple(m for m in named_view(M1) if m.member_id != UUID[M3])
    probes = {
        n: replace(p, facts=replace(p.facts, members=expelled))  # type: ignore[type-var]
        for n, p in named_group(M1).items()
        if n != M3
    }
    probes[M3] = ProbeResult(M3, None, "timed out (no answer within 500 ms)", 500.0)
    decision = run(steady(M1), probes, memory=first.memory, retry_down=3)
    assert decision.verdicts[M3].state is State.OFFLINE, decision.verdicts[M3].reason


def test_readiness_finds_a_primary_named_by_hostname() -> None:
    policy = GroupReplicationPolicy()
    assumed = policy.assume(named_group(M1), {M1: Assumed.DOWN}, cluster_settings())
    m2 = assumed[M2].facts
    assert isinstance(m2, GrFacts)
    assert UUID[M1] not in {m.member_id for m in m2.members}, "expelled by the majority"
    elected = min(UUID[M2], UUID[M3])
    assert any(m.member_id == elected and m.role == "PRIMARY" for m in m2.members)


def test_without_readings_a_member_is_its_state_not_its_load() -> None:
    """What failover readiness is worked out from: queues and counters move with load alone;
    the group's view and the member's settings do not."""
    policy = GroupReplicationPolicy()
    members = view(M1)
    idle, busy = facts(M2, members).facts, facts(M2, members, queue=37).facts
    assert isinstance(busy, GrFacts)
    busier = replace(busy, certify_queue=5, remote_applied=98765)
    assert idle != busier
    assert policy.without_readings(idle) == policy.without_readings(busier)
    expel = replace(busy, expel_timeout_s=5)
    assert policy.without_readings(expel) != policy.without_readings(idle)
    left = facts(M2, view(M1, {M3: "UNREACHABLE"})).facts
    assert policy.without_readings(left) != policy.without_readings(idle)
