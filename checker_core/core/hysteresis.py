"""Hysteresis (rule S4): a node changes side only after enough probes in a row agree.

retry_down / retry_up count the probes in a row needed before acting; 0 and 1 both mean
"act on the first one". Hard evidence (non-Primary, maintenance, explicit rejection) acts at once.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

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

    def to_json(self) -> dict[str, object]:
        return {
            "routable": self.routable,
            "bad_streak": self.bad_streak,
            "good_streak": self.good_streak,
            "lagging": self.lagging,
            "drain_since": self.drain_since,
            "queue_samples": [list(s) for s in self.queue_samples],
        }

    @classmethod
    def from_json(cls, data: dict[str, object]) -> NodeMemory:
        samples = data.get("queue_samples") or []
        assert isinstance(samples, list)
        drain_since = data.get("drain_since")
        return cls(
            routable=bool(data.get("routable", False)),
            bad_streak=int(str(data.get("bad_streak", 0))),
            good_streak=int(str(data.get("good_streak", 0))),
            lagging=bool(data.get("lagging", False)),
            drain_since=None if drain_since is None else float(str(drain_since)),
            queue_samples=tuple((float(t), int(q)) for t, q in samples),
        )


def lagging(queue: int | None, limit: int, was_lagging: bool) -> bool:
    """Over `limit` takes a node out of reading; it comes back once under half of it (G7, R6).
    A limit of 0 means no limit."""
    if limit <= 0 or queue is None:
        return False
    return queue > limit or (was_lagging and queue * 2 >= limit)


def settle(
    raw: Verdict,
    previous: NodeMemory | None,
    routed_now: bool,
    retry_up: int,
    retry_down: int,
) -> tuple[Verdict, NodeMemory]:
    """The verdict to act on, and the memory to keep, given the raw verdict of this probe.

    Without memory (first pass, lost state file) the node's side is where ProxySQL has it now.
    """
    before = previous if previous is not None else NodeMemory(routable=routed_now)
    # counting past the largest threshold tells nothing new, and a steady state then leaves
    # the state file unchanged (no write per pass)
    cap = max(1, retry_up, retry_down)
    good = raw.state.routable
    if good:
        streak = min(cap, before.good_streak + 1)
        memory = replace(before, good_streak=streak, bad_streak=0)
        if before.routable or streak >= max(1, retry_up):
            return raw, replace(memory, routable=True)
        needed = max(1, retry_up)
        return raw.recovering(
            f"{raw.reason} ({streak} of {needed} good probes before routing)"
        ), memory
    streak = min(cap, before.bad_streak + 1)
    memory = replace(before, bad_streak=streak, good_streak=0)
    if not before.routable or raw.hard or streak >= max(1, retry_down):
        return raw, replace(memory, routable=False)
    needed = max(1, retry_down)
    return raw.held(f"{raw.reason} ({streak} of {needed} bad probes before demotion)"), memory
