"""One run of the simulated world: start it, play a schedule drawn from a seed (or given), let
it settle, judge it at rest, stop it. A failing run can be cut down (`shrink`) to the shortest
schedule that still fails, and that schedule saved as a case the suite replays."""

from __future__ import annotations

import json
import random
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from tests.world import hooks_told
from tests.world import schedule as sched
from tests.world.invariants import Judge, Violation, quiescent, variables_kept
from tests.world.observer import Observer
from tests.world.world import RunResult, World, WorldShape

READY_S = 60.0
DEFAULT_SHAPE = WorldShape()
# ProxySQL variables that move by themselves (uptime-like counters, checksums)
MOVING_VARIABLES = ("admin-version", "mysql-server_version")


def run(
    seed: int,
    seconds: float,
    *,
    shape: WorldShape = DEFAULT_SHAPE,
    schedule: sched.Schedule | None = None,
    directory: Path | None = None,
    exclude: frozenset[str] = frozenset(),
    say: Callable[[str], None] = print,
) -> RunResult:
    where = directory or Path(tempfile.mkdtemp(prefix=f"world-{seed}-"))
    world = World(where, shape)
    with world.running():
        _wait_ready(world)
        # the world's clock starts with the schedule: steps and violations share one time line
        world.t0 = time.monotonic()
        if schedule is None:
            schedule = sched.draw(
                seed,
                [*world.clusters, sched.PROXYSQL],
                seconds,
                exclude=exclude,
                slow_ms=shape.cadence.slow_ms,
            )
        for line in schedule.lines():
            say(line)
        judge = Judge(world.specs.values())
        clients = world.start_clients(seed)
        before = _variables(world)
        observer = Observer(world, judge)
        observer.start()
        tending = threading.Event()
        caretaker = threading.Thread(target=world.tend, args=(tending,), name="caretaker")
        caretaker.start()
        result = RunResult(seed, schedule)
        rng = random.Random(seed)
        try:
            skipped: set[int] = set()
            for step in schedule.steps:
                wait = step.at - world.now()
                if wait > 0:
                    time.sleep(wait)
                if step.heals in skipped or not world.do(step, judge, rng):
                    skipped.add(step.number)
                    result.skipped += 1
                    continue
                result.steps_done += 1
                if step.heals is None:
                    result.faults_done += 1
            for thread in list(world._threads):
                thread.join(timeout=120)
            # the application goes home: what it held in ProxySQL's runtime is let go
            world.stop_clients()
            at_rest = _settle(world, observer)
        finally:
            tending.set()
            caretaker.join(timeout=10)
            observer.stop()
        events = hooks_told.told(world.dir)
        result.hook_events = len(events)
        told = hooks_told.judge(
            events,
            world.passes_seen,
            world.switchovers,
            time.time() - time.monotonic() + world.t0,
        )
        result.violations = sorted(
            observer.violations()
            + told
            + at_rest
            + variables_kept(before, _variables(world), world.now()),
            key=lambda v: v.at,
        )
        result.checks = judge.checks
        result.samples = observer.samples
        result.seconds = world.now()
        result.outcomes = list(world.outcomes)
        if world.relay is not None:
            result.admin_faults = list(world.relay.done)
        for error in observer.errors[:5]:
            say(f"observer: {error}")
        result.notes = list(judge.notes)
        result.load_windows_ms = [1000 * (load - read) for read, load in judge.loads]
        if clients is not None:
            result.clients = dict(clients.counts)
    return result


def _wait_ready(world: World) -> None:
    """Every cluster has its one ONLINE writer."""
    deadline = time.monotonic() + READY_S
    while time.monotonic() < deadline:
        runtime = world.rows("runtime_mysql_servers")
        if all(
            any(r.hostgroup == spec.writer and r.status == "ONLINE" for r in runtime)
            for spec in world.specs.values()
        ):
            return
        time.sleep(0.2)
    raise RuntimeError(f"the world did not get a writer in every cluster in {READY_S:.0f} s")


def _settle(world: World, observer: Observer) -> list[Violation]:
    """Invariants at rest: polled until they hold or twice the recovery bound has passed
    (evictions are cleared and nodes come back over a few passes)."""
    deadline = time.monotonic() + 2 * world.cadence.recover_s + 4.0
    found: list[Violation] = []
    while True:
        runtime = world.rows("runtime_mysql_servers")
        staged = world.rows("mysql_servers")
        truth = world.truth()
        found = []
        for spec in world.specs.values():
            found += quiescent(spec, world.now(), runtime, staged, truth[spec.name])
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.5)


def _variables(world: World) -> dict[str, str]:
    return {k: v for k, v in world.variables().items() if k not in MOVING_VARIABLES}


def shrink(
    failing: RunResult,
    replay: Callable[[sched.Schedule], RunResult],
    say: Callable[[str], None] = print,
    budget: int = 12,
) -> sched.Schedule:
    """The shortest schedule found that still fails with one of the same invariants: the
    prefix up to the first violation, then one fault dropped at a time while it still fails.
    At most `budget` replays."""
    wanted = {v.invariant for v in failing.violations}
    best = failing.schedule
    failed_at = min(v.at for v in failing.violations)
    tries = 0
    candidates: Iterable[sched.Schedule] = sched.shrunk(best, failed_at)
    improved = True
    while improved and tries < budget:
        improved = False
        for candidate in candidates:
            if tries >= budget or len(candidate.steps) >= len(best.steps):
                continue
            tries += 1
            result = replay(candidate)
            hits = [v for v in result.violations if v.invariant in wanted]
            say(
                f"shrink try {tries}: {len(candidate.steps)} steps -> "
                + ("fails" if hits else "passes")
            )
            if hits:
                best = candidate
                failed_at = min(v.at for v in hits)
                candidates = sched.shrunk(best, failed_at)
                improved = True
                break
    return best


def to_json(schedule: sched.Schedule, cadence: str = "steady") -> dict[str, Any]:
    return {
        "seed": schedule.seed,
        "cadence": cadence,
        "steps": [
            {
                "at": s.at,
                "action": s.action,
                "cluster": s.cluster,
                "node": s.node,
                "fields": [list(f) for f in s.fields],
                "heals": s.heals,
                "number": s.number,
            }
            for s in schedule.steps
        ],
    }


def from_json(data: dict[str, Any]) -> sched.Schedule:
    return sched.Schedule(
        int(data["seed"]),
        tuple(
            sched.Step(
                float(s["at"]),
                str(s["action"]),
                str(s["cluster"]),
                s["node"],
                tuple((str(k), v) for k, v in s["fields"]),
                s["heals"],
                int(s["number"]),
            )
            for s in data["steps"]
        ),
    )


def save(schedule: sched.Schedule, path: Path, cadence: str = "steady") -> None:
    path.write_text(json.dumps(to_json(schedule, cadence), indent=1) + "\n")
