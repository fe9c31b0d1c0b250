"""Which checker acts among the proxies of a ProxySQL Cluster: a pure function of what the local
proxy knows of its peers, the proxy's clock and what the checker remembers."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from checker_core.core.leadership import Leadership, NotAPeer, PeerMemory, ProxyAddress, Role
from checker_core.core.peers import (
    ClusterTiming,
    PeerView,
    ProxyClusterView,
    choose_actor,
    is_alive,
)

NOW = 1_700_000_000
TIMING = ClusterTiming(check_interval_ms=200, status_frequency=10, diffs_before_sync=3)
WINDOW_S = TIMING.window_ms // 1000  # 5 s with these settings
P1, P2, P3 = (ProxyAddress("127.0.0.1", port) for port in (6112, 6122, 6132))
LONG_UP = 3600


def remembered(leadership: Leadership) -> PeerMemory:
    """What the checker keeps of its peers after a pass (always there once it has peers)."""
    assert leadership.memory is not None
    return leadership.memory


def peer(
    address: ProxyAddress,
    age_s: int = 0,
    *,
    uptime: int = LONG_UP,
    checksum: str = "0xAA",
    diff_check: int = 0,
    last_check_ms: int = 600,
) -> PeerView:
    return PeerView(address, uptime, last_check_ms, NOW - age_s, checksum, diff_check)


def view(me: ProxyAddress, *peers: PeerView, own_checksum: str = "0xAA") -> ProxyClusterView:
    own = next((p for p in peers if p.address == me), None)
    uptime = own.uptime_s if own is not None and own.uptime_s is not None else LONG_UP
    return ProxyClusterView(me, tuple(peers), NOW, uptime, own_checksum, TIMING)


def test_the_window_follows_proxysqls_own_check_settings() -> None:
    assert TIMING.window_ms == 2 * 200 * 10 + 1000
    assert ClusterTiming().window_ms == 2 * 1000 * 10 + 1000  # ProxySQL's defaults: 21 s


@pytest.mark.parametrize(
    ("age_s", "last_check_ms", "alive"),
    [
        (0, 600, True),
        (WINDOW_S, 600, True),  # exactly at the edge of the window: still alive
        (WINDOW_S + 1, 600, False),  # one second past it: dead
        (0, TIMING.window_ms, True),
        (0, TIMING.window_ms + 1, False),  # checks of it stopped answering
    ],
)
def test_a_peer_is_alive_while_its_checks_are_fresh(
    age_s: int, last_check_ms: int, alive: bool
) -> None:
    assert is_alive(peer(P2, age_s, last_check_ms=last_check_ms), NOW, TIMING) is alive


def test_a_peer_never_checked_is_not_alive() -> None:
    assert not is_alive(PeerView(P2), NOW, TIMING)


def test_without_peers_the_checker_acts_alone() -> None:
    assert choose_actor(view(P1), PeerMemory()).role is Role.ALONE
    assert choose_actor(view(P1, peer(P1)), PeerMemory()).role is Role.ALONE


def test_an_address_not_in_the_list_is_refused_with_the_list() -> None:
    other = ProxyAddress("10.0.0.9", 6032)
    with pytest.raises(NotAPeer, match=r"10\.0\.0\.9:6032 is not in runtime_proxysql_servers"):
        choose_actor(view(other, peer(P1), peer(P2)), PeerMemory())


def test_the_first_alive_peer_in_order_acts_and_the_others_stand_by() -> None:
    peers = (peer(P3), peer(P1), peer(P2))
    roles = {me: choose_actor(view(me, *peers), PeerMemory()) for me in (P1, P2, P3)}
    assert roles[P1].role is Role.ACTING
    assert roles[P2].role is Role.STANDBY and roles[P3].role is Role.STANDBY
    assert all(r.acting == P1 for r in roles.values())
    assert roles[P2].reason.startswith("standby: 127.0.0.1:6112 acts (3 of 3 proxies alive)")


def test_failover_to_the_next_proxy_then_no_ping_pong_when_the_first_comes_back() -> None:
    # P2's checker: P1 acted; P1 dies; after the window P2 takes over
    memory = remembered(choose_actor(view(P2, peer(P1), peer(P2), peer(P3)), PeerMemory()))
    inside = choose_actor(view(P2, peer(P1, WINDOW_S), peer(P2), peer(P3)), memory)
    assert inside.role is Role.STANDBY, "still inside the window: P1 may be slow, not dead"
    dead = choose_actor(view(P2, peer(P1, WINDOW_S + 1), peer(P2), peer(P3)), remembered(inside))
    assert dead.role is Role.ACTING
    assert f"took over from {P1}" in dead.reason
    # P1 restarts: alive again, uptime 1 s; P2 keeps acting for a full window
    back = choose_actor(view(P2, peer(P1, 0, uptime=1), peer(P2), peer(P3)), remembered(dead))
    assert back.role is Role.ACTING
    # P1's own checker agrees: it has been up for 1 s only
    own = choose_actor(view(P1, peer(P1, 0, uptime=1), peer(P2), peer(P3)), PeerMemory())
    assert own.role is Role.STANDBY and own.acting == P2
    # a full window later P1 acts again, and P2 steps down
    later = ProxyClusterView(
        P2,
        (peer(P1, 0, uptime=WINDOW_S + 1), peer(P2), peer(P3)),
        NOW + WINDOW_S,
        LONG_UP,
        "0xAA",
        TIMING,
    )
    settled = choose_actor(later, remembered(back))
    assert settled.role is Role.STANDBY and settled.acting == P1
    assert "is back and settled" in settled.reason
    # P1's own checker waits two windows of uptime: P2 stands down first, never both acting
    up = (WINDOW_S + 1, 2 * WINDOW_S)
    own_roles = [
        choose_actor(view(P1, peer(P1, uptime=u), peer(P2), peer(P3)), PeerMemory()).role
        for u in up
    ]
    assert own_roles == [Role.STANDBY, Role.ACTING]


def test_a_restart_seen_late_counts_from_the_peers_start_not_from_the_pass_that_saw_it() -> None:
    # P2 took over from a dead P1, then ran no pass (or its proxy saw P1 late) while P1
    # restarted and stayed up for two windows: P1's own checker acts now, so P2 must stand by
    seen_dead = ProxyClusterView(
        P2, (peer(P1, WINDOW_S + 1), peer(P2), peer(P3)), NOW, LONG_UP, "0xAA", TIMING
    )
    took_over = choose_actor(seen_dead, remembered_alive(P2))
    assert took_over.role is Role.ACTING
    restarted_at = NOW + 1
    now = restarted_at + 2 * WINDOW_S
    p1 = PeerView(P1, now - restarted_at, 300, now, "0xAA", 0)
    own = ProxyClusterView(P1, (p1, peer(P2), peer(P3)), now, now - restarted_at, "0xAA", TIMING)
    assert choose_actor(own, PeerMemory()).role is Role.ACTING
    late = ProxyClusterView(P2, (p1, peer(P2), peer(P3)), now, LONG_UP, "0xAA", TIMING)
    decision = choose_actor(late, remembered(took_over))
    assert (decision.role, decision.acting) == (Role.STANDBY, P1), decision.reason


def remembered_alive(me: ProxyAddress) -> PeerMemory:
    """A checker's memory after a pass that saw P1, P2 and P3 alive for long."""
    return remembered(choose_actor(view(me, peer(P1), peer(P2), peer(P3)), PeerMemory()))


