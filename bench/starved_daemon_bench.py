"""A daemon starved of CPU and restarted: how many passes went blind, and did any empty the
writer hostgroup?

    python -m bench.starved_daemon_bench [--seconds 60] [--burners 4] [--restart-every 10]

`galera-checker daemon` runs on the Galera lab at a sub-second cadence (interval 200 ms,
max_runtime 100 ms) while `--burners` processes spin on the CPU at the same priority, and is
restarted every `--restart-every` seconds (a restart's first connects are the slow part). The
writer hostgroup is sampled every 20 ms through the whole run. Printed: passes by outcome,
passes that loaded a layout with every node judged down, and the samples with no ONLINE writer.
Nothing is asserted: the cluster is healthy all along, so every one of those is the checker's
own doing.

Run it against another checkout (a before/after on the same lab) with CHECKOUT=/path: the
daemon is then started with that checkout first on PYTHONPATH.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

from bench.common import Lab, admin_client, write_config
from tests.lab.galera import GaleraLab

SAMPLE_EVERY_S = 0.02
LOADED_SHOWN = 12


def burn(stop_at: float) -> None:
    while time.monotonic() < stop_at:
        pass


def daemon_env() -> dict[str, str]:
    env = {"PATH": os.environ.get("PATH", os.defpath)}
    checkout = os.environ.get("CHECKOUT")
    if checkout:
        env["PYTHONPATH"] = checkout
    return env


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--burners", type=int, default=4)
    parser.add_argument("--restart-every", type=float, default=10.0)
    args = parser.parse_args(argv)
    outcomes: Counter[str] = Counter()
    loaded_lines: list[str] = []
    all_down_loads = 0
    samples = empty = 0
    with Lab(galera_lab=GaleraLab()) as lab:
        config = write_config(lab, "galera-starved", interval_ms=200, max_runtime_ms=100)
        executable = Lab.executable("galera-checker")
        admin = admin_client(lab.proxysql)
        # one pass to place the roster, unstarved and unhurried
        relaxed = ["--set", "run.interval_ms=2000", "--set", "run.max_runtime_ms=1800"]
        subprocess.run(
            [executable, f"--config={config}", *relaxed, "run"], env=daemon_env(), check=True
        )
        stop_at = time.monotonic() + args.seconds
        burners = [
            multiprocessing.Process(target=burn, args=(stop_at,)) for _ in range(args.burners)
        ]
        for proc in burners:
            proc.start()
        lines: list[str] = []

        def sample() -> None:
            nonlocal samples, empty
            while time.monotonic() < stop_at:
                samples += 1
                if not lab.writers(admin):
                    empty += 1
                time.sleep(SAMPLE_EVERY_S)

        sampler = threading.Thread(target=sample)
        sampler.start()
        restarts = 0
        while time.monotonic() < stop_at:
            daemon = subprocess.Popen(
                [executable, f"--config={config}", "daemon"],
                env=daemon_env(),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
            reader = threading.Thread(
                target=lambda d=daemon: lines.extend(d.stderr or []), daemon=True
            )
            reader.start()
            time.sleep(min(args.restart_every, max(0.0, stop_at - time.monotonic())))
            daemon.terminate()
            daemon.wait(timeout=30)
            reader.join(timeout=5)
            restarts += 1
        sampler.join()
        for proc in burners:
            proc.join()
        admin.close()
    for line in lines:
        if not line.startswith("{"):
            continue
        entry = json.loads(line)
        if entry.get("event") != "pass":
            continue
        outcomes[str(entry.get("outcome"))] += 1
        verdicts = entry.get("verdicts") or {}
        if entry.get("loaded"):
            loaded_lines.append(str(entry.get("summary")))
            if set(verdicts) == {"down"}:
                all_down_loads += 1
    total = sum(outcomes.values())
    checkout = os.environ.get("CHECKOUT") or str(Path(__file__).resolve().parents[1])
    print(f"checkout: {checkout}")
    print(
        f"{total} passes in {args.seconds:.0f} s, {restarts} daemon starts, "
        f"{args.burners} CPU burners on {os.cpu_count()} cores"
    )
    print("outcomes: " + ", ".join(f"{k} {v}" for k, v in sorted(outcomes.items())))
    print(f"passes that loaded a layout with every node down: {all_down_loads}")
    print(f"writer hostgroup samples with no ONLINE writer: {empty} of {samples}")
    for line in loaded_lines[:LOADED_SHOWN]:
        print(f"  loaded: {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
