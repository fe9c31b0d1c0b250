"""What one pass has done so far, from which every outcome of the pass is made."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from checker_core.passes.result import Outcome, PassInputs, PassResult

if TYPE_CHECKING:
    from checker_core.core.decide import Decision
    from checker_core.core.hysteresis import NodeMemory
    from checker_core.core.leadership import Leadership
    from checker_core.core.model import NodeAddress
    from checker_core.core.probes import ProbeResult
    from checker_core.core.roster import LiveLayout
    from checker_core.edges.memory import StateStore
    from checker_core.edges.proxysql import ApplyResult, Statement
    from checker_core.passes.plugin import Advice


class PassProgress:
    """What one pass has done so far. Every outcome is made from it, so a pass cut short after
    its LOAD still says what ProxySQL now has."""

    def __init__(self, cluster: str, pass_id: str, started: float) -> None:
        self.cluster = cluster
        self.pass_id = pass_id
        self.started = started
        self.decision: Decision | None = None
        self.layout: LiveLayout | None = None
        self.probes: Mapping[NodeAddress, ProbeResult] = {}
        self.leaving_in_use: Mapping[tuple[int, NodeAddress], int] = {}
        self.statements: tuple[Statement, ...] = ()
        self.leadership: Leadership | None = None
        self.applied: ApplyResult | None = None
        self.warnings: tuple[str, ...] = ()
        self.loaded = False  # set the moment LOAD MYSQL SERVERS TO RUNTIME returned
        self.remembered = False
        self.state_failures = 0
        self.evictions = 0
        self.node_actions: tuple[str, ...] = ()
        self.advice: tuple[Advice, ...] = ()
        self.inputs: PassInputs | None = None
        self.assumed: tuple[str, ...] = ()

    def decided(
        self,
        decision: Decision,
        layout: LiveLayout,
        probes: Mapping[NodeAddress, ProbeResult],
        leaving_in_use: Mapping[tuple[int, NodeAddress], int],
    ) -> None:
        self.decision, self.layout, self.probes = decision, layout, probes
        self.leaving_in_use = leaving_in_use

    def mark_loaded(self) -> None:
        self.loaded = True

    def warn(self, text: str) -> None:
        self.warnings = (*self.warnings, text)

    def remember(
        self, store: StateStore, cluster: str, memory: Mapping[NodeAddress, NodeMemory]
    ) -> None:
        """The counters saved; a state dir that fails (full, unwritable) costs a warning and
        a retry next pass, never the pass: what it did to ProxySQL stands."""
        if self.remembered:
            return
        self.remembered = True
        self.state_failed(store.save(cluster, memory))

    def state_failed(self, failure: str | None) -> None:
        if failure:
            self.state_failures += 1
            self.warn(failure)

    def result(self, outcome: Outcome, message: str, now: float) -> PassResult:
        return PassResult(
            self.cluster,
            self.pass_id,
            outcome,
            (now - self.started) * 1000,
            message,
            decision=self.decision,
            layout=self.layout,
            probes=self.probes,
            statements=self.statements,
            applied=self.applied,
            warnings=self.warnings,
            leadership=self.leadership,
            leaving_in_use=self.leaving_in_use,
            state_failures=self.state_failures,
            inputs=self.inputs,
            assumed=self.assumed,
            evictions=self.evictions,
            node_actions=self.node_actions,
            advice=self.advice,
        )
