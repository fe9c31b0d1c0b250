"""The pass keeps its own deadline: a value its steps ask between them and its I/O takes its
timeouts from. Nothing is raised into running code from outside, so the deadline never lands
inside a staging write, a state-file write or a library's finalizer; a pass whose ProxySQL does
not answer still ends by itself, cut short."""

from __future__ import annotations

import os
import re
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from checker_core.core.model import ServerStatus
from checker_core.edges.deadline import Deadline, PassTimeout
from checker_core.edges.lock import write_lock
from checker_core.edges.proxysql import AdminClient
from checker_core.passes.result import Mode, Outcome, PassResult
from checker_core.passes.runner import PassRunner
from tests.unit.config_cases import galera_runner, galera_settings
from tests.unit.fakes import HealthyProber, MemoryAdmin, ProberSaying, hung_admin, ports, retuned
from tests.unit.galera_cases import HG, N1, N2, steady, templates

# ------------------------------------------------------------------ the record


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize(
    ("spent_s", "left", "expired", "bound_2s", "said"),
    [
        (0.0, 1.8, False, 1.8, "pass cut short after 0 ms (run.max_runtime_ms 1800)"),
        (0.3, 1.5, False, 1.5, "pass cut short after 300 ms (run.max_runtime_ms 1800)"),
        (1.0, 0.8, False, 0.8, "pass cut short after 1000 ms (run.max_runtime_ms 1800)"),
        (1.8, 0.0, True, 0.0, "pass cut short after 1800 ms (run.max_runtime_ms 1800)"),
        (2.5, 0.0, True, 0.0, "pass cut short after 2500 ms (run.max_runtime_ms 1800)"),
    ],
)
def test_a_deadline_says_what_is_left_and_how_long_the_pass_ran(
    spent_s: float, left: float, expired: bool, bound_2s: float, said: str
) -> None:
    clock = Clock(100.0)
    deadline = Deadline.of_pass(100.0, 1800, clock)
    clock.now = 100.0 + spent_s

    assert deadline.left() == pytest.approx(left)
    assert deadline.expired() is expired
    assert deadline.bound(2.0) == pytest.approx(bound_2s)
    assert deadline.bound(0.1) == pytest.approx(min(0.1, left))
    assert str(deadline.cut_short()) == said
    assert str(deadline.cut_short("statement 3 of 5")) == f"{said}: statement 3 of 5"
    if expired:
        with pytest.raises(PassTimeout, match=re.escape(said)):
            deadline.check()
    else:
        deadline.check()


def test_without_a_budget_the_message_names_only_the_key() -> None:
    clock = Clock(10.0)
    deadline = Deadline(10.0, 10.5, None, clock)
    clock.now = 10.6
    assert str(deadline.cut_short()) == "pass cut short after 600 ms (run.max_runtime_ms)"


# ------------------------------------------------------------------ a ProxySQL that is late


@pytest.fixture
def unraisable() -> Iterator[list[Any]]:
    """What Python reported as raised where it could not be (a finalizer, a callback)."""
    seen: list[Any] = []
    before = sys.unraisablehook
    sys.unraisablehook = seen.append
    try:
        yield seen
    finally:
        sys.unraisablehook = before


def hung_runner(tmp_path: Path, stack: ExitStack, max_runtime_ms: int) -> PassRunner:
    """A runner whose every connect finds a ProxySQL admin that never answers."""
    settings = galera_settings(tmp_path)
    settings = replace(settings, run=replace(settings.run, max_runtime_ms=max_runtime_ms))

    def connect() -> AdminClient:
        return stack.enter_context(hung_admin())

    return galera_runner(tmp_path, settings=settings, **ports(connect, HealthyProber()))


def cut_short(result: PassResult, budget_ms: int) -> bool:
    return (
        result.outcome is Outcome.FAILED
        and result.message.startswith("pass cut short after ")
        and f"(run.max_runtime_ms {budget_ms})" in result.message
        and result.message.endswith("; nothing loaded")
    )


def test_a_pass_whose_admin_never_answers_ends_by_itself_cut_short(
    tmp_path: Path, unraisable: list[Any]
) -> None:
    with ExitStack() as stack:
        runner = hung_runner(tmp_path, stack, max_runtime_ms=60)
        results = [runner.run(Mode.APPLY) for _ in range(20)]

    assert all(cut_short(r, 60) for r in results), [r.message for r in results]
    # the read the deadline cut short (a pass slow to reach it stops at the step before)
    assert any("hung admin gave no answer in the time left" in r.message for r in results)
    assert unraisable == []


