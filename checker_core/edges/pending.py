"""Probes started together and collected by one deadline: the threads' results and the
exchange's answers as they come, a late one said late, and a probe still out at the deadline
judged by how far it got (the node's silence, or the checker's own lateness)."""

from __future__ import annotations

import contextlib
import functools
import queue
import select
import time
from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from checker_core.core.model import NodeAddress
from checker_core.core.probes import (
    ProbeFailure,
    ProbeResult,
    ProbeTimeouts,
    question_out_s,
    whole_timeout,
)
from checker_core.edges import driver

if TYPE_CHECKING:
    import pymysql

    from checker_core.edges.exchange import Exchange


class ExchangeMaker(Protocol):
    """What makes the exchange that asks the nodes on their open connections (the Prober)."""

    def exchange(self) -> Exchange: ...


class Flight:
    """How far one probe got: when its thread began (its connect, when it had no connection),
    its connection once it had one and when it asked its question on it. The probe's thread
    writes it; a collector whose deadline came first reads it."""

    __slots__ = ("asked", "begun", "conn")

    def __init__(self) -> None:
        self.begun: float | None = None
        self.conn: pymysql.connections.Connection[Any] | None = None
        self.asked: float | None = None


# while threads' probes are out beside the exchange's, their queue is looked at this often
_MIXED_POLL_S = 0.005
# a collector that woke this much after its deadline (at least) was itself short of CPU
LATE_WAKE_MIN_S = 0.02
LATE_WAKE_SHARE = 0.1


