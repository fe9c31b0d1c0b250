"""One pass's decision (rule S1): a pure function of ProxySQL's rows, the probes, the memory and
the settings. Each checker brings its Policy; everything else is shared.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Protocol

from checker_core.core.hysteresis import NodeMemory, settle, settles_at
from checker_core.core.model import ClusterRows, NodeAddress, Plan, ServerRow, sort_rows
from checker_core.core.planner import plan
from checker_core.core.probes import (
    CLEAR,
    PassSight,
    ProbeFailure,
    ProbeResult,
    ProbeTimeouts,
    Sight,
    sight_of,
    unanswered_after,
)
from checker_core.core.roles import Assignment, RoleRules, assign
from checker_core.core.roster import (
    LiveLayout,
    Roster,
    build_roster,
    check_rows,
    roster_templates,
)
from checker_core.core.settings import ClusterSettings
from checker_core.core.verdict import State, Verdict


class Policy(Protocol):
    """What a checker decides for itself: verdicts from probes, and who writes."""

    def judge_all(
        self,
        probes: Mapping[NodeAddress, ProbeResult],
        cluster: ClusterSettings,
        memory: Mapping[NodeAddress, NodeMemory],
    ) -> dict[NodeAddress, Verdict]: ...

    def choose_writers(
        self,
        verdicts: Mapping[NodeAddress, Verdict],
        roster: Roster,
        layout: LiveLayout,
        cluster: ClusterSettings,
    ) -> tuple[tuple[NodeAddress, ...], str]: ...

    def watch_key(self, facts: object) -> object:
        """What of a probe's facts says the node's state (no load counters): the daemon's
        watch between passes compares it with the last pass's."""
        ...

    def identity(self, facts: object) -> str | None:
        """Who the node is, as its probe says (not where it is): remembered per node."""
        ...

    def without_readings(self, facts: object) -> object:
        """A probe's facts without the readings that move with load alone (queues, counters):
        what failover readiness is worked out from besides the verdicts."""
        ...


@dataclass(frozen=True, slots=True)
class Decision:
    """One pass's decision: the roster, the verdicts, the roles and the plan that follows."""

    roster: Roster
    adopted: tuple[ServerRow, ...]  # template rows built this pass (empty templates), else ()
    raw: Mapping[NodeAddress, Verdict]  # what the probes said
    verdicts: Mapping[NodeAddress, Verdict]  # what the pass acts on (after hysteresis)
    assignment: Assignment
    plan: Plan
    memory: Mapping[NodeAddress, NodeMemory]
    sight: PassSight = CLEAR
    # what to remember when the plan is not loaded (paused, standby, deferred): each node on the
    # side it is live on, and no drain clock before the LOAD that makes the writer OFFLINE_SOFT
    unloaded_memory: Mapping[NodeAddress, NodeMemory] = field(default_factory=dict)
    # when one more probe can move a node its hysteresis holds (the clock of `now`): the
    # daemon's next pass for it, sooner than the cadence when that is later
    due: Mapping[NodeAddress, float] = field(default_factory=dict)

    @property
    def blind(self) -> bool:
        return self.sight.sight is Sight.BLIND

    def roster_edits_loaded(self, rows: ClusterRows) -> str | None:
        """What a LOAD of this plan made live besides its changes: the templates staged and
        never loaded, which were the roster this pass used. Live templates are never loaded
        by a pass: an edit staged over them is set aside for its LOAD (apply)."""
        if self.adopted or rows.live(self.plan.hostgroups.templates) or not self.plan.templates:
            return None
        parts = [
            f"{r.node} in hostgroup {r.hostgroup_id} weight {r.weight}" for r in self.plan.templates
        ]
        return (
            "this LOAD also made live the roster staged in mysql_servers and not loaded "
            f"before: {'; '.join(parts)}"
        )


QUEUE_SAMPLES = 10  # enough points for a drain rate, few enough to keep the state file small


def queue_history(
    verdict: Verdict, memory: NodeMemory, now: float
) -> tuple[tuple[float, int], ...]:
    """Queue lengths seen during a brownout, newest last; forgotten once it is over."""
    if verdict.state is not State.BROWNOUT or verdict.queue is None:
        return ()
    return (*memory.queue_samples, (now, verdict.queue))[-QUEUE_SAMPLES:]


@dataclass(frozen=True, slots=True)
class ClusterView:
    """What ProxySQL's rows say about one cluster, read once per pass: who is in the roster
    (adopted from the managed rows when the templates are empty) and where each node is live."""

    rows: ClusterRows
    roster: Roster
    adopted: tuple[ServerRow, ...]
    layout: LiveLayout


