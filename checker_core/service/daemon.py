"""The daemon: the same pass on a fixed cadence, connections kept between passes.

SIGHUP reloads the configuration at the next pass boundary (a bad file keeps the old settings);
SIGTERM / SIGINT stop after the current pass. The cadence is fixed-rate: a late pass is not
followed by a burst of catch-up passes. Under systemd (Type=notify) it reports READY after the
first pass, a WATCHDOG ping after every pass, and STOPPING; with run.metrics_listen it serves
/metrics, /health and /status.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable
from types import FrameType
from typing import Any

from checker_core.edges import tls
from checker_core.report import log_pass
from checker_core.runner import CheckerKind, Mode, PassResult, PassRunner
from checker_core.service.board import Board
from checker_core.service.listen import ListenAddress
from checker_core.service.listener import Listener, ListenError
from checker_core.service.readiness import ReadinessWatch
from checker_core.service.sdnotify import Notifier
from checker_core.service.watch import BetweenPasses, Trigger
from checker_core.settings.config import ConfigError, Settings


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

    def on_stop(signum: int, frame: FrameType | None) -> None:
        stop.set()

    def on_hup(signum: int, frame: FrameType | None) -> None:
        reload.set()

    signal.signal(signal.SIGTERM, on_stop)
    signal.signal(signal.SIGINT, on_stop)
    signal.signal(signal.SIGHUP, on_hup)
    daemon = _Daemon(load, kind, log, notifier or Notifier.from_env())
    try:
        daemon.loop(stop, reload, on_pass)
    finally:
        daemon.close()
    log.info("daemon", summary="stopped after the current pass")
    return 0


class _Daemon:
    """The loop's state: the runner, what it shows outside, and how it reaches systemd."""

    def __init__(
        self, load: Callable[[], Settings], kind: CheckerKind, log: Any, notify: Notifier
    ) -> None:
        self.load, self.kind, self.log, self.notify = load, kind, log, notify
        settings = load()
        self.board = Board(settings)
        self.listener = self._listen(settings.run.metrics_listen)
        self.runner = PassRunner(settings, kind, persistent=True)
        self.between = self._between(settings)
        self.readiness = ReadinessWatch()
        self.advised: dict[str, tuple[str, ...]] = {}
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

    def loop(
        self, stop: threading.Event, reload: threading.Event, on_pass: Callable[[], None] | None
    ) -> None:
        next_tick = time.monotonic()
        ready = False
        early = False
        while not stop.is_set():
            if reload.is_set():
                reload.clear()
                self.notify.reloading()
                self._reload()
                ready = False
            results = []
            for ran in self.runner.run_all(Mode.APPLY):
                result, change = self.readiness.observe(ran)
                # on the board before its line is logged: whoever reads the line and then asks
                # /metrics or /status sees this pass there
                self.board.record([result])
                log_pass(self.log, result)
                if change:
                    self.log.warning("readiness", cluster=result.cluster, summary=change)
                self._warn_advice(result)
                results.append(result)
            self._report_to_systemd(results, first=not ready)
            ready = True
            if on_pass is not None:
                on_pass()
            self.between.observe(results)
            if not early:
                next_tick += self.runner.settings.run.interval_ms / 1000
                next_tick = max(next_tick, time.monotonic())
            # an early pass leaves the cadence as it was: the next regular pass keeps its time
            trigger = self._wait(next_tick, stop)
            early = trigger is not None
            if trigger is not None:
                self.board.started_early(trigger.cause.label)
                self.log.info("watch", summary=trigger.describe())
        self.notify.stopping()

    def _wait(self, until: float, stop: threading.Event) -> Trigger | None:
        """The watch's wait; whatever it raises costs the watch until the next tick, never the
        daemon (the regular cadence goes on)."""
        try:
            return self.between.wait(until, stop)
        except Exception as exc:  # the net: the watch is an acceleration, the loop is not
            self.log.error("watch", summary=f"watch failed, waiting for the next pass: {exc!r}")
            stop.wait(max(0.0, until - time.monotonic()))
            return None

    def _warn_advice(self, result: PassResult) -> None:
        """An advisor's warning is logged when it appears or changes, not every pass (the
        pass line carries it every pass)."""
        if result.decision is None:
            return
        warned = tuple(a.text for a in result.advice if a.warning)
        if warned != self.advised.get(result.cluster, ()):
            self.advised[result.cluster] = warned
            for text in warned:
                self.log.warning("advice", cluster=result.cluster, summary=text)

    def _between(self, settings: Settings) -> BetweenPasses:
        monitor = settings.monitor
        return BetweenPasses(
            self.runner.prober,
            self.kind.policy,
            question=self.kind.watch,
            watch_interval_ms=settings.run.watch_interval_ms,
            answer_budget_s=(monitor.connect_timeout_ms + monitor.read_timeout_ms) / 1000,
        )

    def close(self) -> None:
        self.readiness.close()
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
        answered = self.runner.warm_up()
        self.log.debug(
            "daemon",
            summary=f"connected ahead of the first pass: {answered} node(s) answered "
            f"in {(time.monotonic() - started) * 1000:.0f} ms",
        )

    def _report_to_systemd(self, results: list[PassResult], first: bool) -> None:
        status = " | ".join(r.summary() for r in results)
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
        self.between = self._between(settings)
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
