"""Applying passes one after another until a command has what it waits for (a switchover's
move done), each with whether its time is up: the command reads each pass and decides; this
only keeps the cadence and the deadline, on the runner's monotonic clock."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from checker_core.passes.result import Mode, PassResult

if TYPE_CHECKING:
    from checker_core.core.model import NodeAddress
    from checker_core.passes.runner import PassRunner

# between two passes of a move, at most: ProxySQL needs no more to show ConnUsed falling
STEP_S = 0.2


def passes_until(
    runner: PassRunner, timeout_s: float, pin: NodeAddress | None = None
) -> Iterator[tuple[PassResult, bool]]:
    """The runner's applying passes (with `pin` pinned, when given), one every interval
    (STEP_S at most), each with True once `timeout_s` has passed since the first began.
    Endless: the caller stops."""
    interval = runner.settings.run.interval_ms / 1000
    limit = runner.monotonic() + timeout_s
    while True:
        result = runner.run(Mode.APPLY, pin=pin)
        yield result, runner.monotonic() >= limit
        time.sleep(min(STEP_S, interval))
