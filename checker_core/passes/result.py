"""What one pass did: its mode, its outcome (with the exit code it carries) and its result, with
the questions asked of it afterwards (writers, readiness, brownouts); what its first step read;
and what a pass has done so far, from which every one of its outcomes is made. Records; no I/O."""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from checker_core.core.model import NodeAddress
from checker_core.core.probes import ProbeResult
from checker_core.core.roster import LiveLayout
from checker_core.exitcodes import Exit

if TYPE_CHECKING:
    from checker_core.core.brownout import BrownoutReport
    from checker_core.core.decide import ClusterView, Decision
    from checker_core.core.hysteresis import NodeMemory
    from checker_core.core.leadership import Leadership, Role
    from checker_core.core.settings import ClusterSettings
    from checker_core.core.statements import ApplyResult, Statement
    from checker_core.core.whatif import Readiness, WhatIf


@dataclass(frozen=True, slots=True)
class Advice:
    """Something a pass works out for the operator without acting on it."""

    text: str
    warning: bool  # the pass line, status and check-config say it; else only check-config


class Mode(enum.Enum):
    APPLY = "apply"
    DRY_RUN = "dry_run"
    STATUS = "status"


class Outcome(enum.Enum):
    CHANGED = ("changed", Exit.OK)
    UNCHANGED = ("unchanged", Exit.OK)
    PLANNED = ("planned", Exit.OK)  # dry-run / status: computed, not applied
    PAUSED = ("paused", Exit.OK)
    BUSY = ("busy", Exit.OK)
    # no node answered: nothing changed, nothing counted; not a failure of the run itself (the
    # scheduler must not see a crash), but not a check either: /health counts these in a row
    BLIND = ("blind", Exit.OK)
    # a ProxySQL Cluster peer's checker acts: this one probed and judged, and wrote nothing
    STANDBY = ("standby", Exit.OK)
    # acting, but the cluster saw a LOAD in this same second: the changes go in the next pass
    DEFERRED = ("deferred", Exit.OK)
    # acting, but no LOAD can propagate: the cluster's newest epoch is ahead of this proxy's
    # clock by more than a second (clock skew or a step back); a failure until the clocks agree
    CLOCK_SKEW = ("clock_skew", Exit.FAILED)
    FAILED = ("failed", Exit.FAILED)
    BAD_INPUT = ("bad_input", Exit.BAD_INPUT)

    def __init__(self, label: str, exit_code: Exit) -> None:
        self.label = label
        self.exit_code = exit_code


@dataclass(frozen=True, slots=True)
class PassInputs:
    """What a pass decided from, besides its probes."""

    policy: Any  # the checker's Policy, which can also assume failures (whatif.Assumer)
    view: ClusterView
    memory: Mapping[NodeAddress, NodeMemory]
    cluster: ClusterSettings
    now: float

    def what_if(self, probes: Mapping[NodeAddress, ProbeResult]) -> WhatIf:
        """The same decision asked of other failures (whatif is loaded on demand)."""
        from checker_core.core.whatif import WhatIf

        return WhatIf(
            self.policy, self.policy, self.view, probes, self.memory, self.cluster, self.now
        )


