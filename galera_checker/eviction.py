"""Evicting a Galera member whose mysqld is certainly gone (cluster.evict_dead_nodes). Pure.

While a dead member is still in the view, every commit of the cluster waits for it until
evs.suspect_timeout has passed (5 s by default): the new writer takes writes and cannot commit
them. A survivor told `evs.evict=<gcomm uuid>` drops the member at once.

Only a refused connection counts as proof: the host answered (RST) and nothing listens on the
port, so mysqld is gone. A timeout proves nothing (SIGSTOP, a loaded host, a slow network): such
a node is never evicted. Once the member is out of the survivors' view, the entries this checker
made are cleared from the nodes that list them (see clearings).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

from checker_core.core.model import NodeAddress
from checker_core.core.probes import ProbeFailure, ProbeResult
from galera_checker.policy import GaleraFacts


@dataclass(frozen=True, slots=True)
class Eviction:
    """Evict `node` (its gcomm uuid when known) on every survivor of the Primary component,
    `survivor` (a writer first) before the others. Told by one survivor alone, the others may
    go on waiting for their own suspect_timeout before they agree on the new view."""

    node: NodeAddress
    uuid: str | None  # None: found in the survivor's view by its address
    survivor: NodeAddress
    reason: str
    others: tuple[NodeAddress, ...] = ()


@dataclass(frozen=True, slots=True)
class Clearing:
    """Clear the eviction list of `node`: every entry in it is one of ours, and stale."""

    node: NodeAddress
    uuids: tuple[str, ...]


def facts_of(probe: ProbeResult | None) -> GaleraFacts | None:
    return probe.facts if probe is not None and isinstance(probe.facts, GaleraFacts) else None


def in_primary(probe: ProbeResult | None) -> bool:
    facts = facts_of(probe)
    return facts is not None and facts.get("wsrep_cluster_status") == "Primary"


def identities(probes: Mapping[NodeAddress, ProbeResult]) -> dict[NodeAddress, str]:
    """Each answering node's gcomm uuid, as it says itself."""
    found = {}
    for node, probe in probes.items():
        facts = facts_of(probe)
        uuid = facts.get("wsrep_gcomm_uuid") if facts is not None else None
        if uuid:
            found[node] = uuid
    return found


def evictions(
    probes: Mapping[NodeAddress, ProbeResult],
    roster: Collection[NodeAddress],
    known: Mapping[NodeAddress, str],
    writers: Collection[NodeAddress],
) -> tuple[Eviction, ...]:
    """The refused nodes of the roster to evict, each through a survivor in the Primary
    component (a writer first). No survivor: nothing to evict through, nothing evicted."""
    survivors = sorted(n for n in roster if in_primary(probes.get(n)))
    if not survivors:
        return ()
    survivor = next((n for n in survivors if n in writers), survivors[0])
    found = []
    for node in sorted(roster):
        probe = probes.get(node)
        if probe is None or probe.how_failed is not ProbeFailure.REFUSED:
            continue
        others = tuple(n for n in survivors if n != survivor)
        reason = f"connection refused: {probe.error}"
        found.append(Eviction(node, known.get(node), survivor, reason, others))
    return tuple(found)


def member_to_evict(eviction: Eviction, members: Mapping[str, str]) -> str | None:
    """The gcomm uuid to evict in a survivor's view (`members`: uuid -> client address): the
    uuid the node gave while it lived, else the member at its address; None when it is no
    longer in the view."""
    if eviction.uuid is not None and eviction.uuid in members:
        return eviction.uuid
    return next((u for u, a in sorted(members.items()) if a == str(eviction.node)), None)


def clearings(
    probes: Mapping[NodeAddress, ProbeResult],
    roster: Collection[NodeAddress],
    ours: Collection[str],
    members: Collection[str],
) -> tuple[Clearing, ...]:
    """Nodes in the Primary component whose eviction list holds only entries this checker
    made, none of them a member of the view any more (`members`: the view's gcomm uuids as a
    survivor lists them). Cleared at once, not when the node comes back: Galera takes a
    restarted node for the evicted one (the same uuid but for its clock sequence) and keeps it
    out while the entry stands, and an entry left in a list delays the next eviction."""
    if not ours:
        return ()
    current = set(identities({n: p for n, p in probes.items() if n in roster}).values())
    found = []
    for node in sorted(roster):
        probe = probes.get(node)
        facts = facts_of(probe)
        listed = evict_list(facts.get("wsrep_evs_evict_list") if facts else None)
        gone = not set(listed) & (set(members) | current)
        if listed and in_primary(probe) and set(listed) <= set(ours) and gone:
            found.append(Clearing(node, listed))
    return tuple(found)


def evict_list(text: str | None) -> tuple[str, ...]:
    """wsrep_evs_evict_list: uuids separated by commas (empty when none)."""
    return tuple(sorted(u.strip() for u in (text or "").split(",") if u.strip()))
