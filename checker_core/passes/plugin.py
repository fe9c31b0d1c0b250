"""What a checker plugs into the pass: its rules, its probe, its actions on the nodes and its
advice. A contract of records and protocols; no I/O."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from checker_core.core.decide import Decision, Policy
from checker_core.core.model import NodeAddress
from checker_core.core.probes import ProbeResult
from checker_core.core.schema import Checker
from checker_core.core.settings import ClusterSettings, Endpoint, Settings
from checker_core.exitcodes import Exit
from checker_core.passes.result import Advice

if TYPE_CHECKING:
    from pathlib import Path

    from checker_core.core.probes import ProbeFn


class NodeStore(Protocol):
    """What a checker's actions on the nodes keep in the state directory (the StateStore)."""

    def evicted(self, cluster: str) -> dict[str, str]: ...

    def record_evicted(self, cluster: str, uuids: Mapping[str, str]) -> str | None: ...

    def evict_lock_path(self, cluster: str) -> Path: ...

    def causal_latency(self, cluster: str) -> tuple[tuple[float, ...], float | None]: ...

    def record_causal_latency(
        self, cluster: str, samples: Collection[float], at: float
    ) -> str | None: ...

    def eviction_throttles(
        self, cluster: str
    ) -> tuple[dict[NodeAddress, float], dict[NodeAddress, float]]: ...

    def record_eviction_throttles(
        self,
        cluster: str,
        tried: Mapping[NodeAddress, float],
        withheld: Mapping[NodeAddress, float],
    ) -> str | None: ...


@dataclass(frozen=True, slots=True)
class AfterPass:
    """What a checker's actions on the nodes are given once a pass has decided (and applied)."""

    cluster: ClusterSettings
    decision: Decision
    probes: Mapping[NodeAddress, ProbeResult]
    node_admin: Endpoint | None
    store: NodeStore
    budget_s: float  # what is left of the pass's time
    acting: bool  # False: a dry run, a standby or a paused checker only says what it would do
    # a daemon's pass (the process lives on): a slow action goes on after the pass, on a
    # thread of its own, and is reported by the next pass; a one-shot pass leaves it to
    # NodeActions.finish, once its lock is released
    persistent: bool = False


# how a checker's line for an eviction it made begins: /status keeps the last such lines
EVICTED = "evicted "


@dataclass(frozen=True, slots=True)
class ActionsDone:
    """What a checker's node actions did after a pass, for its pass line."""

    said: tuple[str, ...] = ()  # what was done (or would be): the pass line says it
    failed: tuple[str, ...] = ()  # what could not be done: warnings too
    evictions: int = 0
    unresponsive: int = 0  # of the evictions, members evicted while silent (not refused)
    # members evicted that cannot come back by themselves: they need a restart
    stranded: tuple[NodeAddress, ...] = ()


@dataclass(frozen=True, slots=True)
class LaterActions:
    """What a one-shot process did on one cluster's nodes after its pass, the pass's lock
    released: said in a line of its own, after the pass line."""

    cluster: str
    done: ActionsDone
    duration_ms: float


class NodeActions(Protocol):
    """Actions a checker takes on the nodes themselves after a pass (Galera: evictions)."""

    def after_pass(self, after: AfterPass) -> ActionsDone: ...

    def finish(self) -> tuple[LaterActions, ...]:
        """In a one-shot process, once every pass is over and its lock released: the work its
        passes left for after them (none unless they did), each piece bounded by a deadline of
        its own, never a pass's; then the process ends."""
        ...


@dataclass(frozen=True, slots=True)
class AdviceInput:
    """What a checker's advisor reads: the cluster, the probes and ProxySQL's variables."""

    cluster: ClusterSettings
    probes: Mapping[NodeAddress, ProbeResult]
    proxy_variables: Mapping[str, str]  # runtime_global_variables the advisor asked for
    now: float  # monotonic


class Advisor(Protocol):
    """What a checker tells the operator from a pass's probes and ProxySQL's settings."""

    def proxy_variables(self, cluster: ClusterSettings) -> tuple[str, ...]:
        """The runtime_global_variables it needs for this cluster (none: nothing is asked)."""
        ...

    def advise(self, given: AdviceInput) -> tuple[Advice, ...]: ...


@dataclass(frozen=True, slots=True)
class SwitchoverRequest:
    """`switchover` as the operator typed it, for the checker's own move; the cluster is
    known, every other option is the checker's to refuse or to use."""

    settings: Settings
    cluster: ClusterSettings
    to: str | None  # HOST:PORT as typed
    source: str | None
    release: bool
    timeout_s: float | None
    running_transactions_s: int | None
    dry_run: bool
    say: Callable[[str], None]


@dataclass(frozen=True, slots=True)
class CheckerKind:
    """What makes a checker: its name, its rules and its probe."""

    checker: Checker
    policy: Policy
    probe: ProbeFn
    # the daemon's question to a writer between passes (a lighter probe); None: the probe
    watch: ProbeFn | None = None
    # makes one cluster's actions on its nodes: each runner has its own, so that what they
    # keep between passes (throttles, an eviction under way) is never another cluster's
    new_actions: Callable[[], NodeActions] | None = None
    advisor: Advisor | None = None
    # a planned move of the writer: the exit code once it is done or refused
    switchover: Callable[[SwitchoverRequest], Exit] | None = None