@dataclass(frozen=True, slots=True)
class PassResult:
    """Everything one pass did and saw: its pass line and exit code come from it."""

    cluster: str
    pass_id: str
    outcome: Outcome
    duration_ms: float
    message: str  # why, when the pass did not get to a decision
    decision: Decision | None = None
    layout: LiveLayout | None = None
    probes: Mapping[NodeAddress, ProbeResult] = field(default_factory=dict)
    statements: tuple[Statement, ...] = ()
    applied: ApplyResult | None = None
    warnings: tuple[str, ...] = ()
    leadership: Leadership | None = None
    # ConnUsed of the servers ProxySQL keeps OFFLINE_HARD in runtime after a LOAD removed them
    leaving_in_use: Mapping[tuple[int, NodeAddress], int] = field(default_factory=dict)
    state_failures: int = 0  # state files this pass could not write (it went on without them)
    # what the decision was made from, for the questions asked of it afterwards (readiness)
    inputs: PassInputs | None = None
    # the failures a what-if dry-run assumed, in words ("127.0.0.1:3311 down")
    assumed: tuple[str, ...] = ()
    # readiness already worked out for these very inputs (the daemon's steady passes)
    known_readiness: Readiness | None = None
    # the daemon works readiness out off its loop: none known yet means none, not "ask now"
    readiness_deferred: bool = False
    evictions: int = 0  # Galera members this pass evicted from the survivors' view
    unresponsive_evictions: int = 0  # of them, members evicted while silent (not refused)
    node_actions: tuple[str, ...] = ()  # what the pass did to the nodes themselves, in words
    advice: tuple[Advice, ...] = ()
    # Galera members evicted that cannot come back by themselves: each needs a restart
    stranded: tuple[NodeAddress, ...] = ()

    @property
    def role(self) -> Role | None:
        return self.leadership.role if self.leadership else None

    @property
    def writers(self) -> tuple[NodeAddress, ...]:
        """The writers this pass decided on (its plan's, loaded or not)."""
        return self.decision.assignment.writers if self.decision else ()

    @property
    def plan_live(self) -> bool:
        """ProxySQL routes as the decision says: loaded, nothing to load, or kept (blind)."""
        loaded = self.applied is not None and self.applied.loaded
        return loaded or self.outcome in (Outcome.CHANGED, Outcome.UNCHANGED, Outcome.BLIND)

    @property
    def routed_writers(self) -> tuple[NodeAddress, ...]:
        """The writers ProxySQL routes to after this pass: the plan's once it is live, else
        the ones it had (a paused, standby or deferred pass, a failed LOAD, a dry run)."""
        if self.plan_live or self.layout is None:
            return self.writers
        return tuple(self.layout.writers)

    @property
    def writers_known(self) -> bool:
        """Whether this pass knows whom ProxySQL routes writes to: not when it read nothing of
        ProxySQL (another process held the lock, it failed before reading)."""
        return self.plan_live or self.layout is not None

    def what_if(self) -> WhatIf | None:
        """The pass's inputs, to ask what other failures would lead to (loaded on demand)."""
        return None if self.inputs is None else self.inputs.what_if(self.probes)

    def readiness(self) -> Readiness | None:
        """Would losing the writer, or any one node, still leave a writer and a reader?"""
        if self.known_readiness is not None or self.readiness_deferred:
            return self.known_readiness
        what_if = self.what_if()
        if what_if is None or self.decision is None or self.decision.blind or self.assumed:
            return None
        return what_if.readiness(self.decision)

    def brownouts(self) -> tuple[BrownoutReport, ...]:
        if not self.decision:
            return ()
        draining = [(n, m) for n, m in sorted(self.decision.memory.items()) if m.queue_samples]
        if not draining:
            return ()
        # loaded only when a queue is sampled: a Galera pass never needs it
        from checker_core.core.brownout import brownout_report

        found = (brownout_report(n, m) for n, m in draining)
        return tuple(r for r in found if r is not None)

    def moved_to(self, target: NodeAddress) -> bool:
        """A planned move is done: the pass went live (or had nothing to change), the target
        writes alone, and no demoted writer drains any more."""
        decision = self.decision
        if decision is None or self.outcome not in (Outcome.CHANGED, Outcome.UNCHANGED):
            return False

        plan = decision.plan
        return LiveLayout.planned(plan.hostgroups, plan.desired).writes_alone(target)

    def verdict_counts(self) -> dict[str, int]:
        if not self.decision:
            return {}
        return dict(sorted(Counter(v.state.value for v in self.decision.verdicts.values()).items()))


# outcomes whose own message says why the pass ended (a deadline's failure among them)
SAY_WHY_THEY_ENDED = (Outcome.BUSY, Outcome.FAILED, Outcome.BAD_INPUT)


def exit_code(results: list[PassResult]) -> Exit:
    return max((r.outcome.exit_code for r in results), default=Exit.OK)


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
        self.unresponsive_evictions = 0
        self.node_actions: tuple[str, ...] = ()
        self.stranded: tuple[NodeAddress, ...] = ()
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

    def warn_if(self, text: str | None) -> None:
        if text:
            self.warn(text)

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
            unresponsive_evictions=self.unresponsive_evictions,
            node_actions=self.node_actions,
            advice=self.advice,
            stranded=self.stranded,
        )
