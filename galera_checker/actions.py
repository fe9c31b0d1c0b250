"""What galera-checker does to the nodes themselves after a pass: evict a member whose mysqld is
gone (cluster.evict_dead_nodes) or that stalls the group while silent (cluster.
evict_unresponsive_nodes), and clear those evictions once the cluster is whole again.

Through the [node_admin] account, on one survivor of the Primary component; every statement
takes its values as parameters. A failure is said in the pass line and costs nothing else: the
eviction is an acceleration, the cluster evicts the member by itself after evs.suspect_timeout.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from checker_core.core.model import NodeAddress
from checker_core.passes.plugin import ActionsDone, AfterPass, LaterActions

if TYPE_CHECKING:
    from galera_checker.eviction import Clearing, Eviction

from galera_checker.cluster_memory import ClusterMemory
from galera_checker.node_calls import (
    EVICT_MARGIN_S,
    PAST_DEADLINE,
    Evicted,
    NodeCalls,
    Session,
    node_admin_session,
)
from galera_checker.off_pass import (
    early_reads,
    leave_for_later,
    measure,
    note,
    off_pass,
    report,
    silent_since,
)

# a node still refused is looked for in the survivors' view again after this (an eviction that
# did not take is retried; a node out of the view costs one query per this many seconds)
RETRY_S = 5.0


class GaleraActions:
    """One cluster's evictions and clearings after each of its passes (each runner has its
    own): what it keeps between them is that cluster's alone."""

    def __init__(
        self, connect: Session | None = None, monotonic: Callable[[], float] = time.monotonic
    ) -> None:
        self.connect = connect or node_admin_session
        self.monotonic = monotonic
        self.memory = ClusterMemory()
        self._cluster: str | None = None  # the cluster's name, from its first pass

    def after_pass(self, after: AfterPass) -> ActionsDone:
        options = after.cluster
        self._cluster = options.name
        if not options.evict_dead_nodes and options.unresponsive_after_ms <= 0:
            return ActionsDone()  # nothing learnt or asked: a pass without eviction pays nothing
        # one deadline for all of it, this call's own: every connect gets what is left of it
        deadline = self.monotonic() + after.budget_s
        calls = NodeCalls(self.connect, self.monotonic, after.node_admin, deadline)
        return _act(calls, self.memory, after)

    def finish(self) -> tuple[LaterActions, ...]:
        """A scheduler process's evictions that its pass left for after it: under the
        cluster's eviction lock, each eviction with a deadline of its own (its stall wait plus
        OFF_PASS_SLACK_S); waited for until the last deadline, then said and noted in the state
        dir as a daemon's next pass would."""
        memory, later = self.memory, self.memory.later
        if later is None or self._cluster is None:
            return ()
        started, waited = self.monotonic(), time.monotonic()
        off_pass(later.calls, memory, later.work, later.lock_path)
        if memory.job is not None:
            # the wall's time, which a join counts in; the statements' margin on top
            bound = memory.job_s + EVICT_MARGIN_S - (time.monotonic() - waited)
            memory.job.join(max(0.0, bound))
        took_ms = (self.monotonic() - started) * 1000
        memory.later = None
        return (LaterActions(self._cluster, report(self._cluster, memory, later), took_ms),)


