"""What galera-checker does to the nodes themselves after a pass: evict a member whose mysqld is
gone (cluster.evict_dead_nodes) or that stalls the group while silent (cluster.
evict_unresponsive_nodes), and clear those evictions once the cluster is whole again.

Through the [node_admin] account, on one survivor of the Primary component; every statement
takes its values as parameters. A failure is said in the pass line and costs nothing else: the
eviction is an acceleration, the cluster evicts the member by itself after evs.suspect_timeout.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import deque
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from checker_core.core.model import NodeAddress
from checker_core.core.probes import ProbeFailure
from checker_core.edges.failures import describe_error, failure_of
from checker_core.edges.lock import cluster_lock
from checker_core.passes.plugin import EVICTED, ActionsDone, AfterPass, LaterActions

if TYPE_CHECKING:
    from pathlib import Path

    import pymysql

    from checker_core.core.hysteresis import NodeMemory
    from checker_core.core.settings import Endpoint
    from checker_core.passes.plugin import NodeStore
    from galera_checker.eviction import CausalRead, Clearing, Eviction

Session = Callable[..., AbstractContextManager["pymysql.connections.Connection[Any]"]]

# a view's members with their gcomm uuid and client address: MariaDB 10.4+, then PXC 8
MEMBER_QUERIES = (
    "SELECT node_uuid, node_incoming_address FROM mysql.wsrep_cluster_members",
    "SELECT UUID, HOST_NAME FROM performance_schema.pxc_cluster_view",
)
EVICT_SQL = "SET GLOBAL wsrep_provider_options = %s"
# a node still refused is looked for in the survivors' view again after this (an eviction that
# did not take is retried; a node out of the view costs one query per this many seconds)
RETRY_S = 5.0
PAST_DEADLINE = "the pass's deadline (run.max_runtime_ms) came first; the next pass goes on"
# a causal read waits for the group to deliver a message to every member of the view: it stalls
# while one of them is silent, and answers in milliseconds otherwise
CAUSAL_READ = ("SET SESSION wsrep_sync_wait = 1", "SELECT 1")
# what an eviction needs besides the stall wait: connects, the view, the statements
EVICT_MARGIN_S = 0.1
# an eviction done off the pass (a daemon's on a thread, a scheduler process's once its pass is
# over): what it may take besides the stall wait (connects, the view, telling every survivor)
OFF_PASS_SLACK_S = 2.0
# the cluster's normal causal-read latency: measured at most this often while it is whole, the
# highest of the last LATENCY_SAMPLES measurements
LATENCY_EVERY_S = 10.0
LATENCY_SAMPLES = 6


class ClusterMemory:
    """What the actions keep of one cluster between its passes. Only that cluster's passes
    read or write it (one pass of a cluster at a time). A scheduler pass, a new process, starts
    with none but the latencies the state dir kept: its throttles only save queries (a dead
    node's view is asked once more, a withheld eviction said once more), nothing depends on
    them for what is decided."""

    __slots__ = (
        "early",
        "finished",
        "job",
        "job_s",
        "known",
        "later",
        "lock",
        "measured_at",
        "samples",
        "throttles_read",
        "tried",
        "withheld",
    )

    def __init__(self) -> None:
        self.known: dict[NodeAddress, str] = {}  # the last gcomm uuid each node gave
        self.tried: dict[NodeAddress, float] = {}  # when a node was last looked for in the view
        self.withheld: dict[NodeAddress, float] = {}  # when its withheld eviction was last said
        # a scheduler process reads the last one's throttles once, and keeps them for the next
        self.throttles_read = False
        self.samples: deque[float] = deque(maxlen=LATENCY_SAMPLES)  # causal reads, ms
        self.measured_at: float | None = None  # monotonic
        # a daemon's eviction of a silent member under way off the pass, and those it finished
        # that no pass has reported yet (the job's thread appends, the cluster's pass takes)
        self.job: threading.Thread | None = None
        self.job_s = 0.0  # what the job's evictions may take, their deadlines put together
        self.finished: list[tuple[Eviction, _Evicted]] = []
        self.lock = threading.Lock()
        # a scheduler pass's evictions left for after it, once its lock is released (finish)
        self.later: _Later | None = None
        # a daemon's causal reads on the survivors of a member silent for less than
        # unresponsive_after_ms, started so that the proof is ready when the time is up
        self.early: EarlyReads | None = None

    def busy(self) -> bool:
        return self.job is not None and self.job.is_alive()

    def take_finished(self) -> list[tuple[Eviction, _Evicted]]:
        with self.lock:
            done, self.finished = self.finished, []
        return done

    def normal_ms(self) -> float | None:
        return max(self.samples) if self.samples else None


class GaleraActions:
    """One cluster's evictions and clearings after each of its passes (each runner has its
    own): what it keeps between them is that cluster's alone."""

    def __init__(
        self, connect: Session | None = None, monotonic: Callable[[], float] = time.monotonic
    ) -> None:
        self.connect = connect or _node_admin_session
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
        calls = _Calls(self.connect, self.monotonic, after.node_admin, deadline)
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
        _off_pass(later.calls, memory, later.work, later.lock_path)
        if memory.job is not None:
            # the wall's time, which a join counts in; the statements' margin on top
            bound = memory.job_s + EVICT_MARGIN_S - (time.monotonic() - waited)
            memory.job.join(max(0.0, bound))
        took_ms = (self.monotonic() - started) * 1000
        memory.later = None
        return (LaterActions(self._cluster, _report(self._cluster, memory, later), took_ms),)


