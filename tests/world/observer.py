"""The observer of the simulated world: every few tens of milliseconds it reads ProxySQL's
runtime and staged rows, the cluster models' truth and every daemon's /status, and hands the
sample to the judge; it also follows the daemons' logs (a traceback, a pass over its deadline,
a cluster with no pass) and notices a daemon that died without the world stopping it."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from tests.world.invariants import Judge, LoadedPass, Sample, Violation
from tests.world.world import SLACK_S, World, read_rows

PAGE_EVERY_S = 1.0  # how often the daemons' status pages are looked at
PERIOD_S = 0.05
# an observer's look later than this past its period says the machine is short of CPU
OVERLOADED_S = 0.15
# the apply runs on to its LOAD once begun: the admin's round trips may end it past the
# deadline by a little, never by a whole admin timeout
OVERRUN_MS = 150
# a cluster whose daemon runs makes a pass at least this often (beyond the cadence's own)
NO_PASS_S = 3.0 + SLACK_S


@dataclass
class LogFollower:
    """New lines of one daemon's log since the last look."""

    path: Path
    offset: int = 0
    partial: bytes = b""

    def lines(self) -> list[str]:
        try:
            with self.path.open("rb") as f:
                f.seek(self.offset)
                data = f.read()
        except OSError:
            return []
        self.offset += len(data)
        data = self.partial + data
        *complete, self.partial = data.split(b"\n")
        return [line.decode(errors="replace") for line in complete]


