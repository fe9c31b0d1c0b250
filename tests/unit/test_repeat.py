"""A command's passes (a switchover's move) come one after another, applying, until their time
is up by the runner's monotonic clock; the command decides what each pass means."""

from __future__ import annotations

import itertools
from pathlib import Path

from checker_core.passes.repeat import passes_until
from checker_core.passes.result import Outcome
from tests.unit.config_cases import galera_runner
from tests.unit.fakes import HealthyProber, MemoryAdmin, ports
from tests.unit.galera_cases import N1, steady, templates


def test_passes_apply_until_the_time_is_up(tmp_path: Path) -> None:
    now = [100.0]
    admin = MemoryAdmin([*templates(), *steady(N1)])
    runner = galera_runner(tmp_path, **ports(admin, HealthyProber(), monotonic=lambda: now[0]))
    seen = []
    for result, late in itertools.islice(passes_until(runner, 1.0), 4):
        seen.append((result.outcome, late))
        now[0] += 0.5  # each pass takes 0.5 s on the runner's clock
    assert seen == [
        (Outcome.UNCHANGED, False),
        (Outcome.UNCHANGED, False),
        (Outcome.UNCHANGED, True),
        (Outcome.UNCHANGED, True),
    ]
    assert admin.writes() == [], "the layout was converged: the passes applied nothing"
