"""PassResults of a Galera cluster for the daemon's metrics, health and log tests: a pass over a
live layout, loaded or not, built with the real decide()."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from checker_core.core.decide import view_of
from checker_core.core.model import NodeAddress, ServerRow
from checker_core.core.probes import ProbeResult
from checker_core.core.roster import LiveLayout
from checker_core.core.statements import ApplyResult
from checker_core.passes.result import Outcome, PassInputs, PassResult
from galera_checker.policy import GaleraPolicy
from tests.unit.galera_cases import HG, NODES, cluster_settings, probe_ok, rows_of, run


def galera_pass(
    live: Iterable[ServerRow],
    probes: Mapping[NodeAddress, ProbeResult] | None = None,
    cluster: str = "main",
    apply: bool = True,
) -> PassResult:
    """The pass the daemon would run over `live`; CHANGED when its plan has changes and `apply`."""
    rows = list(live)
    all_probes = {n: probe_ok(n) for n in NODES}
    all_probes.update(probes or {})
    decision = run(rows, all_probes)
    settings = cluster_settings()
    changed = bool(decision.plan.changes) and apply
    outcome = Outcome.CHANGED if changed else Outcome.UNCHANGED
    return PassResult(
        cluster,
        "p1",
        outcome,
        4.0,
        outcome.label,
        decision=decision,
        layout=LiveLayout.of(rows_of(rows), HG),
        probes=all_probes,
        applied=ApplyResult(len(decision.plan.changes), changed, changed),
        inputs=PassInputs(GaleraPolicy(), view_of(rows_of(rows), settings), {}, settings, 1000.0),
    )


def failed_pass(cluster: str = "main", message: str = "cannot reach ProxySQL admin") -> PassResult:
    return PassResult(cluster, "p2", Outcome.FAILED, 1.0, message)


def after(result: PassResult) -> list[ServerRow]:
    """The managed rows live once `result` was applied."""
    assert result.decision is not None
    return list(result.decision.plan.desired)
