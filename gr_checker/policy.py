"""Group Replication rules R2-R6: member state, quorum, cross-checked views, who writes. Pure.

The group elects; the checker follows and never writes to a node with super_read_only=ON. A new
primary still super_read_only is in "brownout" (applying its backlog): with `brownout = hold` the
writer hostgroup stays empty of it, so ProxySQL holds new writes instead of failing them with
error 1290, and the pass it turns writable it becomes the writer.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from checker_core.core.hysteresis import NodeMemory, lagging
from checker_core.core.model import NodeAddress
from checker_core.core.probes import ProbeResult, unreachable
from checker_core.core.roster import LiveLayout, Roster
from checker_core.core.settings import ClusterSettings
from checker_core.core.verdict import State, Verdict
from checker_core.core.writers import WriterRules, writers_by_weight

if TYPE_CHECKING:
    from checker_core.core.whatif import Assumed


@dataclass(frozen=True, slots=True)
class Member:
    """One row of performance_schema.replication_group_members, as one member sees it."""

    member_id: str
    host: str
    port: int
    state: str
    role: str

    @property
    def address(self) -> NodeAddress:
        return NodeAddress(self.host, self.port)


@dataclass(frozen=True, slots=True)
class GrFacts:
    """What one Group Replication member said of itself and its group."""

    server_uuid: str
    super_read_only: bool
    read_only: bool
    single_primary: bool
    members: tuple[Member, ...]  # this member's view of the group
    applier_queue: int | None  # COUNT_TRANSACTIONS_REMOTE_IN_APPLIER_QUEUE of itself
    certify_queue: int | None  # COUNT_TRANSACTIONS_IN_QUEUE
    remote_applied: int | None  # COUNT_TRANSACTIONS_REMOTE_APPLIED
    expel_timeout_s: int | None = None  # group_replication_member_expel_timeout

    @property
    def me(self) -> Member | None:
        return next((m for m in self.members if m.member_id == self.server_uuid), None)

    @property
    def online(self) -> int:
        return sum(1 for m in self.members if m.state == "ONLINE")

    @property
    def has_quorum(self) -> bool:
        """More than half of the members in its own view are ONLINE (R3)."""
        me = self.me
        return me is not None and me.state == "ONLINE" and self.online * 2 > len(self.members)

    def sees_online(self, member_id: str) -> bool:
        return any(m.member_id == member_id and m.state == "ONLINE" for m in self.members)

    @property
    def watch_key(self) -> tuple[object, ...]:
        """What a writer's state is made of: its flags, its view of the group, and, while it is
        super_read_only (a new primary held in its brownout), whether its applier queue is empty:
        that releases it. A writable member's queue empties and fills under load alone (every
        writer of a multi-primary group's), which is noise, not a state. The daemon's watch
        starts a pass when this changes."""
        view = tuple(sorted((m.member_id, m.state, m.role) for m in self.members))
        drained = not self.applier_queue if self.super_read_only else None
        return (
            self.server_uuid,
            self.super_read_only,
            self.read_only,
            self.single_primary,
            view,
            drained,
        )


def _facts(probe: ProbeResult | None) -> GrFacts | None:
    return probe.facts if probe is not None and isinstance(probe.facts, GrFacts) else None


def judge_group(
    probes: Mapping[NodeAddress, ProbeResult],
    max_transactions_behind: int,
    lagging_before: Mapping[NodeAddress, bool],
    known: Mapping[NodeAddress, str] | None = None,
) -> dict[NodeAddress, Verdict]:
    """R2-R6 for every probed node, each view checked against the majority's. `known`: the
    server_uuid each node last answered with, to find a silent one in the others' views."""
    quorum_views = [
        f for f in (_facts(p) for p in probes.values()) if f is not None and f.has_quorum
    ]
    verdicts: dict[NodeAddress, Verdict] = {}
    for node, probe in probes.items():
        facts = _facts(probe)
        if facts is None:
            uuid = (known or {}).get(node)
            verdicts[node] = _unprobed(node, probe, quorum_views, uuid)
            continue
        verdicts[node] = _judge(
            node, facts, quorum_views, max_transactions_behind, lagging_before.get(node, False)
        )
    return verdicts


