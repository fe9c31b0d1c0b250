"""The simulated world's short run in the suite: a few seeds of random faults and operator
actions against both checkers' daemons, every invariant checked all the time (docs/testing.md),
and every schedule a failing run was once cut down to, replayed.

The world is the test's own: simulated clusters on 127.0.0.1 ports the OS picks and a ProxySQL
of its own, so it needs no lab lock. The long run is `python -m bench.sim`.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.world import run as world_run
from tests.world.world import CADENCES, RunResult, WorldShape

CASES = Path(__file__).resolve().parents[1] / "world" / "cases"
# a minute each: with 3 clusters, about 60 faults and operator actions per seed
SHORT_SEEDS = (1, 2)
SHORT_SECONDS = 50.0


def _report(result: RunResult) -> str:
    lines = [v.line() for v in result.violations]
    failed = [
        f"{o.step.action} exit {o.code}: {o.tail.strip()[-300:]}"
        for o in result.outcomes
        if o.code not in (0, None)
    ]
    return "\n".join([*lines, *failed[:5]])


@pytest.mark.parametrize("seed", SHORT_SEEDS)
def test_the_world_breaks_no_invariant(seed: int, tmp_path: Path) -> None:
    result = world_run.run(seed, SHORT_SECONDS, directory=tmp_path, say=lambda _line: None)
    assert result.faults_done >= 10, "the schedule played"
    assert result.samples > 100, "the observer looked all along"
    if result.clients:  # a real ProxySQL: the application ran through it
        assert sum(c.transactions for c in result.clients.values()) > 0, result.clients
    assert result.ok, f"seed {seed}:\n{_report(result)}"


@pytest.mark.parametrize(
    "case", sorted(CASES.glob("*.json")) if CASES.is_dir() else [], ids=lambda p: p.stem
)
def test_a_schedule_that_once_failed_passes(case: Path, tmp_path: Path) -> None:
    data = json.loads(case.read_text())
    schedule = world_run.from_json(data)
    shape = WorldShape(cadence=CADENCES[str(data.get("cadence", "steady"))])
    result = world_run.run(
        schedule.seed,
        schedule.end,
        shape=shape,
        schedule=schedule,
        directory=tmp_path,
        say=lambda _line: None,
    )
    assert result.ok, f"{case.name}:\n{_report(result)}"
