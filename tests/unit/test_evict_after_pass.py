"""A scheduler process's evictions after its pass: the pass line first, the pass's lock free
while they run, one process at a time under the cluster's eviction lock, nothing on a pass
that promises no change."""

from __future__ import annotations

import json
import math
import sys
import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from checker_core import oneshot
from checker_core.core.model import NodeAddress
from checker_core.core.schema import Checker
from checker_core.edges.lock import cluster_lock
from checker_core.edges.memory import StateStore
from checker_core.passes.fleet import Fleet
from checker_core.passes.plugin import (
    ActionsDone,
    AfterPass,
    CheckerKind,
    LaterActions,
)
from galera_checker.actions import GaleraActions
from galera_checker.node_calls import CAUSAL_READ, EVICT_SQL
from galera_checker.policy import GaleraPolicy
from tests.unit.config_cases import galera_runner
from tests.unit.fakes import HealthyProber, MemoryAdmin, ports
from tests.unit.galera_cases import N1, N2, N3, steady, templates
from tests.unit.test_unresponsive import Galera, after


def test_a_scheduler_pass_short_of_time_evicts_a_silent_member_after_it(tmp_path: Path) -> None:
    """With 0.29 s left (its probes waited for the frozen node) the pass neither waits nor
    defers: the eviction goes on once the pass is over, with the whole stall wait."""
    galera = Galera({N2: math.inf, N3: math.inf}, frozenset())
    actions = GaleraActions(galera.connect, galera.monotonic)
    passed = actions.after_pass(after(tmp_path, 1.5, budget_s=0.29))
    assert passed.failed == () and galera.log == [], "nothing asked within the pass"
    assert "eviction of 127.0.0.1:3311 after this pass" in passed.said[0], passed
    (later,) = actions.finish()
    assert later.done.evictions == later.done.unresponsive == 1, later
    assert later.done.said[0].startswith("evicted 127.0.0.1:3311 (gcomm uuid u-1) through")
    assert galera.waits == [1.0, 1.0], "the whole wait, whatever the pass had left"
    assert StateStore(tmp_path, Checker.GALERA).evicted("main") == {"u-1": str(N1)}


def test_the_pass_lock_is_free_while_the_eviction_runs(tmp_path: Path) -> None:
    """ProxySQL's next run of the cluster takes the pass's lock while this process's eviction
    waits out the stall; the eviction holds its own lock meanwhile."""
    galera = Galera({N2: math.inf, N3: math.inf}, frozenset())
    store = StateStore(tmp_path, Checker.GALERA)
    taken: list[tuple[bool, bool]] = []

    one_at_a_time = threading.Lock()  # the causal reads' threads: one flock try at a time

    def connect(account: object, node: NodeAddress, **timeouts: float) -> Any:
        with (
            one_at_a_time,
            cluster_lock(store.lock_path("main")) as pass_lock,
            cluster_lock(store.evict_lock_path("main")) as evict_lock,
        ):
            taken.append((pass_lock, evict_lock))
        return galera.connect(account, node, **timeouts)

    actions = GaleraActions(connect, galera.monotonic)
    actions.after_pass(after(tmp_path, 1.5, budget_s=0.29))
    (later,) = actions.finish()
    assert later.done.evictions == 1, later
    assert taken and all(t == (True, False) for t in taken), taken


def test_a_second_process_finds_the_eviction_lock_busy_and_says_so(tmp_path: Path) -> None:
    galera = Galera({N2: math.inf, N3: math.inf}, frozenset())
    actions = GaleraActions(galera.connect, galera.monotonic)
    actions.after_pass(after(tmp_path, 1.5, budget_s=0.29))
    store = StateStore(tmp_path, Checker.GALERA)
    with cluster_lock(store.evict_lock_path("main")) as held:
        assert held
        (later,) = actions.finish()
    assert later.done.evictions == 0 and later.done.said == (), later
    (line,) = later.done.failed
    assert line.startswith("eviction of 127.0.0.1:3311 skipped: another process holds"), line
    assert "evict.lock" in line and line.endswith("the next pass asks again")
    assert galera.log == [], "not a statement on the nodes"
    assert store.evicted("main") == {}


