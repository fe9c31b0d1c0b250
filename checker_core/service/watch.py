"""The daemon between passes: what starts the next pass before its time.

A pass still runs every run.interval_ms; this only makes one run sooner, when waiting would
leave writes failing for nothing:
- a probe connection kept open between passes becomes readable: its server closed it, reset it,
  or said goodbye (a killed mysqld's kernel closes its sockets at once; a shutdown sends an error
  first). Waiting costs nothing: the sockets are polled, no query is sent;
- every run.watch_interval_ms the writers are asked the watch's one question on their open
  connection; a different answer (reject, desync, read_only, another view of the group), an
  error or no answer starts a pass;
  (both by one thread for every cluster, the hub: service/watch_hub.py)
- a probe that failed in the last pass, on a node the pass before heard, is asked again at once
  by the next pass, not one interval later;
- a node its hysteresis holds (suspect, recovering) is asked again as soon as one more probe can
  move it: when its streak has spanned the time retry_down / retry_up ask for. A recheck asks
  sooner; it never spends the hysteresis faster.
The pass itself is the same pass: this changes when it runs, never what it decides.
"""

from __future__ import annotations

import enum
import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from checker_core.core.decide import Policy
from checker_core.core.model import NodeAddress
from checker_core.core.probes import ProbeFailure, ProbeFn, ProbeResult
from checker_core.core.settings import Endpoint
from checker_core.edges.backend import Prober
from checker_core.passes.result import PassResult
from checker_core.service.watch_hub import WatchHub
from checker_core.service.watcher import Watcher

# the longest a wait sleeps in one go: a stop request is noticed within this
MAX_NAP_S = 0.25
# the same for a wait that is woken when its stop is set (BetweenPasses.wake): a backstop only.
# Each nap cost a loop about 70 µs of CPU, 4 a second: at 50 clusters 1.3 % of a core
WOKEN_NAP_S = 5.0


class Cause(enum.Enum):
    """Why a pass started before its time."""

    CLOSED = ("closed", "a probe connection was closed or reset by its server")
    CHANGED = ("changed", "a writer's state changed")
    UNANSWERED = ("unanswered", "a writer did not answer the watch's question")
    RECHECK = ("recheck", "a probe failed, or a node's hysteresis is spent: it is probed again")

    def __init__(self, label: str, meaning: str) -> None:
        self.label = label
        self.meaning = meaning


@dataclass(frozen=True, slots=True)
class Trigger:
    """What ended a cluster's wait early, and on which nodes."""

    cause: Cause
    nodes: tuple[NodeAddress, ...]
    detail: str
    # the nodes that left the watch's question unanswered, and when it was asked (monotonic):
    # the next pass counts their silence from then (cluster.evict_unresponsive_nodes)
    silent_since: Mapping[NodeAddress, float] = field(default_factory=dict)

    def describe(self) -> str:
        return f"{self.detail}: pass started at once"


@dataclass(frozen=True, slots=True)
class Watched:
    """A writer the watch asks between passes, and how the last pass saw it."""

    node: NodeAddress
    key: object
    writer: bool = True  # a reader is asked too with cluster.evict_unresponsive_nodes


def answer_budget_s(monitor: Endpoint) -> float:
    """How long the watch's question waits for its answer: the monitor's read timeout, the
    bound the operator set for a node's answer on an open connection. A node that answers
    within it is never silent to the watch, whatever unresponsive_after_ms says: cutting the
    question short would close a slow node's connection and count a silence that is only the
    checker's impatience (the pass would then connect and log in to it afresh, slower still)."""
    return monitor.read_timeout_ms / 1000


def watched_writers(
    results: Sequence[PassResult], policy: Policy, everyone: bool = False
) -> tuple[Watched, ...]:
    """The writers of the passes that decided, with the state their probe read; a writer the
    pass did not hear is not asked (the pass already knows it failed). A pass that left no
    writer (a view change, a GR brownout held) has every node that answered asked instead:
    the first that may write again starts the pass that routes to it. `everyone`: every node
    that answered is asked (cluster.evict_unresponsive_nodes: a frozen reader stalls the
    cluster's writes as a frozen writer does)."""
    found: dict[NodeAddress, Watched] = {}
    for result in results:
        if result.decision is None or result.decision.blind:
            continue
        writers = () if everyone else result.routed_writers
        asked = writers or tuple(result.decision.roster.addresses)
        for node in asked:
            probe = result.probes.get(node)
            if probe is not None and probe.answered:
                writer = node in result.routed_writers
                found[node] = Watched(node, policy.watch_key(probe.facts), writer)
    return tuple(found[n] for n in sorted(found))


def rechecks(
    results: Sequence[PassResult], heard_before: Mapping[str, frozenset[NodeAddress]]
) -> tuple[NodeAddress, ...]:
    """Nodes whose probe failed in these passes and that the pass before heard: a new failure,
    asked again at once. A node that stays down is not asked again and again: it waits for the
    cadence, or for its hysteresis (`due`)."""
    found: set[NodeAddress] = set()
    for result in results:
        if result.decision is None or result.decision.blind:
            continue
        before = heard_before.get(result.cluster, frozenset())
        for node, probe in result.probes.items():
            if not probe.answered and node in before:
                found.add(node)
    return tuple(sorted(found))


