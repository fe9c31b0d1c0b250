"""The daemon: the same pass on a fixed cadence, connections kept between passes.

SIGHUP reloads the configuration (a bad file keeps the old settings): the loops of clusters
whose settings did not change go on untouched, the others stop after their current pass and
new ones start at once, each warming up on its own thread. SIGTERM / SIGINT stop after the
current pass. The cadence is fixed-rate: a late pass is not followed by a burst of catch-up
passes. Under systemd (Type=notify) it reports READY after the first passes, RELOADING then
READY when a reload is taken, a WATCHDOG ping once every loop has turned, and STOPPING; with
run.metrics_listen it serves /metrics, /health and /status.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable
from types import FrameType
from typing import Any, Protocol

from checker_core.core.model import BadRow
from checker_core.core.reload import plan_reload
from checker_core.core.settings import ClusterSettings, ListenAddress, Settings
from checker_core.edges import tls
from checker_core.edges.admin_errors import AdminError
from checker_core.edges.memory import StateStore
from checker_core.passes.fleet import Fleet
from checker_core.passes.plugin import CheckerKind
from checker_core.passes.result import Mode, PassResult
from checker_core.passes.runner import PassRunner
from checker_core.report import log_pass, summary
from checker_core.service.board import Board
from checker_core.service.listener import Listener, ListenError
from checker_core.service.readiness import ReadinessWatch
from checker_core.service.sdnotify import Notifier
from checker_core.service.watch import MAX_NAP_S, BetweenPasses, Trigger, answer_budget_s
from checker_core.service.watch_hub import WatchHub
from checker_core.settings.config import ConfigError


class NewFleet(Protocol):
    """Makes the daemon's fleet of every configured cluster (each loop's runner is made by
    it); `store` and `write_gate` are the running ones a reload keeps."""

    def __call__(
        self,
        settings: Settings,
        *,
        store: StateStore | None = None,
        write_gate: threading.Lock | None = None,
    ) -> Fleet: ...


def run_daemon(
    load: Callable[[], Settings],
    kind: CheckerKind,
    log: Any,
    on_pass: Callable[[], None] | None = None,
    notifier: Notifier | None = None,
) -> int:
    """Raises ListenError before the first pass when run.metrics_listen cannot be listened on."""
    stop = threading.Event()
    reload = threading.Event()
    halt = threading.Event()  # ends the main thread's wait: set by a stop and by a reload

    def on_stop(signum: int, frame: FrameType | None) -> None:
        stop.set()
        halt.set()

    def on_hup(signum: int, frame: FrameType | None) -> None:
        reload.set()
        halt.set()

    signal.signal(signal.SIGTERM, on_stop)
    signal.signal(signal.SIGINT, on_stop)
    signal.signal(signal.SIGHUP, on_hup)
    daemon = Daemon(load, kind, log, notifier or Notifier.from_env())
    try:
        daemon.loop(stop, reload, halt, on_pass)
    finally:
        daemon.close()
    log.info("daemon", summary="stopped after the current pass")
    return 0


class ClusterLoop:
    """One cluster's cadence: its warm-up, then its pass and the watch's wait for the next one,
    with its own runner, connections and watch. Each loop runs on a thread of its own (a lone
    cluster's, started with the daemon, on the main thread): one cluster's slow or dead nodes
    never delay another cluster's warm-up, detection or failover, and a reload that leaves its
    settings as they were never stops it."""

    def __init__(
        self,
        daemon: Daemon,
        runner: PassRunner,
        cluster: ClusterSettings,
        phase_s: float = 0.0,
        replaces: ClusterLoop | None = None,
    ) -> None:
        """`runner`: the cluster's own (its prober is what the watch asks), closed with the
        loop; `phase_s`: how far into the interval its regular passes fall after the first;
        `replaces`: the same cluster's loop a reload stopped, whose last pass ends before this
        one's first (two passes of one cluster never run at once)."""
        self.daemon, self.runner, self.cluster = daemon, runner, cluster
        self.name = cluster.name
        self.phase_s = phase_s
        self.replaces = replaces
        self.between = daemon.between_for(runner)
        self.next_tick = 0.0
        self.early = False
        self.warmed = False
        self.waiting = False  # its pass is done, the wait after it is not
        self.turns = 0  # passes done: the watchdog is pinged once every loop has turned
        self.last: PassResult | None = None
        self.advised: tuple[str, ...] = ()  # the advisor's warnings last logged
        self.stop = threading.Event()  # this loop's end: removed, changed, or the daemon's stop
        self.ended = threading.Event()  # its last pass is over and its runner closed
        self.thread: threading.Thread | None = None

    def run(self, stop: threading.Event, after_pass: Callable[[ClusterLoop], None]) -> None:
        """Warm up, then pass and wait until `stop`. A wait `stop` cut short is taken up again
        by the next call, to the same tick (the main thread's lone loop, after a reload)."""
        while not stop.is_set():
            if not self.warmed:
                self.warm_up(stop)
            elif self.waiting:
                self.waiting = not self.wait_next(stop)
            else:
                self.run_pass()
                self.waiting = True
                after_pass(self)

    def start(self, after_pass: Callable[[ClusterLoop], None]) -> None:
        """Run on a thread of its own until its `stop`; its runner is closed as it ends."""

        def body() -> None:
            try:
                self.run(self.stop, after_pass)
            except BaseException as exc:
                # as with a lone loop, what escapes a pass ends the daemon, never one cluster
                # silently: the main thread raises it, the others stop after their pass
                self.daemon.loop_failed(exc)
            finally:
                self.close()

        self.thread = threading.Thread(target=body, name=f"loop-{self.name}", daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.runner.close()
        self.ended.set()

    def warm_up(self, stop: threading.Event) -> None:
        """Its connections opened before its first pass, on its own time; then the end of the
        loop it replaces. Its regular passes fall `phase_s` after the first."""
        started = time.monotonic()
        answered = warm_up(self.runner)
        self.daemon.log.debug(
            "daemon",
            cluster=self.name,
            summary=f"connected ahead of the first pass: {answered} node(s) answered "
            f"in {(time.monotonic() - started) * 1000:.0f} ms",
        )
        before = self.replaces
        while before is not None and not before.ended.wait(MAX_NAP_S):
            if stop.is_set():
                return
        self.replaces = None
        self.next_tick = time.monotonic() + self.phase_s
        self.warmed = True

    def passes(self) -> list[PassResult]:
        refused = self.daemon.fleet.refusal(self.cluster)
        if refused is not None:
            return [refused]
        return [self.runner.run(Mode.APPLY)]

    def run_pass(self) -> None:
        daemon = self.daemon
        results = []
        for ran in self.passes():
            result, change = daemon.readiness.observe(ran)
            # on the board before its line is logged: whoever reads the line and then asks
            # /metrics or /status sees this pass there
            daemon.board.record([result])
            log_pass(daemon.log, result)
            if change:
                daemon.log.warning("readiness", cluster=result.cluster, summary=change)
            self.warn_advice(result)
            results.append(result)
        self.last = results[-1] if results else None
        self.turns += 1
        self.between.observe(results)
        if not self.early:
            self.next_tick += self.runner.settings.run.interval_ms / 1000
            self.next_tick = max(self.next_tick, time.monotonic())
        # an early pass leaves the cadence as it was: the next regular pass keeps its time

    def wait_next(self, stop: threading.Event) -> bool:
        """The wait until the next pass; False when `stop` cut it short before its time."""
        trigger = self._wait(stop)
        if trigger is None:
            return not stop.is_set() or time.monotonic() >= self.next_tick
        self.early = True
        if trigger.silent_since:
            seen = self.runner.silence_seen
            for node, since in trigger.silent_since.items():
                seen[node] = min(since, seen.get(node, since))
        self.daemon.board.started_early(trigger.cause.label)
        self.daemon.log.info("watch", cluster=self.name, summary=trigger.describe())
        return True

    def _wait(self, stop: threading.Event) -> Trigger | None:
        """The watch's wait; whatever it raises costs the watch until the next tick, never the
        daemon (the regular cadence goes on)."""
        self.early = False
        try:
            return self.between.wait(self.next_tick, stop)
        except Exception as exc:  # the net: the watch is an acceleration, the loop is not
            self.daemon.log.error(
                "watch",
                cluster=self.name,
                summary=f"watch failed, waiting for the next pass: {exc!r}",
            )
            stop.wait(max(0.0, self.next_tick - time.monotonic()))
            return None

    def warn_advice(self, result: PassResult) -> None:
        """An advisor's warning is logged when it appears or changes, not every pass (the
        pass line carries it every pass)."""
        if result.decision is None:
            return
        warned = tuple(a.text for a in result.advice if a.warning)
        if warned != self.advised:
            self.advised = warned
            for text in warned:
                self.daemon.log.warning("advice", cluster=result.cluster, summary=text)


class Daemon:
    """The loops and what surrounds them: the fleet their runners come from, what they show
    outside, and how they reach systemd. The main thread takes signals and reloads, and reports
    to systemd; the loops turn on their own."""

    def __init__(
        self,
        load: Callable[[], Settings],
        kind: CheckerKind,
        log: Any,
        notify: Notifier,
        new_fleet: NewFleet | None = None,
    ) -> None:
        self.load, self.kind, self.log, self.notify = load, kind, log, notify
        self.new_fleet = new_fleet or _fleet_of(kind)
        settings = self.settings = load()
        self.board = Board(settings)
        self.listener = self._listen(settings.run.metrics_listen)
        self.fleet = self.new_fleet(settings)
        self.readiness = ReadinessWatch()
        # one thread watches every cluster's connections and writers between passes
        self.hub = WatchHub()
        self.ready = False  # READY sent: once every loop has passed once
        self.failed: list[BaseException] = []
        self._halt = threading.Event()
        self._turned = threading.Condition()
        self._not_turned: set[ClusterLoop] = set()  # loops that have not turned since the report
        self.loops: dict[str, ClusterLoop] = {}
        self.leaving: list[ClusterLoop] = []  # stopped by a reload, their last pass maybe running
        self._add_loops(settings, {})
        self.alone = next(iter(self.loops.values())) if len(self.loops) == 1 else None
        self._warn_watchdog(settings)
        serving = (
            f", serving /metrics /health /status on {self.listener.address}"
            if self.listener
            else ""
        )
        log.info(
            "daemon",
            summary=f"started, every {settings.run.interval_ms} ms{serving}",
            clusters=[c.name for c in settings.clusters],
        )

    def _add_loops(self, settings: Settings, replaced: dict[str, ClusterLoop]) -> None:
        """A loop for every configured cluster that has none, in the configured order; a
        cluster in `replaced` waits for its old loop's last pass before its first."""
        clusters = settings.clusters
        # the loops' regular passes spread over the interval: passes that all fall due together
        # only wait for each other (one interpreter lock), each taking the time of them all
        spread_s = settings.run.interval_ms / 1000 / len(clusters)
        loops = {}
        for i, cluster in enumerate(clusters):
            loop = self.loops.get(cluster.name)
            if loop is None:
                runner = self.fleet.new_runner(cluster)
                loop = ClusterLoop(
                    self, runner, cluster, i * spread_s, replaces=replaced.get(cluster.name)
                )
            loops[cluster.name] = loop
        self.loops = loops

    def between_for(self, runner: PassRunner) -> BetweenPasses:
        settings = runner.settings
        after_ms = [c.unresponsive_after_ms for c in settings.clusters if c.unresponsive_after_ms]
        return BetweenPasses(
            runner.prober,
            self.kind.policy,
            question=self.kind.watch,
            watch_interval_ms=settings.run.watch_interval_ms,
            answer_budget_s=answer_budget_s(settings.monitor),
            hub=self.hub,
            # a frozen reader stalls a Galera cluster's writes as a frozen writer does
            everyone=bool(after_ms),
        )

    def turned(self, loop: ClusterLoop) -> None:
        """A loop turned; the reporting thread is woken once every loop has (with many
        clusters, a wake-up per pass of each would cost more than the report)."""
        with self._turned:
            self._not_turned.discard(loop)
            if not self._not_turned:
                self._turned.notify_all()

    def loop_failed(self, exc: BaseException) -> None:
        self.failed.append(exc)
        self._halt.set()

    def loop(
        self,
        stop: threading.Event,
        reload: threading.Event,
        halt: threading.Event,
        on_pass: Callable[[], None] | None,
    ) -> None:
        """Until `stop`; `reload` is taken at once; `halt` ends the main thread's wait (the lone
        loop's, or its watch over the loops' threads)."""
        self._halt = halt
        try:
            while not stop.is_set() and not self.failed:
                if reload.is_set():
                    reload.clear()
                    self.notify.reloading()
                    self._reload()
                    if self.ready:  # taken: the loops it started report by their passes
                        self.notify.ready(self._status())
                halt.clear()
                if stop.is_set() or reload.is_set() or self.failed:
                    halt.set()  # a signal that came in while it was being cleared
                lone = self._lone()
                if lone is not None:
                    lone.run(halt, lambda _: self._reported(on_pass))
                else:
                    self._several(halt, on_pass)
            if self.failed:
                raise self.failed[0]
        finally:
            self._end_all()
            self.notify.stopping()

    def _lone(self) -> ClusterLoop | None:
        """The loop the main thread runs: a lone cluster's, started with the daemon. A loop a
        reload starts runs on a thread of its own, so that the main thread keeps taking
        signals and reporting while it warms up."""
        alone = self.alone
        if alone is not None and list(self.loops.values()) == [alone] and alone.thread is None:
            return alone
        return None

    def _reported(self, on_pass: Callable[[], None] | None) -> None:
        self._report_to_systemd()
        if on_pass is not None:
            on_pass()

    def _several(self, halt: threading.Event, on_pass: Callable[[], None] | None) -> None:
        """Every loop on its own thread; this one reports to systemd until a stop or a reload
        (which the loops never see: each has its own stop)."""
        for loop in self.loops.values():
            if loop.thread is None:
                loop.start(self.turned)
        with self._turned:
            self._not_turned = self._to_turn()
        while not halt.is_set():
            self.leaving = [loop for loop in self.leaving if not loop.ended.is_set()]
            with self._turned:
                if self._not_turned:
                    self._turned.wait(MAX_NAP_S)
                if self._not_turned or halt.is_set():
                    continue
                waited = self._to_turn()
                self._not_turned = set(waited)
            if not waited:
                # every loop is warming up (a reload restarted them all): bounded work, so
                # the watchdog goes on; the status waits for their passes
                self.notify.watchdog()
                halt.wait(MAX_NAP_S)
                continue
            # every loop turned since the last report: the watchdog is for a loop that
            # stopped turning, any one of them
            self._reported(on_pass)

    def _to_turn(self) -> set[ClusterLoop]:
        """The loops the next report waits for: until READY every one; then those past their
        warm-up (a loop a reload started is waited for from its first pass on)."""
        return {loop for loop in self.loops.values() if loop.warmed or not self.ready}

    def _end_all(self) -> None:
        """Every loop stopped after its current pass, its runner closed."""
        loops = [*self.loops.values(), *self.leaving]
        for loop in loops:
            loop.stop.set()
        for loop in loops:
            if loop.thread is not None:
                loop.thread.join()
            elif not loop.ended.is_set():
                loop.close()

    def close(self) -> None:
        self.readiness.close()
        self.hub.close()
        self.fleet.close()
        if self.listener is not None:
            self.listener.close()

    def _listen(self, address: ListenAddress | None) -> Listener | None:
        if address is None:
            return None
        self.board.enable_metrics()
        return Listener(address, self.board.routes())

    def _status(self) -> str:
        return " | ".join(summary(loop.last) for loop in self.loops.values() if loop.last)

    def _report_to_systemd(self) -> None:
        first, self.ready = not self.ready, True
        if not self.notify.enabled:
            return  # not under systemd: no status line to make
        if first:
            self.notify.ready(self._status())
        else:
            self.notify.status(self._status())
        # after every pass, whatever its outcome: the watchdog is for a loop that stopped turning
        self.notify.watchdog()

    def _warn_watchdog(self, settings: Settings) -> None:
        usec = self.notify.watchdog_usec
        if usec is not None and settings.run.interval_ms * 1000 * 2 > usec:
            self.log.warning(
                "daemon",
                summary=f"WatchdogSec ({usec // 1000} ms) is under two run intervals "
                f"({settings.run.interval_ms} ms): systemd may kill a healthy daemon",
            )

    def _reload(self) -> None:
        """The new settings taken at once: the loops of unchanged clusters go on untouched,
        the others are told to stop after their current pass, and new loops are made (each
        started, and warmed up, on a thread of its own). Nothing here waits on a node."""
        try:
            settings = self.load()
        except ConfigError as exc:
            self.log.error(
                "reload",
                summary="configuration not reloaded, keeping the previous one",
                reason=[str(p) for p in exc.problems],
            )
            return
        plan = plan_reload(self.settings, settings)
        tls.forget()  # certificate files are read again, as the configuration is
        old = self.fleet
        # the kept loops' runners write with this store and gate: the new ones share them. The
        # one ProxySQL write gate is kept whatever changed: a stopped loop's last pass may
        # still be writing beside a new loop's first
        keep_store = "run.state_dir" not in plan.shared and "a cluster named `all`" not in (
            plan.shared
        )
        self.fleet = self.new_fleet(
            settings, store=old.store if keep_store else None, write_gate=old.write_gate
        )
        self.settings = settings
        replaced = {}
        for name in plan.stop:
            loop = self.loops.pop(name)
            loop.stop.set()
            replaced[name] = loop
            if loop.thread is None:
                loop.close()  # the main thread's lone loop, between its passes now
            else:
                self.leaving.append(loop)
        with self._turned:
            self._not_turned.difference_update(replaced.values())
        self._add_loops(settings, replaced)
        self.board.reconfigure(settings)
        self.readiness.forget({c.name for c in settings.clusters})
        wanted = settings.run.metrics_listen
        if (self.listener.address if self.listener else None) != wanted:
            if self.listener is not None:
                self.listener.close()
                self.listener = None
            try:
                self.listener = self._listen(wanted)
            except ListenError as exc:
                self.log.error("reload", summary=f"run.metrics_listen: {exc}; serving no metrics")
        self._warn_watchdog(settings)
        self.log.info(
            "reload",
            summary=f"configuration reloaded from {settings.source}: {plan.describe()}",
        )
        # closed once no kept loop reads the rosters through it: off this thread, which goes
        # on taking signals and pinging the watchdog while such a read ends
        threading.Thread(target=old.retire, name="reload-close", daemon=True).start()


def _fleet_of(kind: CheckerKind) -> NewFleet:
    def new_fleet(
        settings: Settings,
        *,
        store: StateStore | None = None,
        write_gate: threading.Lock | None = None,
    ) -> Fleet:
        return Fleet(settings, kind, persistent=True, store=store, write_gate=write_gate)

    return new_fleet


def warm_up(runner: PassRunner) -> int:
    """Open a runner's connections (ProxySQL, every node in its clusters' hostgroups) outside
    any pass deadline, so the first pass after a start or reload is not blind for want of
    connects, which cost far more than a steady pass. Returns how many nodes answered; a
    failure here is left for the first pass to report."""
    settings = runner.settings
    hostgroups = {h for c in settings.clusters for h in c.hostgroups.all}
    try:
        rows = runner.admin().read_rows(hostgroups).runtime
    except (AdminError, BadRow):
        runner.drop_admin()
        return 0
    nodes = sorted({r.node for r in rows})
    monitor = settings.monitor
    budget = (monitor.connect_timeout_ms + monitor.read_timeout_ms) / 1000
    probes = runner.prober.probe_all(nodes, runner.monotonic() + budget)
    return sum(1 for p in probes.values() if p.answered)
