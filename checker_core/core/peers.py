"""Which checker acts when several ProxySQL proxies form a ProxySQL Cluster. Pure.

Every proxy of a ProxySQL Cluster may have a checker beside it; they all probe and judge, but
only one may write `mysql_servers` and LOAD: two LOADs on two peers in the same second split the
cluster for good (peers keep different rows until someone LOADs again). The acting proxy is
chosen from what ProxySQL itself knows of its peers, with no consensus of our own:

- a peer is *alive* while the local proxy's checks of it are fresh: its row in
  stats_proxysql_servers_checksums was updated, and its stats_proxysql_servers_metrics row was
  checked, within the liveness window (derived from admin-cluster_check_interval_ms and
  admin-cluster_check_status_frequency). The local proxy is alive by definition: the checker
  just talked to it. A proxy that started less than a window ago and has not yet checked every
  peer's status stands by: its peers are unknown to it, not dead;
- a peer is *settled* once it has been alive for a full window (its Uptime_s, or since this
  checker last saw it dead, whichever is shorter): a proxy that just came back does not take
  the role back at once, so the role does not ping-pong. A checker counts its own proxy settled
  only after two windows (of uptime, or since its proxy saw a majority of peers again after
  seeing too few): its peers notice it later than it notices itself, and must have stood down
  before it acts;
- the acting proxy is the first settled peer in (hostname, port) order; when all of them
  started within the last window (a new cluster), the first alive one; otherwise, while none
  is settled, nobody acts.

Checkers that see the same peers compute the same actor; where their views differ for a moment
(a proxy coming back), the stricter rule for oneself makes "nobody acts for a while" the
failure mode, never "two act". A checker that sees the acting proxy dead takes over after the
liveness window, a few seconds with ProxySQL's defaults.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from checker_core.core.leadership import Leadership, NotAPeer, PeerMemory, ProxyAddress, Role

# How many status checks (the ones that refresh stats_proxysql_servers_metrics) may be missed
# before a peer counts as dead, plus a second for updated_at's whole-second resolution.
MISSED_STATUS_CHECKS = 2
CLOCK_RESOLUTION_MS = 1000
# checks beyond diffs_before_sync after which a standing checksum difference is a split: a
# healthy pull happens within diffs_before_sync checks
SPLIT_MARGIN_FACTOR = 2
# Uptime_s and the proxy's clock tick apart: now - Uptime_s wanders by a second or so
CLOCK_JITTER_S = 2
# how many windows a proxy must have been up (or back in touch) before it acts again
SELF_WINDOWS = 2


@dataclass(frozen=True, slots=True)
class Checksum:
    """runtime_checksums_values for mysql_servers: version grows by one with every LOAD."""

    version: int
    epoch: int
    checksum: str


@dataclass(frozen=True, slots=True)
class ClusterTiming:
    """The local proxy's cluster settings (global_variables)."""

    check_interval_ms: int = 1000
    status_frequency: int = 10
    diffs_before_sync: int = 3

    @property
    def window_ms(self) -> int:
        """How long a peer may go unchecked before it counts as dead."""
        status_every = self.check_interval_ms * max(1, self.status_frequency)
        return MISSED_STATUS_CHECKS * status_every + CLOCK_RESOLUTION_MS

    @property
    def split_after_checks(self) -> int:
        """Checks with a different mysql_servers checksum after which the cluster is split."""
        return SPLIT_MARGIN_FACTOR * max(1, self.diffs_before_sync) + 1


@dataclass(frozen=True, slots=True)
class PeerView:
    """What the local proxy knows of one peer (the local proxy included)."""

    address: ProxyAddress
    uptime_s: int | None = None  # stats_proxysql_servers_metrics.Uptime_s
    last_check_ms: int | None = None  # stats_proxysql_servers_metrics.last_check_ms
    updated_at: int | None = None  # stats_proxysql_servers_checksums.updated_at (mysql_servers)
    checksum: str | None = None  # the peer's mysql_servers checksum, as last seen
    diff_check: int = 0  # consecutive checks in which it differed from the local one
    epoch: int | None = None  # the peer's mysql_servers epoch: when it last LOADed, seconds


@dataclass(frozen=True, slots=True)
class ProxyClusterView:
    """Everything the rule needs, read from the local proxy in one pass."""

    me: ProxyAddress
    peers: tuple[PeerView, ...]  # runtime_proxysql_servers, with their stats
    now: int  # the local proxy's clock, unix seconds
    own_uptime_s: int
    own_checksum: str | None
    timing: ClusterTiming = field(default_factory=ClusterTiming)
    own_epoch: int | None = None  # when this proxy last LOADed mysql_servers (its clock)

    def peer(self, address: ProxyAddress) -> PeerView | None:
        return next((p for p in self.peers if p.address == address), None)


