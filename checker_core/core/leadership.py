"""A checker's role among the checkers of a ProxySQL Cluster, as every pass reports it. Pure.

Kept apart from peers.py (the rule that chooses the acting checker) so that a pass on a proxy
without peers, the common case and every scheduler run, does not build the rule's records; what
a checker remembers of its peers (PeerMemory) is here, as the role's memory.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field

from checker_core.core.model import BadInput, NodeAddress

# a proxy as proxysql_servers names it: host and port, the same record as a backend's address
ProxyAddress = NodeAddress


class Role(enum.Enum):
    """What this checker does with its plan."""

    ALONE = ("alone", "no ProxySQL Cluster peers (or proxysql.cluster = off): acts")
    ACTING = ("acting", "the acting checker of a ProxySQL Cluster: writes and LOADs")
    STANDBY = ("standby", "another proxy's checker acts: probes, judges and reports only")

    def __init__(self, label: str, meaning: str) -> None:
        self.label = label
        self.meaning = meaning

    @property
    def acts(self) -> bool:
        return self is not Role.STANDBY


@dataclass(frozen=True, slots=True)
class PeerMemory:
    """What a checker remembers of the peers between passes (state file)."""

    alive_since: Mapping[ProxyAddress, float] = field(default_factory=dict)
    acting: ProxyAddress | None = None
    seen: bool = False  # False until the first pass: then Uptime_s is all there is to go on
    minority: bool = False  # the last pass saw no majority of the peers alive (cut off?)
    # alive_since of the peers last seen dead: a comeback with a later start is a restart
    gone: Mapping[ProxyAddress, float] = field(default_factory=dict)
    checked_at: float | None = None  # the local proxy's clock at the last pass


@dataclass(frozen=True, slots=True)
class Leadership:
    """The role of this pass's checker, and why."""

    role: Role
    acting: ProxyAddress | None
    alive: tuple[ProxyAddress, ...]
    reason: str  # for the pass line
    split: str | None  # an alarm: the local rows differ from the acting proxy's for too long
    memory: PeerMemory | None  # what to remember of the peers; None without peers
    # why this pass must not LOAD though it acts: a LOAD in the same second as the last one
    # anywhere in the cluster carries no newer epoch, and the peers would never pull it
    load_wait: str | None = None
    # the cluster's newest mysql_servers epoch is this many seconds ahead of the local proxy's
    # clock (a peer's clock ahead, this host's clock stepped back): no LOAD here can carry a
    # newer epoch until the clock gets there, which is no "same second" wait but a fault
    clock_skew_s: int = 0

    @property
    def acts(self) -> bool:
        return self.role.acts


class NotAPeer(BadInput):
    """proxysql.cluster_address names no row of runtime_proxysql_servers."""


ALONE = Leadership(Role.ALONE, None, (), "", None, None)
