"""What a probe means for a node: a state with a reason. A verdict never acts by itself."""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace

from checker_core.core.model import NodeAddress


class State(enum.Enum):
    HEALTHY = "healthy"  # may read; may write unless read_only vetoes it
    LAGGING = "lagging"  # too far behind to read from; a Galera writer may stay (flow control)
    LAST_RESORT = "last_resort"  # a donor still serving: writer only when nobody else can be
    BROWNOUT = "brownout"  # a new GR primary still super_read_only while it drains its queue
    SUSPECT = "suspect"  # bad probe tolerated by retry_down: keeps its place, gains nothing
    UNSEEN = "unseen"  # silent in a pass where most nodes were: keeps its place, not counted
    RECOVERING = "recovering"  # good probe not yet confirmed by retry_up: stays out
    OFFLINE = "offline"
    MAINTENANCE = "maintenance"
    DOWN = "down"

    @property
    def routable(self) -> bool:
        """Whether the node may carry traffic in some role (before hysteresis)."""
        return self in _ROUTABLE

    @property
    def keeps_place(self) -> bool:
        """Held where it is: it keeps whatever role it has, and gains nothing new."""
        return self in (State.SUSPECT, State.UNSEEN)


_ROUTABLE = frozenset(
    {State.HEALTHY, State.LAGGING, State.LAST_RESORT, State.BROWNOUT, State.SUSPECT, State.UNSEEN}
)


@dataclass(frozen=True, slots=True)
class Verdict:
    """A node's state, why, and what it still allows."""

    node: NodeAddress
    state: State
    reason: str
    writable: bool = False  # no read_only / super_read_only veto
    hard: bool = False  # hard evidence: acts at once whatever retry_down says
    drain: bool = False  # if it was a writer, let its transactions finish (OFFLINE_SOFT) first
    segment: int | None = None
    queue: int | None = None  # receive / applier queue, when known
    role: str | None = (
        None  # what the cluster itself calls the node (GR: primary, secondary, member)
    )

    def describe(self) -> str:
        return f"{self.node}: {self.state.value}: {self.reason}"

    def held(self, reason: str) -> Verdict:
        return replace(self, state=State.SUSPECT, reason=reason, hard=False)

    def unseen(self, reason: str) -> Verdict:
        return replace(self, state=State.UNSEEN, reason=reason, hard=False)

    def recovering(self, reason: str) -> Verdict:
        return replace(self, state=State.RECOVERING, reason=reason, hard=False)