def test_passes_on_threads_of_their_own_end_cut_short_with_nothing_raised_from_outside(
    tmp_path: Path, unraisable: list[Any]
) -> None:
    results: list[PassResult] = []

    def passes(runner: PassRunner) -> None:
        for _ in range(10):
            results.append(runner.run(Mode.APPLY))

    with ExitStack() as stack:
        homes = [tmp_path / str(i) for i in range(4)]
        for home in homes:
            home.mkdir()
        runners = [hung_runner(home, stack, max_runtime_ms=50) for home in homes]
        threads = [threading.Thread(target=passes, args=(r,)) for r in runners]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert not any(t.is_alive() for t in threads)

    assert len(results) == 40
    assert all(cut_short(r, 50) for r in results), [r.message for r in results]
    assert unraisable == []


def test_a_statement_is_bounded_by_the_time_left_and_none_begins_after_it() -> None:
    with hung_admin(timeout_s=30.0) as admin:
        admin.bound_by(Deadline.of_pass(time.monotonic(), 80))
        # ended by a timeout the deadline shortened, not by the admin's own 30 s
        with pytest.raises(PassTimeout, match="hung admin gave no answer in the time left"):
            admin.read_rows([HG.writer])
        with pytest.raises(PassTimeout, match=r"pass cut short after \d+ ms"):
            admin.execute("SELECT 1")  # not begun: the time is up


# ------------------------------------------------------------------ never in the middle


class SlowWrites(MemoryAdmin):
    """A ProxySQL whose every write takes `seconds` (a busy admin)."""

    def __init__(self, *args: Any, seconds: float) -> None:
        super().__init__(*args)
        self.seconds = seconds

    def execute(self, sql: str, params: Any = ()) -> list[tuple[Any, ...]]:
        if not sql.startswith("SELECT"):
            time.sleep(self.seconds)
        return super().execute(sql, params)


def short_runner(tmp_path: Path, admin: MemoryAdmin, prober: object, budget_ms: int) -> PassRunner:
    settings = galera_settings(tmp_path)
    settings = replace(settings, run=replace(settings.run, max_runtime_ms=budget_ms))
    return galera_runner(tmp_path, settings=settings, **ports(admin, prober))


def live_writers(admin: MemoryAdmin) -> set[Any]:
    return {
        r.node
        for r in admin.runtime.values()
        if r.hostgroup_id == HG.writer and r.status is ServerStatus.ONLINE
    }


def test_an_apply_begun_in_time_runs_to_its_load_past_the_deadline(tmp_path: Path) -> None:
    """Staging writes that together outlast the pass's time: none is cut in the middle and none
    is left staged without its LOAD; the pass says it ran over."""
    admin = SlowWrites([*templates(), *steady(N1)], seconds=0.04)
    runner = short_runner(tmp_path, admin, ProberSaying({N1}), budget_ms=100)
    runner = retuned(runner, retry_down=1)

    result = runner.run(Mode.APPLY)

    assert result.outcome is Outcome.CHANGED, result.message
    assert len(admin.writes()) * 0.04 > 0.1, "the writes outlast the pass's time"
    assert live_writers(admin) == {N2}
    assert admin.staging == admin.runtime, "everything staged was loaded"
    assert any("over run.max_runtime_ms (100)" in w for w in result.warnings), result.warnings


def test_a_state_file_write_is_never_cut_in_the_middle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A slow disk (fsync) that outlasts the pass's time: the counters are written whole."""
    real_fsync = os.fsync

    def slow_fsync(fd: int) -> None:
        time.sleep(0.15)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", slow_fsync)  # the state store's, as every module's
    admin = MemoryAdmin([*templates(), *steady(N1)])
    runner = short_runner(tmp_path, admin, HealthyProber(), budget_ms=100)
    cluster = runner.settings.clusters[0]

    result = runner.run(Mode.APPLY)

    assert result.outcome is Outcome.UNCHANGED, result.message
    memory, warning = runner.store.load(cluster.name)
    assert warning is None
    assert set(memory) == {r.node for r in steady(N1)}
    assert any("over run.max_runtime_ms (100)" in w for w in result.warnings), result.warnings