class PendingProbes:
    """Probes started together; collect() waits for them up to the deadline. `timeouts`: the
    monitor's, which a node must have had in full for its silence to count (None: a fake's
    results, put in whole)."""

    def __init__(
        self,
        nodes: tuple[NodeAddress, ...],
        started: float,
        timeouts: ProbeTimeouts | None = None,
    ) -> None:
        self.nodes = nodes
        self.started = started
        self.timeouts = timeouts
        # how far each thread's probe got, made as it is first asked for
        self.flights: defaultdict[NodeAddress, Flight] = defaultdict(Flight)
        self.exchange: Exchange | None = None  # the nodes asked on their open connections
        self.exchanged: set[NodeAddress] = set()

    @functools.cached_property
    def results(self) -> queue.Queue[ProbeResult]:
        """Where probe threads put their results (made only when a thread is started: the
        daemon's probes on open connections need none)."""
        return queue.Queue()

    def _threads_started(self) -> bool:
        return "results" in self.__dict__

    def exchange_for(self, prober: ExchangeMaker) -> Exchange:
        if self.exchange is None:
            self.exchange = prober.exchange()
        return self.exchange

    def release(self) -> None:
        """No collect is coming (the pass ended before it): the answers already in are read,
        which gives their connections back to the prober; the questions still out are
        abandoned with their connections (a late answer cannot be told from the next)."""
        exchange = self.exchange
        if exchange is not None and exchange.busy:
            exchange.step(0)
            exchange.abandon()

    def collect(
        self,
        deadline: float,
        only: Collection[NodeAddress] | None = None,
        enough: Mapping[NodeAddress, float] | None = None,
    ) -> dict[NodeAddress, ProbeResult]:
        """Every node's result by the deadline (monotonic seconds); late ones say so. `only`:
        the nodes still wanted; the others' results are taken if they came, never waited for.
        `enough`: for some nodes, a time after which they are waited for no longer (silent
        already for cluster.unresponsive_after_ms then); the deadline holds for the others."""
        keep = None if only is None else frozenset(only)
        wanted = [n for n in self.nodes if keep is None or n in keep]
        done: dict[NodeAddress, ProbeResult] = {}
        missing = set(wanted)
        exchange = self.exchange
        cut = {n: min(at, deadline) for n, at in (enough or {}).items() if n in missing}
        ends = deadline
        while missing:
            # with only nodes that have a time of their own left, the wait ends at the last one
            ends = max(cut[n] for n in missing) if cut and missing <= cut.keys() else deadline
            remaining = ends - time.monotonic()
            if remaining <= 0:
                break
            if exchange is not None and exchange.busy:
                # threads' results come by the queue: looked at between polls
                threads_out = not missing <= exchange.flying()
                wait = min(remaining, _MIXED_POLL_S) if threads_out else remaining
                self._take_in(done, exchange.step(wait), missing)
                self._drain(done, missing)
                continue
            if not self._threads_started():
                break
            try:
                result = self.results.get(timeout=remaining)
            except queue.Empty:
                break
            self._take_in(done, (result,), missing)
        woke = time.monotonic()
        # what came in while this thread waited for the CPU came in time
        asked: dict[NodeAddress, float] = {}
        if exchange is not None:
            self._take_in(done, exchange.step(0), missing)
            asked = exchange.asked_at()
            exchange.abandon()
        self._drain(done, missing)
        for node in wanted:
            if node not in done:
                done[node] = self._unanswered(node, woke, asked, cut_at=ends, deadline=deadline)
        return done

    def _unanswered(
        self,
        node: NodeAddress,
        woke: float,
        asked: Mapping[NodeAddress, float],
        *,
        cut_at: float,
        deadline: float,
    ) -> ProbeResult:
        """The result of a node with no answer when the wait ended at `cut_at`: unheard when
        the pass's own lateness or a question cut short explains it, else silent."""
        waited = (woke - self.started) * 1000
        late = self.own_lateness(node, cut_at, woke)
        short = None if late else self.cut_short(node, woke, asked)
        own = late or short
        said = (
            f"no answer in {waited:.0f} ms (silent for unresponsive_after_ms by then)"
            if cut_at < deadline
            else f"no answer within the pass deadline ({waited:.0f} ms)"
        )
        return ProbeResult(
            node,
            None,
            own or said,
            waited,
            ProbeFailure.UNHEARD if own else ProbeFailure.SILENT,
            unanswered_ms=self._unanswered_ms(node, woke, asked, late=late, short=short),
        )

    @staticmethod
    def _take_in(
        done: dict[NodeAddress, ProbeResult],
        results: Iterable[ProbeResult],
        missing: set[NodeAddress],
    ) -> None:
        for result in results:
            done[result.node] = result
            missing.discard(result.node)

    def _drain(self, done: dict[NodeAddress, ProbeResult], missing: set[NodeAddress]) -> None:
        if not self._threads_started():
            return
        with contextlib.suppress(queue.Empty):
            while True:
                self._take_in(done, (self.results.get_nowait(),), missing)

    def cut_short(
        self, node: NodeAddress, ended: float, asked: Mapping[NodeAddress, float]
    ) -> str | None:
        """Why a probe still out when the pass stopped waiting (`ended`) says nothing of its node:
        the node had not had its whole configured timeout (core.probes.whole_timeout). None when
        it had, or when the timeouts are not known."""
        if self.timeouts is None:
            return None
        if node in self.exchanged:
            # written on its open connection; one never written failed at once, a result
            at = asked.get(node)
            return None if at is None else whole_timeout(self.timeouts, ended, asked_at=at)
        flight = self.flights[node]
        return whole_timeout(
            self.timeouts, ended, connecting_since=flight.begun, asked_at=flight.asked
        )

    def _unanswered_ms(
        self,
        node: NodeAddress,
        ended: float,
        asked: Mapping[NodeAddress, float],
        *,
        late: str | None,
        short: str | None,
    ) -> float | None:
        """What of an unanswered probe's wait was the node's (ProbeResult.unanswered_ms): none
        of the checker's own lateness; a question the deadline cut short, as long as it was
        out. None for a silent probe: all of its wait."""
        if late is not None:
            return 0.0
        if short is None:
            return None
        if node in self.exchanged:
            return question_out_s(ended, asked_at=asked.get(node)) * 1000
        flight = self.flights[node]
        return question_out_s(ended, connecting_since=flight.begun, asked_at=flight.asked) * 1000

    def own_lateness(self, node: NodeAddress, deadline: float, woke: float) -> str | None:
        """Why a probe still out at the deadline says nothing of its node: the checker itself
        lacked CPU. None when the node had its chance and stayed silent."""
        window = max(0.0, deadline - self.started)
        late = woke - deadline
        if late > max(LATE_WAKE_MIN_S, window * LATE_WAKE_SHARE):
            return (
                f"not heard: the checker woke {late * 1000:.0f} ms after its deadline "
                "(short of CPU)"
            )
        if node not in self.nodes or node in self.exchanged:
            return None  # asked when the probes began; its answer was read at the deadline
        flight = self.flights[node]
        if flight.begun is None:
            return "not heard: the checker had not started its probe by the deadline (short of CPU)"
        if flight.begun - self.started > window / 2:
            left = (deadline - flight.begun) * 1000
            return (
                f"not heard: the checker started its probe only {max(0.0, left):.0f} ms before "
                "the deadline (short of CPU)"
            )
        if _answer_waiting(flight.conn):
            return "not heard: its answer was waiting unread at the deadline (short of CPU)"
        return None


def _answer_waiting(conn: pymysql.connections.Connection[Any] | None) -> bool:
    """Whether the node's bytes sit in the socket, unread by a probe thread that had no CPU."""
    sock = driver.socket_of(conn)
    if sock is None:
        return False
    try:
        poller = select.poll()
        poller.register(sock.fileno(), select.POLLIN)
        return bool(poller.poll(0))
    except (OSError, ValueError):
        return False
