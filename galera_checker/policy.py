"""Galera / PXC rules G1-G9 (what a node's wsrep state means) and G10-G12 (who writes, with
core.writers). Pure.

The writer is chosen by weight among healthy nodes; read_only only vetoes writing, it never
makes a reader (Galera nodes are all writable unless someone says otherwise).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
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

_SEGMENT = re.compile(r"(?:^|;)\s*gmcast\.segment\s*=\s*(\d+)")

# what says whether a writer may still write (galera_checker.probe.watch reads just these)
WATCHED = (
    "wsrep_cluster_status",
    "wsrep_ready",
    "wsrep_connected",
    "wsrep_local_state",
    "wsrep_cluster_size",
    "wsrep_reject_queries",
    "wsrep_desync",
    "read_only",
    "super_read_only",
    "pxc_maint_mode",
)

# what a probe reads that moves with the load alone, not with the node's state
READINGS = frozenset({"wsrep_local_recv_queue"})

# wsrep_local_state numbers (Galera's node state machine)
_STATE_NAMES = {1: "Joining", 2: "Donor/Desynced", 3: "Joined", 4: "Synced"}


def _on(value: str | None) -> bool:
    return (value or "").strip().upper() in ("ON", "1", "TRUE", "YES")


def _int(value: str | None) -> int | None:
    try:
        return int(str(value).strip())
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class GaleraFacts:
    """The wsrep status and variables a probe read, by lower-case name."""

    values: Mapping[str, str]

    def get(self, name: str) -> str | None:
        return self.values.get(name)

    @property
    def segment(self) -> int | None:
        match = _SEGMENT.search(self.values.get("wsrep_provider_options", ""))
        return int(match.group(1)) if match else None

    @property
    def read_only(self) -> bool:
        return _on(self.get("read_only")) or _on(self.get("super_read_only"))

    @property
    def recv_queue(self) -> int | None:
        return _int(self.get("wsrep_local_recv_queue"))

    @property
    def watch_key(self) -> tuple[tuple[str, str | None], ...]:
        """Whether the node may still write, as the watch's question and a probe both read it:
        the daemon's watch between passes starts a pass when this changes."""
        # asked of every answer the watch hears: pairs made in C, no generator per answer
        return tuple(zip(WATCHED, map(self.values.get, WATCHED), strict=True))


def judge(
    node: NodeAddress,
    facts: GaleraFacts | None,
    probe: ProbeResult | None,
    max_transactions_behind: int,
    was_lagging: bool,
) -> Verdict:
    """G1-G9, first match wins."""
    if facts is None:
        return unreachable(node, probe)  # G1
    segment = facts.segment
    queue = facts.recv_queue
    writable = not facts.read_only

    def verdict(state: State, reason: str, *, hard: bool = False, drain: bool = False) -> Verdict:
        return Verdict(node, state, reason, writable, hard, drain, segment, queue)

    down = _out_of_primary(facts)  # G2
    if down is not None:
        return verdict(State.DOWN, down, hard=True)
    maint = facts.get("pxc_maint_mode")
    if maint is not None and maint.upper() != "DISABLED":  # G3, PXC only
        return verdict(State.MAINTENANCE, f"pxc_maint_mode={maint}", hard=True, drain=True)
    reject = (facts.get("wsrep_reject_queries") or "NONE").upper()
    if reject != "NONE":  # G4
        return verdict(State.OFFLINE, f"wsrep_reject_queries={reject}", hard=True)
    local_state = _int(facts.get("wsrep_local_state"))
    comment = facts.get("wsrep_local_state_comment") or _STATE_NAMES.get(local_state or 0, "?")
    if local_state == 2:  # G5
        return _donor(facts, comment, verdict)
    if local_state != 4:  # G6
        return verdict(State.OFFLINE, f"wsrep_local_state={local_state} ({comment})")
    if lagging(queue, max_transactions_behind, was_lagging):  # G7
        limit = max_transactions_behind
        return verdict(
            State.LAGGING,
            f"wsrep_local_recv_queue={queue} (limit {limit}, back under {limit // 2})",
            drain=True,
        )
    if not writable:  # G8
        return verdict(State.HEALTHY, "read_only=ON: may read, may not write", drain=True)
    return verdict(State.HEALTHY, "synced", drain=True)  # G9


def _out_of_primary(facts: GaleraFacts) -> str | None:
    """Why a node that answered serves no Primary component (G2), or None."""
    status = facts.get("wsrep_cluster_status")
    if status is None:
        return "not a Galera node (no wsrep_cluster_status)"
    if status != "Primary":
        return f"wsrep_cluster_status={status}"
    for name in ("wsrep_ready", "wsrep_connected"):
        if not _on(facts.get(name)):
            return f"{name}={facts.get(name)}"
    return None


def _donor(facts: GaleraFacts, comment: str, verdict: Callable[..., Verdict]) -> Verdict:
    """G5: a donor (or a node desynced by hand) serves only as the last resort, or not at all
    while it rejects queries."""
    if _on(facts.get("wsrep_desync")):
        return verdict(
            State.OFFLINE, f"desynced (wsrep_desync=ON, {comment})", hard=True, drain=True
        )
    if _on(facts.get("wsrep_sst_donor_rejects_queries")):
        return verdict(
            State.OFFLINE, "donor rejecting queries (wsrep_sst_donor_rejects_queries=ON)", hard=True
        )
    return verdict(State.LAST_RESORT, f"donor ({comment}): last resort only", drain=True)


def facts_of(probe: ProbeResult | None) -> GaleraFacts | None:
    """A probe's Galera facts; None when it read none."""
    return probe.facts if probe is not None and isinstance(probe.facts, GaleraFacts) else None


