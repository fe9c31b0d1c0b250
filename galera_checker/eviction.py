"""Evicting a Galera member whose mysqld is certainly gone (cluster.evict_dead_nodes). Pure.

While a dead member is still in the view, every commit of the cluster waits for it until
evs.suspect_timeout has passed (5 s by default): the new writer takes writes and cannot commit
them. A survivor told `evs.evict=<gcomm uuid>` drops the member at once.

Only a refused connection counts as proof: the host answered (RST) and nothing listens on the
port, so mysqld is gone. A timeout proves nothing (SIGSTOP, a loaded host, a slow network): such
a node is never evicted. Once the member is out of the survivors' view, the entries this checker
made are cleared from the nodes that list them (see clearings).

A member is who it is, not where it is: the one evicted is the process this checker saw alive at
that address (the gcomm uuid it gave), never whoever is at the address now. A service manager
restarts a killed mysqld within seconds, under a new uuid, its client port closed while it
joins: evicting that one would keep it out. And survivors evict only while they are one Primary
component (the same cluster state uuid and view) holding a majority of that view: a port refused
on most nodes (a firewall, a wrong port) is no proof that most of the cluster died.

A member that is frozen (SIGSTOP, a VM pause, a stuck disk) or cut off by the network does not
refuse: it is silent, to the checker and to the group, and the group waits for it until
evs.suspect_timeout. With cluster.evict_unresponsive_nodes it is evicted once it has been silent
for unresponsive_after_ms and the survivors, a majority of one Primary view that answer the
checker, show that their replication is stalled on it (the actions ask each of them a causal
read, which cannot complete while a member of the view is silent). A member silent only to the
checker (a slow or broken link between the two) leaves the group's replication flowing: the
causal reads answer, and it is never evicted.

A causal read is one of three things: answered (in so many ms), stalled (it waited out the whole
stall wait) or unknown (it never ran: the connection was refused, e.g. 1040 Too many connections
from a stalled survivor, or the statement failed, or the pass ended before it did). The proof is
conservative: one measured answer from any survivor disproves the stall; an unknown read neither
proves nor disproves anything; the stall is proven only when no survivor answered and at least a
majority of the view's members (the silent one counted in the view) were measured stalled.

The stall wait is the cluster's own: k (STALL_FACTOR) times the causal-read latency measured
while the cluster was whole, never less than STALL_WAIT_S, and UNKNOWN_LATENCY_WAIT_S while no
latency was ever measured. It is never cut to what the pass has left: a daemon's actions wait
it off the pass, and a scheduler pass that cannot give it defers the eviction to the next pass.

The eviction lists of a cluster where either option is on are this checker's: an entry in a
Primary member's wsrep_evs_evict_list that is no member of the view (as a survivor lists it) and
no answering member's current gcomm uuid is stale, whoever put it there, and the list is cleared
(`evs.evict=` empties the whole list; no single entry can be taken out), only when every entry in
it is stale. Judged from the cluster's own state alone: a lost state file changes nothing.
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Mapping
from dataclasses import dataclass

from checker_core.core.hysteresis import NodeMemory
from checker_core.core.model import NodeAddress
from checker_core.core.probes import ProbeFailure, ProbeResult
from galera_checker.policy import facts_of


@dataclass(frozen=True, slots=True)
class Eviction:
    """Evict `node` (its gcomm uuid when known) on every survivor of the Primary component,
    `survivor` (a writer first) before the others. Told by one survivor alone, the others may
    go on waiting for their own suspect_timeout before they agree on the new view."""

    node: NodeAddress
    uuid: str | None  # the gcomm uuid it gave while it lived; None: never seen, not evicted
    survivor: NodeAddress
    reason: str
    others: tuple[NodeAddress, ...] = ()
    withheld: str | None = None  # why it is not evicted, though refused (or silent)
    # a silent member, not a refused one: evicted only once the survivors are seen stalled
    unresponsive: bool = False
    view: int = 0  # the size of the survivors' view (wsrep_cluster_size); 0: unknown

    @property
    def allowed(self) -> bool:
        return self.withheld is None


@dataclass(frozen=True, slots=True)
class Clearing:
    """Clear the eviction list of `node`: every entry in it is stale."""

    node: NodeAddress
    uuids: tuple[str, ...]


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
    """The refused nodes of the roster, each to evict through a survivor in the Primary
    component (a writer first), or withheld with the reason. No survivor: nothing to evict
    through, nothing said."""
    through = _through(probes, roster, writers)
    if through is None:
        return ()
    survivors, survivor, withheld = through
    view = _view_size(probes, survivors)
    found = []
    for node in sorted(roster):
        probe = probes.get(node)
        if probe is None or probe.how_failed is not ProbeFailure.REFUSED:
            continue
        others = tuple(n for n in survivors if n != survivor)
        reason = f"connection refused: {probe.error}"
        uuid = known.get(node)
        why = withheld
        if why is None and uuid is None:
            why = (
                "its gcomm uuid was never seen while it lived, and whoever is at its address "
                "now may be its restarted process"
            )
        found.append(Eviction(node, uuid, survivor, reason, others, why, view=view))
    return tuple(found)


# a probe that leaves a member's silence going: silent again, or unheard (cut short by the pass's
# deadline or by its wait for the silence to reach the threshold, before the member had its
# whole read timeout again). A silence is counted only from a question the member left
# unanswered for its whole timeout (silent_since); after that, only an answer ends it.
STILL_SILENT = frozenset({ProbeFailure.SILENT, ProbeFailure.UNHEARD})


def unresponsive_members(
    probes: Mapping[NodeAddress, ProbeResult],
    roster: Collection[NodeAddress],
    memory: Mapping[NodeAddress, NodeMemory],
    known: Mapping[NodeAddress, str],
    writers: Collection[NodeAddress],
    *,
    now: float,
    after_ms: int,
    before: bool = False,
) -> tuple[Eviction, ...]:
    """The roster's members silent for `after_ms` or more (memory's silent_since, monotonic
    `now`), each to evict through the survivors in the Primary component once they are seen
    stalled on it, or withheld with the reason. No survivor: nothing said. `before`: the
    members silent for less than `after_ms` instead, whose survivors' causal reads may start
    now so that the proof is ready when the time is up (nothing is evicted on them before)."""
    through = _through(probes, roster, writers) if after_ms > 0 else None
    if through is None:
        return ()
    survivors, survivor, withheld = through
    view = _view_size(probes, survivors)
    found = []
    for node in sorted(roster):
        probe, kept = probes.get(node), memory.get(node)
        if probe is None or kept is None or kept.silent_since is None:
            continue
        if probe.how_failed not in STILL_SILENT:
            continue
        silent_ms = (now - kept.silent_since) * 1000
        if (silent_ms < after_ms) is not before:
            continue
        uuid = known.get(node)
        why = withheld
        if why is None and uuid is None:
            why = "its gcomm uuid was never seen while it answered"
        reason = f"silent for {silent_ms:.0f} ms (unresponsive_after_ms {after_ms})"
        others = tuple(n for n in survivors if n != survivor)
        found.append(
            Eviction(node, uuid, survivor, reason, others, why, unresponsive=True, view=view)
        )
    return tuple(found)


def _through(
    probes: Mapping[NodeAddress, ProbeResult],
    roster: Collection[NodeAddress],
    writers: Collection[NodeAddress],
) -> tuple[list[NodeAddress], NodeAddress, str | None] | None:
    """Who an eviction goes through: the survivors in the Primary component, the one told
    first, and why they may not evict (None: they may). None without a survivor.

    The one told first is the survivor of the lowest gcomm uuid (a writer when none says its
    uuid): Galera makes the member of the lowest uuid the representative of the next view.
    Told first, it installs the view without the member at once (5-8 ms on the lab); told
    after another survivor, or at the same moment, the survivors agree on it only after
    about 0.5 s more (docs/eviction.md)."""
    survivors = sorted(n for n in roster if in_primary(probes.get(n)))
    if not survivors:
        return None
    said = identities({n: probes[n] for n in survivors if n in probes})
    if len(said) == len(survivors):
        survivor = min(survivors, key=lambda n: said[n])
    else:
        survivor = next((n for n in survivors if n in writers), survivors[0])
    return survivors, survivor, _no_majority(probes, survivors)


class ReadOutcome(enum.Enum):
    """What a survivor's causal read showed."""

    ANSWERED = "answered"  # it completed: the group delivers to every member
    STALLED = "stalled"  # it waited out the whole stall wait
    UNKNOWN = "unknown"  # it never ran (connect refused, a statement failed, no time): no proof


