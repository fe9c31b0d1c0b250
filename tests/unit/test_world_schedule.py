"""The simulated world's schedule: a seed gives one schedule, every fault is healed, a cluster
never has a majority of its nodes faulty at once, and a shrunk schedule is still whole."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.world import schedule as sched

SHAPES = (
    sched.ClusterShape("g1", "galera", ("n1", "n2", "n3")),
    sched.ClusterShape("g2", "galera", ("n1", "n2", "n3")),
    sched.ClusterShape("r1", "gr", ("n1", "n2", "n3")),
    sched.PROXYSQL,
)
NODE_FAULTS = {f.name: f for f in sched.FAULTS if f.node_level}


def test_a_seed_replays_the_same_schedule() -> None:
    first = sched.draw(7, SHAPES, 120)
    again = sched.draw(7, SHAPES, 120)
    other = sched.draw(8, SHAPES, 120)
    assert first == again
    assert first.steps != other.steps
    assert next(iter(first.lines())) == f"seed 7: {len(first.steps)} steps"


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10**6), seconds=st.floats(5, 300))
def test_every_fault_is_healed_once_after_it_on_the_same_target(seed: int, seconds: float) -> None:
    schedule = sched.draw(seed, SHAPES, seconds)
    by_number = {s.number: s for s in schedule.steps}
    heals = [s for s in schedule.steps if s.heals is not None]
    faults = [s for s in schedule.steps if s.heals is None]
    lasting = [f for f in faults if f.action in {k.name for k in sched.FAULTS}]
    assert sorted(h.heals or 0 for h in heals) == sorted(f.number for f in lasting)
    for heal in heals:
        assert heal.heals is not None
        fault = by_number[heal.heals]
        kind = next(k for k in sched.FAULTS if k.name == fault.action)
        assert heal.action == kind.heal
        assert (heal.cluster, heal.node) == (fault.cluster, fault.node)
        assert heal.at >= fault.at
    assert [s.at for s in schedule.steps] == sorted(s.at for s in schedule.steps)
    assert [s.number for s in schedule.steps] == list(range(1, len(schedule.steps) + 1))


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10**6))
def test_a_minority_of_a_clusters_nodes_at_most_is_faulty_at_once(seed: int) -> None:
    schedule = sched.draw(seed, SHAPES, 200)
    faulty: dict[str, set[str]] = {s.name: set() for s in SHAPES}
    for step in schedule.steps:
        if step.node is None:
            continue
        if step.heals is None and step.action in NODE_FAULTS:
            assert step.node not in faulty[step.cluster]
            faulty[step.cluster].add(step.node)
            assert len(faulty[step.cluster]) * 2 < 3
        elif step.heals is not None:
            faulty[step.cluster].discard(step.node)


def test_faults_of_a_kind_are_drawn_only_for_clusters_of_that_kind() -> None:
    schedule = sched.draw(3, SHAPES, 600)
    kinds = {s.name: s.kind for s in SHAPES}
    for step in schedule.steps:
        fault = next((k for k in sched.FAULTS if k.name == step.action), None)
        if fault is not None:
            assert kinds[step.cluster] in fault.kinds, step.line()
    actions = {s.action for s in schedule.steps}
    assert {"stop_gr", "donor", "freeze", "kill", "load_refused", "admin_slow"} <= actions
    assert all(s.node is None for s in schedule.steps if s.cluster == "proxysql")


def test_excluded_actions_are_never_drawn() -> None:
    schedule = sched.draw(3, SHAPES, 600, exclude=frozenset({"kill", "restart", "pause"}))
    assert not {"kill", "pause"} & {s.action for s in schedule.steps}


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10**6), cut=st.floats(0, 120))
def test_a_prefix_and_a_dropped_fault_keep_every_fault_healed(seed: int, cut: float) -> None:
    schedule = sched.draw(seed, SHAPES, 120)
    prefix = sched.until(schedule, cut)
    assert all(s.at < cut for s in prefix.steps if s.heals is None)
    for candidate in [prefix, *list(sched.shrunk(schedule, cut))[1:4]]:
        numbers = {s.number for s in candidate.steps}
        for step in candidate.steps:
            if step.heals is not None:
                assert step.heals in numbers
        lasting = {
            s.number
            for s in candidate.steps
            if s.heals is None and s.action in {k.name for k in sched.FAULTS}
        }
        assert lasting == {s.heals for s in candidate.steps if s.heals is not None}


def test_dropping_a_fault_drops_its_heal_and_nothing_else() -> None:
    schedule = sched.draw(11, SHAPES, 60)
    fault = next(s for s in schedule.steps if s.action in NODE_FAULTS)
    left = sched.without(schedule, frozenset({fault.number}))
    gone = {s.number for s in schedule.steps} - {s.number for s in left.steps}
    heal = next(s.number for s in schedule.steps if s.heals == fault.number)
    assert gone == {fault.number, heal}


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10**6))
def test_a_clusters_faults_and_actions_are_spread_out_in_time(seed: int) -> None:
    """No burst of steps at one moment: each cluster's next fault or action comes at least the
    shortest gap after the one before."""
    schedule = sched.draw(seed, SHAPES, 300)
    for shape in SHAPES:
        times = [s.at for s in schedule.steps if s.cluster == shape.name and s.heals is None]
        assert all(b - a >= 0.5 - 0.002 for a, b in itertools.pairwise(times)), times
