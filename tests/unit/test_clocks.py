"""Time is the monotonic clock: retry_down / retry_up count in time, drains and /health ages
ignore wall-clock steps, and a state file's times are used only within the boot that wrote them."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from checker_core.core.hysteresis import NodeMemory, settle, settles_at, span_needed
from checker_core.core.model import NodeAddress, ServerStatus
from checker_core.core.probes import ProbeFailure, ProbeResult
from checker_core.core.schema import Checker
from checker_core.core.settings import ClusterSettings
from checker_core.core.verdict import State, Verdict
from checker_core.edges import memory as memory_module
from checker_core.edges.memory import StateStore
from checker_core.edges.pending import PendingProbes
from checker_core.passes.result import Mode, Outcome
from checker_core.passes.runner import PassRunner
from checker_core.report import summary
from checker_core.service.board import Board
from tests.unit.config_cases import galera_runner, galera_settings
from tests.unit.fakes import HealthyProber, MemoryAdmin, ports, retuned
from tests.unit.galera_cases import HG, N1, N2, placed, probe_down, probe_ok, steady, templates
from tests.unit.test_failure_paths import DESYNCED, HeldAdmin

BAD = Verdict(N1, State.DOWN, "unreachable: refused")
GOOD = Verdict(N1, State.HEALTHY, "Synced")


class DownProber(HealthyProber):
    """Nodes in `down` refuse connections, `facts` changes what the others answer."""

    def __init__(self) -> None:
        self.down: set[NodeAddress] = set()
        self.facts: dict[NodeAddress, dict[str, str]] = {}

    def start(self, nodes: Sequence[NodeAddress], deadline: float) -> PendingProbes:
        pending = PendingProbes(tuple(nodes), 0.0)
        for node in nodes:
            found = (
                probe_down(node)
                if node in self.down
                else probe_ok(node, **self.facts.get(node, {}))
            )
            pending.results.put(found)
        return pending


class Relay(HealthyProber):
    """The runner's prober, passing its probes to `to`: the one a test puts there between
    passes (a runner keeps the prober it was built with)."""

    def __init__(self, first: DownProber) -> None:
        self.first = first
        self.to: HealthyProber = first

    def start(self, nodes: Sequence[NodeAddress], deadline: float) -> PendingProbes:
        return self.to.start(nodes, deadline)


def runner_at(
    tmp_path: Path, interval_ms: int, now: list[float], admin: MemoryAdmin, prober: HealthyProber
) -> PassRunner:
    settings = galera_settings(tmp_path)
    settings = replace(settings, run=replace(settings.run, interval_ms=interval_ms))
    return galera_runner(tmp_path, settings=settings, **ports(admin, prober, clock=lambda: now[0]))


def writers(admin: MemoryAdmin) -> set[NodeAddress]:
    return {
        r.node
        for r in admin.runtime.values()
        if r.hostgroup_id == HG.writer and r.status is ServerStatus.ONLINE
    }


# ------------------------------------------------------------------ retry_down, retry_up


def writer_down(
    tmp_path: Path, now: list[float], relay: Relay | None = None
) -> tuple[PassRunner, MemoryAdmin, DownProber, ClusterSettings]:
    """A runner at interval_ms 2000, retry_down 3, whose writer N1 refuses from now on; with
    `relay`, its probes go through it (to its DownProber, until the test changes `relay.to`)."""
    admin = MemoryAdmin([*templates(), *steady(N1)])
    prober = DownProber() if relay is None else relay.first
    runner = runner_at(tmp_path, 2000, now, admin, relay or prober)
    prober.down.add(N1)
    runner = retuned(runner, retry_down=3)
    return runner, admin, prober, runner.cluster


def test_passes_that_ask_again_sooner_do_not_spend_retry_down_faster(tmp_path: Path) -> None:
    """retry_down = 3 at interval_ms = 2000 tolerates a writer blip of up to 3 s, however many
    passes the daemon runs in it (its recheck runs them back to back)."""
    now = [100.0]
    runner, admin, _, _ = writer_down(tmp_path, now)
    for at in (0.0, 0.3, 0.65, 1.5):  # four passes in a 1.5 s blip
        now[0] = 100.0 + at
        held = runner.run(Mode.APPLY)
        assert writers(admin) == {N1}, summary(held)
    now[0] = 100.0 + 3.0  # three probes over two intervals (less half of one): it is down
    acted = runner.run(Mode.APPLY)
    assert acted.outcome is Outcome.CHANGED
    assert writers(admin) == {N2}, summary(acted)


def test_a_blip_shorter_than_the_span_leaves_the_writer_alone(tmp_path: Path) -> None:
    now = [100.0]
    runner, admin, prober, _ = writer_down(tmp_path, now)
    for at in (0.0, 0.2, 0.4, 0.6, 0.8, 1.0, 1.2, 1.4):
        now[0] = 100.0 + at
        runner.run(Mode.APPLY)
    prober.down.clear()  # back after 1.5 s
    now[0] = 101.6
    back = runner.run(Mode.APPLY)
    assert back.outcome is Outcome.UNCHANGED, summary(back)
    assert writers(admin) == {N1}


@pytest.mark.parametrize(
    ("retry", "interval_s", "needed"),
    [(0, 2.0, 0.0), (1, 2.0, 0.0), (2, 2.0, 1.0), (3, 2.0, 3.0), (5, 1.0, 3.5)],
)
def test_the_span_retry_asks_for(retry: int, interval_s: float, needed: float) -> None:
    assert span_needed(retry, interval_s) == needed


def test_retry_up_counts_in_time_too() -> None:
    memory = NodeMemory(routable=False)
    seen = []
    for at in (0.0, 0.1, 0.2, 2.9, 3.0):
        verdict, memory = settle(GOOD, memory, False, 3, 0, now=at, interval_s=2.0)
        seen.append(memory.routable)
        assert (verdict.state is State.RECOVERING) is (not memory.routable)
    assert seen == [False, False, False, False, True]


def test_hard_evidence_needs_no_time() -> None:
    hard = Verdict(N1, State.OFFLINE, "wsrep_cluster_status=non-Primary", hard=True)
    _, memory = settle(hard, None, True, 0, 3, now=5.0, interval_s=2.0)
    assert not memory.routable


def test_without_a_known_time_the_count_alone_decides() -> None:
    """A state file of an older version, or of another boot: the streak it kept still counts."""
    memory = NodeMemory(routable=True, bad_streak=2, bad_since=None)
    _, after = settle(BAD, memory, True, 0, 3, now=5.0, interval_s=2.0)
    assert not after.routable


def test_a_settled_node_keeps_its_memory_unchanged_pass_after_pass() -> None:
    memory = NodeMemory(routable=True)
    _, memory = settle(GOOD, memory, True, 2, 3, now=1.0, interval_s=2.0)
    _, again = settle(GOOD, memory, True, 2, 3, now=50.0, interval_s=2.0)
    _, thrice = settle(GOOD, again, True, 2, 3, now=90.0, interval_s=2.0)
    _, later = settle(GOOD, thrice, True, 2, 3, now=400.0, interval_s=2.0)
    assert later == thrice  # a steady state file is not rewritten every pass


@pytest.mark.parametrize(
    ("memory", "expected"),
    [
        (NodeMemory(routable=True), None),  # nothing held
        (NodeMemory(routable=True, bad_streak=1, bad_since=10.0), None),  # 2 probes to go
        (NodeMemory(routable=True, bad_streak=2, bad_since=10.0), 13.0),
        (NodeMemory(routable=True, bad_streak=3, bad_since=10.0), 13.0),  # only time to go
        (NodeMemory(routable=True, bad_streak=2, bad_since=None), None),  # the count decides
        (NodeMemory(routable=False, good_streak=1, good_since=20.0), 21.0),
        (NodeMemory(routable=False, bad_streak=3, bad_since=10.0), None),  # out already
    ],
)
def test_when_one_more_probe_can_move_a_held_node(
    memory: NodeMemory, expected: float | None
) -> None:
    assert settles_at(memory, 2, 3, interval_s=2.0) == expected


def test_the_pass_says_when_its_held_writer_can_be_moved(tmp_path: Path) -> None:
    now = [100.0]
    prober = DownProber()
    runner = runner_at(tmp_path, 2000, now, MemoryAdmin([*templates(), *steady(N1)]), prober)
    runner = retuned(runner, retry_down=2)
    prober.down.add(N1)
    first = runner.run(Mode.APPLY)
    assert first.decision is not None
    assert first.decision.due == {N1: 101.0}
    now[0] = 101.0
    second = runner.run(Mode.APPLY)
    assert second.outcome is Outcome.CHANGED, summary(second)


# ------------------------------------------------------------------ drains, /health


def test_a_drain_ends_after_drain_timeout_ms_when_the_wall_clock_steps_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An hour's backward step of the wall clock must not keep a demoted writer draining (two
    nodes taking writes) for an hour."""
    wall = [time.time()]
    monkeypatch.setattr(time, "time", lambda: wall[0])
    admin = HeldAdmin([*templates(), *steady(N1)])
    prober = DownProber()
    runner = galera_runner(tmp_path, **ports(admin, prober))
    runner = retuned(runner, drain_timeout_ms=50)
    prober.facts[N1] = DESYNCED
    runner.run(Mode.APPLY)
    assert admin.runtime[placed(N1, HG.writer).key].status is ServerStatus.OFFLINE_SOFT
    wall[0] -= 3600
    time.sleep(0.1)  # longer than drain_timeout_ms, on the monotonic clock
    done = runner.run(Mode.APPLY)
    assert placed(N1, HG.writer).key not in admin.runtime, summary(done)


