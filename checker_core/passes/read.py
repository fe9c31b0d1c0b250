"""What a pass's first steps read and hear: ProxySQL's rows as one record the steps after it
take, and the roster's probes (those begun while the rows were read, and the rest)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from checker_core.core.decide import unresponsive_at

if TYPE_CHECKING:
    from checker_core.core.decide import ClusterView
    from checker_core.core.hysteresis import NodeMemory
    from checker_core.core.model import ClusterRows, NodeAddress
    from checker_core.core.probes import ProbeResult
    from checker_core.core.settings import ClusterSettings, Settings
    from checker_core.edges.backend import Prober
    from checker_core.edges.deadline import Deadline
    from checker_core.edges.pending import PendingProbes
    from checker_core.edges.proxysql import AdminClient
    from checker_core.passes.shared_rows import SharedRows


@dataclass(frozen=True, slots=True)
class PassRead:
    """What the pass's first step found: ProxySQL's rows of the cluster and what they mean, the
    remembered counters, and the probes begun while the rows were read."""

    admin: AdminClient
    rows: ClusterRows
    view: ClusterView
    memory: Mapping[NodeAddress, NodeMemory]
    pending: PendingProbes | None
    probe_deadline: float  # monotonic: every probe of the pass ends by then

    def probed_late(self) -> int:
        """How many of the roster's nodes had no probe begun with the pass (new to it)."""
        begun = set(self.pending.nodes) if self.pending is not None else set()
        return sum(1 for node in self.view.roster.addresses if node not in begun)

    @contextlib.contextmanager
    def releasing_probes(self) -> Iterator[None]:
        """The pass's steps; however they end, probes begun and never collected are let go
        (their answers already in are taken, their connections kept; the rest dropped)."""
        try:
            yield
        finally:
            if self.pending is not None:
                self.pending.release()


def cluster_rows(
    shared: SharedRows | None,
    admin: AdminClient,
    cluster: ClusterSettings,
    began_wrote: tuple[float, float],
    deadline: Deadline,
) -> ClusterRows:
    """The cluster's rows for a pass that began, and whose runner last wrote, at
    `began_wrote` (monotonic): from a daemon's shared read (shared_rows.py: one begun after
    the write, and not long before the pass), else read on the runner's own connection."""
    hostgroups = cluster.hostgroups.all
    if shared is not None:
        rows = shared.rows(hostgroups, *began_wrote, deadline)
        if rows is not None:
            return rows
    return admin.read_rows(hostgroups)


def probe_roster(
    prober: Prober, read: PassRead, cluster: ClusterSettings, now: float
) -> dict[NodeAddress, ProbeResult]:
    """The roster's probes: those begun before the rows were read, and the rest now (a
    node new to the roster). Results for nodes that left the roster are dropped."""
    nodes, probe_deadline = read.view.roster.addresses, read.probe_deadline
    if read.pending is None:
        return prober.probe_all(nodes, probe_deadline)
    enough = _silent_enough(read, cluster, now)
    started = set(read.pending.nodes)
    new = [n for n in nodes if n not in started]
    # a steady roster has none new: nothing more started, nothing more collected
    late = prober.start(new, probe_deadline) if new else None
    # a node that left the roster is not waited for: it may be the hung one removed
    found = read.pending.collect(probe_deadline, only=nodes, enough=enough)
    if late is not None:
        found = {**found, **late.collect(probe_deadline)}
    return {n: found[n] for n in nodes}


def _silent_enough(
    read: PassRead, cluster: ClusterSettings, now: float
) -> dict[NodeAddress, float]:
    """When a node that a pass before found silent has been silent for unresponsive_after_ms
    (monotonic), for those it reaches during this pass: it is not waited for past then,
    since its silence is then what evict_unresponsive_nodes acts on, and every moment more
    is a moment more of the cluster's stalled writes. Only a silence a pass saw counts: that
    pass waited its whole probe time, so a node that answers within the monitor's timeouts
    was heard then. A node silent longer than that before this pass is waited for in full
    (its answer is how it comes back)."""
    if cluster.unresponsive_after_ms <= 0:
        return {}
    mono = time.monotonic()
    found = {}
    for node, memory in read.memory.items():
        at = unresponsive_at(memory, cluster)
        if at is not None and at > now:
            found[node] = mono + (at - now)  # the collector's clock
    return found


def silent_probe_wait_s(settings: Settings) -> float:
    """The least a pass waits for the probe of a node that does not answer: a question on
    an open connection waits the read timeout, a new connection the connect timeout (a
    frozen mysqld's kernel completes the handshake; its greeting never comes). The pass
    that decides when a silence reaches unresponsive_after_ms starts that much before it:
    a longer wait is cut at that moment anyway, a shorter one would end before it and
    leave the decision to the next pass of the cadence."""
    monitor, run = settings.monitor, settings.run
    shortest = min(monitor.connect_timeout_ms, monitor.read_timeout_ms)
    return min(run.probe_budget_ms, shortest) / 1000
