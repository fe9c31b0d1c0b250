"""What a daemon's runner keeps from one pass of a cluster to the next, so that a steady pass
makes again none of what it made before: the view of the same rows, the decision of the same
inputs (when core.steady says it still holds), the statements of the same plan."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from checker_core.core.decide import ClusterView, Decision, Policy, view_of
from checker_core.core.hysteresis import NodeMemory
from checker_core.core.model import ClusterRows, NodeAddress, Plan, ServerRow
from checker_core.core.probes import ProbeResult
from checker_core.core.settings import ClusterSettings
from checker_core.core.steady import Decided, still_holds
from checker_core.core.verdict import Verdict

if TYPE_CHECKING:
    from checker_core.core.statements import Statement


@dataclass(frozen=True, slots=True)
class _Viewed:
    """The rows a view was made from, and the view."""

    rows: ClusterRows
    cluster: ClusterSettings
    view: ClusterView


@dataclass(frozen=True, slots=True)
class _Planned:
    """The plan and staging rows statements were made from."""

    plan: Plan
    staging: tuple[ServerRow, ...]
    persist: bool
    save_owed: bool
    statements: tuple[Statement, ...]


class Kept:
    """Per cluster, the last pass's view, decision and statements (a daemon's runner only)."""

    def __init__(self) -> None:
        self._views: dict[str, _Viewed] = {}
        self._decided: dict[str, Decided] = {}
        self._planned: dict[str, _Planned] = {}

    def view(self, rows: ClusterRows, cluster: ClusterSettings) -> ClusterView:
        """The view of these rows; the one made before when they are the very rows read
        before (AdminClient.read_rows gives them again when its answer did not change)."""
        last = self._views.get(cluster.name)
        if last is not None and last.rows is rows and last.cluster == cluster:
            return last.view
        view = view_of(rows, cluster)
        self._views[cluster.name] = _Viewed(rows, cluster, view)
        return view

    def decision(
        self,
        view: ClusterView,
        cluster: ClusterSettings,
        probes: Mapping[NodeAddress, ProbeResult],
        memory: Mapping[NodeAddress, NodeMemory],
        *,
        policy: Policy,
        decide: Callable[[Mapping[NodeAddress, Verdict] | None], Decision],
    ) -> Decision:
        """The last decision when it still holds (core.steady), else `decide(raw)`'s, given
        the verdicts judged on the way when there are some."""
        decision, raw = still_holds(
            self._decided.get(cluster.name),
            view,
            cluster,
            probes,
            memory,
            judge=functools.partial(policy.judge_all, probes, cluster, memory),
            identity=policy.identity,
        )
        if decision is None:
            decision = decide(raw)
        self._decided[cluster.name] = Decided(view, cluster, probes, memory, decision)
        return decision

    def statements(
        self,
        cluster: str,
        plan: Plan,
        staging: tuple[ServerRow, ...],
        flags: tuple[bool, bool],
        make: Callable[[], tuple[Statement, ...]],
    ) -> tuple[Statement, ...]:
        """The statements of this plan on this staging area (`flags`: persist, save owed)."""
        last = self._planned.get(cluster)
        persist, save_owed = flags
        if (
            last is not None
            and last.plan is plan
            and last.staging is staging
            and (last.persist, last.save_owed) == flags
        ):
            return last.statements
        statements = make()
        self._planned[cluster] = _Planned(plan, staging, persist, save_owed, statements)
        return statements
