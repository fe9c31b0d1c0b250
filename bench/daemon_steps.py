"""Where the daemon's CPU goes, step by step, at many clusters (not a test: it prints numbers,
asserts nothing).

    python -m bench.daemon_steps [--clusters 50] [--interval-ms 1000] [--watch-ms 40]
                                 [--seconds 15] [--changing]

The daemon runs in this process, on simulated Galera nodes (tests/lab/simnodes.py, in a process
of its own) and the lab's ProxySQL, as `galera-checker daemon` would run it. Each step of its
loops is timed by the CPU clock of the thread that runs it (`time.thread_time`), so a wait
costs only the CPU it takes, not its length. It prints each step's share of one core, how many
times it ran and its CPU per call, beside the whole process's CPU over the same seconds:

- `loop.run_pass`: a cluster's pass with what follows it on the loop (readiness, the board,
  the pass line, what the watch is given); `runner.run` is the pass itself, `log_pass` its line;
- `loop.wait_next`: the wait for the next pass, the CPU of its wake-ups and of handing the
  connections to the watch hub and taking them back (`hub.watch`, `hub.release`);
- `hub._turn`: the watch hub's turns: every question asked and answer read, every wait that
  comes or goes.
"""

from __future__ import annotations

import argparse
import collections
import os
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.common import Lab
from bench.scale_bench import WARM_UP_S, seed, set_changing
from checker_core.core.schema import Checker
from checker_core.edges import memory as memory_module
from checker_core.edges.logs import structlog_logger
from checker_core.passes import runner as runner_module
from checker_core.passes import shared_rows as shared_rows_module
from checker_core.service import cluster_loop as cluster_loop_module
from checker_core.service import daemon as daemon_module
from checker_core.service import readiness as readiness_module
from checker_core.service import watch as watch_module
from checker_core.service import watch_hub as hub_module
from checker_core.settings.config import load
from galera_checker.cli import kind as galera_kind
from tests.lab.fleet_config import Fleet, write_config
from tests.lab.simnodes import SimNodes


class Steps:
    """CPU per step while `measuring` is set, summed over every thread that ran it."""

    def __init__(self) -> None:
        self.cpu: collections.defaultdict[str, float] = collections.defaultdict(float)
        self.calls: collections.defaultdict[str, int] = collections.defaultdict(int)
        self.measuring = threading.Event()
        self._lock = threading.Lock()

    def time(self, owner: Any, name: str, label: str) -> None:
        original: Callable[..., Any] = getattr(owner, name)
        steps = self

        def timed(*args: Any, **kwargs: Any) -> Any:
            if not steps.measuring.is_set():
                return original(*args, **kwargs)
            started = time.thread_time()
            try:
                return original(*args, **kwargs)
            finally:
                spent = time.thread_time() - started
                with steps._lock:
                    steps.cpu[label] += spent
                    steps.calls[label] += 1

        setattr(owner, name, timed)


def instrument(steps: Steps) -> None:
    steps.time(cluster_loop_module.ClusterLoop, "run_pass", "loop.run_pass")
    steps.time(runner_module.PassRunner, "run", "runner.run")
    # the pass's own steps, under runner.run
    steps.time(runner_module.PassRunner, "_read", "  runner._read")
    steps.time(runner_module, "cluster_rows", "    cluster_rows")
    steps.time(shared_rows_module.SharedRows, "_read", "      shared read")
    steps.time(runner_module, "probe_roster", "  probe_roster")
    steps.time(runner_module.PassRunner, "_decide", "  runner._decide")
    steps.time(memory_module.StateStore, "paused", "  store.paused")
    steps.time(readiness_module.ReadinessWatch, "observe", "readiness.observe")
    steps.time(cluster_loop_module, "log_pass", "log_pass")
    steps.time(watch_module.BetweenPasses, "observe", "between.observe")
    steps.time(cluster_loop_module.ClusterLoop, "wait_next", "loop.wait_next")
    steps.time(hub_module.WatchHub, "watch", "hub.watch")
    steps.time(hub_module.WatchHub, "release", "hub.release")
    steps.time(hub_module.WatchHub, "_turn", "hub._turn")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--clusters", type=int, default=50)
    parser.add_argument("--interval-ms", type=int, default=1000)
    parser.add_argument("--watch-ms", type=int, default=40, help="run.watch_interval_ms")
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--changing", action="store_true", help="every node's queue moves")
    args = parser.parse_args(argv)
    steps = Steps()
    instrument(steps)
    with (
        Lab() as lab,
        tempfile.TemporaryDirectory(prefix="daemon-steps-") as tmp,
        SimNodes(clusters=args.clusters, nodes=3) as sim,
        open(os.devnull, "w") as sink,
    ):
        fleet = Fleet.of(sim)
        seed(lab, fleet)
        config = write_config(lab.proxysql, fleet, Path(tmp), args.interval_ms, args.watch_ms)
        set_changing(sim, args.changing)
        settings = load(config, Checker.GALERA, env={})
        log = structlog_logger("json", "info", sink, checker="galera")
        print(f"proxysql: {'real ' if lab.proxysql.is_real else 'emulated '}admin endpoint")

        def measure() -> None:
            time.sleep(WARM_UP_S + args.clusters * 0.05)  # connects and first passes
            steps.measuring.set()
            started, cpu = time.monotonic(), time.process_time()
            time.sleep(args.seconds)
            steps.measuring.clear()
            elapsed = time.monotonic() - started
            spent = time.process_time() - cpu
            report(steps, args, elapsed, spent)
            os.kill(os.getpid(), signal.SIGTERM)  # the daemon stops after its current passes

        threading.Thread(target=measure, daemon=True).start()
        daemon_module.run_daemon(lambda: settings, galera_kind(), log)
    return 0


def report(steps: Steps, args: argparse.Namespace, elapsed: float, spent: float) -> None:
    queues = "changing" if args.changing else "quiet"
    print(
        f"{args.clusters} clusters of 3 ({queues}), interval {args.interval_ms} ms, watch "
        f"{args.watch_ms} ms: the process {100 * spent / elapsed:.1f} % of a core "
        f"over {elapsed:.1f} s"
    )
    print(f"  {'step':<18} {'% of a core':>11} {'calls':>7} {'µs CPU each':>12}")
    for label, cpu in sorted(steps.cpu.items(), key=lambda item: -item[1]):
        calls = steps.calls[label]
        each = 1e6 * cpu / max(1, calls)
        print(f"  {label:<18} {100 * cpu / elapsed:>11.2f} {calls:>7} {each:>12.1f}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
