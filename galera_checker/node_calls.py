"""The statements galera-checker makes on the nodes themselves, through the [node_admin]
account: a view's members, evs.evict on every survivor, the causal reads that show the group
stalled on a silent member, the clearing of an eviction list. Each bounded by its caller's
deadline; every value a parameter."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from checker_core.core.model import NodeAddress
from checker_core.core.probes import ProbeFailure
from checker_core.edges.failures import describe_error, failure_of
from checker_core.passes.plugin import EVICTED

if TYPE_CHECKING:
    import pymysql

    from checker_core.core.settings import Endpoint
    from galera_checker.eviction import CausalRead, Clearing, Eviction

Session = Callable[..., AbstractContextManager["pymysql.connections.Connection[Any]"]]

# a view's members with their gcomm uuid and client address: MariaDB 10.4+, then PXC 8
MEMBER_QUERIES = (
    "SELECT node_uuid, node_incoming_address FROM mysql.wsrep_cluster_members",
    "SELECT UUID, HOST_NAME FROM performance_schema.pxc_cluster_view",
)
EVICT_SQL = "SET GLOBAL wsrep_provider_options = %s"
PAST_DEADLINE = "the pass's deadline (run.max_runtime_ms) came first; the next pass goes on"
# a causal read waits for the group to deliver a message to every member of the view: it stalls
# while one of them is silent, and answers in milliseconds otherwise
CAUSAL_READ = ("SET SESSION wsrep_sync_wait = 1", "SELECT 1")
# what an eviction needs besides the stall wait: connects, the view, the statements
EVICT_MARGIN_S = 0.1


class NodeCalls:
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
    ) -> Evicted:
        from checker_core.edges.node_admin import NoNodeAdmin
        from galera_checker.eviction import ReadOutcome, member_to_evict, stalled_on

        node, survivor = eviction.node, eviction.survivor
        reason = eviction.reason
        try:
            with self.connect(self.account, survivor, timeout_s=self.left()) as conn:
                members = _members(conn)
                uuid = member_to_evict(eviction, members)
                if uuid is None:
                    return Evicted()  # not in the survivors' view: nothing to evict
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
                        return Evicted(
                            f"not evicting {node} ({reason}): {stall.said} ({waited})"
                            + ("; the silence is between the checker and it" if answered else ""),
                            settled=False,
                        )
                    reason = f"{reason}, {stall.said} ({waited})"
                _evict_on(conn, uuid)
            told, untold = self._tell_others(eviction.others, uuid)
        except NoNodeAdmin as exc:
            return Evicted(f"eviction of {node} not done: {exc}", went_wrong=True)
        except Exception as exc:  # the cluster still evicts it by itself: say so, go on
            return Evicted(
                f"eviction of {node} through {survivor} failed ({describe_error(exc)}); "
                "the cluster evicts it by itself after evs.suspect_timeout",
                went_wrong=True,
            )
        late = f"; {', '.join(map(str, untold))} not told: {PAST_DEADLINE}" if untold else ""
        through = ", ".join(map(str, (survivor, *told)))
        return Evicted(
            f"{EVICTED}{node} (gcomm uuid {uuid}) through {through}: {reason}{late}",
            uuid,
        )

    def _tell_others(
        self, others: Sequence[NodeAddress], uuid: str
    ) -> tuple[list[NodeAddress], list[NodeAddress]]:
        """The eviction asked of the other survivors too, while the deadline lasts: they agree
        on the new view at once only when told; one that cannot be told still drops the member
        at its own suspect_timeout. (told, not told for want of time)"""
        told: list[NodeAddress] = []
        untold: list[NodeAddress] = []
        for other in others:
            if self.left() <= 0:
                untold.append(other)
                continue
            with (
                contextlib.suppress(Exception),
                self.connect(self.account, other, timeout_s=self.left()) as conn,
            ):
                _evict_on(conn, uuid)
                told.append(other)
        return told, untold

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
class Evicted:
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
        self, calls: NodeCalls, node: NodeAddress, since: float, nodes: Sequence[NodeAddress]
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

    def _ask(self, calls: NodeCalls, node: NodeAddress, wait_s: float) -> None:
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


def node_admin_session(
    account: Endpoint | None, node: NodeAddress, **timeouts: float | None
) -> AbstractContextManager[pymysql.connections.Connection[Any]]:
    """edges.node_admin.session, loaded by the first pass that connects as [node_admin]."""
    from checker_core.edges.node_admin import session

    return session(account, node, **timeouts)
