"""Evictions that take the cluster's own time: a daemon's on a thread of its own after the pass
(its early causal reads started before the silence reaches the threshold), a scheduler
process's once its pass is over; what each did noted for the pass that reports it; the
cluster's normal causal-read latency measured while it is whole."""

from __future__ import annotations

import threading
from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING

from checker_core.core.model import NodeAddress
from checker_core.edges.lock import cluster_lock
from checker_core.passes.plugin import ActionsDone, AfterPass

if TYPE_CHECKING:
    from pathlib import Path

    from checker_core.core.hysteresis import NodeMemory
    from galera_checker.eviction import Eviction

from galera_checker.cluster_memory import ClusterMemory, Later, Work
from galera_checker.node_calls import (
    EVICT_MARGIN_S,
    EarlyReads,
    Evicted,
    NodeCalls,
)

# an eviction done off the pass (a daemon's on a thread, a scheduler process's once its pass is
# over): what it may take besides the stall wait (connects, the view, telling every survivor)
OFF_PASS_SLACK_S = 2.0
# the cluster's normal causal-read latency: measured at most this often while it is whole, the
# highest of the last LATENCY_SAMPLES measurements
LATENCY_EVERY_S = 10.0


def note(
    eviction: Eviction,
    went: Evicted,
    memory: ClusterMemory,
    ours: dict[str, str],
    *,
    said: list[str],
    failed: list[str],
) -> None:
    """What an eviction's outcome leaves: asked again by the next pass unless settled, the
    uuid evicted noted with its node (in place of an older one of the same node), said."""
    node = eviction.node
    if not went.settled:
        memory.tried.pop(node, None)
    if went.uuid is not None:
        for uuid in [u for u, where in ours.items() if where == str(node)]:
            del ours[uuid]
        ours[went.uuid] = str(node)
    if went.text:
        (failed if went.went_wrong else said).append(went.text)


# an eviction left for after the pass: what to evict, the stall wait, how the wait was chosen


def leave_for_later(calls: NodeCalls, memory: ClusterMemory, after: AfterPass, work: Work) -> None:
    cluster = after.cluster.name
    earlier = memory.later.work if memory.later is not None else ()
    path = after.store.evict_lock_path(cluster)
    memory.later = Later(calls, after.store, path, (*earlier, work))


def early_reads(
    calls: NodeCalls,
    memory: ClusterMemory,
    after: AfterPass,
    wanted: Sequence[Eviction],
    *,
    known: Mapping[NodeAddress, str],
    writers: Collection[NodeAddress],
) -> None:
    """A daemon's early causal reads: asked on the survivors of a member silent for less than
    unresponsive_after_ms (one at a time per cluster), each allowed to wait until the stall
    wait is over past the moment the silence reaches the threshold; dropped once the member
    answers (or is no longer silent for the same silence)."""
    from galera_checker.eviction import stall_wait, unresponsive_members

    options = after.cluster
    memory_of = after.decision.memory
    now = calls.monotonic()
    soon = unresponsive_members(
        after.probes,
        after.decision.roster.addresses,
        memory_of,
        known,
        writers,
        now=now,
        after_ms=options.unresponsive_after_ms,
        before=True,
    )
    early = memory.early
    going = {(e.node, silent_since(memory_of, e.node)) for e in (*soon, *wanted)}
    if early is not None and (early.node, early.since) not in going:
        memory.early = early = None  # it answered: the reads prove nothing about it now
    if early is not None or memory.busy():
        return
    for eviction in soon:
        since = silent_since(memory_of, eviction.node)
        if not eviction.allowed or since is None:
            continue
        wait_s, _ = stall_wait(memory.normal_ms())
        deadline = since + options.unresponsive_after_ms / 1000 + wait_s + OFF_PASS_SLACK_S
        own = NodeCalls(calls.connect, calls.monotonic, calls.account, deadline)
        asked = (eviction.survivor, *eviction.others)
        memory.early = EarlyReads(own, eviction.node, since, asked)
        return


def silent_since(memory: Mapping[NodeAddress, NodeMemory], node: NodeAddress) -> float | None:
    kept = memory.get(node)
    return kept.silent_since if kept is not None else None


