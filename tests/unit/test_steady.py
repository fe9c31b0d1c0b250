"""A steady pass keeps the last decision (core/steady.py) only when deciding again would give
the same: the same rows and facts (the objects read before), and a fixed point of the counters.
Whatever the cluster's state, the decision kept equals one made afresh, at any later time."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from hypothesis import given, settings
from hypothesis import strategies as st

from checker_core.core.decide import ClusterView, Decision, decide, view_of
from checker_core.core.hysteresis import NodeMemory
from checker_core.core.model import NodeAddress, ServerRow
from checker_core.core.probes import ProbeResult
from checker_core.core.settings import ClusterSettings
from checker_core.core.steady import Decided, still_holds
from galera_checker.policy import GaleraPolicy
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
    states: tuple[str, ...], retry: int, interval_s: float, passes: int
) -> tuple[Decided, ClusterView, dict[NodeAddress, ProbeResult], Mapping[NodeAddress, NodeMemory]]:
    """Passes with the same answers, each LOAD made live, as the daemon runs them."""
    cluster = cluster_settings(retry_up=retry, retry_down=retry)
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
    kept = still_holds(last, view, last.cluster, probes, memory)
    if kept is None:
        return
    fresh = decided(
        view,
        cluster=last.cluster,
        probes=probes,
        memory=memory,
        now=2000.0 + later,
        interval_s=interval_s,
    )
    assert kept == fresh


def test_a_steady_cluster_keeps_its_decision() -> None:
    last, view, probes, memory = settle_down(("healthy",) * 3, 2, 1.0, 4)
    assert still_holds(last, view, last.cluster, probes, memory) is last.decision


def test_a_fact_read_anew_or_a_counter_that_moved_decides_again() -> None:
    last, view, probes, memory = settle_down(("healthy",) * 3, 2, 1.0, 4)
    n1 = NODES[0]
    reread = {**probes, n1: probe_ok(n1)}  # equal, but not the object read before
    assert still_holds(last, view, last.cluster, reread, memory) is None
    moved = {**memory, n1: NodeMemory(routable=True, bad_streak=1, bad_since=1.0)}
    assert still_holds(last, view, last.cluster, probes, moved) is None
    other_view = view_of(view.rows, last.cluster)  # the rows parsed again
    assert still_holds(last, other_view, last.cluster, probes, memory) is None
    assert still_holds(None, view, last.cluster, probes, memory) is None


def test_a_node_counting_towards_a_move_decides_again() -> None:
    """N1, the writer, fails its first probe of retry_down 3: the decision is no fixed point."""
    last, view, probes, memory = settle_down(("healthy",) * 3, 3, 1.0, 4)
    failing = {**probes, NODES[0]: probe_down(NODES[0])}
    cluster = last.cluster
    first = decided(
        view, cluster=cluster, probes=failing, memory=memory, now=2000.0, interval_s=1.0
    )
    held = Decided(view, cluster, failing, memory, first)
    assert still_holds(held, view, cluster, failing, first.memory) is None
