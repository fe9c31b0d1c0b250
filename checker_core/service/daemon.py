"""The daemon: the same pass on a fixed cadence, connections kept between passes.

SIGHUP reloads the configuration at the next pass boundary (a bad file keeps the old settings);
SIGTERM / SIGINT stop after the current pass. The cadence is fixed-rate: a late pass is not
followed by a burst of catch-up passes. Under systemd (Type=notify) it reports READY after the
first pass, a WATCHDOG ping after every pass, and STOPPING; with run.metrics_listen it serves
/metrics, /health and /status.
"""

from __future__ import annotations

import functools
import signal
import threading
import time
from collections.abc import Callable
from types import FrameType
from typing import Any

from checker_core.core.model import BadRow
from checker_core.core.settings import ClusterSettings, ListenAddress, Settings
from checker_core.edges import tls
from checker_core.edges.proxysql import AdminError
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
    halt = threading.Event()  # ends every loop's wait: set by a stop and by a reload

    def on_stop(signum: int, frame: FrameType | None) -> None:
        stop.set()
        halt.set()

    def on_hup(signum: int, frame: FrameType | None) -> None:
        reload.set()
        halt.set()

    signal.signal(signal.SIGTERM, on_stop)
    signal.signal(signal.SIGINT, on_stop)
    signal.signal(signal.SIGHUP, on_hup)
    daemon = _Daemon(load, kind, log, notifier or Notifier.from_env())
    try:
        daemon.loop(stop, reload, halt, on_pass)
    finally:
        daemon.close()
    log.info("daemon", summary="stopped after the current pass")
    return 0


class ClusterLoop:
    """One cluster's cadence: its pass, then the watch's wait for the next one. With several
    clusters each loop runs on a thread of its own, with its own connections and watch: one
    cluster's slow or dead nodes never delay another cluster's detection or failover."""

    def __init__(
        self,
        daemon: _Daemon,
        runner: PassRunner,
        name: str,
        passes: Callable[[], list[PassResult]],
        phase_s: float = 0.0,
    ) -> None:
        """`runner`: the cluster's own (its prober is what the watch asks); `passes`: its pass;
        `phase_s`: how far into the interval its regular passes fall after the first."""
        self.daemon, self.runner, self.name, self.passes = daemon, runner, name, passes
        self.between = daemon.between_for(runner)
        self.next_tick = time.monotonic() + phase_s
        self.early = False
        self.turns = 0  # passes done: the watchdog is pinged once every loop has turned
        self.last: PassResult | None = None

    def turn(self, stop: threading.Event) -> None:
        """One pass, then the wait until the next one (cut short by the watch or `stop`)."""
        self.run_pass()
        self.wait_next(stop)

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
            daemon.warn_advice(result)
            results.append(result)
        self.last = results[-1] if results else None
        self.turns += 1
        daemon.turned(self)
        self.between.observe(results)

    def wait_next(self, stop: threading.Event) -> None:
        daemon = self.daemon
        if not self.early:
            self.next_tick += self.runner.settings.run.interval_ms / 1000
            self.next_tick = max(self.next_tick, time.monotonic())
        # an early pass leaves the cadence as it was: the next regular pass keeps its time
        trigger = self._wait(stop)
        self.early = trigger is not None
        if trigger is not None and trigger.silent_since:
            seen = self.runner.silence_seen
            for node, since in trigger.silent_since.items():
                seen[node] = min(since, seen.get(node, since))
        if trigger is not None:
            daemon.board.started_early(trigger.cause.label)
            daemon.log.info("watch", cluster=self.name, summary=trigger.describe())

    def _wait(self, stop: threading.Event) -> Trigger | None:
        """The watch's wait; whatever it raises costs the watch until the next tick, never the
        daemon (the regular cadence goes on)."""
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


