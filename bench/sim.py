"""The simulated world as a long run: seed after seed of random faults and operator actions
against the checker, every invariant checked all the time (tests/world; docs/testing.md).

    python -m bench.sim --minutes 30                 # random seeds, 5-minute runs, 30 in all
    python -m bench.sim --minutes 5 --seed 7         # one seed (replays the same schedule)
    python -m bench.sim --minutes 10 --seed 7 --shrink --save tests/world/cases

It prints each run's schedule, then per run and in all: steps played, faults and operator actions,
invariant checks made, samples taken, and every violation with its seed. Exit code 1 when any
invariant was broken. A real ProxySQL is used when one is found (PROXYSQL_BIN, PATH), else the
lab's emulator.
"""

from __future__ import annotations

import argparse
import functools
import random
import statistics
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from tests.world import run as world_run
from tests.world.schedule import Schedule
from tests.world.world import CADENCES, RunResult, WorldShape


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.sim", description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=5.0, help="in all (default 5)")
    parser.add_argument("--seed", type=int, help="one run of this seed (default: random seeds)")
    parser.add_argument("--run-minutes", type=float, default=5.0, help="one seed's run")
    parser.add_argument("--galera", type=int, default=2)
    parser.add_argument("--gr", type=int, default=1)
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument(
        "--cadence",
        choices=sorted(CADENCES),
        default="steady",
        help="steady: 500 ms, timeouts 150/250; fast: 200 ms, 50/50 (issue 38's detect-gap "
        "runs); tight: 500 ms, 300/600 (timeouts past the probes' share of the pass)",
    )
    parser.add_argument("--exclude", default="", help="actions never drawn, comma-separated")
    parser.add_argument("--shrink", action="store_true", help="cut a failing run down")
    parser.add_argument("--save", type=Path, help="where a shrunk failing schedule is saved")
    parser.add_argument("--quiet", action="store_true", help="no schedule lines")
    parser.add_argument(
        "--slow-ms",
        default="",
        help="how late a slow node answers each packet, comma-separated choices (default: the "
        "cadence's, within its timeouts)",
    )
    args = parser.parse_args(argv)
    cadence = CADENCES[args.cadence]
    if args.slow_ms:
        cadence = replace(cadence, slow_ms=tuple(int(ms) for ms in args.slow_ms.split(",")))
    shape = WorldShape(args.galera, args.gr, args.nodes, cadence)
    exclude = frozenset(a for a in args.exclude.split(",") if a)
    say: Callable[[str], None] = _silent if args.quiet else print
    results: list[RunResult] = []
    left = args.minutes * 60
    seeds = [args.seed] if args.seed is not None else []
    while left > 1:
        seed = seeds.pop(0) if seeds else random.SystemRandom().randrange(1, 10**6)
        seconds = min(left, args.minutes * 60 if args.seed is not None else args.run_minutes * 60)
        result = world_run.run(seed, seconds, shape=shape, exclude=exclude, say=say)
        results.append(result)
        print(_line(result), flush=True)
        if result.clients:
            print(f"  seed {seed}: {_clients_line(result)}", flush=True)
        for violation in result.violations:
            print(f"  seed {seed}: {violation.line()}", flush=True)
        for note in result.notes:
            print(f"  seed {seed}: note: {note}", flush=True)
        if result.violations and args.shrink:
            best = world_run.shrink(result, functools.partial(_replay, seed, shape))
            print(f"  shrunk to {len(best.steps)} steps:")
            for line in best.lines():
                print("   ", line)
            if args.save:
                args.save.mkdir(parents=True, exist_ok=True)
                path = args.save / f"seed-{seed}.json"
                world_run.save(best, path, args.cadence)
                print(f"  saved {path}")
        left -= seconds
        if args.seed is not None:
            break
    total = RunResult(0, results[0].schedule if results else Schedule(0))
    for r in results:
        total.steps_done += r.steps_done
        total.faults_done += r.faults_done
        total.checks += r.checks
        total.samples += r.samples
        total.seconds += r.seconds
        total.violations += r.violations
    windows = sorted(w for r in results for w in r.load_windows_ms)
    if windows:
        print(
            f"checker LOADs: {len(windows)}; last read of staging to LOAD: median "
            f"{statistics.median(windows):.1f} ms, 99th percentile "
            f"{windows[int(0.99 * (len(windows) - 1))]:.1f} ms, longest {windows[-1]:.1f} ms"
        )
    print(
        f"in all: {len(results)} runs, {total.seconds / 60:.1f} min, {total.faults_done} faults "
        f"and operator actions ({total.steps_done} steps with heals), {total.checks} invariant "
        f"checks over {total.samples} samples, {len(total.violations)} violations"
    )
    return 1 if total.violations else 0


def _replay(seed: int, shape: WorldShape, schedule: Schedule) -> RunResult:
    return world_run.run(seed, schedule.end, shape=shape, schedule=schedule, say=_silent)


def _silent(_line: str) -> None:
    pass


def _line(result: RunResult) -> str:
    kinds: dict[str, int] = {}
    for step in result.schedule.steps:
        if step.heals is None:
            kinds[step.action] = kinds.get(step.action, 0) + 1
    done = ", ".join(f"{k} {v}" for k, v in sorted(kinds.items()))
    return (
        f"seed {result.seed}: {result.seconds:.0f} s, {result.faults_done} faults and actions "
        f"({done}; {result.skipped} steps refused by the world; "
        f"{len(result.admin_faults)} admin faults met their statement), {result.checks} checks, "
        f"{result.samples} samples, {result.hook_events} hook events judged, "
        f"{len(result.violations)} violations"
    )


def _clients_line(result: RunResult) -> str:
    counts = result.clients.values()
    longest = max(c.longest_hold_s for c in counts)
    return (
        f"clients: {sum(c.transactions for c in counts)} transactions, "
        f"{sum(c.held for c in counts)} held open for seconds (longest {longest:.1f} s), "
        f"{sum(c.attached_sessions for c in counts)} sessions pinned by a user variable, "
        f"{sum(c.errors for c in counts)} errors"
    )


if __name__ == "__main__":
    sys.exit(main())
