"""Every configured cluster's runner, and what they share: the state store, ProxySQL's write
gate and the ports a runner is made with; the one check that spans clusters (two rosters that
name the same node); and their passes side by side, a thread each, so that a cluster whose
nodes hang, or whose ProxySQL reads are slow, never holds up another cluster's pass.

A runner knows one cluster and nothing of the others: the daemon goes daemon -> fleet ->
runner, one way, and so do a scheduler's run and the commands.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, TypeVar

from checker_core.core.model import BadRow, NodeAddress
from checker_core.core.roster import shared_nodes
from checker_core.edges.admin_errors import AdminError
from checker_core.edges.memory import StateStore
from checker_core.edges.proxysql import AdminClient
from checker_core.passes.ports import Ports
from checker_core.passes.proxy_facts import RECHECK_S, SharedFacts
from checker_core.passes.result import Outcome, PassResult
from checker_core.passes.runner import PassRunner

if TYPE_CHECKING:
    from checker_core.core.settings import ClusterSettings, Settings
    from checker_core.core.whatif import Assumed
    from checker_core.passes.plugin import CheckerKind, LaterActions
    from checker_core.passes.result import Mode
    from checker_core.passes.shared_rows import SharedRows

T = TypeVar("T")


class Fleet:
    """The runners of `settings`' clusters. `ports` and `assumed` are handed to every runner it
    makes (PassRunner says what each is); `store` and `write_gate` are shared by them all (a
    reload keeps the running ones)."""

    def __init__(
        self,
        settings: Settings,
        kind: CheckerKind,
        persistent: bool = False,
        *,
        ports: Ports | None = None,
        store: StateStore | None = None,
        write_gate: threading.Lock | None = None,
        assumed: Mapping[NodeAddress, Assumed] | None = None,
        shared_rows: SharedRows | None = None,
    ) -> None:
        self.settings = settings
        self.kind = kind
        self.persistent = persistent
        self.store = store or StateStore(
            settings.run.state_dir, kind.checker, [c.name for c in settings.clusters]
        )
        # one writer at a time to this ProxySQL's mysql_servers: its admin has no transactions,
        # and a LOAD carries every staged row, another cluster's half-written ones too
        self.write_gate = write_gate or threading.Lock()
        self.ports = ports or Ports()
        self._connect_admin = self.ports.connect_admin
        self.monotonic = self.ports.monotonic
        self.assumed = dict(assumed or {})
        self._runners: dict[str, PassRunner] = {}
        # the rosters' check: its own connection, read once per RECHECK_S for every cluster
        self._admin: AdminClient | None = None
        self._shared: dict[str, str] = {}  # clusters whose rosters share a node: why
        self._shared_until = 0.0
        self._lock = threading.Lock()
        self._retired = False
        # a daemon's clusters take their rows from one read of them all (shared_rows.py): the
        # source a reload hands over (its runners that go on read through it too), else a new
        # one when there is more than one cluster to share it
        several = persistent and len(settings.clusters) > 1
        if shared_rows is not None:
            shared_rows.cover(settings)
        elif several:
            from checker_core.passes.shared_rows import SharedRows

            shared_rows = SharedRows(settings, self._connect_admin, self.monotonic)
        self.shared_rows = shared_rows
        # and what they learn of their proxy besides the rows, asked once for all of them
        self.shared_facts = SharedFacts(settings, self.monotonic) if several else None

    # ------------------------------------------------------------ runners

    def new_runner(self, cluster: ClusterSettings) -> PassRunner:
        """A runner of `cluster` alone, for its caller to keep and close (a daemon's loop)."""
        return PassRunner(
            self.settings.only(cluster),
            self.kind,
            self.persistent,
            ports=self.ports,
            store=self.store,
            write_gate=self.write_gate,
            assumed=self.assumed,
            shared_rows=self.shared_rows,
            shared_facts=self.shared_facts,
        )

    def runner(self, cluster: ClusterSettings) -> PassRunner:
        """The fleet's own runner of `cluster`, made on first use and again when its settings
        changed; closed with the fleet."""
        made = self._runners.get(cluster.name)
        if made is None or made.cluster != cluster:
            if made is not None:
                made.close()
            made = self._runners[cluster.name] = self.new_runner(cluster)
        return made

    # ------------------------------------------------------------ passes

    def run_all(self, mode: Mode) -> list[PassResult]:
        """Every cluster's pass at once; the results in the configured order."""
        clusters = self.settings.clusters
        shared = self._shared_nodes() if len(clusters) > 1 else {}
        jobs: list[Callable[[], PassResult]] = []
        for cluster in clusters:
            why = shared.get(cluster.name)
            if why is not None:
                jobs.append(functools.partial(_refused, cluster.name, why))
            else:
                jobs.append(functools.partial(self.runner(cluster).run, mode))
        return run_each(jobs, [c.name for c in clusters])

    def refusal(self, cluster: ClusterSettings) -> PassResult | None:
        """The pass a cluster whose roster names another cluster's node gets instead of its
        own, or None (a daemon's loop asks before each pass of the runner it keeps). The
        rosters are read once per RECHECK_S, for every loop."""
        if len(self.settings.clusters) == 1:
            return None
        try:
            with self._lock:
                if self._retired:
                    return None  # a reload replaced this fleet: the next pass asks the new one
                if self.monotonic() >= self._shared_until:
                    self._shared = self._shared_nodes()
                    self._shared_until = self.monotonic() + RECHECK_S
                why = self._shared.get(cluster.name)
        except Exception as exc:  # the net, as a runner's: one cluster's failed pass
            self._drop_admin()
            message = f"internal error, nothing more done: {type(exc).__name__}: {exc}"
            return PassResult(cluster.name, "-", Outcome.FAILED, 0.0, message)
        return None if why is None else _refused(cluster.name, why)

    def _shared_nodes(self) -> dict[str, str]:
        """Clusters whose rosters name the same node, each with why."""
        clusters = self.settings.clusters
        try:
            if self._admin is None:
                self._admin = self._connect_admin(self.settings, None)
            templates = [h for c in clusters for h in c.hostgroups.templates]
            rows = self._admin.read_rows(templates).runtime
        except (AdminError, BadRow):
            self._drop_admin()
            return {}  # each pass reports the admin problem, or its own bad row, itself
        return shared_nodes(rows, [(c.name, c.hostgroups) for c in clusters])

    def finish(self) -> tuple[LaterActions, ...]:
        """A one-shot process's node actions its passes left for after them (their locks
        released), every cluster's at once."""
        runners = list(self._runners.values())
        done = run_each([r.finish_actions for r in runners], [r.cluster.name for r in runners])
        return tuple(later for each in done for later in each)

    # ------------------------------------------------------------ the end

    def _drop_admin(self) -> None:
        if self._admin is not None:
            self._admin.close()
            self._admin = None

    def hand_over_rows(self) -> SharedRows | None:
        """The shared read, for the fleet a reload makes on the same ProxySQL: this one no
        longer closes it."""
        shared, self.shared_rows = self.shared_rows, None
        return shared

    def retire(self) -> None:
        """A reload replaced this fleet: its connection is closed once no loop reads the
        rosters through it (the loops a reload keeps may be reading them, and ask the new
        fleet next); its shared read, unless handed over, too (a pass of a loop still ending
        then reads its rows itself)."""
        with self._lock:
            self._retired = True
            self._drop_admin()
        if self.shared_rows is not None:
            self.shared_rows.close()

    def close(self) -> None:
        self._drop_admin()
        if self.shared_rows is not None:
            self.shared_rows.close()
        for made in self._runners.values():
            made.close()
        self._runners = {}


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


def _refused(cluster: str, why: str) -> PassResult:
    return PassResult(cluster, "-", Outcome.BAD_INPUT, 0.0, f"bad input, nothing changed: {why}")