class _Daemon:
    """The loops' state: the runners, what they show outside, and how they reach systemd."""

    def __init__(
        self, load: Callable[[], Settings], kind: CheckerKind, log: Any, notify: Notifier
    ) -> None:
        self.load, self.kind, self.log, self.notify = load, kind, log, notify
        settings = load()
        self.board = Board(settings)
        self.listener = self._listen(settings.run.metrics_listen)
        self.runner = PassRunner(settings, kind, persistent=True)
        self.readiness = ReadinessWatch()
        # one thread watches every cluster's connections and writers between passes
        self.hub = WatchHub()
        self.advised: dict[str, tuple[str, ...]] = {}
        self._turned = threading.Condition()
        self._not_turned: set[str] = set()  # the loops that have not turned since the report
        self.loops = self._loops()
        self._warm_up()
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

    def _loops(self) -> list[ClusterLoop]:
        runner = self.runner
        clusters = runner.settings.clusters
        if len(clusters) == 1:
            one = functools.partial(runner.run_all, Mode.APPLY)
            return [ClusterLoop(self, runner, clusters[0].name, one)]
        # the loops' regular passes spread over the interval: passes that all fall due together
        # only wait for each other (one interpreter lock), each taking the time of them all
        spread_s = runner.settings.run.interval_ms / 1000 / len(clusters)
        return [
            ClusterLoop(
                self,
                runner.several().runner_for(c),
                c.name,
                functools.partial(_one_pass, runner, c),
                phase_s=i * spread_s,
            )
            for i, c in enumerate(clusters)
        ]

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
            self._not_turned.discard(loop.name)
            if not self._not_turned:
                self._turned.notify_all()

    def loop(
        self,
        stop: threading.Event,
        reload: threading.Event,
        halt: threading.Event,
        on_pass: Callable[[], None] | None,
    ) -> None:
        """Until `stop`; `reload` is taken at a pass boundary; `halt` ends the loops' waits."""
        ready = False
        while not stop.is_set():
            if reload.is_set():
                reload.clear()
                self.notify.reloading()
                self._reload()
                ready = False
            halt.clear()
            if stop.is_set() or reload.is_set():
                halt.set()  # a signal that came in while it was being cleared
            if len(self.loops) == 1:
                ready = self._one(self.loops[0], halt, on_pass, ready)
            else:
                ready = self._several(halt, on_pass, ready)
        self.notify.stopping()

    def _one(
        self,
        loop: ClusterLoop,
        halt: threading.Event,
        on_pass: Callable[[], None] | None,
        ready: bool,
    ) -> bool:
        """A single cluster's loop, on this (the main) thread, till a stop or a reload."""
        while not halt.is_set():
            loop.run_pass()
            self._report_to_systemd(first=not ready)
            ready = True
            if on_pass is not None:
                on_pass()
            loop.wait_next(halt)
        return ready

    def _several(
        self, halt: threading.Event, on_pass: Callable[[], None] | None, ready: bool
    ) -> bool:
        """Every cluster's loop on its own thread; this one reports to systemd, and ends them
        all at a stop or a reload (each after its current pass)."""

        failed: list[BaseException] = []

        def run(loop: ClusterLoop) -> None:
            try:
                while not halt.is_set():
                    loop.turn(halt)
            except BaseException as exc:
                # as with a single loop, what escapes a pass ends the daemon, never one cluster
                # silently: the others stop after their pass, and the main thread raises it
                failed.append(exc)
                halt.set()

        threads = [
            threading.Thread(target=run, args=(loop,), name=f"loop-{loop.name}", daemon=True)
            for loop in self.loops
        ]
        names = {loop.name for loop in self.loops}
        with self._turned:
            self._not_turned = set(names)
        for thread in threads:
            thread.start()
        seen = [loop.turns for loop in self.loops]
        try:
            while not halt.is_set():
                with self._turned:
                    self._turned.wait(MAX_NAP_S)
                turns = [loop.turns for loop in self.loops]
                if all(now > before for now, before in zip(turns, seen, strict=True)):
                    # every loop turned since the last report: the watchdog is for a loop that
                    # stopped turning, any one of them
                    seen = turns
                    with self._turned:
                        self._not_turned = set(names)
                    self._report_to_systemd(first=not ready)
                    ready = True
                    if on_pass is not None:
                        on_pass()
        finally:
            halt.set()
            for thread in threads:
                thread.join()
        if failed:
            raise failed[0]
        return ready

    def warn_advice(self, result: PassResult) -> None:
        """An advisor's warning is logged when it appears or changes, not every pass (the
        pass line carries it every pass)."""
        if result.decision is None:
            return
        warned = tuple(a.text for a in result.advice if a.warning)
        if warned != self.advised.get(result.cluster, ()):
            self.advised[result.cluster] = warned
            for text in warned:
                self.log.warning("advice", cluster=result.cluster, summary=text)

    def close(self) -> None:
        self.readiness.close()
        self.hub.close()
        self.runner.close()
        if self.listener is not None:
            self.listener.close()

    def _listen(self, address: ListenAddress | None) -> Listener | None:
        if address is None:
            return None
        self.board.enable_metrics()
        return Listener(address, self.board.routes())

    def _warm_up(self) -> None:
        started = time.monotonic()
        answered = sum(warm_up(loop.runner) for loop in self.loops)
        self.log.debug(
            "daemon",
            summary=f"connected ahead of the first pass: {answered} node(s) answered "
            f"in {(time.monotonic() - started) * 1000:.0f} ms",
        )

    def _report_to_systemd(self, first: bool) -> None:
        if not self.notify.enabled:
            return  # not under systemd: no status line to make
        status = " | ".join(summary(loop.last) for loop in self.loops if loop.last is not None)
        if first:
            self.notify.ready(status)
        else:
            self.notify.status(status)
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
        try:
            settings = self.load()
        except ConfigError as exc:
            self.log.error(
                "reload",
                summary="configuration not reloaded, keeping the previous one",
                reason=[str(p) for p in exc.problems],
            )
            return
        self.runner.close()
        tls.forget()  # certificate files are read again, as the configuration is
        self.runner = PassRunner(settings, self.kind, persistent=True)
        self.loops = self._loops()
        self._warm_up()
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
        self.log.info("reload", summary=f"configuration reloaded from {settings.source}")


def _one_pass(runner: PassRunner, cluster: ClusterSettings) -> list[PassResult]:
    return [runner.several().run_one(cluster, Mode.APPLY)]


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