def test_health_ages_are_monotonic(tmp_path: Path) -> None:
    runner = galera_runner(
        tmp_path, **ports(MemoryAdmin([*templates(), *steady(N1)]), HealthyProber())
    )
    ticks, wall = [500.0], [1_800_000_000.0]
    board = Board(runner.settings, clock=lambda: ticks[0], wall=lambda: wall[0])
    board.record([runner.run(Mode.APPLY)])
    assert board.health().healthy
    wall[0] += 7200  # NTP steps the clock two hours forward
    ticks[0] += 1
    assert board.health().healthy, board.health().reason
    ticks[0] += 3600  # an hour without a pass is stale whatever the wall clock says
    wall[0] -= 7200
    assert not board.health().healthy
    assert Board(runner.settings).clock is time.monotonic


# ------------------------------------------------------------------ the state file's clock


def test_times_of_another_boot_are_dropped_and_the_counts_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kept = NodeMemory(
        routable=True,
        bad_streak=2,
        bad_since=50.0,
        drain_since=40.0,
        queue_samples=((45.0, 10),),
    )
    monkeypatch.setattr(memory_module, "_boot", lambda: "boot-a")
    StateStore(tmp_path, Checker.GALERA).save("main", {N1: kept})
    assert StateStore(tmp_path, Checker.GALERA).load("main")[0] == {N1: kept}
    monkeypatch.setattr(memory_module, "_boot", lambda: "boot-b")
    loaded, warning = StateStore(tmp_path, Checker.GALERA).load("main")
    assert warning is None
    assert loaded == {N1: NodeMemory(routable=True, bad_streak=2)}