# ------------------------------------------------------------------ what a pass begins


class SlowRoundTrips(MemoryAdmin):
    """A ProxySQL whose answers were last measured at `round_trip_s`."""

    def __init__(self, *args: Any, round_trip_s: float) -> None:
        super().__init__(*args)
        self.round_trip_s = round_trip_s


def test_an_apply_without_time_for_its_round_trips_is_not_begun(tmp_path: Path) -> None:
    admin = SlowRoundTrips([*templates(), *steady(N1)], round_trip_s=1.0)
    runner = short_runner(tmp_path, admin, ProberSaying({N1}), budget_ms=1000)
    runner = retuned(runner, retry_down=1)

    result = runner.run(Mode.APPLY)

    assert cut_short(result, 1000), result.message
    assert (
        "statement(s) need about" in result.message and "1000.0 ms a round trip" in result.message
    )
    assert admin.writes() == [], "nothing staged"
    assert live_writers(admin) == {N1}


def test_a_pass_waits_for_the_write_gate_no_longer_than_its_time(tmp_path: Path) -> None:
    admin = MemoryAdmin([*templates(), *steady(N1)])
    runner = short_runner(tmp_path, admin, ProberSaying({N1}), budget_ms=100)
    runner = retuned(runner, retry_down=1)

    with runner.write_gate:  # another cluster's apply on the same ProxySQL
        result = runner.run(Mode.APPLY)

    assert cut_short(result, 100), result.message
    assert "another cluster's pass held this ProxySQL's write gate" in result.message
    assert admin.writes() == []


def test_a_pass_waits_for_another_processs_write_lock_no_longer_than_its_time(
    tmp_path: Path,
) -> None:
    """The other checker (or a command) applying to the same ProxySQL holds its write lock in
    the shared state dir: this pass's LOAD never falls between that one's set-aside of an
    operator's edit and its write-back. It waits what it has left, then is cut short."""
    admin = MemoryAdmin([*templates(), *steady(N1)])
    runner = retuned(short_runner(tmp_path, admin, ProberSaying({N1}), budget_ms=100), retry_down=1)
    proxysql = runner.settings.proxysql
    path = runner.store.write_lock_path(proxysql.host, proxysql.port)
    holding, release = threading.Event(), threading.Event()

    def other_process() -> None:
        # a lock of another open file: flock conflicts as it does between processes
        with write_lock(path, 1.0) as held:
            assert held
            holding.set()
            release.wait(10)

    other = threading.Thread(target=other_process)
    other.start()
    try:
        assert holding.wait(10)
        result = runner.run(Mode.APPLY)
    finally:
        release.set()
        other.join(10)
    assert cut_short(result, 100), result.message
    assert "another process held this ProxySQL's write lock" in result.message
    assert admin.writes() == []
    after = runner.run(Mode.APPLY)
    assert after.outcome is Outcome.CHANGED, after.message
    assert live_writers(admin) == {N2}


def test_the_write_lock_is_one_per_proxysql_whatever_the_checker(tmp_path: Path) -> None:
    from checker_core.core.schema import Checker
    from checker_core.edges.memory import StateStore

    galera = StateStore(tmp_path, Checker.GALERA).write_lock_path("127.0.0.1", 6032)
    gr = StateStore(tmp_path, Checker.GR).write_lock_path("127.0.0.1", 6032)
    other = StateStore(tmp_path, Checker.GR).write_lock_path("127.0.0.1", 6033)
    assert galera == gr != other
    with write_lock(galera, 0.0) as first:
        assert first
        with write_lock(gr, 0.05) as second:
            assert not second, "the other checker's process waits"
        with write_lock(other, 0.0) as third:
            assert third, "another ProxySQL's lock is its own"


def test_a_steady_pass_with_nothing_to_write_takes_no_write_lock(tmp_path: Path) -> None:
    admin = MemoryAdmin([*templates(), *steady(N1)])
    runner = short_runner(tmp_path, admin, HealthyProber(), budget_ms=100)
    proxysql = runner.settings.proxysql
    path = runner.store.write_lock_path(proxysql.host, proxysql.port)
    with write_lock(path, 0.0) as held:  # another process applies meanwhile
        assert held
        result = runner.run(Mode.APPLY)
    assert result.outcome is Outcome.UNCHANGED, result.message
