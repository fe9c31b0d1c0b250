"""When the last decision is this pass's decision too, without deciding again. Pure.

A steady daemon decides the same thing pass after pass: the same rows, the same answers, the
same counters. Deciding costs a pass most of its CPU, and grows with the roster. The last
decision stands when everything it was made from is the very same (ProxySQL's rows and each
node's facts are the objects read before: their bytes did not change) and it was a fixed
point: the counters it kept are the counters it was given, so nothing in it was counting
towards a move. Time then changes nothing either: a decision reads the clock only to start a
streak, a drain or a queue sample, and a fixed point has none under way.

On a busy cluster the answers change every pass (a receive queue moves with each write) while
nothing they say does. Then the nodes are judged again, and when every verdict is the last one
but for its queue, and every node says it is the member it was, the decision stands with the
new verdicts beside it: a queue is a reading (shown as it is), not a state; the one rule that
counts it, a brownout, keeps queue samples, which no fixed point holds.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields, replace

from checker_core.core.decide import ClusterView, Decision
from checker_core.core.hysteresis import NodeMemory
from checker_core.core.model import NodeAddress
from checker_core.core.probes import ProbeResult
from checker_core.core.settings import ClusterSettings
from checker_core.core.verdict import Verdict

Judge = Callable[[], Mapping[NodeAddress, Verdict]]
Identity = Callable[[object], str | None]


@dataclass(frozen=True, slots=True)
class Decided:
    """A decision and what it was made from."""

    view: ClusterView
    cluster: ClusterSettings
    probes: Mapping[NodeAddress, ProbeResult]
    memory: Mapping[NodeAddress, NodeMemory]
    decision: Decision


def still_holds(
    last: Decided | None,
    view: ClusterView,
    cluster: ClusterSettings,
    probes: Mapping[NodeAddress, ProbeResult],
    memory: Mapping[NodeAddress, NodeMemory],
    *,
    judge: Judge | None = None,
    identity: Identity | None = None,
) -> tuple[Decision | None, Mapping[NodeAddress, Verdict] | None]:
    """The last decision when it is this pass's decision too (None when it must be made), and
    the verdicts `judge` gave on the way (None when it was not asked): the decision made then
    needs not judge again. Without `judge` and `identity`, changed facts always decide again."""
    if last is None or last.view is not view or last.cluster != cluster:
        return None, None
    decision = last.decision
    if decision.blind or decision.due or view.layout.leaving or view.layout.drains:
        return None, None
    if any(m.drain_since is not None or m.queue_samples for m in decision.memory.values()):
        return None, None
    if decision.memory != last.memory or memory != last.memory:
        return None, None  # counting towards a move: the next probe moves it on
    if probes.keys() != last.probes.keys():
        return None, None
    moved = False
    for node, probe in probes.items():
        before = last.probes[node]
        if probe.error != before.error or probe.failure is not before.failure:
            return None, None
        if probe.facts is before.facts:
            continue
        if judge is None or identity is None or identity(probe.facts) != identity(before.facts):
            return None, None
        moved = True
    if not moved or judge is None:
        return decision, None
    raw = judge()
    if raw.keys() != decision.raw.keys() or any(
        not same_but_queue(verdict, decision.raw[node]) for node, verdict in raw.items()
    ):
        return None, raw
    return replace(decision, raw=raw), raw


_BUT_QUEUE = operator.attrgetter(*(f.name for f in fields(Verdict) if f.name != "queue"))


def same_but_queue(one: Verdict, other: Verdict) -> bool:
    """The same verdict whatever the queue each read."""
    return one == other or _BUT_QUEUE(one) == _BUT_QUEUE(other)


def but_queues(decision: Decision) -> object:
    """The decision as a value equal to another's when they differ only in the queues their
    verdicts read."""

    def verdicts(of: Mapping[NodeAddress, Verdict]) -> tuple[tuple[NodeAddress, object], ...]:
        return tuple((node, _BUT_QUEUE(verdict)) for node, verdict in sorted(of.items()))

    bare = replace(decision, raw={}, verdicts={})
    return bare, verdicts(decision.raw), verdicts(decision.verdicts)
