"""A daemon asks the survivors' causal reads while a member's silence is still under
unresponsive_after_ms, so that the proof is ready when the time is up: the member is still
evicted only by a pass that finds it silent for the whole time, each read is judged on the
stall it measured itself, and reads asked for a silence that ended prove nothing later."""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from checker_core.core.model import NodeAddress
from checker_core.passes.plugin import AfterPass
from galera_checker.actions import GaleraActions
from galera_checker.node_calls import CAUSAL_READ
from tests.unit.galera_cases import N1, N2, N3
from tests.unit.test_unresponsive import after, alive, evicted_on

DEADLINE_S = 10.0


class Group:
    """The survivors of a frozen N1: a causal read waits until the group delivers again
    (`back`, set at a moment of the test) or its read timeout (a stall); a read asked once the
    group is back answers at once."""

    def __init__(self) -> None:
        self.back = threading.Event()
        self.log: list[tuple[object, ...]] = []
        self.lock = threading.Lock()

    def connect(self, account: object, node: NodeAddress, **timeouts: float) -> Any:
        return contextlib.nullcontext(Conn(self, node, timeouts.get("wait_s")))

    def reads(self) -> int:
        with self.lock:
            return sum(sql == CAUSAL_READ[1] for _, sql, _ in self.log)


class Conn:
    def __init__(self, group: Group, node: NodeAddress, wait_s: float | None) -> None:
        self.group, self.node, self.wait_s = group, node, wait_s

    def cursor(self) -> contextlib.nullcontext[Conn]:
        return contextlib.nullcontext(self)

    def execute(self, sql: str, args: object = None) -> None:
        with self.group.lock:
            self.group.log.append((self.node, sql, args))
        if sql == CAUSAL_READ[1]:
            assert self.wait_s is not None
            if not self.group.back.wait(self.wait_s):
                raise TimeoutError("timed out")

    def fetchall(self) -> list[tuple[str, str]]:
        return [("u-1", str(N1)), ("u-2", str(N2)), ("u-3", str(N3))]


def daemon_pass(
    tmp_path: Path, since: float, *, answering: bool = False, now: float | None = None
) -> AfterPass:
    """A daemon's pass at `now` (the real monotonic clock unless given) with N1 silent since
    `since` (or answering)."""
    now = time.monotonic() if now is None else now
    given = replace(after(tmp_path, now - since, now=now), persistent=True)
    memory = dict(given.decision.memory)
    if answering:
        memory[N1] = replace(memory[N1], silent_since=None)
        probes = {**given.probes, N1: alive(N1)}
        return replace(given, decision=replace(given.decision, memory=memory), probes=probes)
    memory[N1] = replace(memory[N1], silent_since=since)
    return replace(given, decision=replace(given.decision, memory=memory))


def actions_of(group: Group, clock: list[float] | None = None) -> GaleraActions:
    actions = GaleraActions(group.connect, (lambda: clock[0]) if clock else time.monotonic)
    actions.memory.samples.append(1.0)  # normal latency 1 ms: stall wait 0.25 s
    return actions


def until(done: Any, what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not done():
        assert time.monotonic() < deadline, what
        time.sleep(0.005)


def finished(actions: GaleraActions) -> None:
    job = actions.memory.job
    assert job is not None, "an eviction started"
    job.join(DEADLINE_S)
    assert not job.is_alive()


def test_the_reads_start_under_the_threshold_and_the_pass_that_reaches_it_evicts_at_once(
    tmp_path: Path,
) -> None:
    group = Group()
    actions = actions_of(group)
    since = time.monotonic() - 0.5
    first = actions.after_pass(daemon_pass(tmp_path, since))
    assert first.evictions == 0 and not any("under way" in s for s in first.said)
    until(lambda: group.reads() == 2, "each survivor asked a causal read before the threshold")
    assert evicted_on(group.log) == []
    until(lambda: time.monotonic() >= since + 1.0, "the threshold")
    started = actions.after_pass(daemon_pass(tmp_path, since))
    assert any("under way" in s for s in started.said), started
    finished(actions)
    assert sorted(evicted_on(group.log), key=str) == [N2, N3]
    assert group.reads() == 2, "judged on the reads already under way, none asked again"
    reported = actions.after_pass(daemon_pass(tmp_path, since))
    assert reported.evictions == 1, reported
    assert "stalled for" in reported.said[0], reported


def test_a_read_asked_late_is_judged_on_its_own_stall_not_on_when_the_pass_came(
    tmp_path: Path,
) -> None:
    """Asked 0.95 s into the silence, the reads have waited 50 ms when the threshold comes
    (a clock of the test's, which stays there): they are judged once each has waited the stall
    wait (0.25 s) of its own, and the group delivering again meanwhile disproves the stall."""
    group = Group()
    since, clock = 1000.0, [1000.95]
    actions = actions_of(group, clock)
    actions.after_pass(daemon_pass(tmp_path, since, now=clock[0]))
    until(lambda: group.reads() == 2, "the early reads asked")
    clock[0] = since + 1.0
    actions.after_pass(daemon_pass(tmp_path, since, now=clock[0]))
    job = actions.memory.job
    assert job is not None
    job.join(0.5)
    assert job.is_alive(), "still waiting for the reads' own stall wait"
    group.back.set()
    finished(actions)
    assert evicted_on(group.log) == []
    assert group.reads() == 2
    reported = actions.after_pass(daemon_pass(tmp_path, since, now=clock[0]))
    assert reported.evictions == 0
    assert "the others replicate" in reported.said[0], reported


def test_reads_asked_for_a_silence_that_ended_prove_nothing_about_the_next(
    tmp_path: Path,
) -> None:
    """The reads asked during a first silence still stall when the member answers; the
    member is then silent again, to the checker alone (the group delivers): the pass that
    finds this second silence at the threshold asks reads of its own, which answer."""
    group = Group()
    actions = actions_of(group)
    first_since = time.monotonic() - 0.5
    actions.after_pass(daemon_pass(tmp_path, first_since))
    until(lambda: group.reads() == 2, "the early reads asked")
    answered = actions.after_pass(daemon_pass(tmp_path, first_since, answering=True))
    assert answered.evictions == 0
    assert actions.memory.early is None, "dropped once the member answered"
    second_since = time.monotonic()
    early_reads = group.reads()
    until(lambda: time.monotonic() >= second_since + 1.0, "the second silence's threshold")
    # the group delivers now, but the first silence's reads (still waiting) would say stalled
    late = Group()
    late.back.set()
    actions.connect = late.connect
    actions.after_pass(daemon_pass(tmp_path, second_since))
    finished(actions)
    assert evicted_on(group.log) == evicted_on(late.log) == []
    assert late.reads() == 2, "reads of its own"
    assert group.reads() == early_reads
    reported = actions.after_pass(daemon_pass(tmp_path, second_since))
    assert reported.evictions == 0 and "the others replicate" in reported.said[0], reported


def test_a_scheduler_pass_asks_no_early_read(tmp_path: Path) -> None:
    """A scheduler pass is a process of its own: reads it left behind would die with it."""
    group = Group()
    actions = actions_of(group)
    given = daemon_pass(tmp_path, time.monotonic() - 0.5)
    actions.after_pass(replace(given, persistent=False))
    assert group.reads() == 0 and actions.memory.early is None