@dataclass(frozen=True, slots=True)
class CausalRead:
    """How a causal read on a node went, and how long it took."""

    outcome: ReadOutcome
    ms: float | None = None  # how long it took (answered) or waited (stalled); None: unknown
    why: str = ""  # why it is unknown

    def __str__(self) -> str:
        if self.outcome is ReadOutcome.UNKNOWN:
            return f"unknown ({self.why})"
        if self.outcome is ReadOutcome.STALLED:
            return f"stalled for {self.ms or 0:.0f} ms"
        return f"{self.ms or 0:.0f} ms"


@dataclass(frozen=True, slots=True)
class Stall:
    """Whether the survivors' replication was shown stalled, and what their reads were, said."""

    proven: bool
    said: str


def stalled_on(reads: Mapping[NodeAddress, CausalRead], view: int) -> Stall:
    """Whether the survivors' causal reads prove the group stalled on a silent member (`view`:
    the size of their view, the silent member included). One measured answer disproves it (the
    group replicates: the silence is the checker's link to the member alone); an unknown read
    neither proves nor disproves; the proof needs no answer and more than half of the view
    measured stalled. Nothing asked, or the view's size unknown: no proof."""
    said = ", ".join(f"{n} {reads[n]}" for n in sorted(reads))
    answered = [n for n, r in reads.items() if r.outcome is ReadOutcome.ANSWERED]
    stalled = sorted(n for n, r in reads.items() if r.outcome is ReadOutcome.STALLED)
    if answered:
        return Stall(False, f"the others replicate (causal reads: {said})")
    if not stalled or view <= 0 or len(stalled) * 2 <= view:
        measured = f"{len(stalled)} of a view of {view}" if view > 0 else "the view's size unknown"
        return Stall(
            False,
            f"too few survivors measured stalled to prove it ({measured}; causal reads: {said})",
        )
    return Stall(True, f"causal reads {said}")


