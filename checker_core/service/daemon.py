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
from collections.abc import Callable
from types import FrameType
from typing import Any, Protocol

from checker_core.core.reload import ReloadPlan, plan_reload
from checker_core.core.settings import ListenAddress, Settings
from checker_core.edges import hangup, tls
from checker_core.edges.memory import StateStore
from checker_core.passes.fleet import Fleet
from checker_core.passes.plugin import CheckerKind
from checker_core.passes.runner import PassRunner
from checker_core.passes.shared_rows import SharedRows
from checker_core.report import summary
from checker_core.service.board import Board
from checker_core.service.cluster_loop import ClusterLoop
from checker_core.service.listener import Listener, ListenError
from checker_core.service.readiness import ReadinessWatch
from checker_core.service.sdnotify import Notifier
from checker_core.service.watch import MAX_NAP_S, BetweenPasses, answer_budget_s
from checker_core.service.watch_hub import WatchHub
from checker_core.settings.config import ConfigError


class NewFleet(Protocol):
    """Makes the daemon's fleet of every configured cluster (each loop's runner is made by
    it); `store`, `write_gate` and `shared_rows` are the running ones a reload keeps."""

    def __call__(
        self,
        settings: Settings,
        *,
        store: StateStore | None = None,
        write_gate: threading.Lock | None = None,
        shared_rows: SharedRows | None = None,
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
    if hangup.came_early():
        # it may have come after the command line read the file: read it again, at once
        log.info("daemon", summary="a SIGHUP came while starting: the configuration is reread")
        on_hup(signal.SIGHUP, None)
    daemon = Daemon(load, kind, log, notifier or Notifier.from_env())
    try:
        daemon.loop(stop, reload, halt, on_pass)
    finally:
        daemon.close()
    log.info("daemon", summary="stopped after the current pass")
    return 0


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
        # ended loops' hook queues telling what they still hold, each within its hooks'
        # timeout: waited for at the stop, never by a reload or a pass
        self._draining: list[threading.Thread] = []
        self._draining_lock = threading.Lock()
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

    def hooks_ending(self, drain: threading.Thread) -> None:
        """An ended loop's hook queue, telling what it still holds (from any loop's thread);
        those done are forgotten."""
        with self._draining_lock:
            self._draining = [t for t in self._draining if t.is_alive()]
            self._draining.append(drain)

    def _end_all(self) -> None:
        """Every loop stopped after its current pass, its runner closed."""
        loops = [*self.loops.values(), *self.leaving]
        for loop in loops:
            loop.halt()
        for loop in loops:
            if loop.thread is not None:
                loop.thread.join()
            elif not loop.ended.is_set():
                loop.close()
        with self._draining_lock:
            draining = list(self._draining)
        for drain in draining:
            drain.join()  # bounded: each queue gives its event in hand its hooks' timeout

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
        self.fleet = self._next_fleet(old, settings, plan)
        self.settings = settings
        replaced = {}
        for name in plan.stop:
            loop = self.loops.pop(name)
            loop.halt()
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

    def _next_fleet(self, old: Fleet, settings: Settings, plan: ReloadPlan) -> Fleet:
        """The fleet of the reloaded settings, with what the loops it keeps write and read
        through. The one ProxySQL write gate is kept whatever changed: a stopped loop's last
        pass may still be writing beside a new loop's first."""
        keep_store = "run.state_dir" not in plan.shared and "a cluster named `all`" not in (
            plan.shared
        )
        # the same ProxySQL: one read of every cluster's rows still, the kept loops' and the
        # new ones' (a changed [proxysql] restarts every loop: the old read ends with them)
        same_proxy = "[proxysql]" not in plan.shared
        return self.new_fleet(
            settings,
            store=old.store if keep_store else None,
            write_gate=old.write_gate,
            shared_rows=old.hand_over_rows() if same_proxy else None,
        )


def _fleet_of(kind: CheckerKind) -> NewFleet:
    def new_fleet(
        settings: Settings,
        *,
        store: StateStore | None = None,
        write_gate: threading.Lock | None = None,
        shared_rows: SharedRows | None = None,
    ) -> Fleet:
        return Fleet(
            settings,
            kind,
            persistent=True,
            store=store,
            write_gate=write_gate,
            shared_rows=shared_rows,
        )

    return new_fleet