def _act(calls: NodeCalls, memory: ClusterMemory, after: AfterPass) -> ActionsDone:
    # loaded by the first pass that may evict: the scheduler's usual pass imports neither
    from galera_checker.eviction import clearings, needs_view, still_evicted, stranded

    options = after.cluster
    cluster = options.name
    if options.unresponsive_after_ms > 0 and memory.measured_at is None and not memory.samples:
        # a new process (each scheduler pass): the latency an earlier one measured
        samples, memory.measured_at = after.store.causal_latency(cluster)
        memory.samples.extend(samples)
    wanted = _wanted(calls, memory, after)
    if wanted is None:
        return ActionsDone()  # a blind pass: nothing to act on
    throttles = _throttles_of(memory, after)
    roster = after.decision.roster.addresses
    evicted = after.store.evicted(cluster)  # what this checker evicted, and which node
    stuck = stranded(after.probes, roster, evicted)
    said: list[str] = [
        f"{node} is an evicted process out of the Primary component: it stays out until "
        "restarted (a new process rejoins)"
        for node in stuck
    ]
    if not after.acting:
        return ActionsDone((*said, *_would(wanted)), stranded=stuck)
    # the lists are read from the members themselves, whatever the state file says
    members: set[str] | None = None
    failed: list[str] = []
    survivor = next((n for n in sorted(roster) if _in_primary(after, n)), None)
    if survivor is not None and needs_view(after.probes, roster):
        members, why = calls.view(survivor)
        if members is None:
            failed.append(
                f"eviction lists not checked: the view could not be asked of {survivor} "
                f"({why}); the next pass asks again"
            )
    clear = clearings(after.probes, roster, members)
    ours = still_evicted(after.probes, roster, evicted)
    round_ = _Round(calls, memory, after, ours, said=said, failed=failed)
    for eviction, went in memory.take_finished():  # done off an earlier pass
        round_.noted(eviction, went)
    for eviction in wanted:
        round_.evict(eviction)
    for clearing in clear:
        round_.clear(clearing)
    if options.unresponsive_after_ms > 0 and not wanted:
        round_.failed += measure(calls, memory, after, roster)
    for failure in (
        after.store.record_evicted(cluster, round_.ours),
        _keep_throttles(memory, after, throttles, round_.now),
    ):
        if failure:
            round_.failed.append(failure)
    return round_.done(stuck)


def _in_primary(after: AfterPass, node: NodeAddress) -> bool:
    from galera_checker.eviction import in_primary

    return in_primary(after.probes.get(node))


def _wanted(calls: NodeCalls, memory: ClusterMemory, after: AfterPass) -> list[Eviction] | None:
    """The evictions this pass's probes ask for (None: a blind pass, which acts on nothing);
    the uuids the state file kept (a scheduler pass is a new process) and this pass's are
    learnt first, and a daemon's early causal reads started."""
    from galera_checker.eviction import evictions, identities, unresponsive_members

    options = after.cluster
    known = memory.known
    known.update({n: m.identity for n, m in after.decision.memory.items() if m.identity})
    known.update(identities(after.probes))
    if after.decision.blind:
        return None
    roster = after.decision.roster.addresses
    writers = after.decision.assignment.writers
    wanted = [
        *(evictions(after.probes, roster, known, writers) if options.evict_dead_nodes else ()),
        *unresponsive_members(
            after.probes,
            roster,
            after.decision.memory,
            known,
            writers,
            now=calls.monotonic(),
            after_ms=options.unresponsive_after_ms,
        ),
    ]
    if after.persistent and after.acting:
        early_reads(calls, memory, after, wanted, known=known, writers=writers)
    return wanted


def _would(wanted: Sequence[Eviction]) -> list[str]:
    """What a pass that does not act (dry run, standby, paused) says it would do."""
    return [
        f"would evict {e.node} through {e.survivor} ({e.reason}"
        f"{' and the others stalled on it' if e.unresponsive else ''})"
        if e.allowed
        else f"would not evict {e.node} ({e.reason}): {e.withheld}"
        for e in wanted
    ]


