"""What a pass asks its ProxySQL besides the cluster's rows: ProxySQL's own managers of the same
hostgroups, the ProxySQL Cluster peers and this checker's role among theirs, the runtime
variables an advisor wants. The daemon asks them again only every RECHECK_S or on a new
connection, so a steady pass costs no extra round trip."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Generic, TypeVar

from checker_core.core.leadership import ALONE, Leadership, ProxyAddress
from checker_core.passes.gate import Stop
from checker_core.passes.result import Outcome

if TYPE_CHECKING:
    from checker_core.core.leadership import PeerMemory
    from checker_core.core.settings import ClusterSettings, Settings
    from checker_core.edges.memory import StateStore
    from checker_core.edges.proxysql import AdminClient

# how often the daemon asks again what it found about its proxy (peers, native managers,
# runtime variables), whatever it found
RECHECK_S = 5.0
# a LOAD that another cluster's LOAD in the same second holds (peers pull only a newer epoch)
# waits for the next second this share of max_runtime_ms at most, asking again this often
WAIT_SECOND_SHARE = 0.25
SECOND_POLL_S = 0.02

T = TypeVar("T")


class Recheck(Generic[T]):
    """A fact about ProxySQL, asked once per admin connection and then every RECHECK_S."""

    def __init__(self, empty: T, monotonic: Callable[[], float]) -> None:
        self.value = empty
        self._monotonic = monotonic
        self._asked_by: AdminClient | None = None
        self._until = 0.0

    def due(self, admin: AdminClient) -> bool:
        return self._asked_by is not admin or self._monotonic() >= self._until

    def keep(self, admin: AdminClient, value: T) -> T:
        self.value, self._asked_by = value, admin
        self._until = self._monotonic() + RECHECK_S
        return value


class SharedFacts:
    """What a daemon's runners learn of their one proxy, asked for all of them at once: ProxySQL
    builds its runtime tables afresh for every SELECT of one (all its servers' rows), so 200
    clusters asking each every RECHECK_S would cost it 40 such reads a second. Each fact is
    asked by whichever pass finds it due, for every cluster of `settings`, and then not again
    for RECHECK_S."""

    def __init__(self, settings: Settings, monotonic: Callable[[], float]) -> None:
        self.clusters = settings.clusters
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._native: dict[str, str] = {}
        self._native_until = -math.inf  # -inf: never asked
        self._asking = False
        self.alone_until = -math.inf  # no peers found: nobody asks again before this

    def native_refusals(self, admin: AdminClient) -> dict[str, str]:
        """{cluster: why} for the clusters ProxySQL's own managers manage too. While one pass
        asks again, the others take what was found last; until something was found, every
        pass asks for itself (none may write before it knows)."""
        from checker_core.edges import native

        with self._lock:
            known = self._native_until > -math.inf
            due = self._monotonic() >= self._native_until and not self._asking
            if known and not due:
                return self._native
            self._asking = self._asking or known
        try:
            found = native.conflicts(admin, self.clusters)
        finally:
            if known:
                with self._lock:
                    self._asking = False
        with self._lock:
            self._native, self._native_until = found, self._monotonic() + RECHECK_S
        return found


class ProxyFacts:
    """One runner's questions to its proxy besides the rows, and what it remembers of them.
    `shared`: a daemon fleet's facts its runners ask once for all (SharedFacts)."""

    def __init__(
        self,
        settings: Settings,
        store: StateStore,
        persistent: bool,
        monotonic: Callable[[], float],
        shared: SharedFacts | None = None,
    ) -> None:
        self.settings = settings
        self.store = store
        self.persistent = persistent
        self.monotonic = monotonic
        self.shared = shared
        # ProxySQL's own managers of our hostgroups: the refusal per cluster
        self._native: Recheck[dict[str, str]] = Recheck({}, monotonic)
        self._variables: Recheck[dict[str, str]] = Recheck({}, monotonic)
        self.alone_until = 0.0  # the daemon found no peers; it asks again after this
        self._peers: PeerMemory | None = None

    def refuse_native_manager(self, admin: AdminClient, cluster: ClusterSettings) -> None:
        """A cluster whose hostgroups ProxySQL's own mysql_*_hostgroups tables manage too is
        bad input: two managers would fight over every server. Asked before anything is
        written."""
        from checker_core.edges import native

        if self.shared is not None:
            refused = self.shared.native_refusals(admin).get(cluster.name)
        else:
            if self._native.due(admin):
                self._native.keep(admin, native.conflicts(admin, self.settings.clusters))
            refused = self._native.value.get(cluster.name)
        if refused is not None:
            raise native.NativeConflict(refused)

    def listed_peers(self, admin: AdminClient) -> tuple[ProxyAddress, ...]:
        """The proxy's ProxySQL Cluster peers: none with cluster = off, nor while the daemon
        found none a moment ago (a steady pass then costs no extra query)."""
        if self.settings.proxysql.cluster == "off":
            return ()
        # a fleet's runners share when they ask again; a runner alone keeps its own
        holder: SharedFacts | ProxyFacts = self.shared if self.shared is not None else self
        if self.persistent and self.monotonic() < holder.alone_until:
            return ()
        from checker_core.edges.proxysql_peers import list_peers

        listed = list_peers(admin)
        if not listed and self.persistent:
            holder.alone_until = self.monotonic() + RECHECK_S
        return listed

    def leadership(
        self, admin: AdminClient, listed: tuple[ProxyAddress, ...], remember: bool
    ) -> Leadership:
        """This checker's role among the ProxySQL Cluster's checkers (ALONE without peers)."""
        if not listed:
            return ALONE
        # the rule and its records are loaded only by a proxy that has peers
        from checker_core.core.peers import choose_actor
        from checker_core.edges.proxysql_peers import read_cluster_view

        proxysql = self.settings.proxysql
        view = read_cluster_view(admin, proxysql.me, listed)
        if self._peers is None:  # a scheduler pass, or the daemon's first: from the state file
            self._peers = self.store.load_peers(proxysql.me)
        leadership = choose_actor(view, self._peers)
        if remember and leadership.memory is not None:
            self._peers = leadership.memory
            self.store.save_peers(proxysql.me, leadership.memory)
        return leadership

    def runtime_variables(self, admin: AdminClient, wanted: Sequence[str]) -> dict[str, str]:
        """ProxySQL's runtime variables an advisor asked for; none when they cannot be read
        (advice is never worth a pass: without them the advisor says less)."""
        from checker_core.edges.admin_errors import AdminError

        if wanted and self._variables.due(admin):
            try:
                found = admin.read_runtime_variables(wanted)
            except AdminError:
                found = {}
            self._variables.keep(admin, found)
        return self._variables.value

    def second_taken(self, admin: AdminClient) -> Stop | None:
        """Asked holding the write gate, just before a LOAD on a proxy with peers: another of
        this process's clusters may have LOADed in this second since the pass read its view,
        and the peers pull only a newer epoch. The LOAD waits for the proxy's next second,
        within the pass's time; past that it is deferred to the next pass."""
        from checker_core.edges.proxysql_peers import loaded_this_second

        limit = self.settings.run.max_runtime_ms / 1000 * WAIT_SECOND_SHARE
        waited_until = self.monotonic() + limit
        while loaded_this_second(admin):
            if self.monotonic() >= waited_until:
                return Stop(
                    Outcome.DEFERRED,
                    "LOAD deferred to the next pass: mysql_servers was loaded in this same "
                    "second (another cluster's pass, or a pull from a peer) and the peers would "
                    "not pull a LOAD with no newer epoch",
                )
            time.sleep(SECOND_POLL_S)
        return None