def _view_size(probes: Mapping[NodeAddress, ProbeResult], survivors: list[NodeAddress]) -> int:
    """The size of the view the survivors agree on; 0 when they disagree or do not say."""
    sizes = {_fact(probes.get(n), "wsrep_cluster_size") for n in survivors}
    if len(sizes) != 1:
        return 0
    try:
        return int(next(iter(sizes)) or "")
    except ValueError:
        return 0


def _fact(probe: ProbeResult | None, name: str) -> str | None:
    facts = facts_of(probe)
    return facts.get(name) if facts is not None else None


def _no_majority(
    probes: Mapping[NodeAddress, ProbeResult], survivors: list[NodeAddress]
) -> str | None:
    """Why the survivors may not evict anyone: they are not one Primary component (state uuid,
    view), or they are not a majority of its view. None: they may."""
    views = {
        (
            f.get("wsrep_cluster_state_uuid"),
            f.get("wsrep_cluster_conf_id"),
            f.get("wsrep_cluster_size"),
        )
        for f in (facts_of(probes.get(n)) for n in survivors)
        if f is not None
    }
    if len(views) != 1:
        return f"the survivors do not agree on the view ({len(views)} different ones)"
    ((_, _, size_text),) = views
    try:
        size = int(size_text or "")
    except ValueError:
        return "the survivors' view size (wsrep_cluster_size) is unknown"
    if len(survivors) * 2 <= size:
        return (
            f"the {len(survivors)} node(s) that answer hold no majority of their view of {size}: "
            "refused ports on the others prove no death (a firewall, a wrong port)"
        )
    return None


def member_to_evict(eviction: Eviction, members: Mapping[str, str]) -> str | None:
    """The gcomm uuid to evict in a survivor's view (`members`: uuid -> client address): the
    uuid the node gave while it lived; None when that process is no longer in the view. Never
    the member found at its address: that may be its restarted process, joining."""
    if eviction.uuid is not None and eviction.uuid in members:
        return eviction.uuid
    return None


def needs_view(probes: Mapping[NodeAddress, ProbeResult], roster: Collection[NodeAddress]) -> bool:
    """Whether a Primary member's eviction list holds an entry that may be stale (no answering
    member's current gcomm uuid): only then is a survivor asked the view's members."""
    current = set(identities({n: p for n, p in probes.items() if n in roster}).values())
    return any(set(_listed(probes.get(n))) - current for n in roster if in_primary(probes.get(n)))


