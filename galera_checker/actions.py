"""What galera-checker does to the nodes themselves after a pass: evict a member whose mysqld is
gone (cluster.evict_dead_nodes) or that stalls the group while silent (cluster.
evict_unresponsive_nodes), and clear those evictions once the cluster is whole again.

Through the [node_admin] account, on one survivor of the Primary component; every statement
takes its values as parameters. A failure is said in the pass line and costs nothing else: the
eviction is an acceleration, the cluster evicts the member by itself after evs.suspect_timeout.
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from checker_core.core.model import NodeAddress
from checker_core.core.probes import ProbeFailure
from checker_core.edges.failures import describe_error, failure_of
from checker_core.passes.plugin import EVICTED, ActionsDone, AfterPass
from galera_checker.policy import facts_of

if TYPE_CHECKING:
    import pymysql

    from checker_core.core.settings import Endpoint
    from galera_checker.eviction import Clearing, Eviction

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
STALL_WAIT_S = 0.5  # how long a survivor's causal read may take before it counts as stalled


class GaleraActions:
    """Keeps, per cluster, the last gcomm uuid each node gave (a dead node gives none)."""

    def __init__(
        self, connect: Session | None = None, monotonic: Callable[[], float] = time.monotonic
    ) -> None:
        self.connect = connect or _node_admin_session
        self.monotonic = monotonic
        self.known: dict[str, dict[NodeAddress, str]] = {}
        # when each refused node was last looked for in the survivors' view
        self.tried: dict[tuple[str, NodeAddress], float] = {}
        # when a refused node's eviction was last said to be withheld
        self.withheld: dict[tuple[str, NodeAddress], float] = {}
        self._deadline = 0.0  # monotonic: when this pass's actions must be done

    def _left(self) -> float:
        return self._deadline - self.monotonic()

    def after_pass(self, after: AfterPass) -> ActionsDone:
        options = after.cluster
        if not options.evict_dead_nodes and options.unresponsive_after_ms <= 0:
            return ActionsDone()  # nothing learnt or asked: a pass without eviction pays nothing
        # loaded by the first pass that may evict: the scheduler's usual pass imports neither
        from galera_checker.eviction import (
            clearings,
            evictions,
            identities,
            unresponsive_members,
        )

        # one deadline for all of it: every connect gets what is left, never the whole budget
        self._deadline = self.monotonic() + after.budget_s
        cluster = after.cluster.name
        known = self.known.setdefault(cluster, {})
        # the uuids the state file kept (a scheduler pass is a new process) and this pass's
        known.update({n: m.identity for n, m in after.decision.memory.items() if m.identity})
        known.update(identities(after.probes))
        if after.decision.blind:
            return ActionsDone()
        roster = after.decision.roster.addresses
        writers = after.decision.assignment.writers
        wanted = (
            evictions(after.probes, roster, known, writers) if options.evict_dead_nodes else ()
        ) + unresponsive_members(
            after.probes,
            roster,
            after.decision.memory,
            known,
            writers,
            now=self.monotonic(),
            after_ms=options.unresponsive_after_ms,
        )
        ours = set(after.store.evicted(cluster))
        clear = clearings(
            after.probes, roster, ours, self._view(after, ours) if after.acting else ours
        )
        said: list[str] = []
        if not after.acting:
            said += [
                f"would evict {e.node} through {e.survivor} ({e.reason}"
                f"{' and the others stalled on it' if e.unresponsive else ''})"
                if e.allowed
                else f"would not evict {e.node} ({e.reason}): {e.withheld}"
                for e in wanted
            ]
            said += [f"would clear the eviction list of {c.node}" for c in clear]
            return ActionsDone(tuple(said))
        failed: list[str] = []
        done = unresponsive = 0
        now = self.monotonic()
        for eviction in wanted:
            key = (cluster, eviction.node)
            if not eviction.allowed:
                # said once per RETRY_S; the eviction itself is not put off: survivors that
                # disagree for a moment (a view change) may agree in the next pass
                if now - self.withheld.get(key, -RETRY_S) >= RETRY_S:
                    self.withheld[key] = now
                    said.append(
                        f"not evicting {eviction.node} ({eviction.reason}): {eviction.withheld}"
                    )
                continue
            if now - self.tried.get(key, -RETRY_S) < RETRY_S:
                continue  # asked a moment ago: a dead node refuses pass after pass
            self.tried[key] = now
            if self._left() <= 0:
                failed.append(f"eviction of {eviction.node} not done: {PAST_DEADLINE}")
                continue
            text, uuid, went_wrong = self._evict(eviction, after.node_admin)
            if uuid is not None:
                done += 1
                unresponsive += eviction.unresponsive
                ours.add(uuid)
            if text:
                (failed if went_wrong else said).append(text)
        for clearing in clear:
            if self._left() <= 0:
                failed.append(f"clearing the eviction list of {clearing.node}: {PAST_DEADLINE}")
                continue
            text, cleared = self._clear(clearing, after.node_admin)
            (said if cleared else failed).append(text)
            if cleared:
                ours -= set(clearing.uuids)
        failure = after.store.record_evicted(cluster, sorted(ours))
        if failure:
            failed.append(failure)
        return ActionsDone(tuple(said), tuple(failed), done, unresponsive)

    def _view(self, after: AfterPass, ours: set[str]) -> set[str]:
        """The view's member uuids as a survivor lists them, asked only while an entry of ours
        is listed somewhere; unknown (ours, so nothing is cleared) when it cannot be asked."""
        from galera_checker.eviction import evict_list, in_primary

        listed = any(
            set(evict_list(f.get("wsrep_evs_evict_list"))) & ours
            for f in (facts_of(p) for p in after.probes.values())
            if f is not None
        )
        survivor = next((n for n, p in sorted(after.probes.items()) if in_primary(p)), None)
        if not ours or not listed or survivor is None:
            return ours
        try:
            with self.connect(after.node_admin, survivor, timeout_s=self._left()) as conn:
                return set(_members(conn))
        except Exception:  # asked again by the next pass
            return ours

    def _evict(
        self, eviction: Eviction, account: Endpoint | None
    ) -> tuple[str | None, str | None, bool]:
        """(what to say, the uuid evicted, whether what is said went wrong); nothing to say when
        the node already left."""
        from checker_core.edges.node_admin import NoNodeAdmin
        from galera_checker.eviction import member_to_evict

        node, survivor = eviction.node, eviction.survivor
        untold: list[NodeAddress] = []
        reason = eviction.reason
        try:
            with self.connect(account, survivor, timeout_s=self._left()) as conn:
                members = _members(conn)
                uuid = member_to_evict(eviction, members)
                if uuid is None:
                    return None, None, False  # not in the survivors' view: nothing to evict
                if eviction.unresponsive:
                    proof, waited = self._stalled(eviction, account)
                    if proof is None:
                        return (
                            f"not evicting {node} ({reason}): the others replicate ({waited}); "
                            "the silence is between the checker and it",
                            None,
                            False,
                        )
                    reason = f"{reason}, {proof}"
                _evict_on(conn, uuid)
            told = [survivor]
            for other in eviction.others:
                # the others agree on the new view at once only when told too; one that cannot
                # be told still drops the member at its own suspect_timeout
                if self._left() <= 0:
                    untold.append(other)
                    continue
                with (
                    contextlib.suppress(Exception),
                    self.connect(account, other, timeout_s=self._left()) as conn,
                ):
                    _evict_on(conn, uuid)
                    told.append(other)
        except NoNodeAdmin as exc:
            return f"eviction of {node} not done: {exc}", None, True
        except Exception as exc:  # the cluster still evicts it by itself: say so, go on
            return (
                f"eviction of {node} through {survivor} failed ({describe_error(exc)}); "
                "the cluster evicts it by itself after evs.suspect_timeout",
                None,
                True,
            )
        late = f"; {', '.join(map(str, untold))} not told: {PAST_DEADLINE}" if untold else ""
        return (
            f"{EVICTED}{node} (gcomm uuid {uuid}) through {', '.join(map(str, told))}: "
            f"{reason}{late}",
            uuid,
            False,
        )

    def _stalled(self, eviction: Eviction, account: Endpoint | None) -> tuple[str | None, str]:
        """Every survivor asked a causal read at once: the proof that they are stalled on the
        silent member (None when any answered), and what each read took, said."""
        from galera_checker.eviction import stalled_on

        survivors = (eviction.survivor, *eviction.others)
        # a third of what is left at most: the eviction and telling the others must fit after
        wait_s = max(0.05, min(STALL_WAIT_S, self._left() / 3))
        waited: dict[NodeAddress, float | None] = {}

        def ask(node: NodeAddress) -> None:
            waited[node] = self._causal_read(account, node, wait_s)

        threads = [threading.Thread(target=ask, args=(n,), daemon=True) for n in survivors]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(wait_s + max(0.0, self._left()))
        # a read not done by now (its connect still under way) is no proof either way
        taken = {n: waited.get(n, math.inf) for n in survivors}
        said = ", ".join(f"{n} {_waited(ms)}" for n, ms in taken.items())
        return stalled_on(taken, wait_s * 1000), f"causal reads: {said}"

    def _causal_read(
        self, account: Endpoint | None, node: NodeAddress, wait_s: float
    ) -> float | None:
        """How long a causal read took on `node` (ms); None when it did not answer in `wait_s`
        (a connection or a statement that fails otherwise is no proof: it says answered, 0 ms)."""
        try:
            with self.connect(account, node, timeout_s=self._left(), wait_s=wait_s) as conn:
                with conn.cursor() as cur:
                    cur.execute(CAUSAL_READ[0])
                started = self.monotonic()
                try:
                    with conn.cursor() as cur:
                        cur.execute(CAUSAL_READ[1])
                        cur.fetchall()
                except Exception as exc:
                    if failure_of(exc) is ProbeFailure.SILENT:
                        return None  # waited out: the read timeout ended it
                    raise
                return (self.monotonic() - started) * 1000
        except Exception:  # no connection or another error: no proof, never taken for a stall
            return 0.0

    def _clear(self, clearing: Clearing, account: Endpoint | None) -> tuple[str, bool]:
        node = clearing.node
        try:
            with (
                self.connect(account, node, timeout_s=self._left()) as conn,
                conn.cursor() as cur,
            ):
                cur.execute(EVICT_SQL, ("evs.evict=",))
        except Exception as exc:  # retried by the next pass: the entries are still listed
            return f"clearing the eviction list of {node} failed ({describe_error(exc)})", False
        return (
            f"cleared the eviction list of {node} ({', '.join(clearing.uuids)}): the evicted "
            "member is out of the view, so its next process may join",
            True,
        )


def _waited(ms: float | None) -> str:
    if ms is None:
        return "stalled"
    return "not done in time" if math.isinf(ms) else f"{ms:.0f} ms"


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
