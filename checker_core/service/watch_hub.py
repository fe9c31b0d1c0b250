"""One thread that watches every cluster between its passes.

Each cluster's loop, while it waits for its next pass, hands its open connections to the hub:
the hub polls them all at once (a server that closes or resets one starts that cluster's pass)
and, every run.watch_interval_ms, writes the watch's question onto every waiting cluster's
writers and reads the answers as they come. A loop per cluster asking on its own thread cost
a thread wake-up per writer and question; here a round costs one wake-up for all of them. A
node that hangs costs the others nothing: nothing here waits on one connection.

A loop takes its connections back before its pass (`release`): a question still out is given
a few milliseconds to be answered, then abandoned (its connection is dropped, as a probe's
would be at its deadline).
"""

from __future__ import annotations

import contextlib
import math
import os
import select
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from checker_core.core.model import NodeAddress
from checker_core.service.watcher import Watcher

if TYPE_CHECKING:
    from checker_core.edges.held_ask import HeldAsk

# the longest the hub sleeps in one go with nothing due (a new watcher wakes it at once)
HUB_NAP_S = 1.0
# how long a loop taking its connections back lets a question still out be answered
RELEASE_GRACE_S = 0.01
# how stale the idle listing may grow when nothing the hub did changed it: a late probe thread
# may hand a connection back meanwhile, followed from the next listing on
RELIST_S = 0.05
_EVENTS = select.EPOLLIN | select.EPOLLPRI | select.EPOLLRDHUP