@dataclass
class Observer:
    world: World
    judge: Judge
    samples: int = 0
    last: Sample | None = None
    errors: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self._logs = {kind: LogFollower(d.log) for kind, d in self.world.daemons.items()}
        self._last_pass: dict[str, float] = {}
        self._dead_said: set[str] = set()
        self._no_pass_said: set[str] = set()
        self.traceback_lines: list[str] = []
        self._overloaded_until = 0.0
        self._page_due = 0.0
        self._loads_seen = 0

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="observer", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _loop(self) -> None:
        conn = None
        while not self._stop.is_set():
            began = time.monotonic()
            try:
                if conn is None:
                    conn = self.world.admin()
                with conn.cursor() as cur:
                    runtime = read_rows(cur, "runtime_mysql_servers")
                    staged = read_rows(cur, "mysql_servers")
                sample = Sample(
                    self.world.now(), runtime, staged, self.world.truth(), self.world.status()
                )
            except Exception as exc:  # the observer outlives a bad look
                self.errors.append(f"{self.world.now():.2f}s: {type(exc).__name__}: {exc}")
                conn = None
                self._stop.wait(PERIOD_S)
                continue
            with self.lock:
                self._feed_loads()
                # the passes that ended by now first: the judge may ask who made a change
                self._follow_logs(sample.at)
                self.judge.sample(sample)
                self.samples += 1
                self.last = sample
            if time.monotonic() >= self._page_due:
                # the status page, as people look at it: once a second, not every sample
                self._page_due = time.monotonic() + PAGE_EVERY_S
                for kind, what in self.world.page_problems():
                    self.judge.violation(7, sample.at, kind, what)
            took = time.monotonic() - began
            if took > PERIOD_S + OVERLOADED_S:
                # the observer itself ran late: the machine is short of CPU for everyone
                self._overloaded_until = time.monotonic() + 2.0
            self._stop.wait(max(0.0, PERIOD_S - took))
        if conn is not None:
            conn.close()

    def _feed_loads(self) -> None:
        """The checkers' LOADs the relay passed on since the last look, in the world's time."""
        relay = self.world.relay
        if relay is None:
            return
        new = relay.loads_after(self._loads_seen)
        self._loads_seen += len(new)
        t0 = self.world.t0
        self.judge.checker_loads((read - t0, load - t0) for read, load in new)

    def _follow_logs(self, at: float) -> None:
        for kind, follower in self._logs.items():
            daemon = self.world.daemons[kind]
            for line in follower.lines():
                self._line(kind, line, at)
            if not daemon.alive() and not daemon.expected_down and kind not in self._dead_said:
                self._dead_said.add(kind)
                self.judge.violation(8, at, kind, f"the {kind} daemon died")
            if daemon.alive():
                self._dead_said.discard(kind)
        for cluster, spec in self.world.specs.items():
            daemon = self.world.daemons[spec.kind]
            since = max(self._last_pass.get(cluster, 0.0), daemon.started_at - self.world.t0)
            quiet_s = NO_PASS_S + 6 * self.world.cadence.interval_ms / 1000
            if daemon.alive() and at - since > quiet_s:
                if cluster not in self._no_pass_said:
                    self._no_pass_said.add(cluster)
                    self.judge.violation(8, at, cluster, f"no pass for {at - since:.1f}s")
            else:
                self._no_pass_said.discard(cluster)

    def _line(self, kind: str, line: str, at: float) -> None:
        if "Traceback" in line or self.traceback_lines:
            # keep the traceback's lines together in one violation
            self.traceback_lines.append(line)
            if line and not line.startswith((" ", "Traceback")):
                text = "\n".join(self.traceback_lines[-30:])
                self.traceback_lines = []
                self.judge.violation(8, at, kind, f"traceback in the {kind} daemon's log:\n{text}")
            return
        try:
            record = json.loads(line)
        except ValueError:
            return
        if not isinstance(record, dict) or record.get("event") != "pass":
            return
        cluster = str(record.get("cluster"))
        self.world.saw_passes(line)
        self._last_pass[cluster] = at
        duration = record.get("duration_ms")
        if record.get("loaded") is True and isinstance(duration, (int, float)):
            self._loaded(cluster, record, duration)
        limit = self.world.cadence.max_runtime_ms
        daemon = self.world.daemons[kind]
        # a pass the world stopped and continued ran late by the world's hand
        starved = daemon.starving.is_set() or time.monotonic() - daemon.starved_until < 2.0
        # ProxySQL's admin held slow by the world: an apply runs on to its LOAD, each statement
        # bounded by the admin's timeout, not the pass's deadline (docs/ARCHITECTURE.md)
        # (or by itself: the relay measures every answer)
        relay = self.world.relay
        if relay is not None and (relay.delay > 0 or time.monotonic() - relay.slow_until < 2.0):
            starved = True
        over = isinstance(duration, (int, float)) and duration > limit + OVERRUN_MS
        slowest = self._slowest_answer(at)
        if over and starved and slowest:
            self.judge.notes.append(
                f"{at:.2f}s [{cluster}]: a pass took {duration} ms while answers from "
                f"ProxySQL's admin came late at the relay ({slowest})"
            )
        if over and not starved and time.monotonic() < self._overloaded_until:
            # the machine, not the checker: every process here ran late (a note, not a verdict)
            self.judge.notes.append(
                f"{at:.2f}s [{cluster}]: a pass took {duration} ms while the machine was "
                "overloaded (the observer itself ran late)"
            )
        elif over and not starved:
            self.judge.violation(
                8,
                at,
                cluster,
                f"a pass took {duration} ms (max_runtime_ms {limit}): {record.get('summary')}",
            )

    def _loaded(self, cluster: str, record: Mapping[str, Any], duration: float) -> None:
        """Tell the judge when a pass that made its plan live ran, on the world's clock (its
        log's wall-clock end less the pass's own duration), and which nodes it took out."""
        try:
            wall = datetime.fromisoformat(str(record.get("ts")).replace("Z", "+00:00"))
        except ValueError:
            return
        ended = wall.timestamp() - (time.time() - time.monotonic()) - self.world.t0
        self.judge.pass_loaded(
            LoadedPass(cluster, ended - duration / 1000, ended, taken_out(record.get("change")))
        )

    def _slowest_answer(self, at: float) -> str:
        """ProxySQL's own slowest answer to a checker in the 2 s before `at` (world time), when
        one was later than the relay's SLOW_ANSWER_S; "" when none was."""
        relay = self.world.relay
        if relay is None:
            return ""
        since = self.world.t0 + at - 2.0
        late = [(took, what) for when, took, what in list(relay.slow_answers) if when >= since]
        if not late:
            return ""
        took, what = max(late)
        return f"{1000 * took:.0f} ms for {what}"

    def violations(self) -> list[Violation]:
        with self.lock:
            return list(self.judge.violations)


def taken_out(changes: object) -> dict[str, str]:
    """node -> the change that took it out of a hostgroup or out of its traffic, from a pass
    line's `change` list ("remove H:P in hostgroup N ...", "update H:P ... -> OFFLINE_SOFT")."""
    out: dict[str, str] = {}
    for change in changes if isinstance(changes, list) else []:
        words = str(change).split()
        if len(words) < 2:
            continue
        leaves = words[0] == "remove" or (
            words[0] == "update" and " -> OFFLINE" in str(change).split(": ", 1)[0]
        )
        if leaves:
            out.setdefault(words[1], str(change))
    return out