def second_components(
    probes: Mapping[NodeAddress, ProbeResult], verdicts: Mapping[NodeAddress, Verdict]
) -> dict[NodeAddress, Verdict]:
    """The nodes that say Primary but are not of the cluster's Primary component, taken out at
    once (hard): another cluster (a state uuid most Primary nodes do not share), or a minority
    forced Primary (`pc.bootstrap`) beside a component that holds a majority of the roster.
    Two Primary components mean stale reads and writes that diverge. A view change is no such
    thing: while it settles, nodes may name different views, but each of a majority's size."""
    primary = {
        node: facts
        for node, probe in probes.items()
        if (facts := facts_of(probe)) is not None
        and facts.get("wsrep_cluster_status") == "Primary"
        and verdicts[node].state.routable
    }
    out: dict[NodeAddress, Verdict] = {}
    uuids = [f.get("wsrep_cluster_state_uuid") for f in primary.values()]
    common = max(set(uuids), key=uuids.count, default=None)
    if common is not None and uuids.count(common) * 2 > len(uuids):
        for node, facts in primary.items():
            theirs = facts.get("wsrep_cluster_state_uuid")
            if theirs != common:
                out[node] = _excluded(
                    verdicts[node],
                    f"another cluster: wsrep_cluster_state_uuid={theirs}, "
                    f"{uuids.count(common)} other node(s) have {common}",
                )
    roster = len(probes)
    majority = {
        f.get("wsrep_cluster_conf_id")
        for n, f in primary.items()
        if n not in out and (_int(f.get("wsrep_cluster_size")) or 0) * 2 > roster
    }
    if not majority:
        return out
    for node, facts in primary.items():
        size = _int(facts.get("wsrep_cluster_size")) or 0
        view = facts.get("wsrep_cluster_conf_id")
        if node in out or size * 2 > roster or view in majority:
            continue
        out[node] = _excluded(
            verdicts[node],
            f"a second Primary component: view {view} of {size} node(s) beside the cluster's "
            f"view of a majority of the {roster} (a minority forced Primary, pc.bootstrap?)",
        )
    return out


def _excluded(verdict: Verdict, reason: str) -> Verdict:
    return Verdict(verdict.node, State.OFFLINE, reason, False, True, False, verdict.segment)


class GaleraPolicy:
    """The Galera rules behind checker_core.core.decide's Policy protocol."""

    def judge_all(
        self,
        probes: Mapping[NodeAddress, ProbeResult],
        cluster: ClusterSettings,
        memory: Mapping[NodeAddress, NodeMemory],
    ) -> dict[NodeAddress, Verdict]:
        verdicts: dict[NodeAddress, Verdict] = {}
        for node, probe in probes.items():
            facts = probe.facts if isinstance(probe.facts, GaleraFacts) else None
            remembered = memory.get(node)
            was_lagging = remembered.lagging if remembered else False
            verdicts[node] = judge(node, facts, probe, cluster.max_transactions_behind, was_lagging)
        return {**verdicts, **second_components(probes, verdicts)}

    def watch_key(self, facts: object) -> object:
        return facts.watch_key if isinstance(facts, GaleraFacts) else None

    def without_readings(self, facts: object) -> object:
        if not isinstance(facts, GaleraFacts):
            return facts
        return {k: v for k, v in facts.values.items() if k not in READINGS}

    def identity(self, facts: object) -> str | None:
        """The gcomm uuid: a restarted mysqld at the same address is another member."""
        return facts.get("wsrep_gcomm_uuid") or None if isinstance(facts, GaleraFacts) else None

    def choose_writers(
        self,
        verdicts: Mapping[NodeAddress, Verdict],
        roster: Roster,
        layout: LiveLayout,
        cluster: ClusterSettings,
    ) -> tuple[tuple[NodeAddress, ...], str]:
        rules = WriterRules(
            cluster.max_writers, cluster.fail_back, cluster.main_segment, cluster.preferred_writer
        )
        # G10: healthy writable nodes serve, lagging ones too (flow control bounds them); a
        # donor that still serves is the last resort
        return writers_by_weight(
            verdicts,
            roster,
            layout,
            rules,
            serving=(State.HEALTHY, State.LAGGING),
            last_resort=(State.LAST_RESORT,),
        )

    def assume(
        self,
        probes: Mapping[NodeAddress, ProbeResult],
        assumed: Mapping[NodeAddress, Assumed],
        cluster: ClusterSettings,
    ) -> dict[NodeAddress, ProbeResult]:
        """Probes that say the assumed nodes failed (what-if); the others as they were."""
        # loaded only by a what-if or a readiness question, never by a plain pass
        from checker_core.core.whatif import Assumed, WhatIfRefused, refused_probe

        result = dict(probes)
        for node, what in assumed.items():
            if what is Assumed.DOWN:
                result[node] = refused_probe(node)
                continue
            probe = probes.get(node)
            facts = probe.facts if probe is not None else None
            if probe is None or not isinstance(facts, GaleraFacts):
                raise WhatIfRefused(
                    f"{node}: its probe read nothing; only a node that answers can "
                    f"be assumed {what.label}"
                )
            if what is Assumed.LAGGING:
                limit = cluster.max_transactions_behind
                if limit <= 0:
                    raise WhatIfRefused(
                        f"cluster {cluster.name}: max_transactions_behind is 0 (no limit), so no "
                        "node is ever lagging"
                    )
                changed = {"wsrep_local_recv_queue": str(limit + 1)}
            else:
                changed = {
                    "wsrep_local_state": "2",
                    "wsrep_local_state_comment": "Donor/Desynced",
                    "wsrep_desync": "ON",
                }
            result[node] = replace(probe, facts=GaleraFacts({**facts.values, **changed}))
        return result