class _Round:
    """One acting pass's evictions and clearings, and what it says of them."""

    def __init__(
        self,
        calls: NodeCalls,
        memory: ClusterMemory,
        after: AfterPass,
        ours: dict[str, str],
        *,
        said: list[str],
        failed: list[str],
    ) -> None:
        self.calls, self.memory, self.after = calls, memory, after
        self.ours = ours  # the uuids this checker evicted and still sees out, with their nodes
        self.said, self.failed = said, failed
        self.evicted = self.unresponsive = 0
        self.now = calls.monotonic()

    def noted(self, eviction: Eviction, went: Evicted) -> None:
        note(eviction, went, self.memory, self.ours, said=self.said, failed=self.failed)
        self.evicted += went.uuid is not None
        self.unresponsive += went.uuid is not None and eviction.unresponsive

    def evict(self, eviction: Eviction) -> None:
        """One wanted eviction: said (withheld), left (asked a moment ago), off the pass (a
        daemon's silent member), after the pass (a scheduler's), or done now."""
        from galera_checker.eviction import stall_wait

        memory, node, now = self.memory, eviction.node, self.now
        if not eviction.allowed:
            # said once per RETRY_S; the eviction itself is not put off: survivors that
            # disagree for a moment (a view change) may agree in the next pass
            if now - memory.withheld.get(node, -RETRY_S) >= RETRY_S:
                memory.withheld[node] = now
                self.said.append(f"not evicting {node} ({eviction.reason}): {eviction.withheld}")
            return
        if now - memory.tried.get(node, -RETRY_S) < RETRY_S:
            return  # asked a moment ago: a dead node refuses pass after pass
        wait_s, normal = stall_wait(memory.normal_ms())
        persistent = self.after.persistent
        if eviction.unresponsive and persistent:
            self._off_pass(eviction, wait_s, normal)
        elif eviction.unresponsive or (self.calls.left() <= 0 and not persistent):
            self._later(eviction, wait_s, normal)
        elif self.calls.left() <= 0:
            self.failed.append(f"eviction of {node} not done: {PAST_DEADLINE}")
        else:
            memory.tried[node] = now
            self.noted(eviction, self.calls.evict(eviction, wait_s, normal))

    def _off_pass(self, eviction: Eviction, wait_s: float, normal: str) -> None:
        """A daemon's silent member: the stall wait is the cluster's, whatever the pass has
        left, so the causal reads and the eviction go on off the pass."""
        memory, node, after = self.memory, eviction.node, self.after
        if memory.busy():
            return
        memory.tried[node] = self.now
        lock_path = after.store.evict_lock_path(after.cluster.name)
        early, memory.early = memory.early, None
        if early is not None and (early.node, early.since) != (
            node,
            silent_since(after.decision.memory, node),
        ):
            early = None
        off_pass(self.calls, memory, ((eviction, wait_s, normal),), lock_path, early)
        self.said.append(
            f"eviction of {node} under way: the survivors' causal reads asked off the "
            f"pass (stall wait {wait_s * 1000:.0f} ms, {normal})"
        )

    def _later(self, eviction: Eviction, wait_s: float, normal: str) -> None:
        """A scheduler pass: after it, its lock released, with the wait the cluster needs (a
        dead node's eviction only when the pass's deadline left it undone)."""
        node = eviction.node
        self.memory.tried[node] = self.now
        leave_for_later(self.calls, self.memory, self.after, (eviction, wait_s, normal))
        self.said.append(
            f"eviction of {node} after this pass: the survivors' causal reads asked once the "
            f"pass is over (stall wait {wait_s * 1000:.0f} ms, {normal})"
            if eviction.unresponsive
            else f"eviction of {node} after this pass: the pass's deadline "
            "(run.max_runtime_ms) came first"
        )

    def clear(self, clearing: Clearing) -> None:
        if self.calls.left() <= 0:
            self.failed.append(f"clearing the eviction list of {clearing.node}: {PAST_DEADLINE}")
            return
        text, cleared = self.calls.clear(clearing)
        (self.said if cleared else self.failed).append(text)

    def done(self, stuck: tuple[NodeAddress, ...]) -> ActionsDone:
        return ActionsDone(
            tuple(self.said), tuple(self.failed), self.evicted, self.unresponsive, stuck
        )


Throttles = tuple[dict[NodeAddress, float], dict[NodeAddress, float]]


def _throttles_of(memory: ClusterMemory, after: AfterPass) -> Throttles:
    """The throttles as this pass begins; a scheduler process (a new one each pass) starts
    from what the last one kept in the state dir, so that it neither asks a dead node's
    survivors nor says a withheld eviction more often than a daemon would."""
    if not after.persistent and not memory.throttles_read:
        memory.throttles_read = True
        tried, withheld = after.store.eviction_throttles(after.cluster.name)
        memory.tried.update(tried)
        memory.withheld.update(withheld)
    return dict(memory.tried), dict(memory.withheld)


def _keep_throttles(
    memory: ClusterMemory, after: AfterPass, before: Throttles, now: float
) -> str | None:
    """A scheduler process's throttles still running, kept for the next one when they
    changed; the reason when the state dir refused."""
    for kept in (memory.tried, memory.withheld):
        for node in [n for n, at in kept.items() if now - at >= RETRY_S]:
            del kept[node]
    if after.persistent or (memory.tried, memory.withheld) == before:
        return None
    return after.store.record_eviction_throttles(after.cluster.name, memory.tried, memory.withheld)
