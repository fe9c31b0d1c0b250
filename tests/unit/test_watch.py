"""The daemon between passes: which writers it asks, what starts a pass at once, and the wait
itself over real sockets (a closed peer is what a killed mysqld's kernel leaves)."""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import replace

import pytest

from checker_core.core.model import NodeAddress
from checker_core.core.probes import ProbeFn, ProbeResult
from checker_core.edges.backend import OpenAsk
from checker_core.service.watch import (
    BetweenPasses,
    Cause,
    Trigger,
    Watched,
    changed,
    due,
    rechecks,
    watched_writers,
)
from checker_core.service.watch_hub import WatchHub
from checker_core.service.watcher import Watcher
from galera_checker.policy import GaleraFacts, GaleraPolicy
from tests.unit.daemon_cases import after, galera_pass
from tests.unit.galera_cases import N1, N2, N3, probe_down, probe_ok, steady

POLICY = GaleraPolicy()


def test_the_writers_of_a_pass_are_watched_with_the_state_their_probe_read() -> None:
    result = galera_pass(steady(N1), apply=False)
    watched = watched_writers([result], POLICY)
    assert [w.node for w in watched] == [N1]
    assert watched[0].key == POLICY.watch_key(probe_ok(N1).facts)


def test_a_pass_that_left_no_writer_watches_every_node_that_answered() -> None:
    """A view change, for a moment non-Primary everywhere: the first node back starts a pass."""
    transient = {n: probe_ok(n, wsrep_cluster_status="non-Primary") for n in (N1, N2)}
    result = galera_pass(steady(N1), {**transient, N3: probe_down(N3)})
    assert result.writers == ()
    watched = watched_writers([result], POLICY)
    assert [w.node for w in watched] == [N1, N2]
    trigger = changed(watched, {N1: probe_ok(N1), N2: transient[N2]}, POLICY)
    assert trigger is not None and trigger.nodes == (N1,)


def test_a_blind_pass_gives_nothing_to_watch() -> None:
    blind = galera_pass(steady(N1), {n: probe_down(n) for n in (N1, N2, N3)}, apply=False)
    assert watched_writers([blind], POLICY) == ()


FAULTS = [
    {"wsrep_reject_queries": "ALL"},
    {"wsrep_desync": "ON", "wsrep_local_state": "2"},
    {"read_only": "ON"},
    {"wsrep_cluster_status": "non-Primary"},
    {"wsrep_ready": "OFF"},
    {"wsrep_cluster_size": "2"},
]


@pytest.mark.parametrize("fault", FAULTS, ids=",".join)
def test_a_changed_state_starts_a_pass(fault: dict[str, str]) -> None:
    watched = (Watched(N1, POLICY.watch_key(probe_ok(N1).facts)),)
    trigger = changed(watched, {N1: probe_ok(N1, **fault)}, POLICY)
    assert trigger is not None and trigger.cause is Cause.CHANGED
    assert trigger.nodes == (N1,)


def test_load_alone_starts_no_pass() -> None:
    watched = (Watched(N1, POLICY.watch_key(probe_ok(N1).facts)),)
    busy = probe_ok(N1, wsrep_local_recv_queue="57", wsrep_evs_repl_latency="0.1/0.2")
    assert changed(watched, {N1: busy}, POLICY) is None


def test_the_watch_answer_and_the_probe_agree_on_a_healthy_writer() -> None:
    """The watch reads fewer values than a probe: the key must be made of those alone."""
    full = probe_ok(N1)
    assert isinstance(full.facts, GaleraFacts)
    from galera_checker.policy import WATCHED

    light = GaleraFacts({k: v for k, v in full.facts.values.items() if k in WATCHED})
    assert POLICY.watch_key(light) == POLICY.watch_key(full.facts)


def test_a_writer_that_does_not_answer_starts_a_pass() -> None:
    watched = (Watched(N1, POLICY.watch_key(probe_ok(N1).facts)),)
    trigger = changed(watched, {N1: probe_down(N1, "Lost connection (error 2013)")}, POLICY)
    assert trigger is not None and trigger.cause is Cause.UNANSWERED
    assert "error 2013" in trigger.detail