def test_a_peer_back_from_a_partition_waits_a_window_though_its_uptime_is_long() -> None:
    cut = view(P2, peer(P1, WINDOW_S + 1), peer(P2), peer(P3))
    memory = remembered(choose_actor(cut, PeerMemory()))
    back = choose_actor(view(P2, peer(P1, 0), peer(P2), peer(P3)), memory)
    assert back.role is Role.ACTING, "P1 was seen dead by this checker: it waits a window"


def test_a_proxy_cut_off_from_its_peers_waits_two_windows_once_it_sees_them_again() -> None:
    # P1's own checker: its proxy saw neither peer for a while (a partition of the proxies)
    alone = choose_actor(view(P1, peer(P1), peer(P2, 60), peer(P3, 60)), PeerMemory())
    assert alone.role is Role.ACTING, "cut off, it still keeps its own proxy's routing right"
    assert remembered(alone).minority
    healed = choose_actor(view(P1, peer(P1), peer(P2), peer(P3)), remembered(alone))
    assert healed.role is Role.STANDBY, "P2 still acts until P2's checker has seen P1 settle"
    assert healed.acting is None, "P1 waits; P2 and P3 are back in its eyes only now"
    assert healed.reason.startswith("standby: no proxy acts until one has been back")
    later = ProxyClusterView(
        P1, (peer(P1), peer(P2), peer(P3)), NOW + 2 * WINDOW_S, LONG_UP, "0xAA", TIMING
    )
    assert choose_actor(later, remembered(healed)).role is Role.ACTING


def test_a_proxy_that_just_started_stands_by_until_it_has_checked_its_peers() -> None:
    fresh = ProxyClusterView(P1, (PeerView(P1), PeerView(P2), PeerView(P3)), NOW, 0, None, TIMING)
    leadership = choose_actor(fresh, PeerMemory())
    assert (leadership.role, leadership.acting) == (Role.STANDBY, None)
    assert "has not checked 127.0.0.1:6122, 127.0.0.1:6132 yet" in leadership.reason
    # a window later, a peer it never heard from is dead, not unknown
    later = ProxyClusterView(
        P1, (peer(P1), PeerView(P2), peer(P3)), NOW, WINDOW_S + 1, "0xAA", TIMING
    )
    assert choose_actor(later, PeerMemory()).alive == (P1, P3)


