"""Choosing writers by weight among the nodes whose verdict lets them write. Pure."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from checker_core.core.model import NodeAddress
from checker_core.core.roster import LiveLayout, Roster
from checker_core.core.verdict import State, Verdict


@dataclass(frozen=True, slots=True)
class WriterRules:
    """What chooses the writers: how many, fail-back, the main segment, a switchover's choice."""

    max_writers: int
    fail_back: bool
    main_segment: int | None
    # a switchover's choice: first while it may write, whatever the weights and fail_back say
    preferred: NodeAddress | None = None


# what a decision's why_writers says when a switchover's pin was not honoured, and why
PIN_PASSED_OVER = "switchover pin passed over: "


def ineligible(
    node: NodeAddress,
    verdicts: Mapping[NodeAddress, Verdict],
    roster: Roster,
    layout: LiveLayout,
    states: tuple[State, ...],
) -> str | None:
    """Why `node` may not be chosen as a writer among nodes in `states`; None: it may."""
    rn, verdict = roster.get(node), verdicts.get(node)
    if rn is None:
        return f"{node} is not in the roster"
    if rn.writer is None:
        return f"{node} has no row in the writer template: it may not write"
    if verdict is None:
        return f"{node} was not probed"
    if verdict.state not in states:
        return f"{node} is {verdict.state.value}: {verdict.reason}"
    if not verdict.writable:
        return f"{node} may not write: {verdict.reason}"
    return barred(node, layout)


def barred(node: NodeAddress, layout: LiveLayout) -> str | None:
    """Why an operator's row keeps `node` from writing (rule S5); None: nothing does."""
    hostgroup = layout.hostgroups.writer
    if layout.blocked(node, hostgroup):
        return (
            f"{node} is barred from writer hostgroup {hostgroup} (an operator's OFFLINE_HARD row)"
        )
    return None


def pin_refusal(
    node: NodeAddress,
    verdicts: Mapping[NodeAddress, Verdict],
    roster: Roster,
    layout: LiveLayout,
    serving: tuple[State, ...],
) -> str | None:
    """Why a switchover's pin may not make `node` the writer now; None: it may. The pin wins
    over weights and fail_back, never over this: the node must be a serving writer candidate,
    and a lagging one never displaces a node that could write without lagging."""
    refused = ineligible(node, verdicts, roster, layout, serving)
    if refused is not None:
        return refused
    verdict = verdicts[node]
    if verdict.state is not State.LAGGING:
        return None
    better = [
        n
        for n in (*layout.writers, *roster.addresses)
        if n != node
        and ineligible(n, verdicts, roster, layout, serving) is None
        and verdicts[n].state is not State.LAGGING
    ]
    if better:
        return f"{node} is lagging: {verdict.reason}"
    return None


class _Order:
    """How nodes rank for the writer role: healthy before lagging (a node with a long receive
    queue would take writes it has not caught up with yet, and flow control would slow the
    whole cluster to its pace), the main segment first, then the heaviest."""

    def __init__(
        self,
        verdicts: Mapping[NodeAddress, Verdict],
        roster: Roster,
        layout: LiveLayout,
        rules: WriterRules,
    ) -> None:
        self.verdicts, self.roster, self.layout, self.rules = verdicts, roster, layout, rules

    def weight(self, node: NodeAddress) -> int:
        rn = self.roster.get(node)
        return rn.writer_weight if rn else 0

    def rank(self, node: NodeAddress) -> tuple[int, int, int, str, int]:
        verdict = self.verdicts[node]
        lagging = int(verdict.state is State.LAGGING)
        main = self.rules.main_segment
        off_segment = int(main is not None and verdict.segment != main)
        return (lagging, off_segment, -self.weight(node), node.host, node.port)

    def candidate(self, node: NodeAddress, states: tuple[State, ...]) -> bool:
        return ineligible(node, self.verdicts, self.roster, self.layout, states) is None

    def held(self) -> list[NodeAddress]:
        """Writers whose bad probe is still tolerated (retry_down), or whose silence the pass
        does not count: they keep the role. Not one an operator set OFFLINE_HARD in the writer
        hostgroup (S5)."""
        writer_hostgroup = self.layout.hostgroups.writer
        return [
            n
            for n in self.layout.writers
            if n in self.verdicts
            and self.verdicts[n].state.keeps_place
            and not self.layout.blocked(n, writer_hostgroup)
        ]

    def serving(self, states: tuple[State, ...]) -> tuple[list[NodeAddress], list[NodeAddress]]:
        """The current writers that serve, and the other roster nodes that could, best first."""
        writers = self.layout.writers
        current = sorted((n for n in writers if self.candidate(n, states)), key=self.rank)
        others = sorted(
            (n for n in self.roster.addresses if n not in writers and self.candidate(n, states)),
            key=self.rank,
        )
        return current, others


