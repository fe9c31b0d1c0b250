"""How long a brownout will last (rule R5): the applier queue, its drain rate, the time left."""

from __future__ import annotations

from dataclasses import dataclass

from checker_core.core.hysteresis import NodeMemory
from checker_core.core.model import NodeAddress


@dataclass(frozen=True, slots=True)
class BrownoutReport:
    """A node slowed down but alive: its queue and how fast it applies."""

    node: NodeAddress
    queue: int
    rate_per_s: float | None  # transactions applied per second, from two samples or more
    seconds_left: float | None

    def describe(self) -> str:
        text = f"brownout on {self.node}: applier queue {self.queue}"
        if self.rate_per_s is None:
            return text + ", drain rate known from the next pass"
        if self.rate_per_s <= 0:
            return text + f", not draining ({self.rate_per_s:.0f}/s)"
        return text + f", draining {self.rate_per_s:.0f}/s, about {self.seconds_left:.1f} s left"


def brownout_report(node: NodeAddress, memory: NodeMemory) -> BrownoutReport | None:
    samples = memory.queue_samples
    if not samples:
        return None
    now, queue = samples[-1]
    if len(samples) < 2:
        return BrownoutReport(node, queue, None, None)
    then, before = samples[0]
    elapsed = now - then
    if elapsed <= 0:
        return BrownoutReport(node, queue, None, None)
    rate = (before - queue) / elapsed
    left = queue / rate if rate > 0 else None
    return BrownoutReport(node, queue, rate, left)
