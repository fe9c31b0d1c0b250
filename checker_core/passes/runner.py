"""One cluster's pass, read -> probe -> decide -> gate -> apply -> node actions -> report.
A runner knows its own cluster and nothing of the others (checker_core.passes.fleet runs them
side by side).

`_pass` is the walk, step by step; the steps follow it in the order they run. Every rule that
decides (what a node is, who writes, whether a pass stops or holds) is pure code in
checker_core.core and checker_core.passes.gate; the I/O is the edges', reached through the
ports the constructor takes.
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import threading
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

from checker_core.core.decide import Decision, decide, view_of
from checker_core.core.hysteresis import with_silence
from checker_core.core.model import BadInput, NodeAddress
from checker_core.core.probes import STILL_UNANSWERED, ProbeTimeouts, promote_unheard
from checker_core.core.statements import ApplyResult, StagingRefused, plan_statements
from checker_core.edges.admin_errors import AdminAccessDenied, AdminError, ApplyFailed
from checker_core.edges.backend import Prober
from checker_core.edges.deadline import Deadline, PassTimeout
from checker_core.edges.lock import cluster_lock
from checker_core.edges.memory import StateStore
from checker_core.edges.proxysql import AdminClient
from checker_core.passes import gate
from checker_core.passes.apply_window import time_to_apply, writes_allowed
from checker_core.passes.ledger import Ledger
from checker_core.passes.plugin import AdviceInput, AfterPass, CheckerKind
from checker_core.passes.ports import Ports
from checker_core.passes.proxy_facts import ProxyFacts, SharedFacts
from checker_core.passes.read import PassRead, cluster_rows, probe_roster, silent_probe_wait_s
from checker_core.passes.result import (
    Mode,
    Outcome,
    PassInputs,
    PassProgress,
    PassResult,
)

if TYPE_CHECKING:
    from pathlib import Path

    from checker_core.core.hysteresis import NodeMemory
    from checker_core.core.leadership import Leadership, ProxyAddress
    from checker_core.core.probes import ProbeResult
    from checker_core.core.settings import ClusterSettings, Settings
    from checker_core.core.whatif import Assumed
    from checker_core.passes.kept import Kept
    from checker_core.passes.plugin import LaterActions, NodeActions
    from checker_core.passes.shared_rows import SharedRows


class PassRunner:
    """Runs the passes of `settings`' one cluster; keeps connections when persistent (daemon).

    Its ports (passes.ports: ProxySQL's admin, the prober, the clocks) are given here, never
    set afterwards. `assumed`: the failures a what-if dry-run assumes (run --dry-run
    --assume-down ...).
    """

    def __init__(
        self,
        settings: Settings,
        kind: CheckerKind,
        persistent: bool = False,
        *,
        ports: Ports | None = None,
        store: StateStore | None = None,
        write_gate: threading.Lock | None = None,
        assumed: Mapping[NodeAddress, Assumed] | None = None,
        shared_rows: SharedRows | None = None,
        shared_facts: SharedFacts | None = None,
    ) -> None:
        if len(settings.clusters) != 1:
            raise ValueError(
                f"a runner runs one cluster, not {len(settings.clusters)}: a Fleet runs several"
            )
        self.settings = settings
        self.cluster: ClusterSettings = settings.clusters[0]
        self.kind = kind
        self.persistent = persistent
        self.store = store or StateStore(
            settings.run.state_dir, kind.checker, [c.name for c in settings.clusters]
        )
        # one writer at a time to this ProxySQL's mysql_servers: its admin has no transactions,
        # and a LOAD carries every staged row, another cluster's half-written ones too
        self.write_gate = write_gate or threading.Lock()
        self.ports = ports = ports or Ports()
        self._connect_admin = ports.connect_admin
        self._new_prober = ports.new_prober or functools.partial(_new_prober, kind, persistent)
        self.clock = ports.clock
        self.monotonic = ports.monotonic
        self.assumed: Mapping[NodeAddress, Assumed] = dict(assumed or {})
        self.prober = self._new_prober(settings)
        self.facts = ProxyFacts(
            settings, self.store, persistent, ports.monotonic, shared=shared_facts
        )
        self.ledger = Ledger(self.store, settings.run, ports.monotonic)
        self._admin: AdminClient | None = None
        # a daemon's read of every cluster's rows at once (shared_rows.py), and when this
        # runner's last apply step ended: its passes read rows begun after that
        self._shared_rows = shared_rows
        self._applied_at = -math.inf
        # the cluster's own actions on its nodes: what they keep is this cluster's alone
        self.actions: NodeActions | None = kind.new_actions() if kind.new_actions else None
        # the daemon's last roster: probed while ProxySQL's rows are being read
        self._last_roster: tuple[NodeAddress, ...] = ()
        # a daemon's steady pass makes none of its view, decision and statements again
        self._kept: Kept | None = None
        # questions the daemon's watch asked between passes and nobody answered: when each
        # was asked (monotonic), for the next pass's count of a node's silence
        self.silence_seen: dict[NodeAddress, float] = {}
        if persistent:  # a daemon's only: a one-shot pass never loads it
            from checker_core.passes.kept import Kept

            self._kept = Kept()

    # ------------------------------------------------------------ one cluster's pass

    def run(self, mode: Mode, *, pin: NodeAddress | None = None) -> PassResult:
        """The cluster's pass (`pin`: with that writer pinned, as a switchover's dry run asks);
        whatever escapes it is this cluster's failed pass, never the end of the others' passes
        or of the daemon (a net: every failure a pass expects already has its own outcome)."""
        cluster = self.cluster if pin is None else replace(self.cluster, preferred_writer=pin)
        try:
            return self._under_lock(cluster, mode)
        except Exception as exc:  # the net itself
            self.drop_admin()
            message = f"internal error, nothing more done: {type(exc).__name__}: {exc}"
            return PassResult(cluster.name, "-", Outcome.FAILED, 0.0, message)

    def _under_lock(self, cluster: ClusterSettings, mode: Mode) -> PassResult:
        """The pass, under the cluster's lock when it applies (a second one finds it busy)."""
        progress = PassProgress(cluster.name, os.urandom(6).hex(), self.monotonic())
        if mode is not Mode.APPLY:
            return self._within_deadline(cluster, mode, progress)
        with contextlib.ExitStack() as stack:
            try:
                self.store.ensure_dir()
                held = stack.enter_context(cluster_lock(self.store.lock_path(cluster.name)))
            except OSError as exc:
                return self.ledger.finish(
                    progress,
                    Outcome.BAD_INPUT,
                    f"bad input, nothing changed: run.state_dir {self.store.state_dir}: "
                    f"cannot create or write its lock file ({exc.strerror or exc})",
                )
            if not held:
                return self.ledger.finish(
                    progress, Outcome.BUSY, "another pass holds the lock; skipped"
                )
            return self._within_deadline(cluster, mode, progress)

    def _within_deadline(
        self, cluster: ClusterSettings, mode: Mode, progress: PassProgress
    ) -> PassResult:
        """The pass under its deadline, with every failure turned into an outcome made from what
        the pass had done: one whose LOAD went out reports the change, whatever came after.

        The deadline is a value the pass keeps and hands down, never an interruption: the steps
        ask it between them, and every wait and I/O of the pass takes its timeout from what is
        left (PassTimeout is raised by the pass's own code, and caught here)."""
        deadline = Deadline.of_pass(
            progress.started, self.settings.run.max_runtime_ms, self.monotonic
        )
        try:
            return self._pass(cluster, mode, progress, deadline)
        except (BadInput, AdminAccessDenied) as exc:
            return self.ledger.finish(
                progress, Outcome.BAD_INPUT, f"bad input, nothing changed: {exc}"
            )
        except (ApplyFailed, StagingRefused) as exc:
            self.drop_admin()
            failed = f"apply failed, live rows unchanged: {exc}"
            return self.ledger.finish(progress, Outcome.FAILED, failed)
        except (AdminError, PassTimeout) as exc:
            if isinstance(exc, AdminError) or not getattr(self._admin, "in_step", False):
                # a pass cut short between statements (waiting for a step, or for the shared
                # read) leaves its connection as good as it was: kept, not made anew
                self.drop_admin()
            if progress.loaded:
                return self.ledger.loaded_then_failed(cluster.name, progress, str(exc))
            said = f"{exc}; nothing loaded" if isinstance(exc, PassTimeout) else str(exc)
            return self.ledger.finish(progress, Outcome.FAILED, said)
        except Exception as exc:  # the net: still made from what the pass had done
            self.drop_admin()
            failure = f"internal error: {type(exc).__name__}: {exc}"
            if progress.loaded:
                return self.ledger.loaded_then_failed(cluster.name, progress, failure)
            return self.ledger.finish(progress, Outcome.FAILED, f"{failure}; nothing loaded")
        finally:
            if self._admin is not None:
                self._admin.bound_by(None)  # between passes, nobody's deadline

    def _pass(
        self, cluster: ClusterSettings, mode: Mode, progress: PassProgress, deadline: Deadline
    ) -> PassResult:
        """One pass, as the steps it takes; a step of the gate that says stop ends it there, and
        so does the deadline, asked between the steps (deadline.check)."""
        cluster = self._pinned(cluster)
        deadline.check()
        read = self._read(cluster, progress, deadline)
        with read.releasing_probes():  # those it never collects, when it ends early
            stop = gate.no_roster(len(read.view.roster.nodes), cluster.hostgroups.all)
            run, late = self.settings.run, read.probed_late()
            stop = stop or gate.probe_time_left(
                progress.started, self.monotonic(), run, probed_late=late
            )
            if stop is not None:
                return self.ledger.finish(progress, stop.outcome, stop.reason)
            # asked while the probes are under way: for a proxy without peers, the usual case,
            # these questions then cost the pass no wait of their own
            self.facts.refuse_native_manager(read.admin, cluster)
            listed = self.facts.listed_peers(read.admin)
            deadline.check()
            probes = probe_roster(self.prober, read, cluster, self.clock())
            deadline.check()
            stop = gate.monitor_refused(probes, self.settings.monitor.user)
            if stop is not None:
                return self.ledger.finish(progress, stop.outcome, stop.reason)
            decision = self._decide(cluster, mode, read, probes, progress)
            stop = gate.blind(decision)
            if stop is not None:
                # no LOAD, no staging repair, no counter saved: the pass saw nothing to act on
                return self.ledger.finish(progress, stop.outcome, stop.reason)
            save_owed = self._plan(cluster, read, decision, progress)
            deadline.check()
            leadership = self._lead(read.admin, listed, decision, mode, progress)
            if mode is not Mode.APPLY:
                self._act_on_nodes(progress, cluster, acting=False)
                return self.ledger.finish(progress, Outcome.PLANNED, "planned")
            deadline.check()
            paused = self.store.paused(cluster.name)
            stop = gate.may_apply(leadership, decision.plan.needs_load, paused)
            with writes_allowed(
                self.write_gate, self._lock_path(progress), deadline, self.monotonic
            ):
                if stop is None and listed and decision.plan.needs_load:
                    stop = self.facts.second_taken(read.admin)
                if stop is not None:
                    return self.ledger.hold(cluster.name, decision, stop, progress)
                time_to_apply(deadline, read.admin, len(progress.statements))
                applied = self._apply(read, decision, progress, save_owed=save_owed)
            self.ledger.after_apply(
                cluster.name, read.rows, decision, applied, progress, save_owed=save_owed
            )
            self._act_on_nodes(progress, cluster, acting=True)
            self._put_back_delay(read.admin, cluster.name, progress)
            outcome = Outcome.CHANGED if applied.loaded else Outcome.UNCHANGED
            return self.ledger.finish(progress, outcome, outcome.label)

    # ------------------------------------------------------------ the steps, in order

    def _lock_path(self, progress: PassProgress) -> Path | None:
        """This ProxySQL's write lock when the plan writes anything; None for a steady pass,
        which touches no lock file (its path is not even made)."""
        if not progress.statements:
            return None
        proxysql = self.settings.proxysql
        return self.store.write_lock_path(proxysql.host, proxysql.port)

    def _apply(
        self, read: PassRead, decision: Decision, progress: PassProgress, *, save_owed: bool
    ) -> ApplyResult:
        """The plan made live (S2): staged, read back, one LOAD, then SAVE when persisting.
        Whatever it wrote, the next pass reads rows begun after it (read.cluster_rows)."""
        try:
            applied = read.admin.apply(
                decision.plan,
                self.settings.run.persist,
                read.rows.staging,
                save_owed=save_owed,
                on_load=progress.mark_loaded,
                warn=progress.warn,
                reconnect=functools.partial(self._connect_admin, self.settings, None),
            )
        finally:
            self._applied_at = self.monotonic()
        progress.applied = applied
        return applied

    def _pinned(self, cluster: ClusterSettings) -> ClusterSettings:
        """The cluster with the writer an operator pinned (`pin`), unless its settings name
        one themselves."""
        pinned = self.store.writer_pin(cluster.name) if cluster.preferred_writer is None else None
        return cluster if pinned is None else replace(cluster, preferred_writer=pinned)

    def _read(
        self, cluster: ClusterSettings, progress: PassProgress, deadline: Deadline
    ) -> PassRead:
        """The remembered counters and ProxySQL's rows of the cluster. A roster rarely changes
        between passes: the last one (the daemon's, or the nodes the state file remembers) is
        probed while ProxySQL is reached and its rows are read, so a steady pass costs the
        longer of the two waits, not their sum."""
        memory, warning = self.store.load(cluster.name)
        if warning:
            progress.warn(warning)
        early = self._last_roster if self.persistent else tuple(memory)
        probe_deadline = progress.started + self.settings.run.probe_budget_ms / 1000
        pending = self.prober.start(early, probe_deadline) if early else None
        admin = self.admin(deadline)
        rows = cluster_rows(
            self._shared_rows, admin, cluster, (progress.started, self._applied_at), deadline
        )
        view = self._kept.view(rows, cluster) if self._kept else view_of(rows, cluster)
        if self.persistent:
            self._last_roster = view.roster.addresses
        return PassRead(admin, rows, view, memory, pending, probe_deadline)

    def _decide(
        self,
        cluster: ClusterSettings,
        mode: Mode,
        read: PassRead,
        probes: Mapping[NodeAddress, ProbeResult],
        progress: PassProgress,
    ) -> Decision:
        """The checker's rules on what was read and heard (the what-if's assumed failures on
        a dry run), and its advisor's word."""
        layout = read.view.layout
        # ConnUsed only matters, and is only read, while a demoted writer drains or ProxySQL
        # keeps a removed server for the connections its clients still hold
        watched = {r.hostgroup_id for r in layout.leaving} | {hg for hg, _ in layout.drains}
        pool = read.admin.connections_in_use(watched) if watched else {}
        now = self.clock()
        monitor = self.settings.monitor
        memory = self._with_watch_silence(read.memory, probes)
        # a node unheard pass after pass has had its whole timeout over its probes in a row
        timeouts = ProbeTimeouts(monitor.connect_timeout_ms / 1000, monitor.read_timeout_ms / 1000)
        probes = promote_unheard(probes, memory, timeouts)
        made = functools.partial(
            decide,
            self.kind.policy,
            read.view,
            probes,
            memory=memory,
            cluster=cluster,
            in_use=pool,
            now=now,
            interval_s=self.settings.run.interval_ms / 1000,
            probe_wait_s=silent_probe_wait_s(self.settings),
            timeouts=timeouts,
        )
        kept, policy = self._kept, self.kind.policy
        decision = (
            kept.decision(
                read.view, cluster, probes, memory, policy=policy, decide=lambda r: made(raw=r)
            )
            if kept
            else made()
        )
        inputs = PassInputs(policy, read.view, memory, cluster, now)
        progress.inputs = inputs
        if mode is Mode.DRY_RUN:
            decision = self._what_if(inputs, probes, decision, progress)
        progress.decided(decision, layout, probes, pool)
        if self.kind.advisor is not None and not decision.blind:
            advisor = self.kind.advisor
            variables = self.facts.runtime_variables(read.admin, advisor.proxy_variables(cluster))
            advice_in = AdviceInput(cluster, probes, variables, self.monotonic())
            progress.advice = advisor.advise(advice_in)
        return decision

    def _with_watch_silence(
        self, memory: Mapping[NodeAddress, NodeMemory], probes: Mapping[NodeAddress, ProbeResult]
    ) -> Mapping[NodeAddress, NodeMemory]:
        """What the daemon's watch saw between passes: questions left unanswered for the whole
        read timeout, by nodes this pass did not hear either (silent, or unheard), count their
        silence from when they were asked, and among their unanswered time."""
        if not self.silence_seen:
            return memory
        silent = {n for n, p in probes.items() if p.how_failed in STILL_UNANSWERED}
        read_timeout_ms = self.settings.monitor.read_timeout_ms
        seen, self.silence_seen = self.silence_seen, {}
        return with_silence(memory, seen, silent, read_timeout_ms)

    def _what_if(
        self,
        inputs: PassInputs,
        probes: Mapping[NodeAddress, ProbeResult],
        decision: Decision,
        progress: PassProgress,
    ) -> Decision:
        """A dry run's what-if: the decision of the pass that acts on the assumed failures
        (one it cannot assume is bad input)."""
        roster = inputs.view.roster.addresses
        assumed = {n: a for n, a in self.assumed.items() if n in roster}
        if not assumed:
            return decision
        progress.assumed = tuple(f"{n} {a.label}" for n, a in sorted(assumed.items()))
        return inputs.what_if(probes).decision(assumed)

    def _plan(
        self, cluster: ClusterSettings, read: PassRead, decision: Decision, progress: PassProgress
    ) -> bool:
        """The statements the plan takes (what a dry run prints); returns whether a SAVE is
        owed by an earlier pass."""
        persist = self.settings.run.persist
        save_owed = persist and self.store.save_owed(cluster.name)
        staging = read.rows.staging
        made = functools.partial(
            plan_statements, decision.plan, staging, persist, save_owed=save_owed
        )
        progress.statements = (
            self._kept.statements(cluster.name, decision.plan, staging, (persist, save_owed), made)
            if self._kept
            else made()
        )
        return save_owed

    def _lead(
        self,
        admin: AdminClient,
        listed: tuple[ProxyAddress, ...],
        decision: Decision,
        mode: Mode,
        progress: PassProgress,
    ) -> Leadership:
        """This checker's role among the ProxySQL Cluster's, remembered by an applying pass."""
        leadership = self.facts.leadership(admin, listed, remember=mode is Mode.APPLY)
        progress.leadership = leadership
        if leadership.split:
            progress.warn(leadership.split)
        if leadership.clock_skew_s and not decision.plan.needs_load:
            # nothing held yet: said before it holds a failover
            progress.warn(f"clock skew, the next LOAD would be held: {leadership.load_wait}")
        return leadership

    def _act_on_nodes(self, progress: PassProgress, cluster: ClusterSettings, acting: bool) -> None:
        """The checker's actions on the nodes (evictions), after the LOAD: routing first."""
        actions, decision = self.actions, progress.decision
        if actions is None or decision is None:
            return
        left = self.settings.run.max_runtime_ms / 1000 - (self.monotonic() - progress.started)
        budget, node_admin = max(0.05, left * 0.8), self.settings.node_admin
        after = AfterPass(
            cluster,
            decision,
            progress.probes,
            node_admin,
            self.store,
            budget,
            acting,
            persistent=self.persistent,
        )
        done = actions.after_pass(after)
        progress.evictions += done.evictions
        progress.unresponsive_evictions += done.unresponsive
        progress.stranded = done.stranded
        progress.node_actions += done.said + done.failed
        for failed in done.failed:
            progress.warn(failed)

    def _put_back_delay(self, admin: AdminClient, cluster: str, progress: PassProgress) -> None:
        if not self.store.delay_record_path(cluster).exists():
            return  # the usual case: one failed stat, and the module that reads it not loaded
        from checker_core.edges.proxysql_sessions import put_back_leftover

        progress.warn_if(put_back_leftover(admin, self.store, cluster))

    # ------------------------------------------------------------ what the steps share

    def admin(self, deadline: Deadline | None = None) -> AdminClient:
        """The connection to ProxySQL's admin, opened when there is none; `deadline`: the pass
        that uses it now (None: outside any pass), which bounds its connect and statements."""
        if self._admin is None:
            self._admin = self._connect_admin(self.settings, deadline)
        self._admin.bound_by(deadline)
        return self._admin

    def drop_admin(self) -> None:
        if self._admin is not None:
            self._admin.close()
            self._admin = None

    def finish_actions(self) -> tuple[LaterActions, ...]:
        """A one-shot process's node actions its passes left for after them (NodeActions.finish)."""
        return self.actions.finish() if self.actions is not None else ()

    def close(self) -> None:
        self.drop_admin()
        self.prober.close()


def _new_prober(kind: CheckerKind, persistent: bool, settings: Settings) -> Prober:
    return Prober(settings.monitor, kind.probe, persistent)