def off_pass(
    calls: NodeCalls,
    memory: ClusterMemory,
    work: Sequence[Work],
    lock_path: Path,
    early: EarlyReads | None = None,
) -> None:
    """Evictions on a thread of their own, one after the other, each with a deadline of its
    own, under the cluster's eviction lock: a daemon's next pass, or a scheduler process's
    finish, reports them. Another process holding the lock (its own eviction of the cluster
    under way) means these are skipped, said once; the next pass asks again."""
    memory.job_s = sum(w + OFF_PASS_SLACK_S for _, w, _ in work)
    nodes = ", ".join(str(e.node) for e, _, _ in work)

    def job() -> None:
        went: list[tuple[Eviction, Evicted]] = []
        try:
            with cluster_lock(lock_path) as held:
                if held:
                    for eviction, wait_s, normal in work:
                        deadline = calls.monotonic() + wait_s + OFF_PASS_SLACK_S
                        own = NodeCalls(calls.connect, calls.monotonic, calls.account, deadline)
                        went.append((eviction, own.evict(eviction, wait_s, normal, early)))
                else:
                    why = f"another process holds {lock_path}, its own eviction under way"
                    went = [(e, Evicted(settled=False)) for e, _, _ in work]
                    went[0] = (work[0][0], skipped(nodes, why))
        except OSError as exc:  # the state dir refused the lock: nothing evicted
            why = f"its lock {lock_path} cannot be taken ({exc.strerror or exc})"
            went = [(e, Evicted(settled=False)) for e, _, _ in work]
            went[0] = (work[0][0], skipped(nodes, why))
        with memory.lock:
            memory.finished.extend(went)

    memory.job = threading.Thread(target=job, name=f"evict {nodes}", daemon=True)
    memory.job.start()


def skipped(nodes: str, why: str) -> Evicted:
    return Evicted(
        f"eviction of {nodes} skipped: {why}; the next pass asks again",
        went_wrong=True,
        settled=False,
    )


def report(cluster: str, memory: ClusterMemory, later: Later) -> ActionsDone:
    """What a scheduler process's evictions after its pass did, noted in the state dir as a
    daemon's next pass notes its own; one not over by its deadline is said so."""
    said: list[str] = []
    failed: list[str] = []
    ours = later.store.evicted(cluster)
    finished = memory.take_finished()
    done = unresponsive = 0
    for eviction, went in finished:
        note(eviction, went, memory, ours, said=said, failed=failed)
        done += went.uuid is not None
        unresponsive += went.uuid is not None and eviction.unresponsive
    over = {e.node for e, _ in finished}
    failed += [
        f"eviction of {e.node} not over by its own deadline (stall wait {w * 1000:.0f} ms + "
        f"{OFF_PASS_SLACK_S * 1000:.0f} ms); the cluster evicts it by itself after "
        "evs.suspect_timeout"
        for e, w, _ in later.work
        if e.node not in over
    ]
    if done:
        failure = later.store.record_evicted(cluster, ours)
        if failure:
            failed.append(failure)
    return ActionsDone(tuple(said), tuple(failed), done, unresponsive)


def measure(
    calls: NodeCalls, memory: ClusterMemory, after: AfterPass, roster: Sequence[NodeAddress]
) -> list[str]:
    """The cluster's normal causal-read latency, measured while every member answers in the
    Primary component, at most once per LATENCY_EVERY_S: the slowest member's read, kept in
    the state dir for the next process too. A measurement with a read that did not answer
    within the pass's time adds nothing. What went wrong keeping it, said."""
    from galera_checker.eviction import ReadOutcome, in_primary

    now = calls.monotonic()
    if memory.measured_at is not None and 0 <= now - memory.measured_at < LATENCY_EVERY_S:
        return []
    if not roster or not all(in_primary(after.probes.get(n)) for n in roster):
        return []
    if calls.left() <= EVICT_MARGIN_S:
        return []
    memory.measured_at = now
    reads = calls.causal_reads(roster, calls.left())
    taken = [r.ms for r in reads.values() if r.outcome is ReadOutcome.ANSWERED]
    if len(taken) == len(roster):
        memory.samples.append(max(ms or 0.0 for ms in taken))
    failure = after.store.record_causal_latency(after.cluster.name, memory.samples, now)
    return [failure] if failure else []