def test_a_new_failure_is_asked_again_and_a_lasting_one_is_not() -> None:
    first = galera_pass(steady(N1), apply=False)
    died = galera_pass(after(first), {N3: probe_down(N3)})
    heard_all = {"main": frozenset({N1, N2, N3})}
    assert rechecks([died], heard_all) == (N3,)
    heard_without = {"main": frozenset({N1, N2})}
    still_down = galera_pass(after(died), {N3: probe_down(N3)}, apply=False)
    assert rechecks([still_down], heard_without) == ()


def test_a_failure_retry_down_still_counts_is_not_asked_again_at_once() -> None:
    """Asked at once again and again, it would spend retry_down in a burst of passes."""
    first = galera_pass(steady(N1), apply=False)
    died = galera_pass(after(first), {N3: probe_down(N3)})
    assert died.decision is not None
    memory = dict(died.decision.memory)
    memory[N3] = replace(memory[N3], routable=True, bad_streak=1, bad_since=10.0)
    pending = replace(died, decision=replace(died.decision, memory=memory, due={N3: 13.0}))
    assert rechecks([pending], {"main": frozenset({N1, N2})}) == ()
    assert due([pending]) == {N3: 13.0}


# ---------------------------------------------------------------- the wait, on real sockets


class SocketProber:
    """Idle connections are socket pairs: the test holds the server's end."""

    def __init__(self, nodes: Sequence[NodeAddress]) -> None:
        self.pairs = {n: socket.socketpair() for n in nodes}
        self.discarded: list[NodeAddress] = []
        self.answers: dict[NodeAddress, ProbeResult] = {n: probe_ok(n) for n in nodes}
        self.asked = 0

    def idle(self) -> dict[int, tuple[NodeAddress, object]]:
        return {ours.fileno(): (n, ours) for n, (ours, _) in self.pairs.items()}

    def still_idle(self, node: NodeAddress, conn: object) -> bool:
        pair = self.pairs.get(node)
        return pair is not None and pair[0] is conn

    def discard(self, node: NodeAddress) -> None:
        self.discarded.append(node)
        ours, _ = self.pairs.pop(node)
        ours.close()

    def ask_open(
        self, nodes: Sequence[NodeAddress], deadline: float, question: ProbeFn | None = None
    ) -> OpenAsk:
        """Answered at once: the question needs no connection here."""
        self.asked += len(nodes)
        ask = OpenAsk(tuple(nodes), deadline)
        ask.results.update({n: self.answers[n] for n in nodes})
        return ask

    def close(self) -> None:
        for ours, theirs in self.pairs.values():
            ours.close()
            theirs.close()


@pytest.fixture
def prober() -> Iterator[SocketProber]:
    made = SocketProber((N1, N2, N3))
    yield made
    made.close()


@pytest.fixture
def hub() -> Iterator[WatchHub]:
    made = WatchHub()
    yield made
    made.close()


def between(prober: SocketProber, watch_ms: int, hub: WatchHub) -> BetweenPasses:
    wait = BetweenPasses(
        prober,  # type: ignore[arg-type]
        POLICY,
        question=None,
        watch_interval_ms=watch_ms,
        answer_budget_s=1.0,
        hub=hub,
    )
    wait.observe([galera_pass(steady(N1), apply=False)])
    return wait


def test_a_connection_closed_by_its_server_ends_the_wait(
    prober: SocketProber, hub: WatchHub
) -> None:
    wait = between(prober, 0, hub)
    _, theirs = prober.pairs[N2]
    threading.Timer(0.05, theirs.close).start()
    trigger = wait.wait(time.monotonic() + 60, threading.Event())
    assert trigger is not None and trigger.cause is Cause.CLOSED
    assert trigger.nodes == (N2,)
    assert prober.discarded == [N2], "the next probe must connect afresh"


def test_a_writer_whose_answer_changes_ends_the_wait(prober: SocketProber, hub: WatchHub) -> None:
    wait = between(prober, 10, hub)
    prober.answers[N1] = probe_ok(N1, wsrep_reject_queries="ALL")
    trigger = wait.wait(time.monotonic() + 60, threading.Event())
    assert trigger is not None and trigger.cause is Cause.CHANGED


def test_a_quiet_cluster_waits_for_the_interval_asking_the_writer_only(
    prober: SocketProber, hub: WatchHub
) -> None:
    wait = between(prober, 10, hub)
    assert wait.wait(time.monotonic() + 0.3, threading.Event()) is None
    assert prober.asked > 0
    assert prober.discarded == []


