"""Several clusters' passes at once, one thread each: a cluster whose nodes hang, or whose
ProxySQL reads are slow, never holds up another cluster's pass (its failover above all).

Each pass keeps its own deadline (run.max_runtime_ms); this only starts them together and
gathers their results in the order asked.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")


def run_each(jobs: Sequence[Callable[[], T]], names: Sequence[str]) -> list[T]:
    """Run every job on a thread of its own (the first on this one) and return their results
    in order. A job must not raise: each turns its own failures into its result."""
    if len(jobs) <= 1:
        return [job() for job in jobs]
    results: dict[int, T] = {}

    def run(index: int) -> None:
        results[index] = jobs[index]()

    threads = [
        threading.Thread(target=run, args=(i,), name=f"pass-{names[i]}", daemon=True)
        for i in range(1, len(jobs))
    ]
    for thread in threads:
        thread.start()
    run(0)
    for thread in threads:
        thread.join()
    return [results[i] for i in range(len(jobs))]
