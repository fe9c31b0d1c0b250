"""What a pass writes down about itself: its counters (once), a SAVE it owes or paid, and the
outcome it ends with, said over its time when it ran long."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from checker_core.core.statements import ApplyResult
from checker_core.passes.result import SAY_WHY_THEY_ENDED, Outcome, PassProgress, PassResult

if TYPE_CHECKING:
    from checker_core.core.decide import Decision
    from checker_core.core.hysteresis import NodeMemory
    from checker_core.core.model import ClusterRows, NodeAddress
    from checker_core.core.settings import RunSettings
    from checker_core.edges.memory import StateStore
    from checker_core.passes import gate


class Ledger:
    """One runner's: the cluster's state store, its run settings, its monotonic clock."""

    def __init__(self, store: StateStore, run: RunSettings, monotonic: Callable[[], float]) -> None:
        self.store, self.run, self.monotonic = store, run, monotonic

    def hold(
        self, cluster: str, decision: Decision, stop: gate.Stop, progress: PassProgress
    ) -> PassResult:
        """Nothing written to ProxySQL, staging included (rule S5: an operator's edit staged
        during a pause stays his); the counters are saved as if nothing had been loaded. Rows
        a dead pass left half-written are put back by the next pass that acts (apply)."""
        self.remember(progress, cluster, decision.unloaded_memory)
        return self.finish(progress, stop.outcome, stop.reason)

    def after_apply(
        self,
        cluster: str,
        rows: ClusterRows,
        decision: Decision,
        applied: ApplyResult,
        progress: PassProgress,
        *,
        save_owed: bool,
    ) -> None:
        """The counters saved, the SAVE owed or paid, and what the LOAD carried besides ours."""
        persist = self.run.persist
        self.remember(progress, cluster, decision.memory)
        if persist and (applied.loaded or save_owed):
            # disk equal to runtime is part of converged: a failed SAVE is retried next pass
            self.owe_save(progress, cluster, not applied.saved)
        roster_edits = decision.roster_edits_loaded(rows) if applied.loaded else None
        for said in (roster_edits, applied.save_error):
            if said:
                progress.warn(said)

    def finish(self, progress: PassProgress, outcome: Outcome, message: str) -> PassResult:
        now = self.monotonic()
        limit_ms = self.run.max_runtime_ms
        spent_ms = (now - progress.started) * 1000
        if spent_ms > limit_ms and outcome not in SAY_WHY_THEY_ENDED:
            # whatever ran long (a slow node action, a lost alarm), the pass says so
            progress.warn(f"the pass took {spent_ms:.0f} ms, over run.max_runtime_ms ({limit_ms})")
        return progress.result(outcome, message, now)

    def remember(
        self, progress: PassProgress, cluster: str, memory: Mapping[NodeAddress, NodeMemory]
    ) -> None:
        """The counters saved, once a pass; a state dir that fails (full, unwritable) costs a
        warning and a retry next pass, never the pass: what it did to ProxySQL stands."""
        if progress.remembered:
            return
        progress.remembered = True
        progress.state_failed(self.store.save(cluster, memory))

    def owe_save(self, progress: PassProgress, cluster: str, owed: bool) -> None:
        progress.state_failed(self.store.owe_save(cluster, owed))

    def loaded_then_failed(self, cluster: str, progress: PassProgress, failure: str) -> PassResult:
        """The LOAD went out and then the pass failed (its deadline, a lost connection): the
        change is live, so the pass reports it as loaded, remembers its counters, and owes the
        SAVE it did not finish."""
        assert progress.decision is not None
        persist = self.run.persist
        saved = progress.applied is not None and progress.applied.saved
        self.remember(progress, cluster, progress.decision.memory)
        after = ""
        if persist and not saved:
            after = "; SAVE MYSQL SERVERS TO DISK owed to the next pass"
            self.owe_save(progress, cluster, True)
        progress.warn(f"{failure} after its LOAD: the change is live{after}")
        if progress.applied is None:
            progress.applied = ApplyResult(staged=0, loaded=True, saved=False)
        return self.finish(progress, Outcome.CHANGED, Outcome.CHANGED.label)