def test_a_stop_request_ends_the_wait(prober: SocketProber, hub: WatchHub) -> None:
    wait = between(prober, 0, hub)
    stop = threading.Event()
    threading.Timer(0.05, stop.set).start()
    assert wait.wait(time.monotonic() + 60, stop) is None
    assert stop.is_set()


@pytest.mark.parametrize("woken", [True, False])
def test_a_stop_with_a_wake_ends_a_wait_that_naps_long_and_one_without_waits_out_its_nap(
    prober: SocketProber, hub: WatchHub, woken: bool
) -> None:
    """A loop on its own thread naps long (WOKEN_NAP_S): its halt() wakes it. The stop alone
    is seen only after the nap: the case the wake is for."""
    wait = between(prober, 0, hub)
    stop = threading.Event()
    ended = threading.Event()

    def waiting() -> None:
        wait.wait(time.monotonic() + 60, stop, nap_s=30)
        ended.set()

    threading.Thread(target=waiting, daemon=True).start()
    for _ in range(500):  # until the wait has handed its watcher over
        if wait._current is not None:
            break
        time.sleep(0.01)
    stop.set()
    if woken:
        wait.wake()
    # woken: at once (bounded at 5 s); not woken: not within 1 s of a 30 s nap
    assert ended.wait(5 if woken else 1) is woken
    if not woken:
        wait.wake()  # the thread is let go
        assert ended.wait(5)


def test_a_node_held_by_its_hysteresis_is_asked_again_when_that_is_spent(
    prober: SocketProber, hub: WatchHub
) -> None:
    wait = between(prober, 0, hub)
    quiet = galera_pass(steady(N1), apply=False)
    assert quiet.decision is not None
    spent_at = time.monotonic() + 0.2
    held = replace(quiet, decision=replace(quiet.decision, due={N3: spent_at}))
    wait.observe([held])
    trigger = wait.wait(time.monotonic() + 60, threading.Event())
    assert time.monotonic() >= spent_at, "not before its streak spanned the time"
    assert trigger is not None and trigger.cause is Cause.RECHECK
    assert trigger.nodes == (N3,)
    assert wait.wait(time.monotonic() + 0.1, threading.Event()) is None, "asked once"


class RacingProber(SocketProber):
    """Between the watch's look at the idle connections and its poll, a probe thread runs:
    `race` says what it does to N2's connection."""

    def __init__(self, nodes: Sequence[NodeAddress], race: str) -> None:
        super().__init__(nodes)
        self.race = race
        self.spare: list[socket.socket] = []

    def idle(self) -> dict[int, tuple[NodeAddress, object]]:
        snapshot = super().idle()
        if self.race:
            ours, theirs = self.pairs.pop(N2)
            if self.race == "taken":
                # a probe took it and its server answered the probe's question
                theirs.sendall(b"\x05\x00\x00\x01\x00\x00\x00\x02\x00")
                self.spare += [ours, theirs]
            else:
                # a late probe handed back a fresh connection; this one was closed here (its
                # number not yet reused: the poll finds it closed)
                self.pairs[N2] = socket.socketpair()
                ours.close()
                self.spare.append(theirs)
            self.race = ""
        return snapshot

    def close(self) -> None:
        super().close()
        for sock in self.spare:
            sock.close()


@pytest.mark.parametrize("race", ["taken", "replaced"])
def test_a_connection_that_stopped_being_idle_says_nothing_of_its_server(
    race: str, hub: WatchHub
) -> None:
    racing = RacingProber((N1, N2, N3), race)
    try:
        wait = between(racing, 0, hub)
        assert wait.wait(time.monotonic() + 0.3, threading.Event()) is None
        assert racing.discarded == [], "no connection dropped that its server did not close"
    finally:
        racing.close()


class HangingAsk(OpenAsk):
    """A question no writer answers: out until its deadline, on a socket that stays quiet."""

    def __init__(self, nodes: tuple[NodeAddress, ...], deadline: float, quiet: int) -> None:
        super().__init__(nodes, deadline)
        self.quiet = quiet

    def fds(self) -> tuple[int, ...]:
        return (self.quiet,)

    @property
    def done(self) -> bool:
        return False


class HangingProber(SocketProber):
    """Its writers hang: the watch's question to them is never answered."""

    def ask_open(
        self, nodes: Sequence[NodeAddress], deadline: float, question: ProbeFn | None = None
    ) -> OpenAsk:
        self.asked += len(nodes)
        return HangingAsk(tuple(nodes), deadline, self.pairs[nodes[0]][0].fileno())