class _Calls:
    """One pass's statements on the nodes, each bounded by that pass's deadline."""

    def __init__(
        self,
        connect: Session,
        monotonic: Callable[[], float],
        account: Endpoint | None,
        deadline: float,
    ) -> None:
        self.connect, self.monotonic, self.account = connect, monotonic, account
        self.deadline = deadline

    def left(self) -> float:
        return self.deadline - self.monotonic()

    def view(self, survivor: NodeAddress) -> tuple[set[str] | None, str]:
        """The view's member uuids as `survivor` lists them; None, and why, when it cannot be
        asked."""
        try:
            with self.connect(self.account, survivor, timeout_s=self.left()) as conn:
                return set(_members(conn)), ""
        except Exception as exc:  # asked again by the next pass
            return None, describe_error(exc)

    def evict(
        self, eviction: Eviction, wait_s: float, normal: str, early: EarlyReads | None = None
    ) -> _Evicted:
        from checker_core.edges.node_admin import NoNodeAdmin
        from galera_checker.eviction import ReadOutcome, member_to_evict, stalled_on

        node, survivor = eviction.node, eviction.survivor
        untold: list[NodeAddress] = []
        reason = eviction.reason
        try:
            with self.connect(self.account, survivor, timeout_s=self.left()) as conn:
                members = _members(conn)
                uuid = member_to_evict(eviction, members)
                if uuid is None:
                    return _Evicted()  # not in the survivors' view: nothing to evict
                if eviction.unresponsive:
                    asked = (survivor, *eviction.others)
                    if early is not None and set(early.nodes) == set(asked):
                        # started while the silence was under the threshold: each is judged
                        # on the stall it measured itself, at least wait_s of its own
                        reads = early.judge(wait_s, self.deadline)
                    else:
                        reads = self.causal_reads(asked, wait_s)
                    stall = stalled_on(reads, eviction.view)
                    waited = f"stall wait {wait_s * 1000:.0f} ms, {normal}"
                    if not stall.proven:
                        # evidence of this moment only: a member still silent is asked about
                        # again by the next pass (the first reads may come before the group
                        # has anything to wait for), not RETRY_S later
                        answered = any(r.outcome is ReadOutcome.ANSWERED for r in reads.values())
                        return _Evicted(
                            f"not evicting {node} ({reason}): {stall.said} ({waited})"
                            + ("; the silence is between the checker and it" if answered else ""),
                            settled=False,
                        )
                    reason = f"{reason}, {stall.said} ({waited})"
                _evict_on(conn, uuid)
            told = [survivor]
            for other in eviction.others:
                # the others agree on the new view at once only when told too; one that cannot
                # be told still drops the member at its own suspect_timeout
                if self.left() <= 0:
                    untold.append(other)
                    continue
                with (
                    contextlib.suppress(Exception),
                    self.connect(self.account, other, timeout_s=self.left()) as conn,
                ):
                    _evict_on(conn, uuid)
                    told.append(other)
        except NoNodeAdmin as exc:
            return _Evicted(f"eviction of {node} not done: {exc}", went_wrong=True)
        except Exception as exc:  # the cluster still evicts it by itself: say so, go on
            return _Evicted(
                f"eviction of {node} through {survivor} failed ({describe_error(exc)}); "
                "the cluster evicts it by itself after evs.suspect_timeout",
                went_wrong=True,
            )
        late = f"; {', '.join(map(str, untold))} not told: {PAST_DEADLINE}" if untold else ""
        return _Evicted(
            f"{EVICTED}{node} (gcomm uuid {uuid}) through {', '.join(map(str, told))}: "
            f"{reason}{late}",
            uuid,
        )

    def causal_reads(
        self, nodes: Sequence[NodeAddress], wait_s: float
    ) -> dict[NodeAddress, CausalRead]:
        """A causal read on every node at once, each allowed `wait_s`; a read not done by the
        deadline of these calls (the pass's, or an eviction's own off the pass) is unknown."""
        from galera_checker.eviction import CausalRead, ReadOutcome

        reads: dict[NodeAddress, CausalRead] = {}

        def ask(node: NodeAddress) -> None:
            reads[node] = self.causal_read(node, wait_s)

        threads = [threading.Thread(target=ask, args=(n,), daemon=True) for n in nodes]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(max(0.0, self.left()))
        late = CausalRead(ReadOutcome.UNKNOWN, why="not done by its deadline")
        return {n: reads.get(n, late) for n in nodes}

    def causal_read(
        self, node: NodeAddress, wait_s: float, begun: Callable[[float], None] | None = None
    ) -> CausalRead:
        """How a causal read on `node` went: answered (ms), stalled (waited out `wait_s`), or
        unknown when it never ran (no connection, a statement that failed otherwise). `begun`
        is told when the read itself was asked (monotonic)."""
        from galera_checker.eviction import CausalRead, ReadOutcome

        try:
            with self.connect(self.account, node, timeout_s=self.left(), wait_s=wait_s) as conn:
                with conn.cursor() as cur:
                    cur.execute(CAUSAL_READ[0])
                started = self.monotonic()
                if begun is not None:
                    begun(started)
                try:
                    with conn.cursor() as cur:
                        cur.execute(CAUSAL_READ[1])
                        cur.fetchall()
                except Exception as exc:
                    if failure_of(exc) is ProbeFailure.SILENT:
                        return CausalRead(ReadOutcome.STALLED, wait_s * 1000)
                    raise
                return CausalRead(ReadOutcome.ANSWERED, (self.monotonic() - started) * 1000)
        except Exception as exc:  # it never ran: no proof either way
            return CausalRead(ReadOutcome.UNKNOWN, why=describe_error(exc))

    def clear(self, clearing: Clearing) -> tuple[str, bool]:
        node = clearing.node
        try:
            with (
                self.connect(self.account, node, timeout_s=self.left()) as conn,
                conn.cursor() as cur,
            ):
                cur.execute(EVICT_SQL, ("evs.evict=",))
        except Exception as exc:  # retried by the next pass: the entries are still listed
            return f"clearing the eviction list of {node} failed ({describe_error(exc)})", False
        return (
            f"cleared the eviction list of {node} ({', '.join(clearing.uuids)}): no entry in it "
            "is a member of the view or a live node, so an evicted member's next process may join",
            True,
        )