def clearings(
    probes: Mapping[NodeAddress, ProbeResult],
    roster: Collection[NodeAddress],
    members: Collection[str] | None,
) -> tuple[Clearing, ...]:
    """Members of the Primary component whose eviction list holds only stale entries: uuids in
    no member of the view (`members`: the view's gcomm uuids as a survivor lists them; None when
    it could not be asked: nothing is stale then) and no answering member's current gcomm uuid.
    Whoever made the entries: the lists of a cluster where eviction is on are the checker's.
    Cleared at once, not when the evicted node comes back: Galera takes a restarted node for the
    evicted one (the same uuid but for its clock sequence) and keeps it out while the entry
    stands, and an entry left in a list delays the next eviction. A list with a live member's
    entry is left whole: `evs.evict=` would empty it all."""
    if members is None:
        return ()
    current = set(identities({n: p for n, p in probes.items() if n in roster}).values())
    alive = set(members) | current
    found = []
    for node in sorted(roster):
        probe = probes.get(node)
        listed = _listed(probe)
        if listed and in_primary(probe) and not set(listed) & alive:
            found.append(Clearing(node, listed))
    return tuple(found)


def _listed(probe: ProbeResult | None) -> tuple[str, ...]:
    facts = facts_of(probe)
    return evict_list(facts.get("wsrep_evs_evict_list") if facts else None)


def evict_list(text: str | None) -> tuple[str, ...]:
    """wsrep_evs_evict_list: uuids separated by commas (empty when none)."""
    return tuple(sorted(u.strip() for u in (text or "").split(",") if u.strip()))


# the causal-read wait that counts as stalled: STALL_FACTOR times the cluster's own normal
# latency, never under STALL_WAIT_S; UNKNOWN_LATENCY_WAIT_S while no latency was measured
# 0.25 s: some 80 times a lab cluster's normal causal read (3 ms), and short enough that a frozen
# member is evicted within about unresponsive_after_ms + 0.4 s (docs/eviction.md, write-gap.md)
STALL_WAIT_S = 0.25
STALL_FACTOR = 4
UNKNOWN_LATENCY_WAIT_S = 1.0


def stall_wait(normal_ms: float | None) -> tuple[float, str]:
    """How long every survivor's causal read must wait before it counts as stalled (s), from
    the cluster's normal causal-read latency (ms; None: never measured), and that latency said."""
    if normal_ms is None:
        return UNKNOWN_LATENCY_WAIT_S, "normal latency unknown"
    return max(STALL_WAIT_S, STALL_FACTOR * normal_ms / 1000), f"normal latency {normal_ms:.0f} ms"


def stranded(
    probes: Mapping[NodeAddress, ProbeResult],
    roster: Collection[NodeAddress],
    evicted: Collection[str],
) -> tuple[NodeAddress, ...]:
    """Evicted processes that answer but cannot come back by themselves: the node is out of
    the Primary component (or not connected) and its own gcomm uuid is one this checker evicted
    (`evicted`) or one a Primary member lists as evicted. Such a process stays out until it is
    restarted; a restarted one has a new uuid and is not shown."""
    listed = {u for n in roster if in_primary(probes.get(n)) for u in _listed(probes.get(n))}
    found = []
    for node in sorted(roster):
        facts = facts_of(probes.get(node))
        if facts is None:
            continue
        uuid = facts.get("wsrep_gcomm_uuid")
        joined = in_primary(probes.get(node)) and facts.get("wsrep_connected") != "OFF"
        if uuid and not joined and (uuid in evicted or uuid in listed):
            found.append(node)
    return tuple(found)


def still_evicted(
    probes: Mapping[NodeAddress, ProbeResult],
    roster: Collection[NodeAddress],
    evicted: Mapping[str, str],
) -> dict[str, str]:
    """Which of the evicted uuids (uuid -> the node it was, "" unknown) are still worth keeping
    to show a node that needs a restart: not once the node left the roster, answers under
    another uuid (restarted) or is back in the Primary component; an entry of unknown node only
    while a member still lists it."""
    listed = {u for n in roster for u in _listed(probes.get(n))}
    current = identities({n: p for n, p in probes.items() if n in roster})
    kept = {}
    for uuid, where in evicted.items():
        node = _address(where)
        if node is None:
            if uuid in listed:
                kept[uuid] = where
            continue
        if node not in roster:
            continue
        now = current.get(node)
        if now is not None and (now != uuid or in_primary(probes.get(node))):
            continue  # restarted, or merged back
        kept[uuid] = where
    return kept


def _address(text: str) -> NodeAddress | None:
    host, _, port = text.rpartition(":")
    return NodeAddress(host, int(port)) if host and port.isdigit() else None
