"""One pass per cluster (read -> probe -> decide -> apply -> report) and the daemon's cadence.

Side effects live here and in proxysql.py, backend.py, memory.py, lock.py; everything between
the reads and the apply is checker_core.core.decide, which is pure.
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

from checker_core.core.decide import Decision, decide, view_of
from checker_core.core.leadership import ALONE, Leadership, ProxyAddress
from checker_core.core.model import (
    BadInput,
    BadRow,
    ClusterRows,
    Hostgroups,
    NodeAddress,
    sort_rows,
)
from checker_core.core.probes import ProbeResult
from checker_core.core.roster import BadRows
from checker_core.core.settings import ClusterSettings, Settings
from checker_core.edges.backend import PendingProbes, Prober
from checker_core.edges.lock import PassTimeout, cluster_lock, deadline
from checker_core.edges.memory import StateStore
from checker_core.edges.proxysql import (
    AdminAccessDenied,
    AdminClient,
    AdminError,
    ApplyFailed,
    ApplyResult,
    plan_statements,
)
from checker_core.passes.plugin import AdviceInput, AfterPass, CheckerKind
from checker_core.passes.result import (
    SAY_WHY_THEY_ENDED,
    Mode,
    Outcome,
    PassInputs,
    PassProgress,
    PassResult,
)

if TYPE_CHECKING:
    from checker_core.core.hysteresis import NodeMemory
    from checker_core.core.leadership import PeerMemory
    from checker_core.core.whatif import Assumed
    from checker_core.passes.plugin import Advice, Advisor

# a pass that reaches its probes with less than this share of their time left probes nobody
MIN_PROBE_SHARE_LEFT = 0.5
ACCESS_DENIED = "(error 1045)"
# how often a daemon whose proxy had no ProxySQL Cluster peers looks for them again
PEERS_RECHECK_S = 5.0
# a LOAD that another cluster's LOAD in the same second holds (peers pull only a newer epoch)
# waits for the next second this share of max_runtime_ms at most, asking again this often
WAIT_SECOND_SHARE = 0.25
SECOND_POLL_S = 0.02


class PassRunner:
    """Runs passes for every configured cluster; keeps connections when persistent (daemon)."""

    def __init__(
        self,
        settings: Settings,
        kind: CheckerKind,
        persistent: bool = False,
        *,
        store: StateStore | None = None,
        write_gate: threading.Lock | None = None,
    ) -> None:
        self.settings = settings
        self.kind = kind
        self.persistent = persistent
        self.store = store or StateStore(
            settings.run.state_dir, kind.checker, [c.name for c in settings.clusters]
        )
        # one writer at a time to this ProxySQL's mysql_servers: its admin has no transactions,
        # and a LOAD carries every staged row, another cluster's half-written ones too
        self.write_gate = write_gate or threading.Lock()
        # with several clusters: one runner each, so each pass has its own connections
        self._each: dict[str, PassRunner] = {}
        self._shared: dict[str, str] = {}  # clusters whose rosters share a node: why
        self._shared_until = 0.0
        self._shared_lock = threading.Lock()
        self.prober = Prober(settings.monitor, kind.probe, persistent)
        self._admin: AdminClient | None = None
        self._peers: PeerMemory | None = None
        self._alone_until = 0.0  # monotonic: the daemon found no peers; asks again after this
        # ProxySQL's own managers of our hostgroups: the refusals, from which connection, till when
        self._native: dict[str, str] = {}
        self._native_checked_by: AdminClient | None = None
        self._native_until = 0.0
        # ProxySQL's runtime variables an advisor asked for: from which connection, till when
        self._variables: dict[str, str] = {}
        self._variables_read_by: AdminClient | None = None
        self._variables_until = 0.0
        # the daemon's last roster per cluster: probed while ProxySQL's rows are being read
        self._last_roster: dict[str, tuple[NodeAddress, ...]] = {}
        # failures a what-if dry-run assumes (run --dry-run --assume-down ...)
        self.assumed: dict[NodeAddress, Assumed] = {}
        # the clock of the times a pass keeps (drains, streaks, queue samples): monotonic, so a
        # wall-clock step never stretches a drain or a hysteresis; the state file says its boot
        self.clock: Callable[[], float] = time.monotonic
        self.monotonic: Callable[[], float] = time.monotonic

    def admin(self) -> AdminClient:
        if self._admin is None:
            self._admin = AdminClient.connect(self.settings.proxysql)
        return self._admin

    def close(self) -> None:
        if self._admin is not None:
            self._admin.close()
            self._admin = None
        self.prober.close()
        for each in self._each.values():
            each.close()
        self._each = {}

    def _refuse_native_manager(self, admin: AdminClient, cluster: ClusterSettings) -> None:
        """A cluster whose hostgroups ProxySQL's own mysql_*_hostgroups tables manage too is
        bad input: two managers would fight over every server. Asked once per scheduler pass,
        and by the daemon once per connection and then every PEERS_RECHECK_S; before anything
        is written."""
        from checker_core.edges import native

        due = self._native_checked_by is not admin or self.monotonic() >= self._native_until
        if due:
            self._native = native.conflicts(admin, self.settings.clusters)
            self._native_checked_by = admin
            self._native_until = self.monotonic() + PEERS_RECHECK_S
        refused = self._native.get(cluster.name)
        if refused is not None:
            raise native.NativeConflict(refused)

    def _listed_peers(self, admin: AdminClient) -> tuple[ProxyAddress, ...]:
        """The proxy's ProxySQL Cluster peers: none with cluster = off, nor while the daemon
        found none a moment ago (a steady pass then costs no extra query)."""
        proxysql = self.settings.proxysql
        if proxysql.cluster == "off":
            return ()
        if self.persistent and self.monotonic() < self._alone_until:
            return ()
        from checker_core.edges.proxysql_peers import list_peers

        listed = list_peers(admin)
        if not listed and self.persistent:
            self._alone_until = self.monotonic() + PEERS_RECHECK_S
        return listed

    def _leadership(
        self, admin: AdminClient, listed: tuple[ProxyAddress, ...], remember: bool
    ) -> Leadership:
        """This checker's role among the ProxySQL Cluster's checkers (ALONE without peers)."""
        if not listed:
            return ALONE
        from checker_core.edges.proxysql_peers import read_cluster_view

        proxysql = self.settings.proxysql
        view = read_cluster_view(admin, proxysql.me, listed)
        # the rule and its records are loaded only by a proxy that has peers
        from checker_core.core.peers import choose_actor

        if self._peers is None:  # a scheduler pass, or the daemon's first: from the state file
            self._peers = self.store.load_peers(proxysql.me)
        leadership = choose_actor(view, self._peers)
        if remember and leadership.memory is not None:
            self._peers = leadership.memory
            self.store.save_peers(proxysql.me, leadership.memory)
        return leadership

    def warm_up(self) -> int:
        """Open the daemon's connections (ProxySQL, every node in the clusters' hostgroups)
        outside any pass deadline, so the first pass after a start or reload is not blind for
        want of connects, which cost far more than a steady pass. Returns how many nodes
        answered; a failure here is left for the first pass to report."""
        hostgroups = {h for c in self.settings.clusters for h in c.hostgroups.all}
        try:
            rows = self.admin().read_rows(hostgroups).runtime
        except (AdminError, BadRow):
            self._drop_admin()
            return 0
        nodes = sorted({r.node for r in rows})
        monitor = self.settings.monitor
        budget = (monitor.connect_timeout_ms + monitor.read_timeout_ms) / 1000
        probes = self.prober.probe_all(nodes, self.monotonic() + budget)
        return sum(1 for p in probes.values() if p.answered)

    def run_all(self, mode: Mode) -> list[PassResult]:
        """One pass per cluster, all at once: one cluster's slow or dead nodes never delay
        another's pass."""
        clusters = self.settings.clusters
        if len(clusters) == 1:
            return [self._isolated(clusters[0], mode)]
        from checker_core.fanout import run_each  # several clusters only

        shared = self._shared_nodes()
        jobs: list[Callable[[], PassResult]] = []
        for cluster in clusters:
            if cluster.name in shared:
                message = f"bad input, nothing changed: {shared[cluster.name]}"
                refused = PassResult(cluster.name, "-", Outcome.BAD_INPUT, 0.0, message)
                jobs.append(functools.partial(_given, refused))
            else:
                jobs.append(functools.partial(self.runner_for(cluster)._isolated, cluster, mode))
        return run_each(jobs, [c.name for c in clusters])

    def run_one(self, cluster: ClusterSettings, mode: Mode) -> PassResult:
        """One cluster's pass on its own runner, beside the others' (the daemon's loop of one
        cluster among several). Clusters whose rosters name the same node are asked about once
        per PEERS_RECHECK_S, for all the loops."""
        try:
            with self._shared_lock:
                if self.monotonic() >= self._shared_until:
                    self._shared = self._shared_nodes()
                    self._shared_until = self.monotonic() + PEERS_RECHECK_S
                shared = self._shared.get(cluster.name)
        except Exception as exc:  # the net, as _isolated's: one cluster's failed pass
            self._drop_admin()
            message = f"internal error, nothing more done: {type(exc).__name__}: {exc}"
            return PassResult(cluster.name, "-", Outcome.FAILED, 0.0, message)
        if shared is not None:
            message = f"bad input, nothing changed: {shared}"
            return PassResult(cluster.name, "-", Outcome.BAD_INPUT, 0.0, message)
        return self.runner_for(cluster)._isolated(cluster, mode)

    def runner_for(self, cluster: ClusterSettings) -> PassRunner:
        """The runner of this one cluster (its own connections, prober and peers' view); the
        state store and the ProxySQL write gate are this runner's."""
        each = self._each.get(cluster.name)
        if each is None or each.settings.clusters != (cluster,):
            if each is not None:
                each.close()
            each = PassRunner(
                replace(self.settings, clusters=(cluster,)),
                self.kind,
                self.persistent,
                store=self.store,
                write_gate=self.write_gate,
            )
            self._each[cluster.name] = each
        each.assumed, each.clock, each.monotonic = self.assumed, self.clock, self.monotonic
        return each

    def _isolated(self, cluster: ClusterSettings, mode: Mode) -> PassResult:
        """One cluster's pass; whatever escapes it is that cluster's failed pass, never the
        end of the others' passes or of the daemon (a net: every failure a pass expects
        already has its own outcome)."""
        try:
            return self.run(cluster, mode)
        except Exception as exc:  # the net itself
            self._drop_admin()
            message = f"internal error, nothing more done: {type(exc).__name__}: {exc}"
            return PassResult(cluster.name, "-", Outcome.FAILED, 0.0, message)

    def _shared_nodes(self) -> dict[str, str]:
        """Clusters whose rosters name the same node: their checkers would fight over it."""
        try:
            templates = [h for c in self.settings.clusters for h in c.hostgroups.templates]
            rows = self.admin().read_rows(templates).runtime
        except (AdminError, BadRow):
            return {}  # each pass reports the admin problem, or its own bad row, itself
        owners: dict[NodeAddress, list[tuple[str, int]]] = {}
        for cluster in self.settings.clusters:
            nodes: dict[NodeAddress, int] = {}
            for row in rows:  # sorted by hostgroup: a node is named by its first template
                if row.hostgroup_id in cluster.hostgroups.templates:
                    nodes.setdefault(row.node, row.hostgroup_id)
            for node, hostgroup in nodes.items():
                owners.setdefault(node, []).append((cluster.name, hostgroup))
        problems: dict[str, str] = {}
        for node, claims in sorted(owners.items()):
            if len(claims) > 1:
                where = " and ".join(f"cluster {name} (hostgroup {hg})" for name, hg in claims)
                for name, _ in claims:
                    problems.setdefault(name, f"{node} is in the roster of {where}")
        return problems

    def run(self, cluster: ClusterSettings, mode: Mode) -> PassResult:
        progress = PassProgress(cluster.name, os.urandom(6).hex(), self.monotonic())
        if mode is not Mode.APPLY:
            return self._guarded(cluster, mode, progress)
        with contextlib.ExitStack() as stack:
            try:
                self.store.ensure_dir()
                held = stack.enter_context(cluster_lock(self.store.lock_path(cluster.name)))
            except OSError as exc:
                return self._finish(
                    progress,
                    Outcome.BAD_INPUT,
                    f"bad input, nothing changed: run.state_dir {self.store.state_dir}: "
                    f"cannot create or write its lock file ({exc.strerror or exc})",
                )
            if not held:
                return self._finish(progress, Outcome.BUSY, "another pass holds the lock; skipped")
            return self._guarded(cluster, mode, progress)

    def _assume(
        self,
        progress: PassProgress,
        probes: Mapping[NodeAddress, ProbeResult],
        assumed: Mapping[NodeAddress, Assumed],
    ) -> Decision:
        """The dry-run's what-if: the decision of the pass that acts on the assumed failures."""
        from checker_core.core.whatif import WhatIfRefused

        inputs = progress.inputs
        assert inputs is not None
        progress.assumed = tuple(f"{n} {a.label}" for n, a in sorted(assumed.items()))
        what_if = inputs.what_if(probes)
        try:
            return what_if.decision(assumed)
        except WhatIfRefused as exc:
            raise BadRows([str(exc)]) from None

    def _advise(
        self,
        admin: AdminClient,
        advisor: Advisor,
        cluster: ClusterSettings,
        probes: Mapping[NodeAddress, ProbeResult],
    ) -> tuple[Advice, ...]:
        """The advisor's word on this pass; ProxySQL's variables asked once per scheduler pass,
        by the daemon once per connection and then every PEERS_RECHECK_S."""
        wanted = advisor.proxy_variables(cluster)
        due = self._variables_read_by is not admin or self.monotonic() >= self._variables_until
        if wanted and due:
            try:
                self._variables = admin.read_runtime_variables(wanted)
            except AdminError:
                # advice is never worth a pass: without the variables the advisor says less
                self._variables = {}
            self._variables_read_by = admin
            self._variables_until = self.monotonic() + PEERS_RECHECK_S
        return advisor.advise(AdviceInput(cluster, probes, self._variables, self.monotonic()))

    def _act_on_nodes(self, progress: PassProgress, cluster: ClusterSettings, acting: bool) -> None:
        """The checker's actions on the nodes (evictions), after the LOAD: routing first."""
        actions, decision = self.kind.actions, progress.decision
        if actions is None or decision is None:
            return
        left = self.settings.run.max_runtime_ms / 1000 - (self.monotonic() - progress.started)
        done = actions.after_pass(
            AfterPass(
                cluster,
                decision,
                progress.probes,
                self.settings.node_admin,
                self.store,
                max(0.05, left * 0.8),
                acting,
            )
        )
        progress.evictions += done.evictions
        progress.node_actions += done.said + done.failed
        for failed in done.failed:
            progress.warn(failed)

    def _second_taken(self, admin: AdminClient) -> tuple[Outcome, str] | None:
        """Asked holding the write gate, just before a LOAD on a proxy with peers: another of
        this process's clusters may have LOADed in this second since the pass read its view,
        and the peers pull only a newer epoch. The LOAD waits for the proxy's next second,
        within the pass's time; past that it is deferred to the next pass."""
        from checker_core.edges.proxysql_peers import loaded_this_second

        limit = self.settings.run.max_runtime_ms / 1000 * WAIT_SECOND_SHARE
        waited_until = self.monotonic() + limit
        while loaded_this_second(admin):
            if self.monotonic() >= waited_until:
                return Outcome.DEFERRED, (
                    "LOAD deferred to the next pass: mysql_servers was loaded in this same "
                    "second (another cluster's pass, or a pull from a peer) and the peers would "
                    "not pull a LOAD with no newer epoch"
                )
            time.sleep(SECOND_POLL_S)
        return None

    def _repair_staging(
        self, admin: AdminClient, rows: ClusterRows, hostgroups: Hostgroups, progress: PassProgress
    ) -> None:
        """Staging rows of the managed hostgroups that differ from what is live (a pass that
        died between its writes and its LOAD) are put back to what is live, without a LOAD."""
        from checker_core.core.roster import live_intent

        intent = live_intent(rows, hostgroups)
        if sort_rows(rows.staged(hostgroups.managed)) == intent:
            return
        written = admin.stage(hostgroups.managed, intent, writer=hostgroups.writer)
        progress.warn(
            f"staging rows that differed from what is live (a pass cut short before its LOAD) "
            f"put back to what is live ({written} statement(s)), nothing loaded"
        )

    def _put_back_delay(self, admin: AdminClient, cluster: str, progress: PassProgress) -> None:
        """A switchover that died midway left ProxySQL's auto-increment delay lowered: the
        acting pass puts the operator's value back."""
        from checker_core.edges import proxysql_sessions

        if proxysql_sessions.leftover(self.store, cluster):
            try:
                said = proxysql_sessions.restore_delay(admin, self.store, cluster)
            except AdminError as exc:
                said = f"a switchover's lowered auto-increment delay not put back yet ({exc})"
            if said:
                progress.warn(said)

    def _remember(
        self, progress: PassProgress, cluster: str, memory: Mapping[NodeAddress, NodeMemory]
    ) -> None:
        """The counters saved, once a pass; a state dir that fails (full, unwritable) costs a
        warning and a retry next pass, never the pass: what it did to ProxySQL stands."""
        if progress.remembered:
            return
        progress.remembered = True
        progress.state_failed(self.store.save(cluster, memory))

    def _owe_save(self, progress: PassProgress, cluster: str, owed: bool) -> None:
        progress.state_failed(self.store.owe_save(cluster, owed))

    def _finish(self, progress: PassProgress, outcome: Outcome, message: str) -> PassResult:
        now = self.monotonic()
        limit_ms = self.settings.run.max_runtime_ms
        spent_ms = (now - progress.started) * 1000
        if spent_ms > limit_ms and outcome not in SAY_WHY_THEY_ENDED:
            # whatever ran long (a slow node action, a lost alarm), the pass says so
            progress.warn(f"the pass took {spent_ms:.0f} ms, over run.max_runtime_ms ({limit_ms})")
        return progress.result(outcome, message, now)

    def _guarded(self, cluster: ClusterSettings, mode: Mode, progress: PassProgress) -> PassResult:
        """The pass under its deadline, with every failure turned into an outcome made from what
        the pass had done: one whose LOAD went out reports the change, whatever came after."""
        budget_ms = self.settings.run.max_runtime_ms
        try:
            left = budget_ms / 1000 - (self.monotonic() - progress.started)
            with deadline(max(0.001, left), budget_ms):
                return self._pass(cluster, mode, progress)
        except (BadInput, AdminAccessDenied) as exc:
            return self._finish(progress, Outcome.BAD_INPUT, f"bad input, nothing changed: {exc}")
        except ApplyFailed as exc:
            self._drop_admin()
            failed = f"apply failed, live rows unchanged: {exc}"
            return self._finish(progress, Outcome.FAILED, failed)
        except (AdminError, PassTimeout) as exc:
            self._drop_admin()
            if progress.loaded:
                return self._loaded_then_failed(cluster, progress, str(exc))
            said = f"{exc}; nothing loaded" if isinstance(exc, PassTimeout) else str(exc)
            return self._finish(progress, Outcome.FAILED, said)
        except Exception as exc:  # the net: still made from what the pass had done
            self._drop_admin()
            failure = f"internal error: {type(exc).__name__}: {exc}"
            if progress.loaded:
                return self._loaded_then_failed(cluster, progress, failure)
            return self._finish(progress, Outcome.FAILED, f"{failure}; nothing loaded")

    def _loaded_then_failed(
        self, cluster: ClusterSettings, progress: PassProgress, failure: str
    ) -> PassResult:
        """The LOAD went out and then the pass failed (its deadline, a lost connection): the
        change is live, so the pass reports it as loaded, remembers its counters, and owes the
        SAVE it did not finish."""
        assert progress.decision is not None
        persist = self.settings.run.persist
        saved = progress.applied is not None and progress.applied.saved
        self._remember(progress, cluster.name, progress.decision.memory)
        after = ""
        if persist and not saved:
            after = "; SAVE MYSQL SERVERS TO DISK owed to the next pass"
            self._owe_save(progress, cluster.name, True)
        progress.warn(f"{failure} after its LOAD: the change is live{after}")
        if progress.applied is None:
            progress.applied = ApplyResult(staged=0, loaded=True, saved=False)
        return self._finish(progress, Outcome.CHANGED, Outcome.CHANGED.label)

    def _probe_roster(
        self,
        nodes: tuple[NodeAddress, ...],
        pending: PendingProbes | None,
        deadline: float,
    ) -> dict[NodeAddress, ProbeResult]:
        """The roster's probes: those begun before the rows were read, and the rest now (a
        node new to the roster). Results for nodes that left the roster are dropped."""
        if pending is None:
            return self.prober.probe_all(nodes, deadline)
        started = set(pending.nodes)
        late = self.prober.start([n for n in nodes if n not in started], deadline)
        # a node that left the roster is not waited for: it may be the hung one removed
        found = {**pending.collect(deadline, only=nodes), **late.collect(deadline)}
        return {n: found[n] for n in nodes}

    def _drop_admin(self) -> None:
        if self._admin is not None:
            self._admin.close()
            self._admin = None

    def _pass(self, cluster: ClusterSettings, mode: Mode, progress: PassProgress) -> PassResult:
        started = progress.started
        pinned = self.store.writer_pin(cluster.name) if cluster.preferred_writer is None else None
        if pinned is not None:
            cluster = replace(cluster, preferred_writer=pinned)
        hostgroups = cluster.hostgroups
        probe_budget = self.settings.run.probe_budget_ms / 1000
        probe_deadline = started + probe_budget
        memory, warning = self.store.load(cluster.name)
        if warning:
            progress.warn(warning)
        # A roster rarely changes between passes: the last one (the daemon's, or the nodes the
        # state file remembers) is probed while ProxySQL is reached and its rows are read, so
        # a steady pass costs the longer of the two waits, not their sum.
        early = self._last_roster.get(cluster.name, ()) if self.persistent else tuple(memory)
        pending = self.prober.start(early, probe_deadline) if early else None
        admin = self.admin()
        rows = admin.read_rows(hostgroups.all)
        view = view_of(rows, cluster)
        roster = view.roster
        if self.persistent:
            self._last_roster[cluster.name] = roster.addresses
        if not roster.nodes:
            return self._finish(
                progress,
                Outcome.BAD_INPUT,
                f"no roster: hostgroups {', '.join(map(str, hostgroups.all))} hold no server; "
                "add the nodes to the writer/reader hostgroups or the templates",
            )
        left = probe_deadline - self.monotonic()
        if left < probe_budget * MIN_PROBE_SHARE_LEFT:
            # a node must not be judged down on a probe the pass left it no time for
            spent = (self.monotonic() - started) * 1000
            return self._finish(
                progress,
                Outcome.FAILED,
                f"reading ProxySQL took {spent:.0f} ms of run.max_runtime_ms "
                f"({self.settings.run.max_runtime_ms}), leaving {max(0.0, left) * 1000:.0f} ms "
                "to probe; nothing changed",
            )
        # asked while the probes are under way: for a proxy without peers, the usual case,
        # these questions then cost the pass no wait of their own
        self._refuse_native_manager(admin, cluster)
        listed = self._listed_peers(admin)
        probes = self._probe_roster(roster.addresses, pending, probe_deadline)
        if probes and all(p.error and ACCESS_DENIED in p.error for p in probes.values()):
            # a wrong monitor password, not a dead cluster: taking every node out would be
            # an outage caused by a typo
            user = self.settings.monitor.user
            return self._finish(
                progress,
                Outcome.BAD_INPUT,
                f"bad input, nothing changed: every node refused the monitor account {user!r} "
                f"({next(iter(probes.values())).error})",
            )
        layout = view.layout
        # ConnUsed only matters, and is only read, while a demoted writer drains or ProxySQL
        # keeps a removed server for the connections its clients still hold
        watched = {r.hostgroup_id for r in layout.leaving} | {hg for hg, _ in layout.drains}
        pool = admin.connections_in_use(watched) if watched else {}
        now = self.clock()
        decision = decide(
            self.kind.policy,
            view,
            probes,
            memory=memory,
            cluster=cluster,
            in_use=pool,
            now=now,
            interval_s=self.settings.run.interval_ms / 1000,
        )
        progress.inputs = PassInputs(self.kind.policy, view, memory, cluster, now)
        assumed = {n: a for n, a in self.assumed.items() if n in roster.addresses}
        if assumed and mode is Mode.DRY_RUN:
            decision = self._assume(progress, probes, assumed)
        progress.decided(decision, layout, probes, pool)
        if self.kind.advisor is not None and not decision.blind:
            progress.advice = self._advise(admin, self.kind.advisor, cluster, probes)
        if decision.blind:
            # no LOAD, no staging repair, no counter saved: the pass saw nothing to act on
            return self._finish(progress, Outcome.BLIND, decision.sight.reason)
        persist = self.settings.run.persist
        save_owed = persist and self.store.save_owed(cluster.name)
        progress.statements = plan_statements(
            decision.plan, rows.staging, persist, save_owed=save_owed
        )
        leadership = self._leadership(admin, listed, remember=mode is Mode.APPLY)
        progress.leadership = leadership
        if leadership.split:
            progress.warn(leadership.split)
        if leadership.clock_skew_s and not decision.plan.needs_load:
            # nothing held yet: said before it holds a failover
            progress.warn(f"clock skew, the next LOAD would be held: {leadership.load_wait}")
        if mode is not Mode.APPLY:
            self._act_on_nodes(progress, cluster, acting=False)
            return self._finish(progress, Outcome.PLANNED, "planned")
        held: tuple[Outcome, str] | None = None
        paused = self.store.paused(cluster.name)
        if not leadership.acts:
            # never a LOAD from a standby, even when its proxy's rows differ: two LOADs on two
            # peers in the same second split a ProxySQL Cluster for good
            held = (Outcome.STANDBY, leadership.reason)
        elif leadership.load_wait and decision.plan.needs_load:
            skewed = leadership.clock_skew_s > 0
            held = (Outcome.CLOCK_SKEW if skewed else Outcome.DEFERRED, leadership.load_wait)
        elif paused is not None:
            held = (Outcome.PAUSED, f"paused by {paused}")
        with self.write_gate:
            if held is None and listed and decision.plan.needs_load:
                held = self._second_taken(admin)
            if held is not None:
                # nothing goes live, and nothing is left for someone else's LOAD to make live
                self._repair_staging(admin, rows, hostgroups, progress)
                self._remember(progress, cluster.name, decision.unloaded_memory)
                return self._finish(progress, *held)
            applied = admin.apply(
                decision.plan,
                persist,
                rows.staging,
                save_owed=save_owed,
                on_load=progress.mark_loaded,
            )
        progress.applied = applied
        self._remember(progress, cluster.name, decision.memory)
        if persist and (applied.loaded or save_owed):
            # disk equal to runtime is part of converged: a failed SAVE is retried next pass
            self._owe_save(progress, cluster.name, not applied.saved)
        roster_edits = _pending_templates(decision, rows) if applied.loaded else None
        for said in (roster_edits, applied.save_error):
            if said:
                progress.warn(said)
        self._act_on_nodes(progress, cluster, acting=True)
        self._put_back_delay(admin, cluster.name, progress)
        outcome = Outcome.CHANGED if applied.loaded else Outcome.UNCHANGED
        return self._finish(progress, outcome, outcome.label)


def _pending_templates(decision: Decision, rows: ClusterRows) -> str | None:
    """What a LOAD of ours made live besides our changes: template rows someone staged and had
    not loaded (ProxySQL loads mysql_servers whole)."""
    hostgroups = decision.plan.hostgroups.templates
    live, staged = set(rows.live(hostgroups)), set(decision.plan.templates)
    if decision.adopted or live == staged:
        return None
    added = sorted(staged - live, key=lambda r: r.key)
    gone = sorted(live - staged, key=lambda r: r.key)
    parts = [f"{r.node} in hostgroup {r.hostgroup_id} weight {r.weight}" for r in added]
    parts += [f"{r.node} out of hostgroup {r.hostgroup_id}" for r in gone]
    return (
        "this LOAD also made live the roster edits staged in mysql_servers and not loaded "
        f"before: {'; '.join(parts)}"
    )


def _given(result: PassResult) -> PassResult:
    return result
