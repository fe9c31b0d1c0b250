"""The events one pass gives its cluster's hooks, read from what the pass itself did: a LOAD it
made (the layout it read before, the rows it loaded after), the members it evicted, and the
condition it left the cluster in. Pure: what a hook is told is decided here, sent elsewhere."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from checker_core.core.events import Condition, EventKind, condition_events
from checker_core.core.model import NodeAddress
from checker_core.core.roster import LiveLayout
from checker_core.passes.plugin import EVICTED, ActionsDone
from checker_core.passes.result import Outcome, PassResult


@dataclass(frozen=True, slots=True)
class Event:
    """One thing a cluster's hooks are told; `fields` are the event's own (docs/hooks.md)."""

    kind: EventKind
    cluster: str
    summary: str  # the event in one line of words
    pass_id: str = ""
    fields: Mapping[str, object] = field(default_factory=dict)

    def document(
        self, checker: str, proxysql: str, at: str, hostgroups: Mapping[str, int]
    ) -> dict[str, object]:
        """The JSON a hook gets: what every event has, then the event's own fields."""
        return {
            "event": self.kind.label,
            "checker": checker,
            "cluster": self.cluster,
            "at": at,
            "pass_id": self.pass_id,
            "proxysql": proxysql,
            "hostgroups": dict(hostgroups),
            "summary": self.summary,
            **self.fields,
        }


def condition_of(result: PassResult) -> Condition | None:
    """Where the pass left its cluster; None when it does not know (it failed before
    deciding, another process held the lock, it held its plan back, or it ran dry)."""
    if result.outcome is Outcome.BLIND:
        return Condition.BLIND
    if result.decision is None or not result.plan_live:
        return None
    return Condition.SERVING if result.routed_writers else Condition.NO_WRITER


def pass_events(result: PassResult, told: Condition | None) -> tuple[Event, ...]:
    """What the pass did that its hooks are told: the moves its LOAD made, its evictions, and
    a change of its cluster's condition from the last one told (`told`)."""
    events = [*_moves(result), *_evictions(result.cluster, result.pass_id, result.node_actions)]
    now = condition_of(result)
    if now is not None:
        for kind in condition_events(told, now):
            events.append(_condition_event(kind, result, now))
    return tuple(events)


def later_events(cluster: str, done: ActionsDone) -> tuple[Event, ...]:
    """A one-shot process's evictions made after its pass (its lock released)."""
    return _evictions(cluster, "", done.said)


def switchover_event(
    cluster: str, old: NodeAddress | None, new: NodeAddress | None, done: bool, why: str
) -> Event:
    said = "done" if done else "failed"
    return Event(
        EventKind.SWITCHOVER,
        cluster,
        f"cluster {cluster}: switchover {old or '?'} -> {new or '?'} {said}: {why}",
        fields={
            "from": str(old) if old else None,
            "to": str(new) if new else None,
            "outcome": said,
            "reason": why,
        },
    )


def _moves(result: PassResult) -> list[Event]:
    """The routing the pass's LOAD changed: the layout read before, the plan's rows after."""
    decision, before = result.decision, result.layout
    if decision is None or before is None or result.applied is None or not result.applied.loaded:
        return []
    plan = decision.plan
    after = LiveLayout.planned(plan.hostgroups, plan.desired)
    cluster, pass_id = result.cluster, result.pass_id
    events: list[Event] = []
    old, new = before.writers, after.writers
    if set(old) != set(new):
        events.append(
            Event(
                EventKind.WRITER_CHANGED,
                cluster,
                f"cluster {cluster}: writer {_names(old)} -> {_names(new)}",
                pass_id,
                {
                    "writers_before": [str(n) for n in old],
                    "writers_after": [str(n) for n in new],
                    "reason": _why(result, old, new),
                },
            )
        )
    nodes = sorted({r.node for r in (*before.rows, *after.rows)})
    for node in nodes:
        was, is_ = before.routed(node), after.routed(node)
        if was == is_:
            continue
        kind = EventKind.NODE_BACK if is_ else EventKind.NODE_OUT
        verdict = decision.verdicts.get(node)
        memory = decision.memory.get(node)
        reason = verdict.reason if verdict is not None else "no longer in the roster"
        events.append(
            Event(
                kind,
                cluster,
                f"cluster {cluster}: {node} {'routed again' if is_ else 'out'}: {reason}",
                pass_id,
                {
                    "node": str(node),
                    "state": verdict.state.value if verdict is not None else None,
                    "reason": reason,
                    "role": verdict.role if verdict is not None else None,
                    # who it is (Galera's gcomm uuid, GR's server_uuid), when a probe told
                    "identity": memory.identity if memory is not None else None,
                },
            )
        )
    return events


def _why(result: PassResult, old: tuple[NodeAddress, ...], new: tuple[NodeAddress, ...]) -> str:
    """Why the writers changed: the verdict of each writer that left, else of the new one."""
    verdicts = result.decision.verdicts if result.decision else {}
    gone = [verdicts[n].describe() for n in old if n not in new and n in verdicts]
    if gone:
        return "; ".join(gone)
    came = [verdicts[n].describe() for n in new if n not in old and n in verdicts]
    return "; ".join(came) or "the plan's writers"


def _condition_event(kind: EventKind, result: PassResult, now: Condition) -> Event:
    cluster = result.cluster
    return Event(
        kind,
        cluster,
        f"cluster {cluster}: {kind.label}: {result.message or now.reason}",
        result.pass_id,
        {
            "condition": now.label,
            "reason": result.message or now.reason,
            "writers_after": [str(n) for n in result.routed_writers],
            "verdicts": {str(n): v.describe() for n, v in sorted(result.decision.verdicts.items())}
            if result.decision
            else None,
        },
    )


def _evictions(cluster: str, pass_id: str, said: tuple[str, ...]) -> tuple[Event, ...]:
    evicted = [line for line in said if line.startswith(EVICTED)]
    if not evicted:
        return ()
    return (
        Event(
            EventKind.EVICTION,
            cluster,
            f"cluster {cluster}: " + "; ".join(evicted),
            pass_id,
            {"evicted": evicted},
        ),
    )


def _names(nodes: tuple[NodeAddress, ...]) -> str:
    return ", ".join(map(str, nodes)) or "none"