class WatchHub:
    def __init__(self, monotonic: Callable[[], float] = time.monotonic) -> None:
        self.monotonic = monotonic
        self._lock = threading.Lock()
        # under the lock: the watchers handed over and not yet taken back, those just handed
        # over, and those whose loop asked for them back
        self._members: set[Watcher] = set()
        self._arrived: list[Watcher] = []
        self._called_back: list[Watcher] = []
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._thread: threading.Thread | None = None
        self._closed = False
        self._next_round = 0.0
        self._fresh_state()

    def _fresh_state(self) -> None:
        # the hub thread's own. A turn costs what is due in it, not every watcher: each pass's
        # watcher coming and going, or one answer coming in, touches that watcher alone; only
        # a round of questions walks them all.
        self._watching: dict[Watcher, None] = {}  # in hand-over order
        self._listening: dict[Watcher, None] = {}  # not heard, not leaving: idle ones polled
        self._out: dict[Watcher, None] = {}  # a question out
        self._leaving: dict[Watcher, None] = {}
        self._askers: dict[float, int] = {}  # how many watchers ask at each interval
        # the watchers whose question was answered whole in the last poll, and the soonest
        # deadline of a question out: a turn looks at those, not at every question out
        self._ready: dict[Watcher, None] = {}
        self._soonest = math.inf
        # whether the idle connections must be listed again, and when they are anyway
        self._relist = True
        self._relist_at = 0.0
        # one epoll object kept across turns, whose registrations follow what changed: a wait
        # costs the connections that have something to say, not every one watched (poll(2)
        # looks at each of them on every call)
        old = getattr(self, "_poller", None)
        if old is not None:
            old.close()
        self._poller = select.epoll()
        self._poller.register(self._wake_r, select.EPOLLIN)
        self._registered: set[int] = set()
        # each listening watcher's idle connections as last listed (`Watcher.idle_now` gives
        # the same dict until its prober's connections change), and every one by descriptor
        self._listed: dict[Watcher, dict[int, tuple[NodeAddress, object]]] = {}
        self._idle: dict[int, tuple[Watcher, NodeAddress, object]] = {}
        self._asked: dict[int, Watcher] = {}
        # the held connections by descriptor (Watcher.held), followed from the hold to the
        # release, asked or not
        self._held: dict[int, Watcher] = {}
        # descriptors whose idle entry changed since the last poll: registered again then (a
        # closed socket leaves epoll by itself, and its number may come back as another's)
        self._touched: set[int] = set()

    def watch(self, watcher: Watcher) -> Watcher:
        with self._lock:
            if self._closed:
                raise RuntimeError("the watch hub is closed")
            self._members.add(watcher)
            self._arrived.append(watcher)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="watch", daemon=True)
                self._thread.start()
        self._nudge()
        return watcher

    def release(self, watcher: Watcher) -> None:
        """The loop takes its connections back: after this returns, the hub touches none."""
        with self._lock:
            if watcher not in self._members:
                return
            watcher.leaving_by = self.monotonic() + RELEASE_GRACE_S
            self._called_back.append(watcher)
        self._nudge()
        # the hub answers within its grace; a hub that died must not hold the loop for good
        if not watcher.released.wait(max(1.0, RELEASE_GRACE_S * 100)):
            with self._lock:
                self._members.discard(watcher)
            self._give_up(watcher)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            watchers, self._members = self._members, set()
        self._nudge()
        for watcher in watchers:
            self._give_up(watcher)
        if self._thread is not None:
            self._thread.join(timeout=2)
        for watcher in watchers:
            # the hub's thread has ended (or is stuck for good): its held connections closed
            held, watcher.held = watcher.held, None
            if held is not None:
                held.drop()
        self._poller.close()
        for fd in (self._wake_r, self._wake_w):
            with contextlib.suppress(OSError):
                os.close(fd)

    def _nudge(self) -> None:
        with contextlib.suppress(OSError):
            os.write(self._wake_w, b"!")

    # ---------------------------------------------------------------- the hub's thread

    def _run(self) -> None:
        while True:
            with self._lock:
                if self._closed:
                    return
                arrived, self._arrived = self._arrived, []
                called_back, self._called_back = self._called_back, []
            try:
                self._take_in(arrived, called_back)
                self._turn()
            except Exception as exc:  # the net: the watch is an acceleration, never the loop
                watchers = list(dict.fromkeys([*self._watching, *arrived]))
                for watcher in watchers:
                    held, watcher.held = watcher.held, None
                    if held is not None:
                        held.drop()  # in whatever state the failed turn left them
                self._fresh_state()  # whatever the failed turn left registered is forgotten
                with self._lock:
                    self._members.difference_update(watchers)
                for watcher in watchers:
                    if watcher.leaving_by is None:
                        watcher.failed = exc
                        watcher.heard.set()
                    else:
                        self._give_up(watcher)

    def _take_in(self, arrived: list[Watcher], called_back: list[Watcher]) -> None:
        if arrived or called_back:
            self._relist = True
        for watcher in arrived:
            self._watching[watcher] = None
            self._listening[watcher] = None
            if watcher.asks:
                self._askers[watcher.every_s] = self._askers.get(watcher.every_s, 0) + 1
        for watcher in called_back:
            if watcher in self._watching:
                self._leaving[watcher] = None
                self._stop_listening(watcher)

    def _turn(self) -> None:
        """One turn of the hub: answers judged, releases done, a round asked if due, then a
        poll."""
        now = self.monotonic()
        ready, self._ready = self._ready, {}
        for watcher in ready:
            if watcher.out is not None and watcher.out.done:
                self._settle(watcher)
        if self._leaving or now >= self._soonest:
            # a deadline passed or a loop calls its watcher back: every question out looked at
            for watcher in [w for w in self._out if self._due(w, now)]:
                self._settle(watcher)
            self._soonest = min(
                (w.out.deadline for w in self._out if w.out is not None), default=math.inf
            )
        for watcher in [w for w in self._leaving if w.out is None]:
            self._let_go(watcher)
        wake = min(now + HUB_NAP_S, self._soonest)
        if self._askers:
            if now >= self._next_round:
                self._round(now)
            wake = min(wake, self._next_round, self._soonest)
        for watcher in self._leaving:
            wake = min(wake, watcher.leaving_by or now)
        if now >= self._relist_at:
            self._relist, self._relist_at = True, now + RELIST_S
        self._poll(max(0.0, wake - self.monotonic()))

    def _round(self, now: float) -> None:
        """The watch's question to every watcher that asks and has none out."""
        for watcher in self._watching:
            if (
                watcher.out is None
                and watcher.leaving_by is None
                and watcher.asks
                and not watcher.heard.is_set()
            ):
                watcher.asked += len(watcher.writers)
                deadline = now + watcher.answer_budget_s
                held = watcher.held if watcher.hold_tried else self._hold(watcher)
                if held is not None:
                    watcher.out = held.ask(deadline)
                    self._forget_dropped(watcher, held)
                else:
                    watcher.out = watcher.prober.ask_open(
                        watcher.writers, deadline, watcher.question
                    )
                self._out[watcher] = None
                self._soonest = min(self._soonest, deadline)
        self._next_round = now + min(self._askers)

    def _hold(self, watcher: Watcher) -> HeldAsk | None:
        """The watcher's writers' connections held for its whole wait, when its prober can."""
        watcher.hold_tried = True
        hold = getattr(watcher.prober, "hold", None)
        if hold is None or watcher.question is None:
            return None
        held: HeldAsk | None = hold(watcher.writers, watcher.question)
        watcher.held = held
        if held is not None:
            for fd in held.fds():
                self._held[fd] = watcher
                self._touched.add(fd)
        return held

    def _forget_dropped(self, watcher: Watcher, held: HeldAsk) -> None:
        """The held connections dropped since last asked are no longer followed as held: the
        number of a closed one may come back as another connection's."""
        for fd in held.dropped:
            if self._held.get(fd) is watcher:
                del self._held[fd]
                self._touched.add(fd)
        held.dropped.clear()

    def _give_back(self, watcher: Watcher) -> None:
        """The watcher's held connections back to its prober."""
        held, watcher.held = watcher.held, None
        watcher.hold_tried = False  # a watcher handed over again holds again
        if held is None:
            return
        for fd in held.fds():
            if self._held.get(fd) is watcher:
                del self._held[fd]
                self._touched.add(fd)
        held.give_back()

    @staticmethod
    def _due(watcher: Watcher, now: float) -> bool:
        """Whether the watcher's question is over: answered, past its deadline, or its loop
        wants its connections back and the grace is spent."""
        out = watcher.out
        if out is None:
            return True
        grace_over = watcher.leaving_by is not None and now >= watcher.leaving_by
        return out.done or now >= out.deadline or grace_over

    def _settle(self, watcher: Watcher) -> None:
        """The watcher's question is over: its answers judged."""
        out, watcher.out = watcher.out, None
        self._out.pop(watcher, None)
        if out is None:
            return
        answers = out.finish()
        self._relist = True  # a connection silent under its question was dropped
        if out is watcher.held:
            self._forget_dropped(watcher, watcher.held)
        if watcher.heard.is_set() or watcher.leaving_by is not None:
            return
        if out.closed_by_server:
            # closed under the question: what a killed mysqld's kernel does, said as a
            # closed connection whether or not a question was out on it
            watcher.closed = tuple(sorted(out.closed_by_server))
            self._heard(watcher, None)
        elif (found := watcher.judged(answers)) is not None:
            self._heard(watcher, found)

    def _let_go(self, watcher: Watcher) -> None:
        """The watcher's loop has its connections back."""
        self._give_back(watcher)
        self._ready.pop(watcher, None)
        self._watching.pop(watcher, None)
        self._leaving.pop(watcher, None)
        self._stop_listening(watcher)
        if watcher.asks:
            left = self._askers.get(watcher.every_s, 1) - 1
            if left > 0:
                self._askers[watcher.every_s] = left
            else:
                self._askers.pop(watcher.every_s, None)
        with self._lock:
            self._members.discard(watcher)
        watcher.released.set()

    def _stop_listening(self, watcher: Watcher) -> None:
        if watcher in self._listening:
            del self._listening[watcher]
            self._touched |= self._unlist(watcher)

    def _listen(self) -> None:
        """Bring the idle connections up to date with the watchers that still listen: a
        watcher's are listed again when its prober's connections changed. Asked when the hub
        changed them, a watcher came, or RELIST_S passed: not on every turn."""
        if not self._relist:
            return
        self._relist = False
        touched = self._touched
        for watcher in self._listening:
            # asked for every listening watcher on every turn: spelt out, no call
            if watcher.idle is not None and (
                getattr(watcher.prober, "changes", None) == watcher.idle_at
            ):
                continue
            listing = watcher.idle_now()
            if self._listed.get(watcher) is not listing:
                touched |= self._unlist(watcher)
                self._listed[watcher] = listing
                for fd, (node, conn) in listing.items():
                    self._idle[fd] = (watcher, node, conn)
                    touched.add(fd)

    def _unlist(self, watcher: Watcher) -> set[int]:
        """Forget the watcher's idle connections; a descriptor another watcher's connection
        now has (closed, then reused) stays that one's."""
        gone: set[int] = set()
        for fd in self._listed.pop(watcher, {}):
            entry = self._idle.get(fd)
            if entry is not None and entry[0] is watcher:
                del self._idle[fd]
                gone.add(fd)
        return gone

    def _poll(self, timeout_s: float) -> None:
        asked = self._follow_all()
        # epoll rounds the timeout up to a whole millisecond: no spin until the next round
        events = self._poller.poll(timeout_s)
        closed: dict[Watcher, list[NodeAddress]] = {}
        for fd, _ in events:
            if fd == self._wake_r:
                with contextlib.suppress(OSError):
                    os.read(self._wake_r, 4096)
            elif fd in self._held:
                self._held_event(fd, closed)
            elif fd in asked:
                watcher = asked[fd]
                out = watcher.out
                if out is not None:
                    out.on_event(fd)
                    if out.done:
                        self._ready[watcher] = None
            else:
                self._idle_event(fd, closed)
        for watcher, nodes in closed.items():
            self._relist = True
            for node in nodes:
                watcher.prober.discard(node)  # a held one is closed already: a no-op
            watcher.closed = tuple(sorted(nodes))
            self._heard(watcher, None)

    def _follow_all(self) -> dict[int, Watcher]:
        """epoll follows the idle connections and those with a question out; the latter, by
        descriptor, are returned."""
        self._listen()
        touched, self._touched = self._touched, set()
        idle = self._idle
        asked: dict[int, Watcher] = {}
        for watcher in self._out:
            if watcher.out is not None and watcher.held is None:  # a held one's are followed
                for fd in watcher.out.fds():
                    asked[fd] = watcher
        held = self._held
        for fd in touched:
            self._follow(fd, fd in idle or fd in asked or fd in held, again=True)
        if asked or self._asked:
            # a question goes out on an idle connection, already followed: most are no-ops
            for fd in asked.keys() ^ self._asked.keys():
                self._follow(fd, fd in idle or fd in asked or fd in held, again=False)
            self._asked = asked
        return asked

    def _held_event(self, fd: int, closed: dict[Watcher, list[NodeAddress]]) -> None:
        """A held connection spoke: its answer, or (unasked) its server closing it."""
        watcher = self._held[fd]
        held = watcher.held
        if held is None:  # given up from the loop's side: no longer the hub's
            del self._held[fd]
            self._touched.add(fd)
            return
        spoke = held.on_event(fd)
        if held.dropped:
            self._forget_dropped(watcher, held)
        if watcher.out is not None:
            if watcher.out.done:
                self._ready[watcher] = None
        elif spoke is not None:
            closed.setdefault(watcher, []).append(spoke)

    def _idle_event(self, fd: int, closed: dict[Watcher, list[NodeAddress]]) -> None:
        """An idle connection spoke: its server closed it. Only a connection that is still the
        node's idle one speaks for its server: one a probe took since, or one a late probe
        replaced, says nothing of the server."""
        found = self._idle.get(fd)
        if found is None:
            return
        watcher, node, conn = found
        if watcher.prober.still_idle(node, conn):
            closed.setdefault(watcher, []).append(node)

    def _follow(self, fd: int, wanted: bool, *, again: bool) -> None:
        """Have the descriptor watched or not; `again`: it may name another socket now."""
        if wanted and fd in self._registered and again:
            try:
                self._poller.modify(fd, _EVENTS)
                return
            except OSError:  # its socket was closed: the number may be another's now
                self._registered.discard(fd)
        if wanted and fd not in self._registered:
            try:
                self._poller.register(fd, _EVENTS)
            except FileExistsError:  # the same socket, still followed
                pass
            except OSError:  # closed since it was listed: its prober's next listing says so
                return
            self._registered.add(fd)
        elif not wanted and fd in self._registered:
            self._registered.discard(fd)
            with contextlib.suppress(OSError):  # closed, so already gone from epoll
                self._poller.unregister(fd)

    def _heard(self, watcher: Watcher, found: object | None) -> None:
        """The watch ends for this watcher (`found`: the answers' verdict, None when it ends
        on a closed connection): its idle connections are no longer polled."""
        if found is not None:
            watcher.found = found
        self._stop_listening(watcher)
        watcher.heard.set()

    def _give_up(self, watcher: Watcher) -> None:
        """The watcher let go without the hub (the hub failed, stalled or closes): a question
        out through the exchange is given up. Held connections are left to the hub, which gives
        them back at its next turn (the loop's pass meanwhile connects afresh): closed from
        here, their descriptors could be a new connection's while the hub still reads them."""
        out, watcher.out = watcher.out, None
        if out is not None and out is not watcher.held:
            out.finish()
        watcher.released.set()
