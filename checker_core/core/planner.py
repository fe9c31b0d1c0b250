"""Roles + roster + live rows -> Plan: the complete wanted rows and their differences. Pure."""

from __future__ import annotations

from collections.abc import Mapping

from checker_core.core.model import (
    Change,
    ChangeKind,
    Hostgroups,
    NodeAddress,
    Plan,
    ServerRow,
    ServerStatus,
    sort_rows,
)
from checker_core.core.roles import Assignment
from checker_core.core.roster import LiveLayout, Roster
from checker_core.core.verdict import Verdict


def wanted_rows(
    roster: Roster, layout: LiveLayout, assignment: Assignment
) -> tuple[ServerRow, ...]:
    """Every row the managed hostgroups must hold: each roster node where its roles put it."""
    hg = layout.hostgroups
    rows: dict[tuple[int, str, int], ServerRow] = {}

    def put(row: ServerRow) -> None:
        rows[row.key] = row

    # sets, asked once per node: the roles' tuples scanned per node cost the square of the roster
    writers, draining = frozenset(assignment.writers), frozenset(assignment.draining)
    backups, draining_backups = (
        frozenset(assignment.backup_writers),
        frozenset(assignment.draining_backups),
    )
    readers, draining_readers = (
        frozenset(assignment.readers),
        frozenset(assignment.draining_readers),
    )
    for rn in roster.nodes:
        node = rn.node
        writer_row = rn.writer or rn.template
        if node in writers:
            put(writer_row.moved(hg.writer, ServerStatus.ONLINE))
        elif node in draining:
            put(writer_row.moved(hg.writer, ServerStatus.OFFLINE_SOFT))
        if node in backups:
            put(writer_row.moved(hg.backup_writer, ServerStatus.ONLINE))
        elif node in draining_backups:
            put(writer_row.moved(hg.backup_writer, ServerStatus.OFFLINE_SOFT))
        reader_row = rn.reader or rn.template
        if node in readers:
            put(reader_row.moved(hg.reader, ServerStatus.ONLINE))
        elif node in draining_readers:
            put(reader_row.moved(hg.reader, ServerStatus.OFFLINE_SOFT))
        if not assignment.routed(node):
            put(rn.template.moved(hg.offline, ServerStatus.ONLINE))
    for row in layout.operator_rows:
        put(row)  # an operator's OFFLINE_HARD row stays exactly as it is
    return sort_rows(rows.values())


def _same(live: ServerRow, wanted: ServerRow) -> bool:
    """Equal but for SHUNNED, which is ProxySQL's own passing state of an ONLINE row."""
    return live.as_loaded() == wanted


def _role(hostgroups: Hostgroups, row: ServerRow) -> str:
    if row.hostgroup_id == hostgroups.writer:
        return "draining writer" if row.status is ServerStatus.OFFLINE_SOFT else "writer"
    draining = "draining " if row.status is ServerStatus.OFFLINE_SOFT else ""
    if row.hostgroup_id == hostgroups.backup_writer:
        return f"{draining}backup writer"
    if row.hostgroup_id == hostgroups.reader:
        return f"{draining}reader"
    return "offline"


def plan(
    roster: Roster,
    layout: LiveLayout,
    assignment: Assignment,
    verdicts: Mapping[NodeAddress, Verdict],
) -> Plan:
    hg = layout.hostgroups
    desired = wanted_rows(roster, layout, assignment)
    # operator rows are kept in staging as they are; they are never a live change of ours
    kept = {row.key for row in layout.operator_rows}
    live = {row.key: row for row in layout.rows if row.key not in kept}
    wanted = {row.key: row for row in desired if row.key not in kept}

    def why(row: ServerRow, wanted: bool = True) -> str:
        verdict = verdicts.get(row.node)
        state = f"{verdict.state.value}: {verdict.reason}" if verdict else "no verdict"
        if wanted and row.hostgroup_id == hg.writer and row.status is ServerStatus.ONLINE:
            return f"{assignment.why_writers}; {state}"
        return state

    changes: list[Change] = []
    for key in sorted(live.keys() | wanted.keys()):
        before, after = live.get(key), wanted.get(key)
        if before is not None and after is not None:
            if not _same(before, after):
                changes.append(
                    Change(ChangeKind.UPDATE, before, after, f"{_role(hg, after)}: {why(after)}")
                )
        elif after is not None:
            changes.append(Change(ChangeKind.ADD, None, after, f"{_role(hg, after)}: {why(after)}"))
        elif before is not None:
            changes.append(
                Change(
                    ChangeKind.REMOVE,
                    before,
                    None,
                    f"no longer {_role(hg, before)}: {why(before, wanted=False)}",
                )
            )
    return Plan(hostgroups=hg, desired=desired, changes=tuple(changes))
