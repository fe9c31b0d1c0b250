"""What a person and the logs see of a pass: the node table, the changes, the SQL. Pure text."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from checker_core.core.leadership import Role
from checker_core.core.model import Hostgroups, NodeAddress, ServerRow, ServerStatus
from checker_core.passes.result import Outcome, PassResult

if TYPE_CHECKING:
    from checker_core.core.decide import Decision
    from checker_core.passes.plugin import LaterActions

_SHORT = {
    ServerStatus.ONLINE: "",
    ServerStatus.SHUNNED: "(shunned)",
    ServerStatus.OFFLINE_SOFT: "(draining)",
    ServerStatus.OFFLINE_HARD: "(offline_hard)",
}


def summary(result: PassResult) -> str:
    """The one sentence that says what this pass did (the log line and what tests read)."""
    head = f"cluster {result.cluster}: "
    if result.decision is None:
        return head + result.message
    counts = ", ".join(f"{k} {v}" for k, v in result.verdict_counts().items())
    notes = "".join(f"; {note}" for note in _notes(result, result.decision))
    return (
        f"{head}{_action(result, result.decision)}; {_writer_text(result)}{notes}; {counts}; "
        f"{result.duration_ms:.0f} ms"
    )


def _writer_text(result: PassResult) -> str:
    before = tuple(result.layout.writers) if result.layout else ()
    writers = ", ".join(map(str, result.writers)) or "none"
    was = ", ".join(map(str, before)) or "none"
    if before == tuple(result.writers):
        return f"writer {writers}"
    if result.plan_live or result.outcome is Outcome.PLANNED:
        return f"writer {writers} (was {was})"
    # nothing went live: ProxySQL still routes to the writer it had
    return f"writer {was} (planned {writers})"


def _action(result: PassResult, decision: Decision) -> str:
    changes = len(decision.plan.changes)
    outcome = result.outcome
    if outcome is Outcome.CHANGED:
        return f"{changes} change(s) loaded" if changes else "roster loaded, no other change"
    if outcome is Outcome.BLIND:
        return decision.sight.reason
    if outcome is Outcome.STANDBY and result.leadership is not None:
        return f"{result.leadership.reason}; {changes} change(s) seen, not applied"
    if outcome in (Outcome.DEFERRED, Outcome.CLOCK_SKEW):
        return f"{changes} change(s) not applied yet: {result.message}"
    said = {
        Outcome.UNCHANGED: "no change",
        Outcome.PAUSED: f"paused, {changes} change(s) not applied",
        Outcome.PLANNED: f"{changes} change(s) planned, not applied",
    }
    return said.get(outcome, result.message)


def _notes(result: PassResult, decision: Decision) -> list[str]:
    """What the pass line adds after its writer, in this order."""
    notes = [b.describe() for b in result.brownouts()]
    if decision.sight.reason and result.outcome is not Outcome.BLIND:
        notes.append(decision.sight.reason)
    leadership = result.leadership
    if result.role is Role.ACTING and leadership is not None:
        notes.append(leadership.reason)
    if leadership is not None and leadership.split:
        notes.append("ProxySQL Cluster split (see warning)")
    layout = result.layout
    shunned = [n for n in (layout.shunned_writers if layout else ()) if n in result.writers]
    if shunned:
        notes.append(
            f"writer {', '.join(map(str, shunned))} SHUNNED by ProxySQL itself "
            "(left for ProxySQL to bring back)"
        )
    if decision.assignment.why_readers:
        notes.append(decision.assignment.why_readers)
    if layout is not None and layout.leaving:
        notes.append(
            "leaving ProxySQL once its clients let go: "
            + ", ".join(
                f"{r.node} in hostgroup {r.hostgroup_id} "
                f"({result.leaving_in_use.get((r.hostgroup_id, r.node), 0)} connection(s) in use)"
                for r in layout.leaving
            )
        )
    if result.applied is not None and result.applied.saved and not result.applied.loaded:
        notes.append("SAVE MYSQL SERVERS TO DISK retried and done")
    if result.assumed:
        notes.append(f"what-if: assuming {', '.join(result.assumed)}")
    notes += result.node_actions
    notes += [f"warning: {a.text}" for a in result.advice if a.warning]
    if decision.adopted:
        nodes = len({r.node for r in decision.adopted})
        hostgroups = sorted({r.hostgroup_id for r in decision.adopted})
        notes.append(f"roster of {nodes} node(s) adopted into empty templates {hostgroups}")
    return notes


def placements(rows: Iterable[ServerRow], hostgroups: Hostgroups, node: NodeAddress) -> str:
    """Where a node is, e.g. 'writer reader' or 'writer(draining) offline'."""
    names = {
        hostgroups.writer: "writer",
        hostgroups.backup_writer: "backup",
        hostgroups.reader: "reader",
        hostgroups.offline: "offline",
    }
    order = list(names)
    found = sorted(
        (r for r in rows if r.node == node and r.hostgroup_id in names),
        key=lambda r: order.index(r.hostgroup_id),
    )
    return " ".join(names[r.hostgroup_id] + _SHORT[r.status] for r in found) or "-"


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [
        max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)
    ]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()
    out = [line]
    out.extend("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows)
    return out


NODE_COLUMNS = (
    ("node", "node"),
    ("writer_weight", "w.weight"),
    ("reader_weight", "r.weight"),
    ("now", "now"),
    ("verdict", "verdict"),
    ("probe_ms", "probe ms"),
    ("next", "next"),
    ("reason", "reason"),
)


def node_records(result: PassResult, hostgroups: Hostgroups) -> list[dict[str, Any]]:
    """Every roster node: weights, where it is, its verdict, where the plan puts it, and why."""
    decision, layout = result.decision, result.layout
    if decision is None or layout is None:
        return []
    # what ProxySQL has: the live rows, the servers it keeps for their clients, the operator's
    now = (*layout.rows, *layout.leaving, *layout.operator_rows)
    records = []
    for rn in decision.roster.nodes:
        node = rn.node
        verdict = decision.verdicts[node]
        probe = result.probes.get(node)
        records.append(
            {
                "node": str(node),
                "writer_weight": rn.writer.weight if rn.writer else None,
                "reader_weight": rn.reader.weight if rn.reader else None,
                "now": placements(now, hostgroups, node),
                "verdict": verdict.state.value,
                "probe_ms": round(probe.elapsed_ms, 1) if probe else None,
                "next": placements(decision.plan.desired, hostgroups, node),
                "reason": verdict.reason,
                "member_role": verdict.role,
            }
        )
    return records


def routed_writers(result: PassResult) -> list[str] | None:
    """Whom ProxySQL routes writes to after the pass; None (unknown) when the pass read
    nothing of ProxySQL: an empty list would say there is no writer."""
    if not result.writers_known:
        return None
    return [str(n) for n in result.routed_writers]


def status_record(result: PassResult, hostgroups: Hostgroups) -> dict[str, Any]:
    """A pass as data: what `status --format json` prints and the daemon serves on /status."""
    decision = result.decision
    readiness = result.readiness()
    return {
        "cluster": result.cluster,
        "pass_id": result.pass_id,
        "outcome": result.outcome.label,
        "role": result.role.label if result.role else None,
        "summary": summary(result),
        "duration_ms": round(result.duration_ms, 1),
        "writers": routed_writers(result),
        "planned_writers": [str(n) for n in result.writers],
        "nodes": node_records(result, hostgroups),
        "changes": [c.describe() for c in decision.plan.changes] if decision else [],
        "warnings": list(result.warnings),
        "failover_ready": None if readiness is None else readiness.ready,
        "next_writers": [str(n) for n in readiness.next_writers] if readiness else [],
        "readiness": None if readiness is None else readiness.reason,
        # Galera members evicted that stay out until restarted
        "needs_restart": [str(n) for n in result.stranded],
    }


def _cell(value: object, column: str) -> str:
    if value is None:
        return "-"
    if column == "probe_ms" and isinstance(value, float):
        return f"{value:.0f}"
    return str(value)


def node_table(result: PassResult, hostgroups: Hostgroups) -> list[str]:
    records = node_records(result, hostgroups)
    if not records:
        return []
    rows = [[_cell(r[key], key) for key, _ in NODE_COLUMNS] for r in records]
    return table([title for _, title in NODE_COLUMNS], rows)


def status_document(
    checker: str, results: Iterable[PassResult], hostgroups: Mapping[str, Hostgroups]
) -> dict[str, Any]:
    return {
        "checker": checker,
        "clusters": [status_record(r, hostgroups[r.cluster]) for r in results],
    }


def render(result: PassResult, hostgroups: Hostgroups, with_sql: bool) -> str:
    lines = [summary(result)]
    if result.decision is not None:
        lines += ["", *node_table(result, hostgroups)]
        if result.decision.adopted:
            lines += ["", "roster adopted into the template hostgroups (they were empty):"]
            lines += [f"  {row.describe()} weight {row.weight}" for row in result.decision.adopted]
        changes = result.decision.plan.changes
        lines += ["", "changes:" if changes else "changes: none"]
        lines += [f"  {change.describe()}" for change in changes]
        readiness = result.readiness()
        if readiness is not None:
            lines += ["", f"failover: {readiness.reason}"]
        if with_sql:
            if result.outcome is Outcome.BLIND:
                lines += ["", "SQL: none (no node answered: a blind pass changes nothing)"]
            elif result.statements:
                lines += ["", "SQL:"]
            else:
                lines += ["", "SQL: none (ProxySQL already matches)"]
            lines += [f"  {s.render()}" for s in result.statements]
    for warning in result.warnings:
        lines.append(f"warning: {warning}")
    return "\n".join(lines)


def log_later(log: Any, later: LaterActions) -> None:
    """One line for what a one-shot process did on a cluster's nodes after its pass (an
    eviction), after the pass line; a warning when some of it went wrong."""
    done = later.done
    method = "warning" if done.failed else "info"
    getattr(log, method)(
        "evict",
        cluster=later.cluster,
        duration_ms=round(later.duration_ms, 1),
        evictions=done.evictions,
        unresponsive=done.unresponsive,
        summary=f"cluster {later.cluster}: " + "; ".join(done.said + done.failed),
    )


def log_pass(log: Any, result: PassResult) -> None:
    """One info line per pass; at debug level one line per node before it (log: structlog)."""
    if result.decision is not None:
        for node, verdict in result.decision.verdicts.items():
            probe = result.probes.get(node)
            log.debug(
                "node",
                cluster=result.cluster,
                pass_id=result.pass_id,
                node=str(node),
                verdict=verdict.state.value,
                reason=verdict.reason,
                duration_ms=round(probe.elapsed_ms, 1) if probe else None,
            )
    changes = [c.describe() for c in result.decision.plan.changes] if result.decision else []
    method = "warning" if result.outcome.exit_code or result.outcome is Outcome.BLIND else "info"
    getattr(log, method)(
        "pass",
        cluster=result.cluster,
        pass_id=result.pass_id,
        outcome=result.outcome.label,
        role=result.role.label if result.role else None,
        duration_ms=round(result.duration_ms, 1),
        writers=routed_writers(result),
        verdicts=result.verdict_counts(),
        change=changes,
        loaded=bool(result.applied and result.applied.loaded),
        reason=None if result.decision else result.message,
        summary=summary(result),
    )
    for warning in result.warnings:
        log.warning("state", cluster=result.cluster, pass_id=result.pass_id, reason=warning)
