"""What a pass heard from its nodes: each probe's result, how a failed one failed, and whether
the checker could see at all. Pure.

A probe that got a definite answer (facts, a refused connection, an error from the server) is
evidence about the node. Silence (a connect or read timeout) is evidence about the node only
when the node had its whole configured timeout (`whole_timeout`: a probe the pass's deadline
cut short first is unheard, not silent; but unheard time adds up over a node's probes in a row,
and once it reaches the node's whole timeout the node has had it: `promote_unheard`), and only
when the checker could hear the others: when
most nodes are silent in the same pass, the silence says more about the checker (starved of
CPU, a cold start, its own network) than about the cluster, and acting on it would take healthy
nodes out.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from checker_core.core.hysteresis import NodeMemory
from checker_core.core.model import NodeAddress
from checker_core.core.verdict import State, Verdict

if TYPE_CHECKING:
    import pymysql

# a checker's probe: the questions it asks one node on an open connection, and what it makes of
# the answers (a record the checker's policy reads)
ProbeFn = Callable[["pymysql.connections.Connection[Any]"], object]


class ProbeFailure(enum.Enum):
    """How a probe failed. ERROR and REFUSED are answers: the node was heard. SILENT is not."""

    SILENT = ("silent", "no answer in time: soft, subject to retry_down and the blind-pass rule")
    UNHEARD = (
        "unheard",
        "the checker's own lateness (short of CPU: its probe started late, or the answer waited "
        "unread; or the pass's deadline came before the node had its whole configured timeout): "
        "says nothing of the node on its own; the time a cut short question was out adds up "
        "over the node's probes in a row, and reaching its whole timeout is its silence",
    )
    ERROR = ("error", "the server answered with an error (access denied, too many connections)")
    REFUSED = ("refused", "nothing listens on the port: the server is not running")

    def __init__(self, label: str, meaning: str) -> None:
        self.label = label
        self.meaning = meaning


@dataclass(frozen=True, slots=True)
class ProbeResult:
    """One node's probe: the facts it read, or why it read nothing. Failure is data."""

    node: NodeAddress
    facts: object | None
    error: str | None
    elapsed_ms: float
    failure: ProbeFailure | None = None  # None with an error: ERROR
    # how long the node had this probe's question out with no answer, when that is not
    # elapsed_ms: an unheard probe's question was out for part of the wait (none of it when
    # the checker's own lateness is why it was not heard)
    unanswered_ms: float | None = None

    @property
    def answered(self) -> bool:
        return self.error is None and self.facts is not None

    @property
    def how_failed(self) -> ProbeFailure | None:
        if self.answered:
            return None
        return self.failure or ProbeFailure.ERROR


@dataclass(frozen=True, slots=True)
class ProbeTimeouts:
    """The monitor's configured timeouts (seconds): what a node is given to answer."""

    connect_s: float
    read_s: float

    @property
    def whole_ms(self) -> float:
        """The node's whole timeout: the longer of the two, so that a node answering within
        either is never called silent early."""
        return max(self.connect_s, self.read_s) * 1000

    @property
    def whole_key(self) -> str:
        if self.read_s >= self.connect_s:
            return "monitor.read_timeout_ms"
        return "monitor.connect_timeout_ms"


def question_out_s(
    ended: float, *, connecting_since: float | None = None, asked_at: float | None = None
) -> float:
    """How long a probe that got no answer by `ended` had its question out to the node (the
    times as `whole_timeout` takes them): its read since it was asked, else its connect."""
    since = asked_at if asked_at is not None else connecting_since
    return 0.0 if since is None else max(0.0, ended - since)


def whole_timeout(
    timeouts: ProbeTimeouts,
    ended: float,
    *,
    connecting_since: float | None = None,
    asked_at: float | None = None,
) -> str | None:
    """Whether a probe that got no answer by `ended` (when the pass stopped waiting for it) gave
    the node its whole configured timeout: None when it did (its silence is the node's), else
    why it is unheard. `asked_at`: when its question was written on an open connection (the
    last one, when a probe asks more than once); `connecting_since`: when its connect began
    (connect and login), for a probe that had no connection yet. Times on one monotonic clock."""
    if asked_at is not None:
        limit, key = timeouts.read_s, "monitor.read_timeout_ms"
    elif connecting_since is not None:
        limit, key = timeouts.connect_s, "monitor.connect_timeout_ms"
    else:
        return "not heard: its probe had not begun by the pass's deadline"
    had = question_out_s(ended, connecting_since=connecting_since, asked_at=asked_at)
    if had >= limit:
        return None
    return (
        f"not heard: cut short by the pass's deadline after {max(0.0, had) * 1000:.0f} ms of "
        f"{key} {limit * 1000:.0f}"
    )


STILL_UNANSWERED = frozenset({ProbeFailure.SILENT, ProbeFailure.UNHEARD})