def test_a_writer_that_hangs_in_one_cluster_never_delays_another(hub: WatchHub) -> None:
    hanging, quick = HangingProber((N1, N2, N3)), SocketProber((N1, N2, N3))
    slow = BetweenPasses(
        hanging,  # type: ignore[arg-type]
        POLICY,
        question=None,
        watch_interval_ms=10,
        answer_budget_s=600.0,
        hub=hub,
    )
    slow.observe([galera_pass(steady(N1), apply=False)])
    fast = between(quick, 10, hub)
    stop = threading.Event()
    ended: list[object] = []
    waiting = threading.Thread(target=lambda: ended.append(slow.wait(time.monotonic() + 600, stop)))
    try:
        waiting.start()
        out_by = time.monotonic() + 60
        while hanging.asked == 0 and waiting.is_alive() and time.monotonic() < out_by:
            time.sleep(0.001)  # until the hung writer's question is out
        assert hanging.asked
        quick.answers[N1] = probe_ok(N1, wsrep_reject_queries="ALL")
        trigger = fast.wait(time.monotonic() + 600, threading.Event())
        assert trigger is not None and trigger.cause is Cause.CHANGED
        assert waiting.is_alive() and not ended, "the hung writer's question is still out"
    finally:
        stop.set()
        waiting.join(timeout=10)
        hanging.close()
        quick.close()
    assert ended == [None], "a stop ends the hung cluster's wait too"


class ClosedUnderAsk(OpenAsk):
    """The writer's server closed the connection while the watch's question was out."""

    @property
    def closed_by_server(self) -> frozenset[NodeAddress]:
        return frozenset(self.nodes)


class ClosingProber(SocketProber):
    def ask_open(
        self, nodes: Sequence[NodeAddress], deadline: float, question: ProbeFn | None = None
    ) -> OpenAsk:
        self.asked += len(nodes)
        ask = ClosedUnderAsk(tuple(nodes), deadline)
        lost = "Lost connection to MySQL server during query (error 2013)"
        ask.results.update({n: probe_down(n, lost) for n in nodes})
        return ask


def test_a_connection_closed_under_the_watchs_question_is_said_as_closed(hub: WatchHub) -> None:
    """A writer killed while its question is out: the same cause as a closed idle connection."""
    closing = ClosingProber((N1, N2, N3))
    try:
        trigger = between(closing, 10, hub).wait(time.monotonic() + 600, threading.Event())
    finally:
        closing.close()
    assert trigger is not None and trigger.cause is Cause.CLOSED
    assert trigger.nodes == (N1,)


class BrokenProber(SocketProber):
    def ask_open(
        self, nodes: Sequence[NodeAddress], deadline: float, question: ProbeFn | None = None
    ) -> OpenAsk:
        raise RuntimeError("a bug in asking")


def test_a_failure_in_the_hub_is_the_waiting_loops_to_say_and_the_hub_goes_on(
    hub: WatchHub,
) -> None:
    broken, quick = BrokenProber((N1, N2, N3)), SocketProber((N1, N2, N3))
    try:
        with pytest.raises(RuntimeError, match="a bug in asking"):
            between(broken, 10, hub).wait(time.monotonic() + 600, threading.Event())
        quick.answers[N1] = probe_ok(N1, wsrep_reject_queries="ALL")
        trigger = between(quick, 10, hub).wait(time.monotonic() + 600, threading.Event())
    finally:
        broken.close()
        quick.close()
    assert trigger is not None and trigger.cause is Cause.CHANGED


class ListingProber(SocketProber):
    """Its idle listing holds until `changes` moves, as a real prober's does; `listed` is set
    once the hub has asked for it."""

    def __init__(self, nodes: Sequence[NodeAddress]) -> None:
        super().__init__(nodes)
        self.changes = 0
        self.listed = threading.Event()

    def idle(self) -> dict[int, tuple[NodeAddress, object]]:
        self.listed.set()
        return super().idle()


def _reopened_on_its_descriptor(ours: socket.socket) -> tuple[socket.socket, socket.socket]:
    """`ours` closed, and a new connection (our end, the server's) whose end here has the very
    descriptor number `ours` had: what a reconnect looks like to a poller."""
    reused = ours.fileno()
    fresh, fresh_theirs = socket.socketpair()
    ours.close()
    os.dup2(fresh.fileno(), reused)
    fresh.close()
    return socket.socket(fileno=reused), fresh_theirs