@dataclass(frozen=True, slots=True)
class _Evicted:
    """How an eviction went: what to say (nothing when the node already left), the uuid
    evicted, whether what is said went wrong, and whether it waits RETRY_S before it is asked
    again (False: the next pass asks again)."""

    text: str | None = None
    uuid: str | None = None
    went_wrong: bool = False
    settled: bool = True


class EarlyReads:
    """Causal reads on the survivors of a member silent for less than unresponsive_after_ms,
    asked by the daemon's pass that found it silent, each on a thread of its own and allowed
    to wait until past the time the silence reaches the threshold: the eviction decided then
    judges them at once instead of asking new ones and waiting the stall wait. They decide
    nothing by themselves: only a pass that finds the member silent for the whole configured
    time starts an eviction, and one that finds it answering drops them. Each read is judged
    on what it measured itself (judge): never on when the pass came."""

    def __init__(
        self, calls: _Calls, node: NodeAddress, since: float, nodes: Sequence[NodeAddress]
    ) -> None:
        self.node, self.since, self.nodes = node, since, tuple(nodes)
        self.monotonic = calls.monotonic
        self._begun: dict[NodeAddress, float] = {}
        self._ended: dict[NodeAddress, CausalRead] = {}
        self._changed = threading.Condition()
        wait_s = max(0.0, calls.left())
        for n in self.nodes:
            thread = threading.Thread(
                target=self._ask, args=(calls, n, wait_s), name=f"early read {n}", daemon=True
            )
            thread.start()

    def _ask(self, calls: _Calls, node: NodeAddress, wait_s: float) -> None:
        def begun(at: float) -> None:
            with self._changed:
                self._begun[node] = at
                self._changed.notify_all()

        read = calls.causal_read(node, wait_s, begun)
        with self._changed:
            self._ended[node] = read
            self._changed.notify_all()

    def judge(self, wait_s: float, deadline: float) -> dict[NodeAddress, CausalRead]:
        """Each read as it stands once it is over or has waited `wait_s` of its own (by
        `deadline` at the latest): answered (its ms), unknown (it never ran), stalled for the
        time it measured itself (at least `wait_s`). One not begun or not long enough under
        way by the deadline is unknown."""
        from galera_checker.eviction import CausalRead, ReadOutcome

        with self._changed:
            while True:
                now = self.monotonic()
                found: dict[NodeAddress, CausalRead] = {}
                wake: list[float] = []
                for n in self.nodes:
                    ended, begun = self._ended.get(n), self._begun.get(n)
                    if ended is not None and (
                        ended.outcome is not ReadOutcome.STALLED or (ended.ms or 0) >= wait_s * 1000
                    ):
                        found[n] = ended
                    elif ended is not None:  # it gave up before the stall wait: no proof
                        found[n] = CausalRead(ReadOutcome.UNKNOWN, why="timed out too soon")
                    elif begun is not None and now - begun >= wait_s:
                        found[n] = CausalRead(ReadOutcome.STALLED, (now - begun) * 1000)
                    elif begun is not None:
                        wake.append(begun + wait_s)
                if len(found) == len(self.nodes):
                    return found
                if now >= deadline:
                    late = CausalRead(ReadOutcome.UNKNOWN, why="not done by its deadline")
                    return {n: found.get(n, late) for n in self.nodes}
                self._changed.wait(max(0.001, min([deadline, *wake]) - now))


