"""Roles both checkers share once the writers are chosen: backup writers, readers, draining.

Pure: verdicts, roster, live layout and settings in; an Assignment out.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from checker_core.core.model import NodeAddress
from checker_core.core.roster import LiveLayout, Roster
from checker_core.core.verdict import State, Verdict


@dataclass(frozen=True, slots=True)
class Assignment:
    """Where each node goes this pass; a node in none of these goes to the offline hostgroup."""

    writers: tuple[NodeAddress, ...]
    backup_writers: tuple[NodeAddress, ...]
    readers: tuple[NodeAddress, ...]
    draining: tuple[NodeAddress, ...]  # OFFLINE_SOFT in the writer hostgroup until drained
    why_writers: str  # how the writers were chosen, for the log
    why_readers: str = ""  # said when the readers are not what writer_is_also_reader asks
    # readers and backup writers whose own state asks for a drain (maintenance, desync, lag):
    # OFFLINE_SOFT in their hostgroup until their connections are done, as with maint mode
    draining_readers: tuple[NodeAddress, ...] = ()
    draining_backups: tuple[NodeAddress, ...] = ()
    # (routed, draining) as sets, made at the first question: asked per node, a scan of the
    # tuples per question grew a pass's cost with the square of the roster
    _sets: list[frozenset[NodeAddress]] = field(
        default_factory=list, init=False, repr=False, compare=False, hash=False
    )

    def _index(self) -> list[frozenset[NodeAddress]]:
        if not self._sets:
            self._sets.append(frozenset((*self.writers, *self.backup_writers, *self.readers)))
            self._sets.append(
                frozenset((*self.draining, *self.draining_readers, *self.draining_backups))
            )
        return self._sets

    def drains(self, node: NodeAddress) -> bool:
        return node in self._index()[1]

    def routed(self, node: NodeAddress) -> bool:
        return node in self._index()[0]


@dataclass(frozen=True, slots=True)
class RoleRules:
    """The settings that decide roles, taken from the cluster's configuration."""

    max_writers: int
    writer_is_also_reader: int
    kill_demoted_writer_connections: bool


def keeps_place(verdict: Verdict | None) -> bool:
    """A tolerated bad probe, or silence the pass does not count: the node keeps whatever it
    has, and gains nothing new."""
    return verdict is not None and verdict.state.keeps_place


def _backups(
    chosen: tuple[NodeAddress, ...],
    verdicts: Mapping[NodeAddress, Verdict],
    roster: Roster,
    layout: LiveLayout,
) -> tuple[NodeAddress, ...]:
    """The backup writers (G13): writer candidates not chosen that may back the writer up."""
    chosen_set, backups_now = frozenset(chosen), frozenset(layout.backup_writers)
    hostgroup = layout.hostgroups.backup_writer
    return tuple(
        rn.node
        for rn in roster.nodes
        if rn.writer is not None
        and rn.node not in chosen_set
        and not layout.blocked(rn.node, hostgroup)
        and _may_back_up(verdicts.get(rn.node), rn.node in backups_now)
    )


def _all_readers(
    chosen: tuple[NodeAddress, ...],
    backups: tuple[NodeAddress, ...],
    verdicts: Mapping[NodeAddress, Verdict],
    roster: Roster,
    layout: LiveLayout,
    *,
    rules: RoleRules,
) -> tuple[tuple[NodeAddress, ...], str]:
    """The readers (G14, R6), and why the writer reads too when it does against the rules."""
    hostgroup = layout.hostgroups.reader
    readers_now = frozenset(layout.readers)
    readable = tuple(
        rn.node
        for rn in roster.nodes
        if rn.reader is not None
        and not layout.blocked(rn.node, hostgroup)
        and _may_read(verdicts.get(rn.node), rn.node in readers_now)
    )
    read_only = frozenset(
        rn.node for rn in roster.nodes if rn.writer is None or not _writable(verdicts.get(rn.node))
    )
    readers = _readers(rules.writer_is_also_reader, readable, chosen, backups, read_only)
    if readers:
        return readers, ""
    # nobody else can read: the writers read too rather than leave reads nowhere to go
    readers = tuple(n for n in chosen if not layout.blocked(n, hostgroup))
    if readers and rules.writer_is_also_reader != 1:
        return readers, "the writer reads too: no other node can"
    return readers, ""