def _unprobed(
    node: NodeAddress, probe: ProbeResult | None, quorum_views: list[GrFacts], uuid: str | None
) -> Verdict:
    """A member the checker could not probe: the group's majority knows better than a failed
    connect. When most of the views with quorum do not see it ONLINE (UNREACHABLE, gone from
    the group), it is out at once; otherwise its own probe counts, after retry_down.

    The member is found in the views by the server_uuid it last answered with; by its address
    only while that is unknown. MEMBER_HOST is the server's hostname unless report_host is set,
    so an address that names no member proves nothing: then its own probe counts."""
    own = unreachable(node, probe)
    if not quorum_views:
        return own

    def row(view: GrFacts) -> Member | None:
        if uuid is not None:
            return next((m for m in view.members if m.member_id == uuid), None)
        return next((m for m in view.members if m.address == node), None)

    rows = [row(view) for view in quorum_views]
    if uuid is None and not any(rows):
        return replace(
            own,
            reason=f"{own.reason}; no member of the group's views is at {node} (MEMBER_HOST:"
            "MEMBER_PORT differ from the roster's address: set report_host / report_port) and "
            "its server_uuid was never probed",
        )
    states = [m.state if m is not None else "missing" for m in rows]
    online = states.count("ONLINE")
    if online * 2 > len(quorum_views):
        return own
    seen = ", ".join(f"{state} in {states.count(state)}" for state in sorted(set(states)))
    return Verdict(
        node,
        State.OFFLINE,
        f"the majority does not see it ONLINE ({seen} of {len(quorum_views)} views); "
        f"its own probe: {own.reason}",
        hard=True,
    )


def _judge(
    node: NodeAddress,
    facts: GrFacts,
    quorum_views: list[GrFacts],
    max_transactions_behind: int,
    was_lagging: bool,
) -> Verdict:
    writable = not (facts.super_read_only or facts.read_only)
    queue = facts.applier_queue
    me = facts.me
    role = None
    if me is not None:
        role = (
            ("primary" if me.role == "PRIMARY" else "secondary")
            if facts.single_primary
            else "member"
        )

    def verdict(state: State, reason: str, *, hard: bool = False, drain: bool = False) -> Verdict:
        may_write = writable and state is State.HEALTHY and role in ("primary", "member")
        return Verdict(node, state, reason, may_write, hard, drain, None, queue, role)

    if me is None:
        return verdict(
            State.OFFLINE, "not in its own replication_group_members view (GR stopped?)", hard=True
        )
    if me.state != "ONLINE":  # R2: the group itself says it is not serving
        return verdict(State.OFFLINE, f"MEMBER_STATE={me.state}", hard=True)
    if not facts.has_quorum:  # R3
        return verdict(
            State.OFFLINE,
            f"minority: {facts.online} of {len(facts.members)} members ONLINE in its view",
            hard=True,
        )
    seen_by = sum(1 for view in quorum_views if view.sees_online(facts.server_uuid))
    if seen_by * 2 <= len(quorum_views):
        return verdict(
            State.OFFLINE,
            f"the majority does not see it ONLINE ({seen_by} of {len(quorum_views)} views)",
            hard=True,
        )
    if role == "primary" and not writable:  # R5
        return verdict(State.BROWNOUT, f"new primary still super_read_only, applier queue {queue}")
    if role == "secondary" and lagging(queue, max_transactions_behind, was_lagging):  # R6
        limit = max_transactions_behind
        return verdict(
            State.LAGGING, f"applier queue {queue} (limit {limit}, back under {limit // 2})"
        )
    if role == "secondary":
        # a former primary's open transactions fail with 1290 anyway: no drain
        return verdict(State.HEALTHY, "secondary")
    return verdict(State.HEALTHY, f"{role}" if writable else f"{role}, read_only", drain=True)


def primary_writers(
    verdicts: Mapping[NodeAddress, Verdict],
    roster: Roster,
    layout: LiveLayout,
    brownout: str,
) -> tuple[tuple[NodeAddress, ...], str]:
    """R4/R5 single-primary: the writer is the group's PRIMARY, once it can take writes."""
    writer_hostgroup = layout.hostgroups.writer
    # a writer an operator set OFFLINE_HARD in the writer hostgroup is not kept (rule S5)
    held = [
        n
        for n in layout.writers
        if (v := verdicts.get(n)) is not None
        and v.state.keeps_place
        and not layout.blocked(n, writer_hostgroup)
    ]
    primaries = [
        n
        for n in roster.addresses
        if (v := verdicts.get(n)) is not None
        and v.role == "primary"
        and v.state in (State.HEALTHY, State.BROWNOUT)
        and not layout.blocked(n, writer_hostgroup)
    ]
    for node in primaries:
        verdict = verdicts[node]
        if verdict.state is State.HEALTHY and verdict.writable:
            return (node,), "the group's primary"
        if verdict.state is State.BROWNOUT:
            if brownout == "route":
                return (node,), "the group's primary, routed during brownout (brownout = route)"
            return (
                (),
                "brownout: holding writes until the new primary is writable (brownout = hold)",
            )
    if held:
        kept = verdicts[held[0]]
        return (held[0],), f"kept: {kept.state.value} ({kept.reason})"
    return (), "no writable primary"


