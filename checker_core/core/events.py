"""What a cluster's hooks are told: the kinds of event, each with what it means, and the
cluster's condition a pass leaves it in (its last one told decides the condition events)."""

from __future__ import annotations

import enum


class EventKind(enum.Enum):
    """An event a hook is told of; its value is the name in the event's JSON."""

    WRITER_CHANGED = (
        "writer_changed",
        "a LOAD by this checker changed the writer hostgroup's writers (none: writes wait)",
    )
    NODE_OUT = ("node_out", "a LOAD by this checker took a node out of every routed hostgroup")
    NODE_BACK = ("node_back", "a LOAD by this checker routed a node again")
    EVICTION = ("eviction", "this checker evicted Galera members from the survivors' view")
    SWITCHOVER = ("switchover", "a switchover command ended: done or failed")
    BLIND = ("blind", "no node of the cluster answered a pass: nothing can be changed")
    NO_WRITER = ("no_writer", "nodes answered, none may write: the writer hostgroup is empty")
    RECOVERED = ("recovered", "after blind or no_writer: nodes answer and a writer is routed")

    def __init__(self, label: str, meaning: str) -> None:
        self.label = label
        self.meaning = meaning

    @classmethod
    def named(cls, label: str) -> EventKind | None:
        return next((kind for kind in cls if kind.label == label), None)


EVENT_NAMES = tuple(kind.label for kind in EventKind)


class Condition(enum.Enum):
    """Where a pass left its cluster, as the condition events see it."""

    SERVING = ("serving", "nodes answered and ProxySQL routes writes to a writer")
    BLIND = ("blind", "no node answered")
    NO_WRITER = ("no_writer", "nodes answered; the writer hostgroup routes to none")

    def __init__(self, label: str, reason: str) -> None:
        self.label = label
        self.reason = reason

    @classmethod
    def named(cls, label: str) -> Condition | None:
        return next((c for c in cls if c.label == label), None)


def condition_events(told: Condition | None, now: Condition) -> tuple[EventKind, ...]:
    """The event a change of condition is told as: none when the hooks were told this one
    already (`told`: the last condition told; None when nothing was, or its record was lost,
    so a serving cluster is no news and a blind one is said again rather than never)."""
    if now is told:
        return ()
    if now is Condition.BLIND:
        return (EventKind.BLIND,)
    if now is Condition.NO_WRITER:
        return (EventKind.NO_WRITER,)
    return () if told is None else (EventKind.RECOVERED,)