def view_of(rows: ClusterRows, cluster: ClusterSettings) -> ClusterView:
    """Raise BadRows for rows the tool must not act on, before any node is probed."""
    hostgroups = cluster.hostgroups
    templates, adopted = roster_templates(rows, hostgroups)
    roster = build_roster(templates, hostgroups)
    check_rows(rows, hostgroups, roster)
    return ClusterView(rows, roster, adopted, LiveLayout.of(rows, hostgroups))


def drained(
    layout: LiveLayout,
    in_use: Mapping[tuple[int, NodeAddress], int],
    memory: Mapping[NodeAddress, NodeMemory],
    cluster: ClusterSettings,
    now: float,
) -> frozenset[tuple[int, NodeAddress]]:
    """(hostgroup, node) of draining rows whose connections are done (ConnUsed 0), or whose
    drain ran too long."""
    done = set()
    for hostgroup, node in layout.drains:
        since = memory[node].drain_since if node in memory else None
        timed_out = since is not None and (now - since) * 1000 >= cluster.drain_timeout_ms
        if in_use.get((hostgroup, node), 0) == 0 or timed_out:
            done.add((hostgroup, node))
    return frozenset(done)


def decide(
    policy: Policy,
    view: ClusterView,
    probes: Mapping[NodeAddress, ProbeResult],
    *,
    memory: Mapping[NodeAddress, NodeMemory],
    cluster: ClusterSettings,
    in_use: Mapping[tuple[int, NodeAddress], int],
    now: float,
    interval_s: float = 0.0,
    raw: Mapping[NodeAddress, Verdict] | None = None,
    probe_wait_s: float = 0.0,
    timeouts: ProbeTimeouts | None = None,
) -> Decision:
    """`in_use`: ConnUsed per (hostgroup, node) of the rows draining now (empty when none).
    `now`: the monotonic clock; `interval_s`: the cadence retry_up / retry_down count in (0:
    probes only); `raw`: the policy's verdicts on these probes, when already judged;
    `probe_wait_s`: how long a pass waits for a silent node's probe before it decides;
    `timeouts`: the monitor's, by which each node's unanswered probes in a row are counted
    (core.probes.unanswered_after; None: not counted, as a what-if whose memory is not kept)."""
    roster, adopted, layout = view.roster, view.adopted, view.layout
    done = drained(layout, in_use, memory, cluster, now)
    # the checker's own probes judge, whatever ProxySQL's monitor made of a node (G16)
    if raw is None:
        raw = policy.judge_all(probes, cluster, memory)
    sight = sight_of(probes, roster.addresses)
    if sight.sight is Sight.BLIND:
        return blind_decision(view, raw, memory, sight)
    verdicts, judged = _verdicts(
        policy,
        view,
        raw,
        probes,
        memory,
        sight=sight,
        cluster=cluster,
        now=now,
        interval_s=interval_s,
        timeouts=timeouts,
    )
    assignment = _roles(policy, verdicts, view, cluster, drained=done)
    remembered = _drain_clocks(judged, assignment, now)
    return Decision(
        roster=roster,
        adopted=adopted,
        raw=raw,
        verdicts=verdicts,
        assignment=assignment,
        plan=replace(
            plan(roster, layout, assignment, verdicts),
            adopted=adopted,
            templates=adopted or sort_rows(view.rows.staged(layout.hostgroups.templates)),
        ),
        memory=remembered,
        sight=sight,
        unloaded_memory=_unloaded(remembered, memory, layout),
        due=_due(remembered, sight.silent, cluster, interval_s, probe_wait_s, now=now),
    )


def _roles(
    policy: Policy,
    verdicts: Mapping[NodeAddress, Verdict],
    view: ClusterView,
    cluster: ClusterSettings,
    *,
    drained: frozenset[tuple[int, NodeAddress]],
) -> Assignment:
    """The writers the policy chooses, then every node's place by the role rules."""
    roster, layout = view.roster, view.layout
    writers, how = policy.choose_writers(verdicts, roster, layout, cluster)
    rules = RoleRules(
        max_writers=cluster.max_writers,
        writer_is_also_reader=cluster.writer_is_also_reader,
        kill_demoted_writer_connections=cluster.kill_demoted_writer_connections,
    )
    return assign(writers, verdicts, roster, layout, rules=rules, drained=drained, why_writers=how)