def due(results: Sequence[PassResult]) -> dict[NodeAddress, float]:
    """When one more probe can move a node its hysteresis holds (monotonic): the pass then."""
    found: dict[NodeAddress, float] = {}
    for result in results:
        if result.decision is None or result.decision.blind:
            continue
        for node, at in result.decision.due.items():
            found[node] = min(at, found.get(node, at))
    return found


def heard(results: Sequence[PassResult]) -> dict[str, frozenset[NodeAddress]]:
    return {r.cluster: frozenset(n for n, p in r.probes.items() if p.answered) for r in results}


def changed(
    watched: Sequence[Watched],
    answers: Mapping[NodeAddress, ProbeResult],
    policy: Policy,
    now: float = 0.0,
) -> Trigger | None:
    """The first writer whose answer differs from what the last pass read (pure; `now`: the
    monotonic time the answers were taken, from which an unanswered question's time is told)."""
    silent: list[NodeAddress] = []
    moved: list[NodeAddress] = []
    readers = {item.node for item in watched if not item.writer}
    for item in watched:
        answer = answers.get(item.node)
        if answer is None or not answer.answered:
            silent.append(item.node)
        elif policy.watch_key(answer.facts) != item.key:
            moved.append(item.node)
    if moved:
        names = ", ".join(map(str, moved))
        return Trigger(
            Cause.CHANGED, tuple(moved), f"watch: {_role(moved, readers)} {names} changed state"
        )
    if silent:
        why = "; ".join(f"{n}: {answers[n].error if n in answers else 'not asked'}" for n in silent)
        since = {
            n: now - answers[n].elapsed_ms / 1000
            for n in silent
            if n in answers and answers[n].how_failed is ProbeFailure.SILENT
        }
        detail = f"watch: {_role(silent, readers)} did not answer ({why})"
        return Trigger(Cause.UNANSWERED, tuple(silent), detail, since)
    return None


def _role(nodes: Sequence[NodeAddress], readers: set[NodeAddress]) -> str:
    return "writer" if not set(nodes) & readers else "node"


class BetweenPasses:
    """The daemon's wait for its next pass, cut short by what the watch sees."""

    def __init__(
        self,
        prober: Prober,
        policy: Policy,
        *,
        question: ProbeFn | None,
        watch_interval_ms: int,
        answer_budget_s: float,
        hub: WatchHub,
        monotonic: Callable[[], float] = time.monotonic,
        everyone: bool = False,
    ) -> None:
        """`everyone`: every node is asked the watch's question, not only the writers."""
        self.hub = hub
        self.everyone = everyone
        self.prober = prober
        self.policy = policy
        self.question = question
        self.watch_s = watch_interval_ms / 1000
        self.answer_budget_s = answer_budget_s
        self.monotonic = monotonic
        self._watched: tuple[Watched, ...] = ()
        self._recheck: tuple[NodeAddress, ...] = ()
        self._due: dict[NodeAddress, float] = {}
        self._heard: dict[str, frozenset[NodeAddress]] = {}
        self.questions = 0  # writer questions asked (bench: the watch's cost)
        self._current: Watcher | None = None  # the wait under way's, for wake()

    def observe(self, results: Sequence[PassResult]) -> None:
        """What the passes just run saw: the writers to ask, the nodes to probe again."""
        self._recheck = rechecks(results, self._heard)
        self._due = due(results)
        self._heard = {**self._heard, **heard(results)}
        self._watched = watched_writers(results, self.policy, self.everyone)

    def wake(self) -> None:
        """End the wait under way at once (its loop's stop was just set): without this a
        wait notices its stop only after its nap."""
        current = self._current
        if current is not None:
            current.heard.set()

    def wait(self, until: float, stop: threading.Event, nap_s: float = MAX_NAP_S) -> Trigger | None:
        """Block until `until` (monotonic), a stop request, or a reason to pass at once. The
        hub watches the connections and asks the writers meanwhile; they are taken back before
        this returns. `stop` is looked at every `nap_s`, and at once after wake()."""
        if self._recheck:
            nodes, self._recheck = self._recheck, ()
            names = ", ".join(map(str, nodes))
            return Trigger(Cause.RECHECK, nodes, f"probe of {names} failed")
        recheck_at = min(self._due.values(), default=math.inf)
        watched = self._watched
        watcher = Watcher(
            self.prober,
            writers=tuple(w.node for w in watched),
            question=self.question,
            every_s=self.watch_s,
            answer_budget_s=self.answer_budget_s,
            judge=lambda answers: changed(watched, answers, self.policy, self.monotonic()),
        )
        self.hub.watch(watcher)
        # set before `stop` is looked at: a stop set after the look wakes this watcher
        self._current = watcher
        try:
            while not stop.is_set():
                now = self.monotonic()
                if now >= until:
                    return None
                if now >= recheck_at:
                    nodes = tuple(sorted(n for n, at in self._due.items() if at <= now))
                    self._due = {}
                    names = ", ".join(map(str, nodes))
                    return Trigger(Cause.RECHECK, nodes, f"{names}: its hysteresis is spent")
                if watcher.heard.wait(min(min(until, recheck_at) - now, nap_s)):
                    break
        finally:
            self._current = None
            self.hub.release(watcher)
            self.questions += watcher.asked
        if watcher.failed is not None:
            raise watcher.failed  # said by the loop: the watch failed, the cadence goes on
        if watcher.closed:
            names = ", ".join(map(str, watcher.closed))
            detail = f"probe connection to {names} closed by the server"
            return Trigger(Cause.CLOSED, watcher.closed, detail)
        found = watcher.found
        return found if isinstance(found, Trigger) else None