def test_a_restarted_proxy_that_has_not_status_checked_its_peers_stands_by() -> None:
    """As a real ProxySQL 2.7.2 shows its peers in the first second after a restart: their
    checksum rows already fresh, their metrics not checked yet (Uptime_s 0, last_check_ms
    counted from long before the start). Taken for dead peers, that view made the restarted
    proxy act beside the one that took over while it was down."""

    def not_yet_checked(address: ProxyAddress) -> PeerView:
        return peer(address, uptime=0, last_check_ms=14_499_739)

    peers = (peer(P1, uptime=0), not_yet_checked(P2), not_yet_checked(P3))
    restarted = ProxyClusterView(P1, peers, NOW, 0, "0xAA", TIMING)
    was_acting = PeerMemory({P1: NOW - 600.0, P2: NOW - 600.0}, P1, seen=True)

    leadership = choose_actor(restarted, was_acting)

    assert (leadership.role, leadership.acting) == (Role.STANDBY, None)
    assert "has not checked 127.0.0.1:6122, 127.0.0.1:6132 yet" in leadership.reason
    # a second later its first status check of P2 is in, P3's is still to come
    peers = (peer(P1, uptime=1), peer(P2, uptime=16, last_check_ms=1), not_yet_checked(P3))
    checked = replace(restarted, own_uptime_s=1, peers=peers)
    assert choose_actor(checked, was_acting).role is Role.STANDBY
    # past a window, a peer still never checked is dead, not unknown
    late = replace(checked, own_uptime_s=WINDOW_S + 1)
    assert P3 not in choose_actor(late, was_acting).alive


def test_proxies_that_all_just_started_let_the_first_act_at_once() -> None:
    peers = (peer(P1, uptime=1), peer(P2, uptime=2), peer(P3, uptime=1))
    roles = {me: choose_actor(view(me, *peers), PeerMemory()).role for me in (P1, P2, P3)}
    assert roles == {P1: Role.ACTING, P2: Role.STANDBY, P3: Role.STANDBY}


def test_a_standby_reports_a_split_only_after_the_sync_window() -> None:
    limit = TIMING.split_after_checks
    syncing = view(P2, peer(P1, checksum="0xBB", diff_check=limit - 1), peer(P2))
    assert choose_actor(syncing, PeerMemory()).split is None
    split = view(P2, peer(P1, checksum="0xBB", diff_check=limit), peer(P2))
    alarm = choose_actor(split, PeerMemory()).split
    assert alarm is not None and "ProxySQL Cluster split" in alarm and "0xBB" in alarm
    same = view(P2, peer(P1, checksum="0xAA", diff_check=limit * 10), peer(P2))
    assert choose_actor(same, PeerMemory()).split is None
    # the acting checker is not the one to report it: it is the one whose LOADs spread
    acting = view(P1, peer(P1), peer(P2, checksum="0xBB", diff_check=limit))
    assert choose_actor(acting, PeerMemory()).split is None


# ------------------------------------------------------------------------------- invariants

ADDRESSES = [ProxyAddress(f"10.0.0.{i}", 6032) for i in range(1, 6)]
ages = st.sampled_from([0, 1, WINDOW_S - 1, WINDOW_S, WINDOW_S + 1, 60])
uptimes = st.sampled_from([1, WINDOW_S - 1, WINDOW_S, WINDOW_S + 1, LONG_UP])


@st.composite
def cluster_views(draw: st.DrawFn) -> tuple[list[PeerView], PeerMemory]:
    addresses = draw(st.lists(st.sampled_from(ADDRESSES), min_size=2, max_size=5, unique=True))
    peers = [
        peer(a, draw(ages), uptime=draw(uptimes), last_check_ms=draw(st.integers(0, 8000)))
        for a in addresses
    ]
    remembered = draw(st.dictionaries(st.sampled_from(addresses), st.integers(NOW - 100, NOW)))
    memory = PeerMemory({a: float(t) for a, t in remembered.items()}, None, draw(st.booleans()))
    return peers, memory


@settings(max_examples=500, deadline=None)
@given(cluster_views())
def test_at_first_look_one_view_never_has_two_actors(
    state: tuple[list[PeerView], PeerMemory],
) -> None:
    peers, _ = state
    alive = [p.address for p in peers if is_alive(p, NOW, TIMING)]
    actors = set()
    for me in alive:
        decision = choose_actor(view(me, *peers), PeerMemory())
        if decision.role is Role.ACTING:
            actors.add(me)
        assert decision.acting in (*alive, None), "the acting proxy is one that is alive"
        assert choose_actor(view(me, *peers), PeerMemory()) == decision, "deterministic"
    assert len(actors) <= 1, (alive, actors)


