"""A steady pass keeps the last decision (core/steady.py) only when deciding again would give
the same: the same rows and facts (the objects read before), and a fixed point of the counters.
Whatever the cluster's state, the decision kept equals one made afresh, at any later time; and
when answers change only in their queues, it equals the one made afresh from the new answers
but for the queue each verdict holds."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from checker_core.core.decide import ClusterView, Decision, decide, view_of
from checker_core.core.hysteresis import NodeMemory
from checker_core.core.model import NodeAddress, ServerRow
from checker_core.core.probes import ProbeResult
from checker_core.core.settings import ClusterSettings
from checker_core.core.steady import Decided, same_but_queue, still_holds
from checker_core.core.verdict import State, Verdict
from galera_checker.policy import GaleraFacts, GaleraPolicy
from tests.unit.galera_cases import (
    NODES,
    apply_plan,
    cluster_settings,
    probe_down,
    probe_ok,
    rows_of,
    steady,
)

POLICY = GaleraPolicy()
STATES: dict[str, Callable[[NodeAddress], ProbeResult]] = {
    "healthy": probe_ok,
    "read_only": lambda n: probe_ok(n, read_only="ON"),
    "down": probe_down,
    "donor": lambda n: probe_ok(n, wsrep_local_state="2", wsrep_local_state_comment="Donor"),
    "lagging": lambda n: probe_ok(n, wsrep_local_recv_queue="500"),
    "rejecting": lambda n: probe_ok(n, wsrep_reject_queries="ALL"),
}


def decided(
    view: ClusterView,
    *,
    cluster: ClusterSettings,
    probes: Mapping[NodeAddress, ProbeResult],
    memory: Mapping[NodeAddress, NodeMemory],
    now: float,
    interval_s: float,
) -> Decision:
    return decide(
        POLICY,
        view,
        probes,
        memory=memory,
        cluster=cluster,
        in_use={},
        now=now,
        interval_s=interval_s,
    )


def settle_down(
    states: tuple[str, ...], retry: int, interval_s: float, passes: int, behind: int = 0
) -> tuple[Decided, ClusterView, dict[NodeAddress, ProbeResult], Mapping[NodeAddress, NodeMemory]]:
    """Passes with the same answers, each LOAD made live, as the daemon runs them (`behind`:
    max_transactions_behind)."""
    cluster = cluster_settings(retry_up=retry, retry_down=retry, max_transactions_behind=behind)
    probes = {n: STATES[s](n) for n, s in zip(NODES, states, strict=True)}
    live: list[ServerRow] = list(steady())
    view = view_of(rows_of(live), cluster)
    memory: Mapping[NodeAddress, NodeMemory] = {}
    last: Decided | None = None
    for k in range(passes):
        decision = decided(
            view,
            cluster=cluster,
            probes=probes,
            memory=memory,
            now=1000.0 + k * interval_s,
            interval_s=interval_s,
        )
        last = Decided(view, cluster, probes, memory, decision)
        memory = decision.memory
        if decision.plan.needs_load:
            live = apply_plan(live, decision)
            view = view_of(rows_of(live), cluster)
    assert last is not None
    return last, view, probes, memory


def afresh(
    last: Decided,
    view: ClusterView,
    probes: Mapping[NodeAddress, ProbeResult],
    memory: Mapping[NodeAddress, NodeMemory],
    *,
    interval_s: float,
    later: float,
) -> Decision:
    """The decision made anew from these inputs, `later` seconds after the settled passes."""
    return decided(
        view,
        cluster=last.cluster,
        probes=probes,
        memory=memory,
        now=2000.0 + later,
        interval_s=interval_s,
    )


@settings(max_examples=150, deadline=None)
@given(
    states=st.tuples(*[st.sampled_from(sorted(STATES))] * len(NODES)),
    retry=st.integers(min_value=1, max_value=3),
    interval_s=st.sampled_from([0.0, 1.0]),
    passes=st.integers(min_value=1, max_value=8),
    later=st.floats(min_value=0.0, max_value=86400.0),
)
def test_a_kept_decision_is_the_one_made_afresh_at_any_later_time(
    states: tuple[str, ...], retry: int, interval_s: float, passes: int, later: float
) -> None:
    last, view, probes, memory = settle_down(states, retry, interval_s, passes)
    kept, judged = still_holds(last, view, last.cluster, probes, memory)
    assert judged is None
    if kept is None:
        return
    assert kept == afresh(last, view, probes, memory, interval_s=interval_s, later=later)


def test_a_steady_cluster_keeps_its_decision() -> None:
    last, view, probes, memory = settle_down(("healthy",) * 3, 2, 1.0, 4)
    assert still_holds(last, view, last.cluster, probes, memory) == (last.decision, None)


def test_a_fact_read_anew_or_a_counter_that_moved_decides_again() -> None:
    last, view, probes, memory = settle_down(("healthy",) * 3, 2, 1.0, 4)
    n1 = NODES[0]
    reread = {**probes, n1: probe_ok(n1)}  # equal, but not the object read before
    assert still_holds(last, view, last.cluster, reread, memory) == (None, None)
    moved = {**memory, n1: NodeMemory(routable=True, bad_streak=1, bad_since=1.0)}
    assert still_holds(last, view, last.cluster, probes, moved) == (None, None)
    other_view = view_of(view.rows, last.cluster)  # the rows parsed again
    assert still_holds(last, other_view, last.cluster, probes, memory) == (None, None)
    assert still_holds(None, view, last.cluster, probes, memory) == (None, None)


def test_a_node_counting_towards_a_move_decides_again() -> None:
    """N1, the writer, fails its first probe of retry_down 3: the decision is no fixed point."""
    last, view, probes, memory = settle_down(("healthy",) * 3, 3, 1.0, 4)
    failing = {**probes, NODES[0]: probe_down(NODES[0])}
    cluster = last.cluster
    first = decided(
        view, cluster=cluster, probes=failing, memory=memory, now=2000.0, interval_s=1.0
    )
    held = Decided(view, cluster, failing, memory, first)
    assert still_holds(held, view, cluster, failing, first.memory) == (None, None)


def rejudged(
    last: Decided,
    view: ClusterView,
    probes: Mapping[NodeAddress, ProbeResult],
    memory: Mapping[NodeAddress, NodeMemory],
) -> tuple[Decision | None, Mapping[NodeAddress, Verdict] | None]:
    cluster = last.cluster
    return still_holds(
        last,
        view,
        cluster,
        probes,
        memory,
        judge=lambda: POLICY.judge_all(probes, cluster, memory),
        identity=POLICY.identity,
    )


def with_queue(facts: object, queue: str) -> GaleraFacts:
    assert isinstance(facts, GaleraFacts)
    return GaleraFacts({**facts.values, "wsrep_local_recv_queue": queue})


QUEUES = st.sampled_from(["0", "1", "7", "99", "101", "500"])


@settings(max_examples=150, deadline=None)
@given(
    states=st.tuples(*[st.sampled_from(sorted(STATES))] * len(NODES)),
    retry=st.integers(min_value=1, max_value=3),
    interval_s=st.sampled_from([0.0, 1.0]),
    passes=st.integers(min_value=1, max_value=8),
    queues=st.tuples(*[st.none() | QUEUES] * len(NODES)),
    behind=st.sampled_from([0, 100]),
    later=st.floats(min_value=0.0, max_value=86400.0),
)
def test_a_decision_kept_over_new_queues_is_the_one_made_afresh_but_for_them(
    *,
    states: tuple[str, ...],
    retry: int,
    interval_s: float,
    passes: int,
    queues: tuple[str | None, ...],
    behind: int,
    later: float,
) -> None:
    """Each node answers anew, some with another receive queue (up to past the lagging
    threshold): a kept decision is the fresh one, its verdicts but for their queues."""
    last, view, probes, memory = settle_down(states, retry, interval_s, passes, behind)
    anew = {
        node: probe
        if queue is None or state == "down"
        else replace(probe, facts=with_queue(probe.facts, queue))
        for (node, probe), queue, state in zip(probes.items(), queues, states, strict=True)
    }
    kept, judged = rejudged(last, view, anew, memory)
    fresh = afresh(last, view, anew, memory, interval_s=interval_s, later=later)
    if judged is not None:
        assert judged == fresh.raw, "the verdicts judged on the way are the fresh ones"
    if kept is None:
        return
    assert kept.raw == fresh.raw
    assert kept.verdicts.keys() == fresh.verdicts.keys()
    assert all(same_but_queue(kept.verdicts[n], fresh.verdicts[n]) for n in kept.verdicts)
    assert replace(kept, verdicts=fresh.verdicts) == fresh


def test_a_healthy_cluster_whose_queues_move_keeps_its_decision() -> None:
    last, view, probes, memory = settle_down(("healthy",) * 3, 2, 1.0, 4)
    n1 = NODES[0]
    anew = {**probes, n1: probe_ok(n1, wsrep_local_recv_queue="3")}
    kept, judged = rejudged(last, view, anew, memory)
    assert kept is not None and judged is not None
    assert kept.plan is last.decision.plan
    assert kept.raw[n1].queue == 3, "the queue as read now"


def test_a_node_judged_otherwise_or_another_member_decides_again() -> None:
    last, view, probes, memory = settle_down(("healthy",) * 3, 2, 1.0, 4, behind=100)
    n1 = NODES[0]
    lagging = {**probes, n1: probe_ok(n1, wsrep_local_recv_queue="500")}
    kept, judged = rejudged(last, view, lagging, memory)
    assert kept is None and judged is not None
    assert judged[n1].state is State.LAGGING
    restarted = {**probes, n1: probe_ok(n1, wsrep_gcomm_uuid="another-process")}
    assert rejudged(last, view, restarted, memory) == (None, None)