def is_alive(peer: PeerView, now: int, timing: ClusterTiming) -> bool:
    """Fresh checks of the peer within the window; a peer never checked is not alive."""
    if peer.updated_at is None:
        return False
    if (now - peer.updated_at) * 1000 > timing.window_ms:
        return False
    return peer.last_check_ms is None or peer.last_check_ms <= timing.window_ms


def checked_since_start(peer: PeerView, own_uptime_s: int) -> bool:
    """Whether the local proxy has checked the peer's status since it started. A ProxySQL 2.7
    just started has the peers' checksum rows at once (updated_at fresh) but reports a peer it
    has not yet status-checked with a last_check_ms far longer than its own uptime; until its
    first status check such a peer is unknown, not dead."""
    if not peer.updated_at:
        return False
    if peer.last_check_ms is None:
        return True
    return peer.last_check_ms <= (own_uptime_s + 1) * 1000  # uptime counts whole seconds


def choose_actor(view: ProxyClusterView, memory: PeerMemory) -> Leadership:
    """The acting proxy and this checker's role; deterministic for a given view and memory."""
    timing, now = view.timing, view.now
    others = [p for p in view.peers if p.address != view.me]
    if not others:
        return Leadership(Role.ALONE, None, (), "", None, PeerMemory())
    if len(others) == len(view.peers):
        listed = ", ".join(str(p.address) for p in sorted(view.peers, key=lambda p: p.address))
        raise NotAPeer(
            f"proxysql.cluster_address {view.me} is not in runtime_proxysql_servers "
            f"({listed}): set it to this proxy's address as proxysql_servers names it"
        )
    window_s = timing.window_ms / 1000
    unchecked = [p.address for p in others if not checked_since_start(p, view.own_uptime_s)]
    if unchecked and view.own_uptime_s < window_s:
        # a proxy that just started has not checked its peers yet: they are unknown, not dead
        reason = (
            f"standby: this proxy started {view.own_uptime_s} s ago and has not checked "
            f"{', '.join(map(str, sorted(unchecked)))} yet"
        )
        return Leadership(Role.STANDBY, None, (view.me,), reason, None, memory)
    alive = sorted(
        p.address for p in view.peers if p.address == view.me or is_alive(p, now, timing)
    )
    majority = len(alive) * 2 > len(view.peers)
    since = _alive_since(view, memory, alive, majority=majority)

    def settled(address: ProxyAddress) -> bool:
        # itself only after twice the window: the peers see it back later than it does, and
        # must have stepped down before it acts (at most one actor, at worst none for a while)
        needed = window_s * (SELF_WINDOWS if address == view.me else 1)
        return now - since[address] >= needed

    ready = [a for a in alive if settled(a)]
    # all just started together (every uptime under a window, the same for every observer):
    # the first alive acts, rather than nobody for two windows
    cold = all(now - _started(view, a) < window_s for a in alive)
    acting = ready[0] if ready else (alive[0] if cold else None)
    role = Role.ACTING if acting == view.me else Role.STANDBY
    reason = _reason(view, memory, acting, alive, ready)
    split = _split(view, acting) if role is Role.STANDBY and acting is not None else None
    in_list = {p.address for p in view.peers}
    gone = {
        a: t
        for a, t in {**memory.gone, **memory.alive_since}.items()
        if a in in_list and a not in since
    }
    remembered = PeerMemory(since, acting, True, not majority, gone, float(now))
    wait, skew = _load_wait(view) if role is Role.ACTING else (None, 0)
    return Leadership(role, acting, tuple(alive), reason, split, remembered, wait, skew)


def _alive_since(
    view: ProxyClusterView, memory: PeerMemory, alive: list[ProxyAddress], *, majority: bool
) -> dict[ProxyAddress, float]:
    """Since when each alive proxy counts as alive, on the peers' shared clock."""
    now = view.now
    since: dict[ProxyAddress, float] = {}
    for address in alive:
        started = _started(view, address)
        before = memory.alive_since.get(address)
        if address == view.me and memory.minority and majority:
            since[address] = float(now)  # back from a view of too few peers: cut off till now
        elif before is not None:
            # a restart we did not see still counts; a second of clock jitter is no restart
            since[address] = started if started > before + CLOCK_JITTER_S else before
        elif memory.seen and address != view.me:
            since[address] = _back_since(address, started, memory, now)
        else:
            since[address] = started
    return since