def assign(
    writers: Sequence[NodeAddress],
    verdicts: Mapping[NodeAddress, Verdict],
    roster: Roster,
    layout: LiveLayout,
    *,
    rules: RoleRules,
    drained: frozenset[tuple[int, NodeAddress]],
    why_writers: str,
) -> Assignment:
    """Complete an Assignment around the chosen writers: backup writers (G13), readers (G14,
    R6) and the drains (G15).

    `drained`: (hostgroup, node) of rows draining whose connections are gone (or whose drain
    ran out of time); they leave that hostgroup now.
    """
    hostgroups = layout.hostgroups
    chosen = tuple(writers)
    backups = _backups(chosen, verdicts, roster, layout)
    readers, why_readers = _all_readers(chosen, backups, verdicts, roster, layout, rules=rules)
    drains = functools.partial(_drains, verdicts=verdicts, layout=layout, drained=drained)
    draining: tuple[NodeAddress, ...] = ()
    if not rules.kill_demoted_writer_connections:
        draining = drains(hostgroups.writer, layout.writers, chosen, any_state=True)
    return Assignment(
        writers=chosen,
        backup_writers=backups,
        readers=readers,
        draining=draining,
        why_writers=why_writers,
        why_readers=why_readers,
        draining_readers=drains(hostgroups.reader, layout.readers, readers),
        draining_backups=drains(hostgroups.backup_writer, layout.backup_writers, backups),
    )


def _drains(
    hostgroup: int,
    serving: Sequence[NodeAddress],
    kept: Sequence[NodeAddress],
    *,
    verdicts: Mapping[NodeAddress, Verdict],
    layout: LiveLayout,
    drained: frozenset[tuple[int, NodeAddress]],
    any_state: bool = False,
) -> tuple[NodeAddress, ...]:
    """Nodes leaving `hostgroup` that go OFFLINE_SOFT first: those serving there now whose
    verdict asks for a drain, and those already draining whose connections are not done.
    A writer drains whatever the reason it is demoted (G15); a reader or backup writer only
    when its own state says so (maintenance, desync, lag), not when it merely changes role."""
    leaving: dict[NodeAddress, None] = {}  # ordered, and a set to ask
    staying = frozenset(kept)
    for node in serving:
        verdict = verdicts.get(node)
        if node in staying or verdict is None or not verdict.drain:
            continue
        if any_state or verdict.state is not State.HEALTHY:
            leaving[node] = None
    for node in layout.draining_in(hostgroup):
        if node not in staying and (hostgroup, node) not in drained:
            leaving.setdefault(node)
    return tuple(leaving)


def _readers(
    mode: int,
    readable: tuple[NodeAddress, ...],
    writers: tuple[NodeAddress, ...],
    backups: tuple[NodeAddress, ...],
    read_only: frozenset[NodeAddress],
) -> tuple[NodeAddress, ...]:
    """writer_is_also_reader (G14, R6), before the fallback to the writers.

    0: every readable node but the writers, backup writers included: reads stay off the writer,
       as galera_check.pl and pxc_scheduler_handler mean it.
    1: every readable node, the writers too.
    2: ProxySQL's native meaning: backup writers and the nodes that may not write (read_only,
       or no writer row in the roster) read; the writers do not. Where every node may write,
       this is the same as 0.
    """
    if mode == 1:
        return readable
    writing = frozenset(writers)
    others = tuple(n for n in readable if n not in writing)
    if mode == 0:
        return others
    backing = frozenset(backups)
    return tuple(n for n in others if n in backing or n in read_only)


def _writable(verdict: Verdict | None) -> bool:
    return verdict is not None and verdict.writable


def _may_back_up(verdict: Verdict | None, backup_now: bool) -> bool:
    if verdict is None:
        return False
    if keeps_place(verdict):
        return backup_now
    return verdict.writable and verdict.state is State.HEALTHY


def _may_read(verdict: Verdict | None, reader_now: bool) -> bool:
    if verdict is None:
        return False
    if keeps_place(verdict):
        return reader_now
    return verdict.state is State.HEALTHY
