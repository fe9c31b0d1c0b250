"""What writer_is_also_reader 0, 1 and 2 mean (G14, R6), as a check on any decision."""

from __future__ import annotations

from checker_core.core.decide import Decision
from checker_core.core.model import Hostgroups, NodeAddress, ServerStatus
from checker_core.core.verdict import State


def _online(decision: Decision, hostgroup: int) -> set[NodeAddress]:
    return {
        r.node
        for r in decision.plan.desired
        if r.hostgroup_id == hostgroup and r.status is ServerStatus.ONLINE
    }


def check_reader_meaning(decision: Decision, mode: int, hg: Hostgroups) -> None:
    if decision.blind:
        assert decision.plan.changes == (), "a blind pass keeps the layout it found"
        return
    writers = _online(decision, hg.writer)
    readers = _online(decision, hg.reader)
    others = readers - writers
    assignment = decision.assignment
    roster = decision.roster
    parked = {
        r.node
        for r in decision.plan.desired
        if r.hostgroup_id == hg.reader and r.status is ServerStatus.OFFLINE_HARD
    }
    may_read = {
        rn.node
        for rn in roster.nodes
        if rn.reader is not None
        and rn.node not in parked
        and decision.verdicts[rn.node].state is State.HEALTHY
    }
    if mode == 1:
        assert may_read <= readers, "1: every healthy node with a reader row reads"
        return
    if writers & readers:
        # 0 and 2: the writer reads only when no other node does, and the pass says why
        assert not others, "the writer reads beside other readers"
        assert assignment.why_readers
    if mode == 0:
        assert may_read - writers <= readers, "0: every healthy node but the writers reads"
        return
    for node in others:
        rn = roster.get(node)
        assert rn is not None
        assert (
            node in assignment.backup_writers
            or rn.writer is None
            or not decision.verdicts[node].writable
        ), "2: only backup writers and nodes that may not write read"