def test_a_descriptor_one_cluster_let_go_and_another_took_speaks_for_the_new_one(
    hub: WatchHub,
) -> None:
    """Cluster A's connection to N2 is closed and its descriptor reused by cluster B's new
    connection to N3; B's server then closes that one. The hub lists B before A (B waited
    first), so A's old entry must not take the descriptor from B."""
    a, b = ListingProber((N1, N2, N3)), ListingProber((N1, N2, N3))
    waits = {name: between(p, 0, hub) for name, p in (("b", b), ("a", a))}
    stop = threading.Event()
    ended: dict[str, object] = {}

    def wait(name: str) -> None:
        ended[name] = waits[name].wait(time.monotonic() + 10, stop)

    threads = {name: threading.Thread(target=wait, args=(name,)) for name in ("b", "a")}
    try:
        for name, prober in (("b", b), ("a", a)):
            threads[name].start()
            assert prober.listed.wait(10), f"cluster {name} is watched"
        ours, theirs = a.pairs.pop(N2)
        b_old = b.pairs[N3]
        b.pairs[N3] = reopened = _reopened_on_its_descriptor(ours)
        fresh_theirs = reopened[1]
        a.changes += 1
        b.changes += 1
        fresh_theirs.close()  # B's server closes its new connection
        threads["b"].join(timeout=20)
    finally:
        stop.set()
        for thread in threads.values():
            thread.join(timeout=10)
        theirs.close()
        for end in b_old:
            end.close()
        a.close()
        b.close()
    trigger = ended.get("b")
    assert isinstance(trigger, Trigger) and trigger.cause is Cause.CLOSED, trigger
    assert trigger.nodes == (N3,)
    assert ended.get("a") is None and a.discarded == []


def test_a_descriptor_a_cluster_let_go_and_took_again_is_watched_again(hub: WatchHub) -> None:
    """The cluster's connection to N2 is closed and the same descriptor number comes back as its
    new connection to N2 (a reconnect). Closing the old one took it out of the hub's epoll, so
    the hub must register it again, not only change it; the server then closes the new one."""
    prober = ListingProber((N1, N2, N3))
    waiting = between(prober, 0, hub)
    stop = threading.Event()
    ended: list[object] = []
    thread = threading.Thread(
        target=lambda: ended.append(waiting.wait(time.monotonic() + 10, stop))
    )
    try:
        thread.start()
        assert prober.listed.wait(10), "the cluster is watched"
        ours, theirs = prober.pairs.pop(N2)
        prober.pairs[N2] = reopened = _reopened_on_its_descriptor(ours)
        fresh_theirs = reopened[1]
        prober.changes += 1
        fresh_theirs.close()  # the server closes the new connection
        thread.join(timeout=20)
    finally:
        stop.set()
        thread.join(timeout=10)
        theirs.close()
        prober.close()
    assert len(ended) == 1
    trigger = ended[0]
    assert isinstance(trigger, Trigger) and trigger.cause is Cause.CLOSED, trigger
    assert trigger.nodes == (N2,)


def test_answers_whose_facts_were_judged_quiet_are_not_judged_again() -> None:
    judged: list[object] = []
    verdict: list[object | None] = [None]

    def judge(answers: object) -> object | None:
        judged.append(answers)
        return verdict[0]

    watcher = Watcher(
        SocketProber(()),  # type: ignore[arg-type]
        writers=(N1, N2),
        question=None,
        every_s=0.01,
        answer_budget_s=1.0,
        judge=judge,
    )
    first = {N1: probe_ok(N1), N2: probe_ok(N2)}
    same = {n: replace(r, elapsed_ms=r.elapsed_ms + 1) for n, r in first.items()}
    moved = {**same, N2: probe_ok(N2)}  # equal facts, but not the very ones judged
    silent = {**same, N2: probe_down(N2, "no answer in 40 ms")}

    assert watcher.judged(first) is None and len(judged) == 1
    assert watcher.judged(same) is None and len(judged) == 1, "the very facts judged quiet"
    assert watcher.judged(moved) is None and len(judged) == 2
    assert watcher.judged(moved) is None and len(judged) == 2
    assert watcher.judged(silent) is None and len(judged) == 3, "a silence is always judged"
    verdict[0] = "changed"
    assert watcher.judged(moved) == "changed" and len(judged) == 4
    assert watcher.judged(moved) == "changed" and len(judged) == 5, "a finding is not kept"
