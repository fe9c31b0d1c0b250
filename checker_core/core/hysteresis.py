"""Hysteresis (rule S4): a node changes side only after enough probes in a row agree, over
enough time.

retry_down / retry_up count the probes in a row needed before acting; 0 and 1 both mean
"act on the first one". They count in time as well: N probes must span N - 1 intervals (less
half an interval, the scheduler's jitter), so a pass that asks again sooner (the daemon's recheck,
its watch) confirms a failure sooner but never spends the hysteresis faster. Hard evidence
(non-Primary, maintenance, explicit rejection) acts at once.

Times are the monotonic clock's seconds; None where it is not known (a state file written before
a reboot, or by an older version): then the count alone decides, as it did before.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, replace

from checker_core.core.model import NodeAddress
from checker_core.core.verdict import Verdict


@dataclass(frozen=True, slots=True)
class NodeMemory:
    """What a pass remembers of a node for the next one (kept in the state file)."""

    routable: bool
    bad_streak: int = 0
    good_streak: int = 0
    lagging: bool = False
    drain_since: float | None = None
    queue_samples: tuple[tuple[float, int], ...] = field(default=())
    bad_since: float | None = None  # the first bad probe of the streak
    good_since: float | None = None  # the first good probe of the streak
    # who answered at this address when it last answered (Galera: its gcomm uuid, a new one per
    # process; GR: its server_uuid): a node is who it is, not where it is
    identity: str | None = None
    # when the first question of the node's present silence (no answer in time) was asked: how
    # long a member has not answered, for cluster.evict_unresponsive_nodes
    silent_since: float | None = None
    # the node's probes in a row that got no answer (silent, or unheard: cut short by the
    # pass's deadline), and how long their questions were out in all (ms): a duration, not a
    # time, so it outlives a reboot. It reaching the whole timeout is the node's silence (S12).
    unanswered_probes: int = 0
    unanswered_ms: float = 0.0

    def without_times(self) -> NodeMemory:
        """The counters alone, for times of another clock (before a reboot, a wall clock)."""
        return replace(
            self,
            drain_since=None,
            queue_samples=(),
            bad_since=None,
            good_since=None,
            silent_since=None,
        )

    def to_json(self) -> dict[str, object]:
        return {
            "routable": self.routable,
            "bad_streak": self.bad_streak,
            "good_streak": self.good_streak,
            "lagging": self.lagging,
            "drain_since": self.drain_since,
            "queue_samples": [list(s) for s in self.queue_samples],
            "bad_since": self.bad_since,
            "good_since": self.good_since,
            "identity": self.identity,
            "silent_since": self.silent_since,
            "unanswered_probes": self.unanswered_probes,
            "unanswered_ms": self.unanswered_ms,
        }

    @classmethod
    def from_json(cls, data: dict[str, object]) -> NodeMemory:
        samples = data.get("queue_samples") or []
        assert isinstance(samples, list)
        drain_since = data.get("drain_since")
        bad_since, good_since = data.get("bad_since"), data.get("good_since")
        silent_since = data.get("silent_since")
        return cls(
            routable=bool(data.get("routable", False)),
            bad_streak=int(str(data.get("bad_streak", 0))),
            good_streak=int(str(data.get("good_streak", 0))),
            lagging=bool(data.get("lagging", False)),
            drain_since=None if drain_since is None else float(str(drain_since)),
            queue_samples=tuple((float(t), int(q)) for t, q in samples),
            bad_since=None if bad_since is None else float(str(bad_since)),
            good_since=None if good_since is None else float(str(good_since)),
            identity=None if data.get("identity") is None else str(data.get("identity")),
            silent_since=None if silent_since is None else float(str(silent_since)),
            # absent from a state file written before they were kept: no silence counted
            unanswered_probes=int(str(data.get("unanswered_probes", 0))),
            unanswered_ms=float(str(data.get("unanswered_ms", 0.0))),
        )


def with_silence(
    memory: Mapping[NodeAddress, NodeMemory],
    since: Mapping[NodeAddress, float],
    silent: Collection[NodeAddress],
    waited_ms: float = 0.0,
) -> Mapping[NodeAddress, NodeMemory]:
    """The memory with each remembered node of `silent` (not heard in this pass: silent, or
    unheard) silent since `since` says (a question the daemon's watch asked it between passes,
    left unanswered for `waited_ms`, its whole read timeout) when that is earlier than the
    memory's own count, and that question among its unanswered ones. A node that answered
    since is not touched."""
    merged = dict(memory)
    for node, asked in since.items():
        kept = memory.get(node)
        if node not in silent or kept is None:
            continue
        earlier = kept.silent_since is not None and kept.silent_since <= asked
        merged[node] = replace(
            kept,
            silent_since=kept.silent_since if earlier else asked,
            unanswered_probes=kept.unanswered_probes + (1 if waited_ms > 0 else 0),
            unanswered_ms=kept.unanswered_ms + waited_ms,
        )
    return merged


def lagging(queue: int | None, limit: int, was_lagging: bool) -> bool:
    """Over `limit` takes a node out of reading; it comes back once under half of it (G7, R6).
    A limit of 0 means no limit."""
    if limit <= 0 or queue is None:
        return False
    return queue > limit or (was_lagging and queue * 2 >= limit)


def span_needed(retry: int, interval_s: float) -> float:
    """The time `retry` probes in a row must span: N - 1 intervals, less half of one."""
    if retry <= 1:
        return 0.0
    return max(0.0, (retry - 1) * interval_s - interval_s / 2)


@dataclass(frozen=True, slots=True)
class _Streak:
    """How many passes in a row a node has said the same, since when, and how many it needs."""

    count: int
    since: float | None
    needed: int
    span_s: float  # the time it must span

    def spent(self, now: float) -> float:
        return 0.0 if self.since is None else max(0.0, now - self.since)

    def done(self, now: float) -> bool:
        return self.count >= self.needed and (self.since is None or self.spent(now) >= self.span_s)

    def progress(self, kind: str, goal: str, now: float) -> str:
        if self.count < self.needed:
            return f"{self.count} of {self.needed} {kind} probes before {goal}"
        return (
            f"{self.count} of {self.needed} {kind} probes, {self.spent(now):.1f} s of the "
            f"{self.span_s:.1f} s they must span before {goal}"
        )


def _streak(count: int, since: float | None, retry: int, interval_s: float) -> _Streak:
    return _Streak(count, since, max(1, retry), span_needed(retry, interval_s))


def settle(
    raw: Verdict,
    previous: NodeMemory | None,
    routed_now: bool,
    retry_up: int,
    retry_down: int,
    *,
    now: float = 0.0,
    interval_s: float = 0.0,
) -> tuple[Verdict, NodeMemory]:
    """The verdict to act on, and the memory to keep, given the raw verdict of this probe.

    Without memory (first pass, lost state file) the node's side is where ProxySQL has it now.
    `interval_s` 0 counts probes only.
    """
    before = previous if previous is not None else NodeMemory(routable=routed_now)
    # counting past the largest threshold tells nothing new, and a steady state then leaves
    # the state file unchanged (no write per pass)
    cap = max(1, retry_up, retry_down)
    good = raw.state.routable
    if good:
        since = before.good_since if before.good_streak > 0 else now
        up = _streak(min(cap, before.good_streak + 1), since, retry_up, interval_s)
        memory = replace(
            before, good_streak=up.count, good_since=up.since, bad_streak=0, bad_since=None
        )
        if before.routable or up.done(now):
            return raw, replace(memory, routable=True)
        return raw.recovering(f"{raw.reason} ({up.progress('good', 'routing', now)})"), memory
    since = before.bad_since if before.bad_streak > 0 else now
    down = _streak(min(cap, before.bad_streak + 1), since, retry_down, interval_s)
    memory = replace(
        before, bad_streak=down.count, bad_since=down.since, good_streak=0, good_since=None
    )
    if not before.routable or raw.hard or down.done(now):
        return raw, replace(memory, routable=False)
    return raw.held(f"{raw.reason} ({down.progress('bad', 'demotion', now)})"), memory


def settles_at(
    memory: NodeMemory, retry_up: int, retry_down: int, interval_s: float
) -> float | None:
    """When one more probe that agrees can move a node held by its hysteresis (suspect, or
    recovering), on the clock of its streak's times; None when it is not held, when it needs
    more probes than one (the cadence brings them), or when its streak's time is unknown."""
    if memory.routable and memory.bad_streak > 0:
        streak, since, retry = memory.bad_streak, memory.bad_since, retry_down
    elif not memory.routable and memory.good_streak > 0:
        streak, since, retry = memory.good_streak, memory.good_since, retry_up
    else:
        return None
    if since is None or streak + 1 < max(1, retry):
        return None
    return since + span_needed(retry, interval_s)
