"""Several clusters' passes at once, one thread each: a cluster whose nodes hang, or whose
ProxySQL reads are slow, never holds up another cluster's pass (its failover above all).

Each pass keeps its own deadline (run.max_runtime_ms); this only starts them together and
gathers their results in the order asked.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypeVar

from checker_core.core.model import BadRow
from checker_core.core.roster import shared_nodes
from checker_core.edges.proxysql import AdminError
from checker_core.passes.proxy_facts import RECHECK_S
from checker_core.passes.result import Outcome, PassResult

if TYPE_CHECKING:
    from checker_core.core.settings import ClusterSettings
    from checker_core.passes.result import Mode
    from checker_core.passes.runner import PassRunner

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


class Several:
    """The passes of a runner's several clusters: one runner each (its own connections, prober
    and view of the peers), sharing the parent's state store, ProxySQL write gate and ports.
    Clusters whose rosters name the same node are refused: their checkers would fight over it."""

    def __init__(self, parent: PassRunner) -> None:
        self.parent = parent
        self.each: dict[str, PassRunner] = {}
        self._shared: dict[str, str] = {}  # clusters whose rosters share a node: why
        self._shared_until = 0.0
        self._shared_lock = threading.Lock()
        self._parent_closed = False

    def run_all(self, mode: Mode) -> list[PassResult]:
        """Every cluster's pass at once; the results in the configured order."""
        clusters = self.parent.settings.clusters
        shared = self.shared_nodes()
        jobs: list[Callable[[], PassResult]] = []
        for cluster in clusters:
            if cluster.name in shared:
                refused = _refused(cluster.name, shared[cluster.name])
                jobs.append(functools.partial(_given, refused))
            else:
                jobs.append(functools.partial(self.runner_for(cluster).one_cluster, cluster, mode))
        return run_each(jobs, [c.name for c in clusters])

    def run_one(self, cluster: ClusterSettings, mode: Mode) -> PassResult:
        """One cluster's pass on its own runner, beside the others'."""
        refused = self.refusal(cluster)
        if refused is not None:
            return refused
        return self.runner_for(cluster).one_cluster(cluster, mode)

    def refusal(self, cluster: ClusterSettings) -> PassResult | None:
        """The pass a cluster whose roster names another cluster's node gets instead of its
        own, or None (the daemon's loop of one cluster among several asks before each pass,
        on the runner it keeps). The rosters are read once per RECHECK_S, for all the
        loops."""
        parent = self.parent
        try:
            with self._shared_lock:
                if self._parent_closed:
                    return None  # a reload replaced this runner: its next pass asks the new one
                if parent.monotonic() >= self._shared_until:
                    self._shared = self.shared_nodes()
                    self._shared_until = parent.monotonic() + RECHECK_S
                shared = self._shared.get(cluster.name)
        except Exception as exc:  # the net, as one_cluster's: one cluster's failed pass
            parent.drop_admin()
            message = f"internal error, nothing more done: {type(exc).__name__}: {exc}"
            return PassResult(cluster.name, "-", Outcome.FAILED, 0.0, message)
        return None if shared is None else _refused(cluster.name, shared)

    def shared_nodes(self) -> dict[str, str]:
        """Clusters whose rosters name the same node, each with why."""
        parent = self.parent
        clusters = parent.settings.clusters
        try:
            templates = [h for c in clusters for h in c.hostgroups.templates]
            rows = parent.admin().read_rows(templates).runtime
        except (AdminError, BadRow):
            return {}  # each pass reports the admin problem, or its own bad row, itself
        return shared_nodes(rows, [(c.name, c.hostgroups) for c in clusters])

    def runner_for(self, cluster: ClusterSettings) -> PassRunner:
        each = self.each.get(cluster.name)
        if each is None or each.settings.clusters != (cluster,):
            if each is not None:
                each.close()
            each = self.each[cluster.name] = self.parent.narrowed(cluster)
        return each

    def close_parent(self) -> None:
        """Close the parent runner once no loop reads the rosters through it (a daemon's
        reload: the loops it keeps may be reading them, and ask the new runner next)."""
        with self._shared_lock:
            self._parent_closed = True
            self.parent.close()

    def close(self) -> None:
        for each in self.each.values():
            each.close()
        self.each = {}


def _refused(cluster: str, why: str) -> PassResult:
    return PassResult(cluster, "-", Outcome.BAD_INPUT, 0.0, f"bad input, nothing changed: {why}")


def _given(result: PassResult) -> PassResult:
    return result