@pytest.mark.parametrize("why", ["dry-run", "standby", "paused"])
def test_a_pass_that_promises_no_change_leaves_nothing_for_after_it(
    tmp_path: Path, why: str
) -> None:
    """Dry runs, standbys and paused passes reach the actions as not acting (a paused or
    standby pass is held before them: tests/unit/test_failure_paths.py)."""
    galera = Galera({N2: math.inf, N3: math.inf}, frozenset())
    actions = GaleraActions(galera.connect, galera.monotonic)
    done = actions.after_pass(after(tmp_path, 1.5, acting=False, budget_s=0.29))
    assert done.said[0].startswith("would evict 127.0.0.1:3311"), done
    assert actions.finish() == ()
    assert galera.log == [] and not StateStore(tmp_path, Checker.GALERA).evicted("main")


class Spy:
    """Node actions that note how each pass reached them and what finish found."""

    def __init__(self, store: StateStore) -> None:
        self.store = store
        self.acting: list[bool] = []
        self.found: list[tuple[bool, int]] = []

    def after_pass(self, given: AfterPass) -> ActionsDone:
        self.acting.append(given.acting)
        return ActionsDone()

    def finish(self) -> tuple[LaterActions, ...]:
        with cluster_lock(self.store.lock_path("main")) as free:
            # the log goes to stderr (pytest's capture while the test runs)
            self.found.append((free, len(sys.stderr.getvalue().splitlines())))  # type: ignore[union-attr]
        return (LaterActions("main", ActionsDone(("evicted someone",), (), 1, 1), 5.0),)


@pytest.fixture
def scheduler_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Iterator[Any]:
    base = galera_runner(tmp_path)
    settings = replace(base.settings, run=replace(base.settings.run, log_format="json"))
    spy = Spy(base.store)
    admin = MemoryAdmin([*templates(), *steady(N1)])

    def fleet(given: Any, kind: CheckerKind, assumed: Any = None) -> Fleet:
        return Fleet(given, kind, **ports(admin, HealthyProber()))

    monkeypatch.setattr(oneshot, "new_fleet", fleet)
    kind = CheckerKind(Checker.GALERA, GaleraPolicy(), repr, new_actions=lambda: spy)
    yield settings, kind, spy, capsys, base.store


def test_the_pass_line_comes_first_and_the_pass_lock_is_released_before_finish(
    scheduler_run: Any,
) -> None:
    settings, kind, spy, capsys, _ = scheduler_run
    code = oneshot.run(settings, lambda: kind)
    lines = capsys.readouterr().err.splitlines()
    assert code == 0, lines
    events = [json.loads(line)["event"] for line in lines]
    assert events == ["pass", "evict"], events
    assert spy.found == [(True, 1)], "finish ran with the pass's lock free, after its line"
    evict = json.loads(lines[1])
    assert evict["cluster"] == "main" and evict["summary"] == "cluster main: evicted someone"


def test_a_paused_scheduler_pass_leaves_nothing_acting(scheduler_run: Any) -> None:
    settings, kind, spy, _, store = scheduler_run
    store.pause("main", "maintenance")
    oneshot.run(settings, lambda: kind)
    assert spy.acting == [], "a paused pass never reaches the node actions"


def test_the_sql_of_an_eviction_after_the_pass_is_the_usual(tmp_path: Path) -> None:
    galera = Galera({N2: math.inf, N3: math.inf}, frozenset())
    actions = GaleraActions(galera.connect, galera.monotonic)
    actions.after_pass(after(tmp_path, 1.5, budget_s=0.29))
    actions.finish()
    told = [node for node, sql, args in galera.log if sql == EVICT_SQL]
    assert sorted(told, key=str) == [N2, N3]
    assert sum(sql == CAUSAL_READ[1] for _, sql, _ in galera.log) == 2