def _verdicts(
    policy: Policy,
    view: ClusterView,
    raw: Mapping[NodeAddress, Verdict],
    probes: Mapping[NodeAddress, ProbeResult],
    memory: Mapping[NodeAddress, NodeMemory],
    *,
    sight: PassSight,
    cluster: ClusterSettings,
    now: float,
    interval_s: float,
    timeouts: ProbeTimeouts | None,
) -> tuple[dict[NodeAddress, Verdict], dict[NodeAddress, NodeMemory]]:
    """Every roster node's verdict after hysteresis, and its memory as this pass leaves it."""
    verdicts: dict[NodeAddress, Verdict] = {}
    judged: dict[NodeAddress, NodeMemory] = {}
    for node in view.roster.addresses:
        verdicts[node], judged[node] = _node_verdict(
            policy,
            node,
            _raw_verdict(raw, node),
            probes.get(node),
            memory.get(node),
            sight=sight,
            routed=view.layout.routed(node),
            cluster=cluster,
            now=now,
            interval_s=interval_s,
            timeouts=timeouts,
        )
    return verdicts, judged


def _drain_clocks(
    remembered: Mapping[NodeAddress, NodeMemory], assignment: Assignment, now: float
) -> dict[NodeAddress, NodeMemory]:
    """Each draining node's drain clock: started now, or kept from the pass that started it."""
    clocked: dict[NodeAddress, NodeMemory] = {}
    for node, kept in remembered.items():
        since = kept.drain_since
        draining = assignment.drains(node)
        clocked[node] = replace(
            kept, drain_since=(since if since is not None else now) if draining else None
        )
    return clocked


def _node_verdict(
    policy: Policy,
    node: NodeAddress,
    verdict: Verdict,
    probe: ProbeResult | None,
    before: NodeMemory | None,
    *,
    sight: PassSight,
    routed: bool,
    cluster: ClusterSettings,
    now: float,
    interval_s: float,
    timeouts: ProbeTimeouts | None,
) -> tuple[Verdict, NodeMemory]:
    """One node's settled verdict and what the pass remembers of it."""
    unanswered = _unanswered(before, probe, timeouts)
    if node in sight.silent:
        # the checker's own blindness: the node keeps its place and its counters, but for
        # the time its questions were out (its own, when the deadline cut them short)
        kept = before or NodeMemory(routable=routed)
        unseen = verdict.unseen(f"{verdict.reason} (not counted: {sight.reason})")
        return unseen, _with_unanswered(kept, unanswered)
    silent_since = _silent_since(probe, before, now)
    verdict = unresponsive(verdict, silent_since, cluster, now)
    settled, node_memory = settle(
        verdict,
        before,
        routed,
        cluster.retry_up,
        cluster.retry_down,
        now=now,
        interval_s=interval_s,
    )
    said = policy.identity(probe.facts) if probe is not None and probe.answered else None
    remembered = replace(
        node_memory,
        lagging=verdict.state is State.LAGGING,
        queue_samples=queue_history(verdict, node_memory, now),
        identity=said or node_memory.identity,
        silent_since=silent_since,
    )
    return settled, _with_unanswered(remembered, unanswered)


def _unloaded(
    remembered: Mapping[NodeAddress, NodeMemory],
    memory: Mapping[NodeAddress, NodeMemory],
    layout: LiveLayout,
) -> dict[NodeAddress, NodeMemory]:
    """What a pass that loads nothing (paused, standby, deferred) remembers: it changes nothing
    it would have to undo, so every node stays on the side ProxySQL routes it on now, whatever
    this pass would have moved (the streaks still count the probes), and live drains keep the
    clock they had."""
    live_drains = {n for _, n in layout.drains}
    return {
        node: replace(
            kept,
            routable=layout.routed(node),
            drain_since=memory[node].drain_since
            if node in live_drains and node in memory
            else None,
        )
        for node, kept in remembered.items()
    }


def _due(
    memory: Mapping[NodeAddress, NodeMemory],
    silent: frozenset[NodeAddress],
    cluster: ClusterSettings,
    interval_s: float,
    probe_wait_s: float = 0.0,
    *,
    now: float | None = None,
) -> dict[NodeAddress, float]:
    """A silent node's counters were not moved by this pass: asking it again at a time already
    past would only repeat the pass, so it waits for the cadence. A member silent for less than
    unresponsive_after_ms is asked again so that the pass, having waited for its probe
    (`probe_wait_s`), decides when that time is up: a routed one to take it out, one already
    out (a writer moved on its first silence) for its eviction, which only the pass that finds
    the time up starts (a pass of the cadence may come up to an interval later)."""
    found = {}
    for node, kept in memory.items():
        if node in silent:
            continue
        at = settles_at(kept, cluster.retry_up, cluster.retry_down, interval_s)
        out_at = unresponsive_at(kept, cluster)
        coming = out_at is not None and now is not None and out_at > now
        if out_at is not None and (kept.routable or coming):
            up = out_at - probe_wait_s
            at = up if at is None else min(at, up)
        if at is not None:
            found[node] = at
    return found


