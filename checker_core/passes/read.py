"""What a pass's first step reads, as one record the steps after it take."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from checker_core.core.decide import ClusterView
    from checker_core.core.hysteresis import NodeMemory
    from checker_core.core.model import ClusterRows, NodeAddress
    from checker_core.edges.backend import PendingProbes
    from checker_core.edges.proxysql import AdminClient


@dataclass(frozen=True, slots=True)
class PassRead:
    """What the pass's first step found: ProxySQL's rows of the cluster and what they mean, the
    remembered counters, and the probes begun while the rows were read."""

    admin: AdminClient
    rows: ClusterRows
    view: ClusterView
    memory: Mapping[NodeAddress, NodeMemory]
    pending: PendingProbes | None
    probe_deadline: float  # monotonic: every probe of the pass ends by then
