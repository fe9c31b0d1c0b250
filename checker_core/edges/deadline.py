"""A pass's deadline, kept by the pass itself: a value made once per pass and handed down.

Nothing is ever raised into running code from outside (no signal, no exception set on a
thread): a pass's steps ask it between them, and every wait and every I/O takes its timeout
from the time it has left. Since every socket the checker opens has a timeout, a pass ends by
itself in bounded time even when a read blocks."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field


class PassTimeout(Exception):
    """The pass reached max_runtime_ms and was cut short; nothing was loaded after that. Raised
    by the pass's own code at a step boundary or by an I/O the deadline bounded, in the pass's
    thread, and caught by the runner."""


@dataclass(frozen=True, slots=True)
class Deadline:
    """When a pass must be done, on the monotonic clock `clock`. `started`: when the pass
    began; `budget_ms`: run.max_runtime_ms, which the messages name."""

    started: float
    at: float
    budget_ms: int | None = None
    clock: Callable[[], float] = field(default=time.monotonic, compare=False, repr=False)

    @classmethod
    def of_pass(
        cls, started: float, budget_ms: int, clock: Callable[[], float] = time.monotonic
    ) -> Deadline:
        return cls(started, started + budget_ms / 1000, budget_ms, clock)

    def left(self) -> float:
        """Seconds left, never below zero."""
        return max(0.0, self.at - self.clock())

    def expired(self) -> bool:
        return self.clock() >= self.at

    def bound(self, timeout_s: float) -> float:
        """`timeout_s`, or what is left when that is less."""
        return min(timeout_s, self.left())

    def spent_ms(self) -> float:
        return (self.clock() - self.started) * 1000

    def cut_short(self, why: str = "") -> PassTimeout:
        """What the pass says when it stops for its deadline; `why`: what it had left to do."""
        limit = f" {self.budget_ms}" if self.budget_ms is not None else ""
        said = f"pass cut short after {self.spent_ms():.0f} ms (run.max_runtime_ms{limit})"
        return PassTimeout(f"{said}: {why}" if why else said)

    def check(self) -> None:
        """A step boundary: raises PassTimeout (in this thread, here) once the time is up."""
        if self.expired():
            raise self.cut_short()