def test_a_state_file_of_wall_clock_times_is_read_as_counts(tmp_path: Path) -> None:
    (tmp_path / "galera.main.state.json").write_text(
        '{"version": 1, "nodes": {"10.0.0.1:3306": {"routable": true, "bad_streak": 1,'
        ' "good_streak": 0, "lagging": false, "drain_since": 1764000000.5,'
        ' "queue_samples": []}}}'
    )
    loaded, _ = StateStore(tmp_path, Checker.GALERA).load("main")
    assert loaded == {NodeAddress("10.0.0.1", 3306): NodeMemory(routable=True, bad_streak=1)}


def test_a_silent_node_a_pass_did_not_count_is_not_asked_again_at_once(tmp_path: Path) -> None:
    """Most nodes silent: their counters stand still, and a recheck time already past would
    start pass after pass."""
    now = [100.0]
    relay = Relay(DownProber())
    runner, admin, prober, _ = writer_down(tmp_path, now, relay)
    runner = retuned(runner, retry_down=2)
    runner.run(Mode.APPLY)  # N1's first bad probe: one more, a second later, moves it
    prober.down.clear()
    relay.to = SilentProber({N1, N2})
    now[0] = 110.0
    quiet = runner.run(Mode.APPLY)
    assert quiet.decision is not None
    assert N1 not in quiet.decision.due
    assert writers(admin) == {N1}


class SilentProber(HealthyProber):
    def __init__(self, silent: set[NodeAddress]) -> None:
        self.silent = silent

    def start(self, nodes: Sequence[NodeAddress], deadline: float) -> PendingProbes:
        pending = PendingProbes(tuple(nodes), 0.0)
        for node in nodes:
            quiet = ProbeResult(node, None, "timed out", 800.0, ProbeFailure.SILENT)
            pending.results.put(quiet if node in self.silent else probe_ok(node))
        return pending