def writers_by_weight(
    verdicts: Mapping[NodeAddress, Verdict],
    roster: Roster,
    layout: LiveLayout,
    rules: WriterRules,
    *,
    serving: tuple[State, ...],
    last_resort: tuple[State, ...],
) -> tuple[tuple[NodeAddress, ...], str]:
    """Writers chosen by roster weight (Galera G10-G12, GR multi-primary R4), best first.

    Keep the current writers while they serve (unless fail_back prefers a heavier node), fill
    free places by weight (main segment first), never more than max_writers; with no serving
    node, a last-resort one rather than none.
    """
    order = _Order(verdicts, roster, layout, rules)
    rank, weight, candidate = order.rank, order.weight, order.candidate
    held = order.held()
    current, others = order.serving(serving)
    limit = rules.max_writers
    pinned, passed_over = rules.preferred, ""
    if pinned is not None:
        refused = pin_refusal(pinned, verdicts, roster, layout, serving)
        if refused is None:
            rest = [n for n in held + current + others if n != pinned]
            return tuple([pinned, *rest][:limit]), f"chosen by switchover ({pinned})"
        passed_over = f"; {PIN_PASSED_OVER}{refused}"
    if rules.fail_back:
        ranked = sorted(current + others, key=rank)
        writers = (held + ranked)[:limit]
        how = "preferred writer (fail_back)"
    else:
        writers = (held + current + others)[:limit]
        how = (
            "kept"
            if writers and all(n in layout.writers for n in writers)
            else "highest writer weight"
        )
    if writers:
        chosen_now = [n for n in writers if n not in layout.writers]
        how += _passed_over(chosen_now, others, verdicts, weight)
        return tuple(writers), how + passed_over
    spare = sorted((n for n in roster.addresses if candidate(n, last_resort)), key=rank)
    if spare:
        kept = [n for n in spare if n in layout.writers]
        chosen = (kept + [n for n in spare if n not in kept])[:limit]
        return tuple(chosen), "last resort: no healthy writable node" + passed_over
    return (), "no usable writable node" + passed_over


def pin_passed_over(why_writers: str) -> str | None:
    """Why the decision did not give the pinned node the writer role (None: it did, or there
    was no pin), in the policy's own words."""
    _, found, why = why_writers.partition(PIN_PASSED_OVER)
    return why if found else None


def _passed_over(
    writers: list[NodeAddress],
    candidates: list[NodeAddress],
    verdicts: Mapping[NodeAddress, Verdict],
    weight: Callable[[NodeAddress], int],
) -> str:
    """Why a heavier node that could have written was not chosen now (it lags)."""
    if not writers:
        return ""
    lightest = min(weight(n) for n in writers)
    skipped = [
        n
        for n in candidates
        if n not in writers and weight(n) > lightest and verdicts[n].state is State.LAGGING
    ]
    return "".join(f"; {n} passed over: {verdicts[n].reason}" for n in skipped)