class GroupReplicationPolicy:
    """The GR rules behind checker_core.core.decide's Policy protocol."""

    def judge_all(
        self,
        probes: Mapping[NodeAddress, ProbeResult],
        cluster: ClusterSettings,
        memory: Mapping[NodeAddress, NodeMemory],
    ) -> dict[NodeAddress, Verdict]:
        lagging = {node: m.lagging for node, m in memory.items()}
        known = {node: m.identity for node, m in memory.items() if m.identity}
        return judge_group(probes, cluster.max_transactions_behind, lagging, known)

    def watch_key(self, facts: object) -> object:
        return facts.watch_key if isinstance(facts, GrFacts) else None

    def without_readings(self, facts: object) -> object:
        if not isinstance(facts, GrFacts):
            return facts
        return replace(facts, applier_queue=None, certify_queue=None, remote_applied=None)

    def identity(self, facts: object) -> str | None:
        """The server_uuid: how the group's views name the member, whatever MEMBER_HOST says."""
        return facts.server_uuid or None if isinstance(facts, GrFacts) else None

    def choose_writers(
        self,
        verdicts: Mapping[NodeAddress, Verdict],
        roster: Roster,
        layout: LiveLayout,
        cluster: ClusterSettings,
    ) -> tuple[tuple[NodeAddress, ...], str]:
        if not any(v.role == "member" for v in verdicts.values()):  # single-primary mode
            return primary_writers(verdicts, roster, layout, cluster.brownout)
        rules = WriterRules(cluster.max_writers, cluster.fail_back, None)
        return writers_by_weight(
            verdicts, roster, layout, rules, serving=(State.HEALTHY,), last_resort=()
        )

    def assume(
        self,
        probes: Mapping[NodeAddress, ProbeResult],
        assumed: Mapping[NodeAddress, Assumed],
        cluster: ClusterSettings,
    ) -> dict[NodeAddress, ProbeResult]:
        """Probes that say the assumed members failed (what-if), as the group reports it once it
        has acted: while the others hold a majority, a member assumed down is expelled from
        their views and, if it was the single primary, the group elects another (the lowest
        server_uuid among the rest: the election rule when member weights are equal; the new
        primary is shown past its brownout); without a majority it stays UNREACHABLE."""
        # loaded only by a what-if or a readiness question, never by a plain pass
        from checker_core.core.whatif import Assumed, WhatIfRefused, refused_probe

        for node, what in assumed.items():
            if what is Assumed.DESYNC:
                raise WhatIfRefused(
                    f"{node}: Group Replication has no desync; assume it down or lagging"
                )
            if what is Assumed.LAGGING and cluster.max_transactions_behind <= 0:
                raise WhatIfRefused(
                    f"cluster {cluster.name}: max_transactions_behind is 0 (no limit), so no "
                    "member is ever lagging"
                )
            if what is not Assumed.DOWN and _facts(probes.get(node)) is None:
                raise WhatIfRefused(
                    f"{node}: its probe read nothing; only a member that answers can be "
                    f"assumed {what.label}"
                )
        down = {n for n, what in assumed.items() if what is Assumed.DOWN}
        # found in the views by server_uuid: MEMBER_HOST need not be the roster's address
        gone_ids = {f.server_uuid for n in down if (f := _facts(probes.get(n))) is not None}
        result: dict[NodeAddress, ProbeResult] = {}
        for node, probe in probes.items():
            facts = _facts(probe)
            if node in down:
                result[node] = refused_probe(node)
                continue
            if facts is None:
                result[node] = probe
                continue
            seen = _without(facts, down, gone_ids)
            if assumed.get(node) is Assumed.LAGGING:
                seen = replace(seen, applier_queue=cluster.max_transactions_behind + 1)
            result[node] = replace(probe, facts=seen)
        return result


def _without(facts: GrFacts, down: set[NodeAddress], down_ids: set[str]) -> GrFacts:
    """One member's view once the group has acted on `down` (`down_ids`: their server_uuids,
    where they answered): expelled while the rest hold a majority (a lost primary replaced by
    the lowest server_uuid left), UNREACHABLE otherwise."""

    def is_down(member: Member) -> bool:
        return member.member_id in down_ids or member.address in down

    gone = [m for m in facts.members if is_down(m)]
    if not gone:
        return facts
    left = [m for m in facts.members if not is_down(m) and m.state == "ONLINE"]
    if len(left) * 2 <= len(facts.members):
        members = tuple(replace(m, state="UNREACHABLE") if is_down(m) else m for m in facts.members)
        return replace(facts, members=members)
    lost_primary = facts.single_primary and any(m.role == "PRIMARY" for m in gone)
    elected = min(left, key=lambda m: m.member_id).member_id if lost_primary else None
    kept = tuple(
        replace(m, role="PRIMARY") if m.member_id == elected else m
        for m in facts.members
        if not is_down(m)
    )
    writable = facts.server_uuid == elected
    if writable:
        return replace(facts, members=kept, super_read_only=False, read_only=False)
    return replace(facts, members=kept)
