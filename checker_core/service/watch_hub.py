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
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from checker_core.core.model import NodeAddress

if TYPE_CHECKING:
    from checker_core.core.probes import ProbeResult
    from checker_core.edges.backend import OpenAsk, ProbeFn, Prober

# the longest the hub sleeps in one go with nothing due (a new watcher wakes it at once)
HUB_NAP_S = 1.0
# how long a loop taking its connections back lets a question still out be answered
RELEASE_GRACE_S = 0.01
_POLL_EVENTS = select.POLLIN | select.POLLPRI | getattr(select, "POLLRDHUP", 0)


class Watcher:
    """One waiting cluster: its connections, its writers to ask, and what it heard."""

    def __init__(
        self,
        prober: Prober,
        *,
        writers: tuple[NodeAddress, ...],
        question: ProbeFn | None,
        every_s: float,
        answer_budget_s: float,
        judge: Callable[[Mapping[NodeAddress, ProbeResult]], object | None],
    ) -> None:
        self.prober = prober
        self.writers = writers
        self.question = question
        self.every_s = every_s
        self.answer_budget_s = answer_budget_s
        self.judge = judge  # the answers' verdict: a trigger, or None when nothing changed
        self.asked = 0
        self.heard = threading.Event()
        # what ended the watch: the nodes whose connection their server closed, or the
        # answers' verdict
        self.closed: tuple[NodeAddress, ...] = ()
        self.found: object | None = None
        self.failed: Exception | None = None  # what broke the hub's turn
        self.leaving_by: float | None = None
        self.released = threading.Event()
        self.out: OpenAsk | None = None
        # its idle connections by descriptor, looked up again only when its prober's
        # connections changed (a question out or answered, one dropped, a late probe's)
        self.idle: dict[int, tuple[NodeAddress, object]] | None = None
        self._idle_at = -1
        # the facts of the last answers the judge found nothing in: the exchange gives back the
        # very facts object for an answer byte for byte the last one, and the judge reads
        # nothing but the facts, so the same objects again need no judging
        self.quiet_facts: tuple[object, ...] | None = None

    def judged(self, answers: Mapping[NodeAddress, ProbeResult]) -> object | None:
        """The judge's verdict on these answers; facts it found nothing in are not judged
        again."""
        facts = tuple(answers[n].facts if n in answers else None for n in self.writers)
        last = self.quiet_facts
        if last is not None and all(
            a is b and a is not None for a, b in zip(facts, last, strict=True)
        ):
            return None
        found = self.judge(answers)
        self.quiet_facts = facts if found is None else None
        return found

    def idle_now(self) -> dict[int, tuple[NodeAddress, object]]:
        changes = getattr(self.prober, "changes", None)
        if self.idle is None or changes is None or changes != self._idle_at:
            self.idle = self.prober.idle()
            self._idle_at = changes if changes is not None else -1
        return self.idle

    @property
    def asks(self) -> bool:
        return self.every_s > 0 and bool(self.writers)