EVENTS = st.sampled_from(["stay", "stay", "stay", "die", "restart"])


@settings(max_examples=2000, deadline=None)
@given(
    size=st.integers(2, 4),
    steps=st.lists(
        st.tuples(
            st.sampled_from([1, 2, 3, 6, 11]),
            st.lists(EVENTS, min_size=4, max_size=4),
            st.lists(st.booleans(), min_size=4, max_size=4),
        ),
        min_size=1,
        max_size=16,
    ),
)
def test_through_deaths_and_restarts_never_two_actors(
    size: int, steps: list[tuple[int, list[str], list[bool]]]
) -> None:
    """A live proxy's checker runs a pass at a step or skips it (a scheduler that ran late, a
    daemon stopped for a while), with its own memory; the proxies all see the same peers (no
    partition between them). Of the checkers that run at a step, at most one acts."""
    addresses = ADDRESSES[:size]
    started = {a: NOW - LONG_UP for a in addresses}
    last_seen: dict[ProxyAddress, int] = {a: NOW for a in addresses}
    up = set(addresses)
    memories = {a: PeerMemory() for a in addresses}
    now = NOW
    for dt, events, runs in steps:
        now += dt
        for address, event in zip(addresses, events, strict=False):
            if event == "die" and address in up and len(up) > 1:
                up.discard(address)
            elif event == "restart" and address not in up:
                up.add(address)
                started[address] = now
        for address in up:
            last_seen[address] = now
        peers = tuple(
            PeerView(a, now - started[a], 300, last_seen[a], "0xAA", 0) for a in addresses
        )
        actors = []
        for me, runs_now in zip(addresses, runs, strict=False):
            if me not in up or not runs_now:
                continue
            seen = ProxyClusterView(me, peers, now, now - started[me], "0xAA", TIMING)
            decision = choose_actor(seen, memories[me])
            memories[me] = remembered(decision)
            if decision.role is Role.ACTING:
                actors.append(me)
        assert len(actors) <= 1, (now, sorted(up), actors)


@settings(max_examples=300, deadline=None)
@given(cluster_views())
def test_once_every_live_proxy_has_settled_exactly_one_acts(
    state: tuple[list[PeerView], PeerMemory],
) -> None:
    peers, _ = state
    settled = [replace(p, uptime_s=2 * WINDOW_S) for p in peers]
    alive = [p.address for p in settled if is_alive(p, NOW, TIMING)]
    actors = {
        me for me in alive if choose_actor(view(me, *settled), PeerMemory()).role is Role.ACTING
    }
    assert len(actors) == (1 if alive else 0)
    if alive:
        assert actors == {min(alive)}, "the first alive proxy in hostname, port order"


def test_the_acting_checker_never_loads_twice_in_one_second_of_the_cluster() -> None:
    base = view(P1, peer(P1), peer(P2), peer(P3))
    assert choose_actor(base, PeerMemory()).load_wait is None
    own = replace(base, own_epoch=NOW)
    waiting = choose_actor(own, PeerMemory()).load_wait
    assert waiting is not None and f"epoch {NOW}" in waiting
    pulled = replace(base, peers=(peer(P1), replace(peer(P2), epoch=NOW), peer(P3)))
    assert choose_actor(pulled, PeerMemory()).load_wait is not None, "a peer's pull counts"
    older = replace(base, own_epoch=NOW - 1)
    assert choose_actor(older, PeerMemory()).load_wait is None
    standby = replace(view(P2, peer(P1), peer(P2)), own_epoch=NOW)
    assert choose_actor(standby, PeerMemory()).load_wait is None, "a standby never LOADs"


def test_an_epoch_ahead_of_the_clock_is_a_clock_fault_not_a_wait() -> None:
    """A peer whose clock runs an hour ahead LOADed (or this host's clock stepped back an
    hour): the wait would hold every LOAD, a failover too, for an hour. It is said as such."""
    base = view(P1, peer(P1), peer(P2), peer(P3))
    same_second = choose_actor(replace(base, own_epoch=NOW), PeerMemory())
    assert same_second.clock_skew_s == 0
    ahead = replace(base, peers=(peer(P1), replace(peer(P2), epoch=NOW + 3600), peer(P3)))
    held = choose_actor(ahead, PeerMemory())
    assert held.clock_skew_s == 3600
    assert held.load_wait is not None and "3600 s ahead of this proxy's clock" in held.load_wait
    assert "same second" not in held.load_wait
    stepped_back = choose_actor(replace(base, own_epoch=NOW + 3600), PeerMemory())
    assert stepped_back.clock_skew_s == 3600
