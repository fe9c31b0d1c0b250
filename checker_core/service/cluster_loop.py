"""One cluster's cadence in the daemon: its warm-up, then its pass and the watch's wait for the
next one, on a thread of its own."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from checker_core.core.model import BadRow
from checker_core.core.settings import ClusterSettings
from checker_core.edges.admin_errors import AdminError
from checker_core.edges.hooks import Told
from checker_core.passes.announce import Announcer, QueueSink
from checker_core.passes.fleet import Fleet
from checker_core.passes.result import Mode, PassResult
from checker_core.passes.runner import PassRunner
from checker_core.report import log_pass
from checker_core.service.board import Board
from checker_core.service.readiness import ReadinessWatch
from checker_core.service.watch import MAX_NAP_S, WOKEN_NAP_S, BetweenPasses, Trigger


class LoopHost(Protocol):
    """What a cluster's loop takes from its daemon."""

    log: Any
    fleet: Fleet
    board: Board
    readiness: ReadinessWatch

    def hooks_ending(self, drain: threading.Thread) -> None: ...

    def between_for(self, runner: PassRunner) -> BetweenPasses: ...

    def loop_failed(self, exc: BaseException) -> None: ...


class ClusterLoop:
    """One cluster's cadence: its warm-up, then its pass and the watch's wait for the next one,
    with its own runner, connections and watch. Each loop runs on a thread of its own (a lone
    cluster's, started with the daemon, on the main thread): one cluster's slow or dead nodes
    never delay another cluster's warm-up, detection or failover, and a reload that leaves its
    settings as they were never stops it."""

    def __init__(
        self,
        daemon: LoopHost,
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
        # the cluster's hooks: its own announcer and queue (one cluster's hook that hangs
        # never holds another's events)
        self.sink: QueueSink | None = None
        if cluster.hooks is not None:
            self.sink = QueueSink(cluster.hooks, self.name, self.hook_said)
        self.announcer = Announcer(runner.settings, cluster, daemon.fleet.store, self.sink)

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

    def halt(self) -> None:
        """Stop after the current pass; a wait under way ends now."""
        self.stop.set()
        self.between.wake()

    def close(self) -> None:
        self.runner.close()
        self.ended.set()
        sink, hooks = self.sink, self.cluster.hooks
        if sink is not None and hooks is not None:
            # the event being told gets its whole timeout and those still waiting are said,
            # on a thread of their own: a reload (its new loop, the main thread taking
            # signals) never waits for a hook that hangs; the daemon's stop does
            drain = threading.Thread(
                target=sink.close, args=(hooks.timeout_ms / 1000,), name=f"hooks-end-{self.name}"
            )
            drain.start()
            self.daemon.hooks_ending(drain)

    def announce(self, result: PassResult) -> None:
        """The pass's events to the board's timeline and the cluster's hooks. Its line already
        says what ProxySQL has: whatever goes wrong here is a line, never the daemon's end."""
        try:
            self.daemon.board.record_events(self.announcer.after_pass(result))
        except Exception as exc:  # the net: events are notifications, the pass is done
            self.daemon.log.error("hook", cluster=self.name, summary=f"events not told: {exc!r}")
        for warning in self.announcer.warnings:
            self.daemon.log.warning("hook", cluster=self.name, summary=warning)
        self.announcer.warnings.clear()

    def hook_said(self, told: Told) -> None:
        """A hook's outcome (on the cluster's hook thread): a line, and the board's count."""
        self.daemon.board.hook_told(told)
        method = self.daemon.log.info if told.ok else self.daemon.log.warning
        method("hook", cluster=self.name, hook_event=told.event, summary=told.describe())

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
            self.announce(result)
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
            # a loop on its own thread is stopped by halt(), which wakes it; the main thread's
            # lone loop by a signal, which does not: it looks every MAX_NAP_S
            nap_s = MAX_NAP_S if self.thread is None else WOKEN_NAP_S
            return self.between.wait(self.next_tick, stop, nap_s)
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
