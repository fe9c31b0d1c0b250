"""The daemon's failover readiness: worked out again only when what it depends on changed
(a steady daemon's passes see the same rows and facts, and each readiness costs one decision
per node), and a warning when a cluster stops, or starts again, being ready."""

from __future__ import annotations

from dataclasses import replace

from checker_core.runner import PassResult


def _inputs_of(result: PassResult) -> object:
    """What readiness depends on: the rows, each probe's facts or failure (not its timing),
    the counters, the settings."""
    inputs = result.inputs
    if inputs is None:
        return None
    probes = tuple(
        (node, probe.facts, probe.error, probe.failure)
        for node, probe in sorted(result.probes.items())
    )
    return (
        inputs.view.rows,
        probes,
        sorted(inputs.memory.items()),
        inputs.cluster,
        result.decision,
    )


class ReadinessWatch:
    def __init__(self) -> None:
        self._last: dict[str, tuple[object, PassResult]] = {}
        self._ready: dict[str, bool] = {}

    def observe(self, result: PassResult) -> tuple[PassResult, str | None]:
        """The result with its readiness known, and what to warn about when it changed."""
        key = _inputs_of(result)
        last = self._last.get(result.cluster)
        readiness = last[1].readiness() if last is not None and last[0] == key else None
        if readiness is None:
            try:
                readiness = result.readiness()
            except Exception as exc:  # a question asked of the pass must never end the daemon
                return result, f"cluster {result.cluster}: failover readiness not known ({exc})"
        if readiness is None:
            return result, None
        known = replace(result, known_readiness=readiness)
        self._last[result.cluster] = (key, known)
        was = self._ready.get(result.cluster)
        self._ready[result.cluster] = readiness.ready
        if (was is None and readiness.ready) or was == readiness.ready:
            return known, None
        return known, f"cluster {result.cluster}: failover {readiness.reason}"

    def forget(self, keep: set[str]) -> None:
        for name in set(self._last) - keep:
            self._last.pop(name, None)
            self._ready.pop(name, None)
