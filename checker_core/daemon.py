"""The daemon: the same pass on a fixed cadence, connections kept between passes.

SIGHUP reloads the configuration at the next pass boundary (a bad file keeps the old settings);
SIGTERM / SIGINT stop after the current pass. The cadence is fixed-rate: a late pass is not
followed by a burst of catch-up passes.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable
from types import FrameType
from typing import Any

from checker_core.config import ConfigError, Settings
from checker_core.report import log_pass
from checker_core.runner import CheckerKind, Mode, PassRunner


def run_daemon(
    load: Callable[[], Settings],
    kind: CheckerKind,
    log: Any,
    on_pass: Callable[[], None] | None = None,
) -> int:
    stop = threading.Event()
    reload = threading.Event()

    def on_stop(signum: int, frame: FrameType | None) -> None:
        stop.set()

    def on_hup(signum: int, frame: FrameType | None) -> None:
        reload.set()

    signal.signal(signal.SIGTERM, on_stop)
    signal.signal(signal.SIGINT, on_stop)
    signal.signal(signal.SIGHUP, on_hup)

    settings = load()
    runner = PassRunner(settings, kind, persistent=True)
    log.info(
        "daemon",
        summary=f"started, every {settings.run.interval_ms} ms",
        clusters=[c.name for c in settings.clusters],
    )
    next_tick = time.monotonic()
    try:
        while not stop.is_set():
            if reload.is_set():
                reload.clear()
                runner = _reloaded(load, kind, runner, log)
            for result in runner.run_all(Mode.APPLY):
                log_pass(log, result)
            if on_pass is not None:
                on_pass()
            interval = runner.settings.run.interval_ms / 1000
            next_tick += interval
            now = time.monotonic()
            next_tick = max(next_tick, now)
            stop.wait(next_tick - now)
    finally:
        runner.close()
    log.info("daemon", summary="stopped after the current pass")
    return 0


def _reloaded(
    load: Callable[[], Settings], kind: CheckerKind, runner: PassRunner, log: Any
) -> PassRunner:
    try:
        settings = load()
    except ConfigError as exc:
        log.error(
            "reload",
            summary="configuration not reloaded, keeping the previous one",
            reason=[str(p) for p in exc.problems],
        )
        return runner
    runner.close()
    log.info("reload", summary=f"configuration reloaded from {settings.source}")
    return PassRunner(settings, kind, persistent=True)
