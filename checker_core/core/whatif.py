"""What the checker would do if nodes failed now, from the real probes of the others; and
whether the cluster is ready for a failover. Pure: the same decision a pass makes, on probes
that say those nodes failed.

A failure is assumed to have lasted long enough to be acted on: the assumed nodes' counters are
set one bad probe short of `retry_down`, so the plan shown is the one of the pass that acts, not
of the first pass that merely tolerates the failure.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Protocol

from checker_core.core.decide import ClusterView, Decision, Policy, decide
from checker_core.core.hysteresis import NodeMemory
from checker_core.core.model import BadInput, NodeAddress, ServerStatus
from checker_core.core.probes import ProbeFailure, ProbeResult
from checker_core.core.settings import ClusterSettings


class Assumed(enum.Enum):
    """A failure a what-if assumes, with what it stands for."""

    DOWN = ("down", "its mysqld is gone: connections are refused")
    LAGGING = ("lagging", "its queue is over max_transactions_behind")
    DESYNC = ("desync", "it is desynced (Galera: wsrep_desync=ON, a donor)")

    def __init__(self, label: str, meaning: str) -> None:
        self.label = label
        self.meaning = meaning


class WhatIfRefused(BadInput):
    """An assumption this checker or this configuration cannot express (bad input)."""


class Assumer(Protocol):
    """A checker's way of making probes say that nodes failed (a Policy's `assume`)."""

    def assume(
        self,
        probes: Mapping[NodeAddress, ProbeResult],
        assumed: Mapping[NodeAddress, Assumed],
        cluster: ClusterSettings,
    ) -> dict[NodeAddress, ProbeResult]: ...


def refused_probe(node: NodeAddress) -> ProbeResult:
    """What a probe of a node whose mysqld is gone reads: nothing, the connection refused."""
    return ProbeResult(
        node, None, "assumed down (what-if): connection refused", 0.0, ProbeFailure.REFUSED
    )


def acting_memory(
    memory: Mapping[NodeAddress, NodeMemory],
    assumed: Mapping[NodeAddress, Assumed],
    cluster: ClusterSettings,
    layout_routed: Mapping[NodeAddress, bool],
) -> dict[NodeAddress, NodeMemory]:
    """The counters of the pass that acts on the assumed failures: one bad probe short of
    retry_down for each assumed node, whatever they are now, and no time left to span."""
    short = max(0, cluster.retry_down - 1)
    kept = dict(memory)
    for node in assumed:
        before = kept.get(node) or NodeMemory(routable=layout_routed.get(node, False))
        kept[node] = replace(before, bad_streak=short, bad_since=None, good_streak=0)
    return kept


@dataclass(frozen=True, slots=True)
class WhatIf:
    """Everything a pass decided from, kept so that other outcomes can be asked of it."""

    policy: Policy
    assumer: Assumer
    view: ClusterView
    probes: Mapping[NodeAddress, ProbeResult]
    memory: Mapping[NodeAddress, NodeMemory]
    cluster: ClusterSettings
    now: float

    def decision(self, assumed: Mapping[NodeAddress, Assumed]) -> Decision:
        """The pass that acts on `assumed`, with every other node as its probe said."""
        unknown = sorted(set(assumed) - set(self.view.roster.addresses))
        if unknown:
            raise WhatIfRefused(
                f"{', '.join(map(str, unknown))}: not in the roster of cluster {self.cluster.name}"
            )
        probes = self.assumer.assume(self.probes, assumed, self.cluster)
        routed = {n: self.view.layout.routed(n) for n in self.view.roster.addresses}
        return decide(
            self.policy,
            self.view,
            probes,
            memory=acting_memory(self.memory, assumed, self.cluster, routed),
            cluster=self.cluster,
            in_use={},
            now=self.now,
        )

    def pinned(self, target: NodeAddress) -> Decision:
        """The pass that a switchover's pin on `target` would make now: the policy decides
        whether the target may write, as it does for every pass the pin is in force."""
        pinned = replace(self.cluster, preferred_writer=target)
        return decide(
            self.policy,
            self.view,
            self.probes,
            memory=self.memory,
            cluster=pinned,
            in_use={},
            now=self.now,
        )

    def readiness(self, current: Decision) -> Readiness:
        """Would losing the writer, or any one node, still leave a writer and a reader?"""
        losses = []
        for node in self.view.roster.addresses:
            after = self.decision({node: Assumed.DOWN})
            losses.append(Loss(node, _online(after, "writer"), _online(after, "reader")))
        writers = current.assignment.writers
        after_writer = self.decision(dict.fromkeys(writers, Assumed.DOWN)) if writers else None
        next_writers = after_writer.assignment.writers if after_writer else ()
        return Readiness(tuple(losses), tuple(next_writers), writers)


def _online(decision: Decision, role: str) -> tuple[NodeAddress, ...]:
    hostgroups = decision.plan.hostgroups
    hostgroup = hostgroups.writer if role == "writer" else hostgroups.reader
    return tuple(
        r.node
        for r in decision.plan.desired
        if r.hostgroup_id == hostgroup and r.status is ServerStatus.ONLINE
    )


@dataclass(frozen=True, slots=True)
class Loss:
    """What losing one node would leave."""

    node: NodeAddress
    writers: tuple[NodeAddress, ...]
    readers: tuple[NodeAddress, ...]

    @property
    def survivable(self) -> bool:
        return bool(self.writers) and bool(self.readers)


@dataclass(frozen=True, slots=True)
class Readiness:
    """Who writes now, who would write next, and what the cluster cannot lose."""

    losses: tuple[Loss, ...]
    next_writers: tuple[NodeAddress, ...]  # who writes if the current writers are lost
    writers: tuple[NodeAddress, ...]  # who writes now

    @property
    def ready(self) -> bool:
        """Losing any one node (the writer included) leaves a writer and a reader."""
        return bool(self.writers) and all(loss.survivable for loss in self.losses)

    @property
    def reason(self) -> str:
        if not self.writers:
            return "no writer now"
        bad = [loss for loss in self.losses if not loss.survivable]
        if not bad:
            nxt = ", ".join(map(str, self.next_writers)) or "none"
            return f"ready: losing any one node leaves a writer and a reader; next writer {nxt}"
        parts = []
        for loss in bad:
            lacks = " and ".join(
                what
                for what, who in (("writer", loss.writers), ("reader", loss.readers))
                if not who
            )
            parts.append(f"losing {loss.node} leaves no {lacks}")
        return "not ready: " + "; ".join(parts)