class WatchHub:
    def __init__(self, monotonic: Callable[[], float] = time.monotonic) -> None:
        self.monotonic = monotonic
        self._lock = threading.Lock()
        self._watchers: list[Watcher] = []
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._thread: threading.Thread | None = None
        self._closed = False
        self._next_round = 0.0
        self._fresh_poll()

    def _fresh_poll(self) -> None:
        # the hub thread's own: one poll object kept across turns, whose registrations follow
        # the connections watched. A turn registers what changed, not every connection again:
        # with many clusters, each pass's watcher coming and going would otherwise cost the
        # hub every cluster's connections each time.
        self._poller = select.poll()
        self._poller.register(self._wake_r, select.POLLIN)
        self._registered: set[int] = set()
        # each listening watcher's idle connections as last listed (`Watcher.idle_now` gives
        # the same dict until its prober's connections change), and every one by descriptor
        self._listed: dict[Watcher, dict[int, tuple[NodeAddress, object]]] = {}
        self._idle: dict[int, tuple[Watcher, NodeAddress, object]] = {}
        self._asked: dict[int, Watcher] = {}

    def watch(self, watcher: Watcher) -> Watcher:
        with self._lock:
            if self._closed:
                raise RuntimeError("the watch hub is closed")
            self._watchers.append(watcher)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="watch", daemon=True)
                self._thread.start()
        self._nudge()
        return watcher

    def release(self, watcher: Watcher) -> None:
        """The loop takes its connections back: after this returns, the hub touches none."""
        with self._lock:
            if watcher not in self._watchers:
                return
            watcher.leaving_by = self.monotonic() + RELEASE_GRACE_S
        self._nudge()
        # the hub answers within its grace; a hub that died must not hold the loop for good
        if not watcher.released.wait(max(1.0, RELEASE_GRACE_S * 100)):
            with self._lock:
                if watcher in self._watchers:
                    self._watchers.remove(watcher)
            self._give_up(watcher)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            watchers, self._watchers = self._watchers, []
        self._nudge()
        for watcher in watchers:
            self._give_up(watcher)
        if self._thread is not None:
            self._thread.join(timeout=2)
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
                watchers = list(self._watchers)
            try:
                self._turn(watchers)
            except Exception as exc:  # the net: the watch is an acceleration, never the loop
                self._fresh_poll()  # whatever the failed turn left registered is forgotten
                for watcher in watchers:
                    if watcher.leaving_by is None:
                        watcher.failed = exc
                        watcher.heard.set()
                    else:
                        self._give_up(watcher)
                with self._lock:
                    self._watchers = [w for w in self._watchers if w not in watchers]

    def _turn(self, watchers: list[Watcher]) -> None:
        """One turn of the hub: answers judged, a round asked if due, then a poll."""
        now = self.monotonic()
        # a watcher with no question out and not leaving has nothing to settle
        watching = [
            w
            for w in watchers
            if (w.out is None and w.leaving_by is None) or not self._settle(w, now)
        ]
        wake = now + HUB_NAP_S
        asking = [w for w in watching if w.asks and not w.heard.is_set() and not w.leaving_by]
        if asking:
            if now >= self._next_round:
                for watcher in asking:
                    if watcher.out is None:
                        self._ask(watcher, now)
                self._next_round = now + min(w.every_s for w in asking)
            wake = min(wake, self._next_round)
        for watcher in watching:
            if watcher.out is not None:
                wake = min(wake, watcher.out.deadline)
            if watcher.leaving_by is not None:
                wake = min(wake, watcher.leaving_by)
        self._poll(watching, max(0.0, wake - self.monotonic()))

    def _settle(self, watcher: Watcher, now: float) -> bool:
        """Finish what is due for the watcher: its answers judged, its release. Whether it is
        no longer watched."""
        out = watcher.out
        if out is not None:
            grace_over = watcher.leaving_by is not None and now >= watcher.leaving_by
            if out.done or now >= out.deadline or grace_over:
                watcher.out = None
                answers = out.finish()
                if not watcher.heard.is_set() and watcher.leaving_by is None:
                    if out.closed_by_server:
                        # closed under the question: what a killed mysqld's kernel does, said
                        # as a closed connection whether or not a question was out on it
                        watcher.closed = tuple(sorted(out.closed_by_server))
                        watcher.heard.set()
                    elif (found := watcher.judged(answers)) is not None:
                        self._heard(watcher, found)
        if watcher.leaving_by is not None and watcher.out is None:
            with self._lock:
                if watcher in self._watchers:
                    self._watchers.remove(watcher)
            watcher.released.set()
            return True
        return False

    def _ask(self, watcher: Watcher, now: float) -> None:
        watcher.asked += len(watcher.writers)
        watcher.out = watcher.prober.ask_open(
            watcher.writers, now + watcher.answer_budget_s, watcher.question
        )

    def _listen(self, watching: list[Watcher]) -> set[int]:
        """Bring the idle connections up to date with the watchers that still listen; the
        descriptors whose entry changed."""
        listening = [w for w in watching if not w.heard.is_set() and w.leaving_by is None]
        touched: set[int] = set()
        still = set(listening)
        for watcher in [w for w in self._listed if w not in still]:
            touched |= self._unlist(watcher)
        for watcher in listening:
            listing = watcher.idle_now()
            if self._listed.get(watcher) is not listing:
                touched |= self._unlist(watcher)
                self._listed[watcher] = listing
                for fd, (node, conn) in listing.items():
                    self._idle[fd] = (watcher, node, conn)
                    touched.add(fd)
        return touched

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

    def _poll(self, watching: list[Watcher], timeout_s: float) -> None:
        touched = self._listen(watching)
        idle = self._idle
        asked: dict[int, Watcher] = {}
        for watcher in watching:
            if watcher.out is not None:
                for fd in watcher.out.fds():
                    asked[fd] = watcher
        if asked or self._asked:
            touched.update(asked.keys() ^ self._asked.keys())
            self._asked = asked
        for fd in touched:
            wanted = fd in idle or fd in asked
            if wanted and fd not in self._registered:
                self._poller.register(fd, _POLL_EVENTS)
                self._registered.add(fd)
            elif not wanted and fd in self._registered:
                self._poller.unregister(fd)
                self._registered.discard(fd)
        # rounded up: a timeout truncated to 0 ms would spin until the next round
        events = self._poller.poll(max(0, math.ceil(timeout_s * 1000)))
        closed: dict[Watcher, list[NodeAddress]] = {}
        for fd, event in events:
            if fd == self._wake_r:
                with contextlib.suppress(OSError):
                    os.read(self._wake_r, 4096)
                continue
            if fd in asked:
                out = asked[fd].out
                if out is not None:
                    out.on_event(fd)
                continue
            found = idle.get(fd)
            # only a connection that is still the node's idle one speaks for its server: one a
            # probe took since, or one closed after a late probe handed back another
            # (POLLNVAL), says nothing of the server
            if found is None or event & select.POLLNVAL:
                continue
            watcher, node, conn = found
            if watcher.prober.still_idle(node, conn):
                closed.setdefault(watcher, []).append(node)
        for watcher, nodes in closed.items():
            for node in nodes:
                watcher.prober.discard(node)
            watcher.closed = tuple(sorted(nodes))
            watcher.heard.set()

    def _heard(self, watcher: Watcher, found: object) -> None:
        watcher.found = found
        watcher.heard.set()

    def _give_up(self, watcher: Watcher) -> None:
        out, watcher.out = watcher.out, None
        if out is not None:
            out.finish()
        watcher.released.set()