def _act(calls: _Calls, memory: ClusterMemory, after: AfterPass) -> ActionsDone:
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
        round_.failed += _measure(calls, memory, after, roster)
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


def _wanted(calls: _Calls, memory: ClusterMemory, after: AfterPass) -> list[Eviction] | None:
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
        _early(calls, memory, after, wanted, known=known, writers=writers)
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
        calls: _Calls,
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

    def noted(self, eviction: Eviction, went: _Evicted) -> None:
        _note(eviction, went, self.memory, self.ours, said=self.said, failed=self.failed)
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
            _since(after.decision.memory, node),
        ):
            early = None
        _off_pass(self.calls, memory, ((eviction, wait_s, normal),), lock_path, early)
        self.said.append(
            f"eviction of {node} under way: the survivors' causal reads asked off the "
            f"pass (stall wait {wait_s * 1000:.0f} ms, {normal})"
        )

    def _later(self, eviction: Eviction, wait_s: float, normal: str) -> None:
        """A scheduler pass: after it, its lock released, with the wait the cluster needs (a
        dead node's eviction only when the pass's deadline left it undone)."""
        node = eviction.node
        self.memory.tried[node] = self.now
        _leave_for_later(self.calls, self.memory, self.after, (eviction, wait_s, normal))
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


def _note(
    eviction: Eviction,
    went: _Evicted,
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
Work = tuple["Eviction", float, str]


@dataclass(frozen=True, slots=True)
class _Later:
    """A scheduler pass's evictions left for after it, with that pass's account and store."""

    calls: _Calls
    store: NodeStore
    lock_path: Path
    work: tuple[Work, ...]


def _leave_for_later(calls: _Calls, memory: ClusterMemory, after: AfterPass, work: Work) -> None:
    cluster = after.cluster.name
    earlier = memory.later.work if memory.later is not None else ()
    path = after.store.evict_lock_path(cluster)
    memory.later = _Later(calls, after.store, path, (*earlier, work))


def _early(
    calls: _Calls,
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
    going = {(e.node, _since(memory_of, e.node)) for e in (*soon, *wanted)}
    if early is not None and (early.node, early.since) not in going:
        memory.early = early = None  # it answered: the reads prove nothing about it now
    if early is not None or memory.busy():
        return
    for eviction in soon:
        since = _since(memory_of, eviction.node)
        if not eviction.allowed or since is None:
            continue
        wait_s, _ = stall_wait(memory.normal_ms())
        deadline = since + options.unresponsive_after_ms / 1000 + wait_s + OFF_PASS_SLACK_S
        own = _Calls(calls.connect, calls.monotonic, calls.account, deadline)
        asked = (eviction.survivor, *eviction.others)
        memory.early = EarlyReads(own, eviction.node, since, asked)
        return


def _since(memory: Mapping[NodeAddress, NodeMemory], node: NodeAddress) -> float | None:
    kept = memory.get(node)
    return kept.silent_since if kept is not None else None


def _off_pass(
    calls: _Calls,
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
        went: list[tuple[Eviction, _Evicted]] = []
        try:
            with cluster_lock(lock_path) as held:
                if held:
                    for eviction, wait_s, normal in work:
                        deadline = calls.monotonic() + wait_s + OFF_PASS_SLACK_S
                        own = _Calls(calls.connect, calls.monotonic, calls.account, deadline)
                        went.append((eviction, own.evict(eviction, wait_s, normal, early)))
                else:
                    why = f"another process holds {lock_path}, its own eviction under way"
                    went = [(e, _Evicted(settled=False)) for e, _, _ in work]
                    went[0] = (work[0][0], _skipped(nodes, why))
        except OSError as exc:  # the state dir refused the lock: nothing evicted
            why = f"its lock {lock_path} cannot be taken ({exc.strerror or exc})"
            went = [(e, _Evicted(settled=False)) for e, _, _ in work]
            went[0] = (work[0][0], _skipped(nodes, why))
        with memory.lock:
            memory.finished.extend(went)

    memory.job = threading.Thread(target=job, name=f"evict {nodes}", daemon=True)
    memory.job.start()


def _skipped(nodes: str, why: str) -> _Evicted:
    return _Evicted(
        f"eviction of {nodes} skipped: {why}; the next pass asks again",
        went_wrong=True,
        settled=False,
    )


def _report(cluster: str, memory: ClusterMemory, later: _Later) -> ActionsDone:
    """What a scheduler process's evictions after its pass did, noted in the state dir as a
    daemon's next pass notes its own; one not over by its deadline is said so."""
    said: list[str] = []
    failed: list[str] = []
    ours = later.store.evicted(cluster)
    finished = memory.take_finished()
    done = unresponsive = 0
    for eviction, went in finished:
        _note(eviction, went, memory, ours, said=said, failed=failed)
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


def _measure(
    calls: _Calls, memory: ClusterMemory, after: AfterPass, roster: Sequence[NodeAddress]
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


def _evict_on(conn: pymysql.connections.Connection[Any], uuid: str) -> None:
    with conn.cursor() as cur:
        cur.execute(EVICT_SQL, (f"evs.evict={uuid}",))


def _members(conn: pymysql.connections.Connection[Any]) -> dict[str, str]:
    """The survivor's view: gcomm uuid -> the member's client address (or name)."""
    last: Exception | None = None
    for query in MEMBER_QUERIES:
        try:
            with conn.cursor() as cur:
                cur.execute(query)
                return {str(uuid): str(address or "") for uuid, address in _rows(cur)}
        except Exception as exc:  # the other flavour's table: try it
            last = exc
    assert last is not None
    raise last


def _rows(cur: Any) -> Iterator[tuple[object, object]]:
    for row in cur.fetchall():
        yield row[0], row[1]


def _node_admin_session(
    account: Endpoint | None, node: NodeAddress, **timeouts: float | None
) -> AbstractContextManager[pymysql.connections.Connection[Any]]:
    """edges.node_admin.session, loaded by the first pass that connects as [node_admin]."""
    from checker_core.edges.node_admin import session

    return session(account, node, **timeouts)
