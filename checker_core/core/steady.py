"""When the last decision is this pass's decision too, without deciding again. Pure.

A steady daemon decides the same thing pass after pass: the same rows, the same answers, the
same counters. Deciding costs a pass most of its CPU, and grows with the roster. The last
decision stands when everything it was made from is the very same (ProxySQL's rows and each
node's facts are the objects read before: their bytes did not change) and it was a fixed
point: the counters it kept are the counters it was given, so nothing in it was counting
towards a move. Time then changes nothing either: a decision reads the clock only to start a
streak, a drain or a queue sample, and a fixed point has none under way.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from checker_core.core.decide import ClusterView, Decision
from checker_core.core.hysteresis import NodeMemory
from checker_core.core.model import NodeAddress
from checker_core.core.probes import ProbeResult
from checker_core.core.settings import ClusterSettings


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
) -> Decision | None:
    """The last decision when it is this pass's decision too; None when it must be made."""
    if last is None or last.view is not view or last.cluster != cluster:
        return None
    decision = last.decision
    if decision.blind or decision.due or view.layout.leaving or view.layout.drains:
        return None
    if any(m.drain_since is not None or m.queue_samples for m in decision.memory.values()):
        return None
    if decision.memory != last.memory or memory != last.memory:
        return None  # counting towards a move: the next probe moves it on
    if probes.keys() != last.probes.keys():
        return None
    for node, probe in probes.items():
        before = last.probes[node]
        if (
            probe.facts is not before.facts
            or probe.error != before.error
            or probe.failure is not before.failure
        ):
            return None
    return decision
