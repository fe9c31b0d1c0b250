"""The daemon's failover readiness, worked out off the loop: a readiness costs one decision per
node (a pass's cost times the roster), so the loop never waits for it. It is worked out again
only when what it depends on changed (a steady daemon's passes see the same rows and facts), on
a worker thread that takes each cluster's newest pass; a pass carries the newest readiness
known, and a warning is said when a cluster stops, or starts again, being ready."""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import TYPE_CHECKING

from checker_core.core.steady import but_queues
from checker_core.passes.result import PassResult

if TYPE_CHECKING:
    from checker_core.core.whatif import Readiness


def _inputs_of(result: PassResult) -> object:
    """What readiness depends on: the rows, each probe's facts or failure (not its timing),
    the decision, the counters, the settings. Not the readings that move with load alone (a
    receive or applier queue, a counter): under writes they change with every answer while
    nothing the nodes say does, and working readiness out again for each would cost a pass
    per node, every pass (core/steady.py keeps the decision over them for the same reason)."""
    inputs = result.inputs
    if inputs is None or result.decision is None:
        return None
    without = inputs.policy.without_readings
    probes = tuple(
        (node, without(probe.facts), probe.error, probe.failure)
        for node, probe in sorted(result.probes.items())
    )
    return (
        inputs.view.rows,
        probes,
        sorted(inputs.memory.items()),
        inputs.cluster,
        but_queues(result.decision),
    )


class ReadinessWatch:
    def __init__(self, off_loop: bool = True) -> None:
        self.off_loop = off_loop
        self._lock = threading.Condition()
        self._pending: dict[str, tuple[object, PassResult]] = {}
        self._known: dict[str, tuple[object, Readiness]] = {}
        self._ready: dict[str, bool] = {}
        self._said: dict[str, list[str]] = {}
        # each cluster's last decision and its inputs' key: a steady pass keeps the very
        # decision object (core.steady.still_holds), which it does only when every input the
        # key reads is the one it was made from, so the key is the one worked out then
        self._keys: dict[str, tuple[object, object]] = {}
        self._working = False
        self._closed = False
        self._thread: threading.Thread | None = None

    def observe(self, result: PassResult) -> tuple[PassResult, str | None]:
        """The result with the newest readiness known, and what to warn about since the last
        pass of its cluster (a readiness worked out off the loop is said with the next pass)."""
        cluster = result.cluster
        last = self._keys.get(cluster)
        if last is not None and result.decision is not None and last[0] is result.decision:
            key = last[1]
        else:
            key = _inputs_of(result)
            self._keys[cluster] = (result.decision, key)
        with self._lock:
            known = self._known.get(cluster)
        if key is not None and (known is None or known[0] != key):
            if self.off_loop:
                self._submit(cluster, key, result)
            else:
                self._work(cluster, key, result)
                with self._lock:
                    known = self._known.get(cluster)
        with self._lock:
            said = self._said.pop(cluster, [])
        # one copy of the (large) result, not one per field
        if known is not None and self.off_loop:
            result = replace(result, known_readiness=known[1], readiness_deferred=True)
        elif known is not None:
            result = replace(result, known_readiness=known[1])
        elif self.off_loop:
            result = replace(result, readiness_deferred=True)
        return result, "; ".join(said) or None

    def wait_idle(self, timeout_s: float) -> bool:
        """Until nothing is pending or being worked out (tests, a clean stop)."""
        with self._lock:
            return self._lock.wait_for(
                lambda: not self._pending and not self._working, timeout=timeout_s
            )

    def forget(self, keep: set[str]) -> None:
        with self._lock:
            for table in (self._pending, self._known, self._ready, self._said, self._keys):
                for name in set(table) - keep:
                    table.pop(name, None)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._pending.clear()
            self._lock.notify_all()

    def _submit(self, cluster: str, key: object, result: PassResult) -> None:
        with self._lock:
            self._pending[cluster] = (key, result)  # only the newest pass of a cluster counts
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="readiness", daemon=True)
                self._thread.start()
            self._lock.notify_all()

    def _run(self) -> None:
        while True:
            with self._lock:
                self._lock.wait_for(lambda: self._pending or self._closed)
                if self._closed:
                    return
                cluster = next(iter(self._pending))
                key, result = self._pending.pop(cluster)
                self._working = True
            try:
                self._work(cluster, key, result)
            finally:
                with self._lock:
                    self._working = False
                    self._lock.notify_all()

    def _work(self, cluster: str, key: object, result: PassResult) -> None:
        try:
            readiness = result.readiness()
        except Exception as exc:  # a question asked of the pass must never end the daemon
            self._say(cluster, f"cluster {cluster}: failover readiness not known ({exc})")
            return
        if readiness is None:
            return
        with self._lock:
            if self._closed:
                return
            self._known[cluster] = (key, readiness)
            was = self._ready.get(cluster)
            self._ready[cluster] = readiness.ready
        if (was is None and readiness.ready) or was == readiness.ready:
            return
        self._say(cluster, f"cluster {cluster}: failover {readiness.reason}")

    def _say(self, cluster: str, text: str) -> None:
        with self._lock:
            self._said.setdefault(cluster, []).append(text)
