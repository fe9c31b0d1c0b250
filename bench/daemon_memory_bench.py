"""Daemon memory over many passes: resident set size after 100 passes and after 10,000.

    python -m bench.daemon_memory_bench [--passes 10000]

The real daemon loop (run_daemon) runs in this process on the Galera lab, with its metrics
listener on and scraped every 100 passes, logging JSON to /dev/null. Only the cadence is
changed: interval_ms is set to 1 ms past the settings' 100 ms floor, so 10,000 passes take a
minute instead of seventeen; memory per pass is what is measured, not the wait between passes.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
import urllib.request
from dataclasses import replace

from bench.common import Lab, write_config
from checker_core.core.schema import Checker
from checker_core.core.settings import ListenAddress, Settings
from checker_core.edges.logs import get_logger
from checker_core.service.daemon import run_daemon
from checker_core.settings.config import load
from galera_checker.cli import kind
from tests.lab.galera import GaleraLab
from tests.lab.process import free_port

FIRST_MARK = 100
SCRAPE_EVERY = 100


def rss_kib() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS in /proc/self/status")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passes", type=int, default=10_000)
    args = parser.parse_args(argv)
    if args.passes <= FIRST_MARK:
        parser.error(f"--passes must be above {FIRST_MARK}")
    marks = sorted({FIRST_MARK, 1_000, args.passes // 2, args.passes} - {0})
    marks = [m for m in marks if FIRST_MARK <= m <= args.passes]
    with Lab(galera_lab=GaleraLab()) as lab:
        path = write_config(lab, "galera-memory", interval_ms=200, max_runtime_ms=180)
        port = free_port("127.0.0.1")
        loaded = load(path, Checker.GALERA, env={})
        run = replace(loaded.run, interval_ms=1, metrics_listen=ListenAddress("127.0.0.1", port))
        settings: Settings = replace(loaded, run=run)
        seen: dict[int, int] = {}
        count = 0
        started = time.monotonic()

        def on_pass() -> None:
            nonlocal count
            count += 1
            if count % SCRAPE_EVERY == 0:
                url = f"http://127.0.0.1:{port}/metrics"
                with urllib.request.urlopen(url, timeout=5) as answer:
                    answer.read()
            if count in marks:
                seen[count] = rss_kib()
            if count >= args.passes:
                os.kill(os.getpid(), signal.SIGTERM)  # the daemon's own stop: after this pass

        with open(os.devnull, "w") as devnull:
            log = get_logger("json", "info", stream=devnull, checker="galera")
            run_daemon(lambda: settings, kind(), log, on_pass=on_pass)
        elapsed = time.monotonic() - started
    first = seen[FIRST_MARK]
    print(f"passes: {count} in {elapsed:.0f} s ({elapsed / count * 1000:.1f} ms each)")
    for mark in marks:
        ratio = seen[mark] / first
        print(f"RSS after {mark:>6} passes: {seen[mark] / 1024:7.1f} MiB  ratio {ratio:5.3f}")
    last = seen[args.passes] / first
    verdict = "within" if last <= 1.10 else "OVER"
    print(f"RSS after {args.passes} vs {FIRST_MARK} passes: {last:.3f} ({verdict} the 10% bound)")
    return 0 if last <= 1.10 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
