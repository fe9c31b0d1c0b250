"""The daemon's readiness watch: worked out off the loop, again only when its inputs changed,
and one warning when a cluster stops (or starts again) being ready for a failover."""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import Any

from checker_core.core.model import NodeAddress
from checker_core.passes.result import PassResult
from checker_core.service.readiness import ReadinessWatch
from galera_checker.policy import GaleraPolicy
from tests.unit.daemon_cases import galera_pass
from tests.unit.galera_cases import N1, N2, N3, probe_ok, steady

SETTLE_S = 30.0  # a bound for the worker, never a measure of it


def settled(watch: ReadinessWatch, result: PassResult) -> tuple[PassResult, str | None]:
    """A pass observed once its readiness was worked out: what the next pass carries, and what
    the two passes were told (a worker that runs before the first observe() returns has its
    word said with that first pass)."""
    _, first = watch.observe(result)
    assert watch.wait_idle(SETTLE_S)
    carried, second = watch.observe(result)
    said = [s for s in (first, second) if s is not None]
    return carried, "; ".join(said) or None


def test_a_steady_cluster_is_ready_once_and_warned_about_when_it_stops_being_ready() -> None:
    watch = ReadinessWatch()
    first, said = settled(watch, galera_pass(steady(N1)))
    assert said is None, "ready from the start: nothing to warn about"
    assert first.known_readiness is not None and first.known_readiness.ready
    again, said = watch.observe(galera_pass(steady(N1)))
    assert said is None
    assert again.known_readiness is first.known_readiness, "same inputs: not worked out again"
    read_only = {N2: probe_ok(N2, read_only="ON"), N3: probe_ok(N3, read_only="ON")}
    lost, said = settled(watch, galera_pass(steady(N1), read_only))
    assert said is not None and f"losing {N1} leaves no writer" in said
    assert lost.known_readiness is not None and not lost.known_readiness.ready
    _, said = settled(watch, galera_pass(steady(N1), read_only))
    assert said is None, "one warning per change"
    _, said = settled(watch, galera_pass(steady(N1)))
    assert said is not None and "ready: losing any one node" in said
    watch.close()


class Blocking(GaleraPolicy):
    """A policy whose what-if waits for `release`: readiness that takes as long as we like."""

    def __init__(self, release: threading.Event) -> None:
        self.release = release

    def assume(self, *args: Any) -> Any:
        assert self.release.wait(SETTLE_S)
        return super().assume(*args)


def test_the_loop_never_waits_for_readiness() -> None:
    release = threading.Event()
    result = galera_pass(steady(N1))
    assert result.inputs is not None
    slow = replace(result, inputs=replace(result.inputs, policy=Blocking(release)))
    watch = ReadinessWatch()
    seen, said = watch.observe(slow)  # returns while the worker is still blocked
    assert not release.is_set()
    assert seen.readiness() is None, "none known yet, and the pass does not work it out itself"
    assert said is None
    release.set()
    assert watch.wait_idle(SETTLE_S)
    known, _ = watch.observe(slow)
    assert known.readiness() is not None and known.readiness().ready  # type: ignore[union-attr]
    watch.close()


def test_a_readiness_that_cannot_be_worked_out_never_ends_the_daemon() -> None:
    class Broken(GaleraPolicy):
        def assume(self, *args: object) -> None:  # type: ignore[override]
            raise RuntimeError("a policy bug")

    result = galera_pass(steady(N1))
    assert result.inputs is not None
    broken = replace(result, inputs=replace(result.inputs, policy=Broken()))
    watch = ReadinessWatch()
    kept, said = settled(watch, broken)
    assert kept.known_readiness is None
    assert said is not None and "failover readiness not known (a policy bug)" in said
    watch.close()


def test_on_the_loop_when_asked_to_be() -> None:
    watch = ReadinessWatch(off_loop=False)
    seen, _ = watch.observe(galera_pass(steady(N1)))
    assert seen.known_readiness is not None and seen.known_readiness.ready


class Counting(GaleraPolicy):
    """A policy that counts the what-ifs readiness asks of it."""

    def __init__(self) -> None:
        self.asked = 0

    def assume(self, *args: Any) -> Any:
        self.asked += 1
        return super().assume(*args)


def test_answers_that_moved_only_in_their_queues_leave_readiness_as_it_was() -> None:
    policy = Counting()

    def pass_with(queues: dict[NodeAddress, str]) -> PassResult:
        probes = {n: probe_ok(n, wsrep_local_recv_queue=q) for n, q in queues.items()}
        result = galera_pass(steady(N1), probes)
        assert result.inputs is not None
        return replace(result, inputs=replace(result.inputs, policy=policy))

    watch = ReadinessWatch()
    first, _ = settled(watch, pass_with({}))
    asked = policy.asked
    assert asked > 0 and first.known_readiness is not None and first.known_readiness.ready
    # under writes every answer's queue moves; what the nodes say does not
    moved, _ = settled(watch, pass_with({N2: "7", N3: "12"}))
    assert policy.asked == asked, "a queue is a reading: readiness not worked out again"
    assert moved.known_readiness is first.known_readiness
    assert moved.decision is not None
    assert moved.decision.raw[N3].queue == 12, "the pass itself shows the queue it read"
    # a verdict that changed is worked out again
    read_only = galera_pass(steady(N1), {N2: probe_ok(N2, read_only="ON")})
    assert read_only.inputs is not None
    changed, _ = settled(watch, replace(read_only, inputs=replace(read_only.inputs, policy=policy)))
    assert policy.asked > asked
    assert changed.known_readiness is not first.known_readiness
    watch.close()


def test_a_fact_that_changed_without_a_verdict_works_readiness_out_again() -> None:
    """The facts count, but for the readings that move with load: a new view of the cluster
    that every node reports alike changes no verdict, and readiness is worked out again."""
    policy = Counting()

    def pass_with(conf_id: str) -> PassResult:
        probes = {n: probe_ok(n, wsrep_cluster_conf_id=conf_id) for n in (N1, N2, N3)}
        result = galera_pass(steady(N1), probes)
        assert result.inputs is not None
        return replace(result, inputs=replace(result.inputs, policy=policy))

    watch = ReadinessWatch()
    settled(watch, pass_with("7"))
    asked = policy.asked
    settled(watch, pass_with("7"))
    assert policy.asked == asked
    settled(watch, pass_with("8"))
    assert policy.asked > asked
    watch.close()