def unanswered_after(
    kept: NodeMemory | None, probe: ProbeResult | None, whole_ms: float
) -> tuple[int, float]:
    """The node's unanswered probes in a row and the time their questions were out (ms), once
    this probe is counted. Silent and unheard probes add their question's time; an answer ends
    the count, and so does a refused connection or a server's error: those are the node's word,
    counted against it as the failures they are (retry_down), not as silence. A probe that
    adds nothing (the checker's own lateness; not probed) leaves the count as it was. Past the
    whole timeout the count stops: more tells nothing new, and a steady state file stays so."""
    count, total = (kept.unanswered_probes, kept.unanswered_ms) if kept else (0, 0.0)
    if probe is None:
        return count, total
    if probe.how_failed not in STILL_UNANSWERED:
        return 0, 0.0
    added = probe.elapsed_ms if probe.unanswered_ms is None else probe.unanswered_ms
    if added <= 0 or (count > 0 and total >= whole_ms):
        return count, total
    return count + 1, total + added


def promote_unheard(
    probes: Mapping[NodeAddress, ProbeResult],
    memory: Mapping[NodeAddress, NodeMemory],
    timeouts: ProbeTimeouts,
) -> dict[NodeAddress, ProbeResult]:
    """The probes, each unheard one that brings its node's unanswered time to its whole
    timeout made silent (S12): every pass's deadline may come before a node's whole timeout,
    and a node that never answers would then keep its place for ever. Its questions, over its
    probes in a row, have had that time: the silence is the node's."""
    whole_ms = timeouts.whole_ms
    found = dict(probes)
    for node, probe in probes.items():
        if probe.how_failed is not ProbeFailure.UNHEARD:
            continue
        kept = memory.get(node)
        count, total = unanswered_after(kept, probe, whole_ms)
        if total < whole_ms:
            continue
        whole = f"its whole timeout: {timeouts.whole_key} {whole_ms:.0f}"
        if kept is not None and kept.unanswered_probes == count:  # counted no further
            why = (
                f"still no answer since {count} probe(s) in a row, {total:.0f} ms in all, "
                f"had {whole}; this one {probe.error}"
            )
        else:
            why = (
                f"no answer over {count} probe(s) in a row, {total:.0f} ms in all ({whole}); "
                f"this one {probe.error}"
            )
        found[node] = replace(probe, error=why, failure=ProbeFailure.SILENT)
    return found


def unreachable(node: NodeAddress, probe: ProbeResult | None) -> Verdict:
    """G1 / R2 for a probe that read nothing: down after retry_down bad probes, whatever the
    kind of failure. A refused connection is definite, but a restarting server refuses for a
    moment too, and retry_down is the tolerance the operator chose for exactly that; the kind
    matters to the pass's sight (silence may be the checker's own), not to this verdict."""
    if probe is None:
        return Verdict(node, State.DOWN, "not probed")
    return Verdict(node, State.DOWN, f"unreachable: {probe.error or 'no answer'}")


class Sight(enum.Enum):
    """How much of the cluster a pass could see."""

    CLEAR = ("clear", "most nodes answered: every verdict counts")
    PARTIAL = ("partial", "most nodes were silent: the silent ones keep their place, not counted")
    BLIND = ("blind", "no node answered: the pass changes nothing")

    def __init__(self, label: str, meaning: str) -> None:
        self.label = label
        self.meaning = meaning


@dataclass(frozen=True, slots=True)
class PassSight:
    """How much of the cluster a pass could see, and whose silence does not count."""

    sight: Sight
    silent: frozenset[NodeAddress]  # the nodes whose silence is not counted against them
    reason: str  # for the pass line; empty when the sight is clear


CLEAR = PassSight(Sight.CLEAR, frozenset(), "")


def sight_of(probes: Mapping[NodeAddress, ProbeResult], nodes: Iterable[NodeAddress]) -> PassSight:
    """BLIND when no roster node answered; PARTIAL when more than half were silent."""
    roster = tuple(nodes)
    results = [probes.get(n) for n in roster]
    answered = sum(1 for r in results if r is not None and r.answered)
    silent = frozenset(
        n
        for n, r in zip(roster, results, strict=True)
        if r is None or r.how_failed in (ProbeFailure.SILENT, ProbeFailure.UNHEARD)
    )
    # the checker's own lateness is never the node's: not counted, whatever the others did
    unheard = frozenset(
        n
        for n, r in zip(roster, results, strict=True)
        if r is not None and r.how_failed is ProbeFailure.UNHEARD
    )
    if not roster:
        return CLEAR
    waited = max((r.elapsed_ms for r in results if r is not None), default=0.0)
    if answered == 0:
        counts = _failure_counts(results)
        return PassSight(
            Sight.BLIND,
            frozenset(roster),
            f"blind: no node answered within {waited:.0f} ms ({counts}); layout kept",
        )
    if len(silent) * 2 > len(roster):
        return PassSight(
            Sight.PARTIAL,
            silent,
            f"partly blind: {len(silent)} of {len(roster)} nodes silent within {waited:.0f} ms; "
            "the silent keep their place",
        )
    if unheard:
        return PassSight(
            Sight.CLEAR,
            unheard,
            f"{len(unheard)} node(s) unheard for the checker's own lateness (short of CPU, or "
            "cut short by the pass's deadline); they keep their place",
        )
    return CLEAR


def _failure_counts(results: Iterable[ProbeResult | None]) -> str:
    counts: dict[str, int] = {}
    for result in results:
        label = "not probed" if result is None else (result.how_failed or ProbeFailure.ERROR).label
        counts[label] = counts.get(label, 0) + 1
    return ", ".join(f"{n} {label}" for label, n in sorted(counts.items()))
