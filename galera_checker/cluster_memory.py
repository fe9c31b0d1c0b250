"""What galera-checker's actions keep of one cluster between its passes."""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING

from checker_core.core.model import NodeAddress

if TYPE_CHECKING:
    from pathlib import Path

    from checker_core.passes.plugin import NodeStore
    from galera_checker.eviction import Eviction
    from galera_checker.node_calls import EarlyReads, Evicted, NodeCalls

LATENCY_SAMPLES = 6


class ClusterMemory:
    """What the actions keep of one cluster between its passes. Only that cluster's passes
    read or write it (one pass of a cluster at a time). A scheduler pass, a new process, starts
    with the latencies and the throttles the state dir kept (the throttles only save queries
    and lines: nothing decided depends on them)."""

    __slots__ = (
        "early",
        "finished",
        "job",
        "job_s",
        "known",
        "later",
        "lock",
        "measured_at",
        "samples",
        "throttles_read",
        "tried",
        "withheld",
    )

    def __init__(self) -> None:
        self.known: dict[NodeAddress, str] = {}  # the last gcomm uuid each node gave
        self.tried: dict[NodeAddress, float] = {}  # when a node was last looked for in the view
        self.withheld: dict[NodeAddress, float] = {}  # when its withheld eviction was last said
        # a scheduler process reads the last one's throttles once, and keeps them for the next
        self.throttles_read = False
        self.samples: deque[float] = deque(maxlen=LATENCY_SAMPLES)  # causal reads, ms
        self.measured_at: float | None = None  # monotonic
        # a daemon's eviction of a silent member under way off the pass, and those it finished
        # that no pass has reported yet (the job's thread appends, the cluster's pass takes)
        self.job: threading.Thread | None = None
        self.job_s = 0.0  # what the job's evictions may take, their deadlines put together
        self.finished: list[tuple[Eviction, Evicted]] = []
        self.lock = threading.Lock()
        # a scheduler pass's evictions left for after it, once its lock is released (finish)
        self.later: Later | None = None
        # a daemon's causal reads on the survivors of a member silent for less than
        # unresponsive_after_ms, started so that the proof is ready when the time is up
        self.early: EarlyReads | None = None

    def busy(self) -> bool:
        return self.job is not None and self.job.is_alive()

    def take_finished(self) -> list[tuple[Eviction, Evicted]]:
        with self.lock:
            done, self.finished = self.finished, []
        return done

    def normal_ms(self) -> float | None:
        return max(self.samples) if self.samples else None


Work = tuple["Eviction", float, str]


@dataclass(frozen=True, slots=True)
class Later:
    """A scheduler pass's evictions left for after it, with that pass's account and store."""

    calls: NodeCalls
    store: NodeStore
    lock_path: Path
    work: tuple[Work, ...]