def unresponsive_at(kept: NodeMemory | None, cluster: ClusterSettings) -> float | None:
    """When the silence a pass saw reaches unresponsive_after_ms (the clock of `now`); None
    when the node is not silent or the option is off."""
    if cluster.unresponsive_after_ms <= 0 or kept is None or kept.silent_since is None:
        return None
    return kept.silent_since + cluster.unresponsive_after_ms / 1000


def _unanswered(
    kept: NodeMemory | None, probe: ProbeResult | None, timeouts: ProbeTimeouts | None
) -> tuple[int, float] | None:
    """The node's unanswered probes in a row and their time, counted with this probe; None
    when the timeouts are not given (nothing counted)."""
    if timeouts is None:
        return None
    return unanswered_after(kept, probe, timeouts.whole_ms)


def _with_unanswered(kept: NodeMemory, unanswered: tuple[int, float] | None) -> NodeMemory:
    if unanswered is None:
        return kept
    count, total = unanswered
    return replace(kept, unanswered_probes=count, unanswered_ms=total)


def _silent_since(probe: ProbeResult | None, before: NodeMemory | None, now: float) -> float | None:
    """Since when the node has not answered in time (None: it answered, or failed otherwise):
    from when the first question it left unanswered was asked, not from when that was seen.
    A silence made of unheard probes (S12) began at least their questions' time ago."""
    if probe is None or probe.how_failed is not ProbeFailure.SILENT:
        return None
    if before is not None and before.silent_since is not None:
        return before.silent_since
    unanswered = before.unanswered_ms if before is not None else 0.0
    return now - (unanswered + probe.elapsed_ms) / 1000


def unresponsive(
    verdict: Verdict, silent_since: float | None, cluster: ClusterSettings, now: float
) -> Verdict:
    """A member silent for unresponsive_after_ms is out at once (cluster.evict_unresponsive_nodes):
    whatever retry_down would wait for, no write goes to a node that may be frozen or cut off
    while the rest of the cluster stalls on it."""
    after_ms = cluster.unresponsive_after_ms
    if after_ms <= 0 or silent_since is None or verdict.hard:
        return verdict
    silent_ms = (now - silent_since) * 1000
    if silent_ms < after_ms:
        return verdict
    return replace(
        verdict,
        hard=True,
        reason=f"{verdict.reason}; silent for {silent_ms:.0f} ms, unresponsive_after_ms "
        f"{after_ms}: out at once (evict_unresponsive_nodes)",
    )


def blind_decision(
    view: ClusterView,
    raw: Mapping[NodeAddress, Verdict],
    memory: Mapping[NodeAddress, NodeMemory],
    sight: PassSight,
) -> Decision:
    """No node answered: keep every row where it is, staging included, adopt nothing, and count
    nothing. With nobody answering there is no better writer to move to, and ProxySQL's own
    monitor still shuns a server that really died."""
    roster, layout = view.roster, view.layout
    hostgroups = layout.hostgroups
    verdicts = {}
    for node in roster.addresses:
        verdict = _raw_verdict(raw, node)
        verdicts[node] = verdict.unseen(f"{verdict.reason} (not counted: no node answered)")
    kept = Assignment(
        writers=layout.writers,
        backup_writers=layout.backup_writers,
        readers=layout.readers,
        draining=layout.draining,
        why_writers="kept: no node answered",
    )
    staged = sort_rows(view.rows.staged(hostgroups.managed))
    return Decision(
        roster=roster,
        adopted=(),
        raw=raw,
        verdicts=verdicts,
        assignment=kept,
        plan=Plan(
            hostgroups=hostgroups,
            desired=staged,
            templates=sort_rows(view.rows.staged(hostgroups.templates)),
        ),
        memory={n: memory[n] for n in roster.addresses if n in memory},
        sight=sight,
    )


def _raw_verdict(raw: Mapping[NodeAddress, Verdict], node: NodeAddress) -> Verdict:
    return raw.get(node) or Verdict(node, State.DOWN, "not probed")