def _back_since(address: ProxyAddress, started: float, memory: PeerMemory, now: int) -> float:
    """Since when a peer this checker saw dead (or never saw) counts as alive again: the
    earliest time it can have come back. Later would be unsafe: the peer counts itself from
    its start (or from when it saw a majority again), and a checker that ran no pass for a
    while, or whose proxy saw the comeback late, would think the peer unsettled while it
    already acts. A restart while away counts from the new start, as the peer itself counts;
    a proxy back from a partition (same start) no earlier than the last pass that saw it dead."""
    earlier = memory.gone.get(address)
    if earlier is not None and started > earlier + CLOCK_JITTER_S:
        return started
    if memory.checked_at is None:
        return float(now)
    return max(started, memory.checked_at)


def _uptime(peer: PeerView | None) -> int | None:
    return None if peer is None else peer.uptime_s


def _started(view: ProxyClusterView, address: ProxyAddress) -> float:
    uptime = view.own_uptime_s if address == view.me else _uptime(view.peer(address))
    return float(view.now - (uptime or 0))


def _reason(
    view: ProxyClusterView,
    memory: PeerMemory,
    acting: ProxyAddress | None,
    alive: list[ProxyAddress],
    settled: list[ProxyAddress],
) -> str:
    window_s = view.timing.window_ms / 1000
    count = f"{len(alive)} of {len(view.peers)} proxies alive"
    if acting is None:
        return (
            f"standby: no proxy acts until one has been back for a full window ({count}, "
            f"none settled: {', '.join(map(str, alive))})"
        )
    before = memory.acting
    if before is not None and before != acting:
        if before not in alive:
            change = f"; took over from {before}: not seen for {window_s:.0f} s"
        else:
            change = f"; {acting} is back and settled, {before} steps down"
    else:
        change = ""
    if acting == view.me:
        return f"acting for the ProxySQL Cluster ({count}){change}"
    waiting = [a for a in alive if a not in settled and a < acting]
    wait = f"; {', '.join(map(str, waiting))} alive for under {window_s:.0f} s" if waiting else ""
    return f"standby: {acting} acts ({count}){change}{wait}"


def _load_wait(view: ProxyClusterView) -> tuple[str | None, int]:
    """ProxySQL peers pull only a newer epoch, counted in whole seconds: a LOAD in the second
    of the last one (ours, or a peer's pull) would stay on this proxy for good. An epoch more
    than that ahead of the local clock is a clock fault, returned as its size: waiting for it
    would hold every LOAD (a failover too) for as long as the skew."""
    epochs = [e for e in (view.own_epoch, *(p.epoch for p in view.peers)) if e is not None]
    latest = max(epochs, default=None)
    if latest is None or latest < view.now:
        return None, 0
    ahead = latest - view.now
    if ahead * 1000 <= CLOCK_RESOLUTION_MS:
        return (
            f"LOAD deferred to the next pass: mysql_servers was loaded in this same second "
            f"(epoch {latest}) and the peers would not pull a LOAD with no newer epoch"
        ), 0
    return (
        f"LOAD held: the ProxySQL Cluster's newest mysql_servers epoch ({latest}) is {ahead} s "
        f"ahead of this proxy's clock ({view.now}): a peer's clock runs ahead, or this host's "
        "clock stepped back. A LOAD here would carry an older epoch, which the peers never "
        "pull and which this proxy replaces with theirs; fix the clocks (NTP), or LOAD "
        "mysql_servers on a proxy whose clock is ahead"
    ), ahead


def _split(view: ProxyClusterView, acting: ProxyAddress) -> str | None:
    peer = view.peer(acting)
    if peer is None or peer.checksum is None or view.own_checksum is None:
        return None
    if peer.checksum == view.own_checksum:
        return None
    limit = view.timing.split_after_checks
    if peer.diff_check < limit:
        return None
    return (
        f"ProxySQL Cluster split: this proxy's mysql_servers (checksum {view.own_checksum}) "
        f"differs from the acting proxy {acting}'s ({peer.checksum}) for {peer.diff_check} "
        f"checks (sync expected within {view.timing.diffs_before_sync}); not fixed by a LOAD "
        "here: LOAD on the acting proxy, or on the proxy whose rows are right"
    )
