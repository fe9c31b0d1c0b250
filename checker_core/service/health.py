"""Is the daemon doing its job? Healthy while every cluster's last successful pass ended within
HEALTHY_INTERVALS intervals and its last BLIND_PASSES passes were not all blind; pure, so the
rule is tested without a clock or a listener."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from checker_core.passes.plugin import EVICTED
from checker_core.passes.result import Outcome, PassResult
from checker_core.report import summary

HEALTHY_INTERVALS = 3
# passes in a row that heard no node before /health says so: one is a hiccup (a start, a burst
# of CPU starvation), three mean the checker cannot see the cluster and is not checking it
BLIND_PASSES = 3
# a pass that got to a decision and did what the mode asked; the others leave ProxySQL unchecked
SUCCESSFUL = frozenset(
    {Outcome.CHANGED, Outcome.UNCHANGED, Outcome.PAUSED, Outcome.STANDBY, Outcome.DEFERRED}
)


@dataclass(frozen=True, slots=True)
class ClusterRecord:
    """What the daemon remembers of a cluster's passes for /health and /status."""

    last: PassResult
    finished_at: float
    last_success_at: float | None
    blind_streak: int = 0  # passes in a row, up to this one, that heard no node
    # what the last pass that evicted a member said of it (kept until another one evicts)
    evictions: tuple[str, ...] = ()

    def after(self, result: PassResult, finished_at: float) -> ClusterRecord:
        success = finished_at if result.outcome in SUCCESSFUL else self.last_success_at
        blind = self.blind_streak + 1 if result.outcome is Outcome.BLIND else 0
        evictions = _evictions(result) or self.evictions
        return ClusterRecord(result, finished_at, success, blind, evictions)

    @staticmethod
    def first(result: PassResult, finished_at: float) -> ClusterRecord:
        success = finished_at if result.outcome in SUCCESSFUL else None
        blind = int(result.outcome is Outcome.BLIND)
        return ClusterRecord(result, finished_at, success, blind, _evictions(result))


def _evictions(result: PassResult) -> tuple[str, ...]:
    if not result.evictions:
        return ()
    return tuple(said for said in result.node_actions if said.startswith(EVICTED))


@dataclass(frozen=True, slots=True)
class Health:
    """The daemon's answer to /health: healthy or not, why, and each cluster's state."""

    healthy: bool
    reason: str
    clusters: Mapping[str, Mapping[str, object]]

    def document(self) -> dict[str, object]:
        return {
            "status": "ok" if self.healthy else "unhealthy",
            "reason": self.reason,
            "clusters": dict(self.clusters),
        }


def judge_health(
    records: Mapping[str, ClusterRecord | None],
    interval_s: float,
    started_at: float,
    now: float,
) -> Health:
    """`records`: every configured cluster, None before its first pass. Before its first
    successful pass a cluster is unhealthy: nothing has checked its hostgroups yet, and a
    readiness probe must not send traffic there (start-up grace is the prober's start period)."""
    limit = HEALTHY_INTERVALS * interval_s
    problems = []
    clusters: dict[str, dict[str, object]] = {}
    for name, record in sorted(records.items()):
        success = record.last_success_at if record else None
        age = max(0.0, now - (started_at if success is None else success))
        blind = record.blind_streak if record else 0
        ok = success is not None and age <= limit and blind < BLIND_PASSES
        detail: dict[str, object] = {
            "healthy": ok,
            "seconds_since_success": None if success is None else round(age, 3),
            "blind_passes_in_a_row": blind,
            "last_outcome": record.last.outcome.label if record else None,
            "role": _role(record.last) if record else None,
            "last_summary": summary(record.last) if record else None,
        }
        clusters[name] = detail
        if ok:
            continue
        if record is None:
            problems.append(f"cluster {name}: no pass finished yet ({age:.1f} s since start)")
        elif blind >= BLIND_PASSES:
            problems.append(
                f"cluster {name}: {blind} blind passes in a row (no node answered; the layout is "
                f"kept, not checked); last: {summary(record.last)}"
            )
        elif record.last_success_at is None:
            problems.append(
                f"cluster {name}: no successful pass yet ({age:.1f} s since start); "
                f"last: {summary(record.last)}"
            )
        else:
            problems.append(
                f"cluster {name}: last successful pass {age:.1f} s ago "
                f"(limit {limit:.1f} s = {HEALTHY_INTERVALS} intervals); "
                f"last: {summary(record.last)}"
            )
    if problems:
        return Health(False, "; ".join(problems), clusters)
    return Health(True, f"every cluster had a successful pass within {limit:.1f} s", clusters)


def _role(result: PassResult) -> str | None:
    """alone, acting or standby; None when the pass ended before it asked its proxy."""
    return result.leadership.role.label if result.leadership is not None else None
