"""A pass probes the last roster (the daemon's, or the nodes its state file remembers) while
ProxySQL's rows are being read, so a steady pass costs the longer of the two waits, not their
sum; the roster read in this pass still decides which nodes are judged (a node new to it is
probed late, one gone from it is neither judged nor waited for)."""

from __future__ import annotations

import time
from collections.abc import Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import pytest

from checker_core.core.model import ClusterRows, NodeAddress, ServerRow
from checker_core.core.probes import ProbeFn, ProbeResult
from checker_core.core.statements import ApplyResult
from checker_core.edges import native
from checker_core.edges.pending import PendingProbes
from checker_core.edges.proxysql import AdminClient
from checker_core.passes.result import Mode, Outcome
from checker_core.passes.runner import PassRunner
from tests.unit.config_cases import galera_runner
from tests.unit.fakes import MemoryAdmin, ports
from tests.unit.galera_cases import N1, N2, N3, NODES, probe_ok, rows_of, steady, templates

N4 = NodeAddress("127.0.0.1", 3314)


class RecordingAdmin:
    """The admin client as far as a pass uses it, writing what it is asked into `events`."""

    def __init__(self, rows: ClusterRows, events: list[str]) -> None:
        self.rows = rows
        self.events = events

    def read_rows(self, hostgroups: Iterable[int]) -> ClusterRows:
        self.events.append("read rows")
        return self.rows

    def connections_in_use(self, hostgroups: Iterable[int]) -> dict[tuple[int, NodeAddress], int]:
        return {}

    def execute(self, sql: str, params: Sequence[object] = ()) -> list[tuple[Any, ...]]:
        if sql != native.QUERY:  # ProxySQL's own managers: none, asked beside the peers
            self.events.append("admin query")
        return []  # a proxy without ProxySQL Cluster peers

    def apply(
        self, plan: Any, persist: bool, staging: Sequence[ServerRow], **flags: Any
    ) -> ApplyResult:
        changed = len(plan.changes)
        self.events.append(f"apply {changed}")
        return ApplyResult(staged=changed, loaded=plan.needs_load, saved=False)

    round_trip_s = 0.0

    def fresh_round_trip_s(self) -> float:
        return self.round_trip_s

    def bound_by(self, deadline: object) -> None:
        pass  # instant: no deadline to keep

    def close(self) -> None:
        pass


class RecordingProber:
    """Answers every probe at once with a healthy node, writing what was started into `events`."""

    def __init__(self, events: list[str]) -> None:
        self.events = events

    def start(self, nodes: Sequence[NodeAddress], deadline: float) -> PendingProbes:
        pending = PendingProbes(tuple(nodes), 0.0)
        if nodes:
            self.events.append("probe " + " ".join(str(n.port) for n in nodes))
        for node in nodes:
            pending.results.put(probe_ok(node))
        return pending

    def probe_all(
        self, nodes: Sequence[NodeAddress], deadline: float
    ) -> dict[NodeAddress, ProbeResult]:
        return self.start(nodes, deadline).collect(deadline)

    def close(self) -> None:
        pass


def recording_runner(
    tmp_path: Path, persistent: bool, rows: ClusterRows, cluster: str = "off"
) -> tuple[PassRunner, RecordingAdmin, list[str]]:
    events: list[str] = []
    admin = RecordingAdmin(rows, events)
    runner = galera_runner(
        tmp_path,
        persistent,
        proxysql=f'cluster = "{cluster}"',
        **ports(cast(AdminClient, admin), RecordingProber(events)),
    )
    return runner, admin, events


def one_pass(runner: PassRunner) -> tuple[Outcome, Mapping[NodeAddress, ProbeResult]]:
    result = runner.run(Mode.APPLY)
    return result.outcome, result.probes


ALL = "probe 3311 3312 3313"


@pytest.mark.parametrize("persistent", [True, False], ids=["daemon", "scheduler"])
def test_a_pass_probes_the_last_roster_before_reading_the_rows(
    tmp_path: Path, persistent: bool
) -> None:
    """The daemon's last roster, or the nodes a scheduler pass's state file remembers."""
    runner, _, events = recording_runner(tmp_path, persistent, rows_of(steady(N1)))
    assert one_pass(runner)[0] is Outcome.UNCHANGED
    assert events == ["read rows", ALL, "apply 0"], "no roster known yet: read first"
    for _ in range(2):
        if not persistent:  # each scheduler pass is a new process
            runner, _, events = recording_runner(tmp_path, persistent, rows_of(steady(N1)))
        events.clear()
        outcome, probes = one_pass(runner)
        assert outcome is Outcome.UNCHANGED
        assert events == [ALL, "read rows", "apply 0"]
        assert set(probes) == set(NODES)


def test_a_node_new_to_the_roster_is_probed_late_and_one_gone_is_not_judged(
    tmp_path: Path,
) -> None:
    daemon, admin, events = recording_runner(tmp_path, True, rows_of(steady(N1)))
    one_pass(daemon)
    events.clear()
    admin.rows = rows_of(
        [r for r in steady(N1) if r.node != N3], weights={N1: 1000, N2: 500, N4: 10}
    )

    outcome, probes = one_pass(daemon)

    assert outcome is Outcome.CHANGED
    assert events[:3] == [ALL, "read rows", "probe 3314"]
    assert set(probes) == {N1, N2, N4}
    events.clear()
    one_pass(daemon)
    assert events[:2] == ["probe 3311 3312 3314", "read rows"], "the new roster is remembered"


def test_a_scheduler_pass_judges_the_roster_it_read_not_the_one_remembered(
    tmp_path: Path,
) -> None:
    first, _, _ = recording_runner(tmp_path, False, rows_of(steady(N1)))
    one_pass(first)
    rows = rows_of([r for r in steady(N1) if r.node != N3], weights={N1: 1000, N2: 500, N4: 10})
    later, _, events = recording_runner(tmp_path, False, rows)

    outcome, probes = one_pass(later)

    assert outcome is Outcome.CHANGED
    assert events[:3] == [ALL, "read rows", "probe 3314"]
    assert set(probes) == {N1, N2, N4}


def test_a_node_gone_from_the_roster_is_not_waited_for() -> None:
    pending = PendingProbes((N1, N2, N3), 0.0)
    pending.results.put(probe_ok(N1))
    pending.results.put(probe_ok(N2))  # N3 hangs: it never answers

    found = pending.collect(time.monotonic() + 60, only=(N1, N2))

    assert set(found) == {N1, N2}
    assert all(r.answered for r in found.values())


def test_a_silent_node_still_in_the_roster_is_waited_for_until_the_deadline() -> None:
    pending = PendingProbes((N1, N2), time.monotonic())
    pending.results.put(probe_ok(N1))
    pending.flights[N2].begun = pending.started  # its probe went out at once, and hangs

    found = pending.collect(time.monotonic() + 0.05, only=(N1, N2, N4))

    assert set(found) == {N1, N2}, "only nodes this batch probed"
    assert found[N1].answered
    assert not found[N2].answered
    assert "no answer within the pass deadline" in (found[N2].error or "")


def test_the_proxy_is_asked_about_its_peers_while_the_probes_are_under_way(
    tmp_path: Path,
) -> None:
    first, _, _ = recording_runner(tmp_path, False, rows_of(steady(N1)), cluster="auto")
    one_pass(first)
    one_shot, _, events = recording_runner(tmp_path, False, rows_of(steady(N1)), cluster="auto")
    start = one_shot.prober.start

    class RecordedPending(PendingProbes):
        def collect(
            self,
            deadline: float,
            only: Collection[NodeAddress] | None = None,
            enough: Mapping[NodeAddress, float] | None = None,
        ) -> dict[NodeAddress, ProbeResult]:
            events.append("probes collected")
            return super().collect(deadline, only, enough)

    def recorded_start(
        nodes: Sequence[NodeAddress], deadline: float, probe: ProbeFn | None = None
    ) -> PendingProbes:
        pending = start(nodes, deadline)  # the recording prober has no other question
        recorded = RecordedPending(pending.nodes, pending.started)
        recorded.results = pending.results
        return recorded

    one_shot.prober.start = recorded_start  # type: ignore[method-assign]

    assert one_pass(one_shot)[0] is Outcome.UNCHANGED
    assert events[:4] == [ALL, "read rows", "admin query", "probes collected"]


class SlowRowsAdmin(RecordingAdmin):
    """ProxySQL's rows take `seconds` of the pass's clock to read (a busy proxy, or a daemon
    short of CPU)."""

    def __init__(self, rows: ClusterRows, events: list[str], clock: list[float]) -> None:
        super().__init__(rows, events)
        self.clock = clock
        self.seconds = 0.0

    def read_rows(self, hostgroups: Iterable[int]) -> ClusterRows:
        self.clock[0] += self.seconds
        return super().read_rows(hostgroups)


@pytest.mark.parametrize("persistent", [True, False], ids=["daemon", "scheduler"])
def test_a_slow_read_fails_no_pass_whose_probes_began_with_it(
    tmp_path: Path, persistent: bool
) -> None:
    """Reading ProxySQL took most of the probes' share: the probes that began with the pass had
    it all the same, so the pass goes on; a node new to the roster, probed only after the read,
    would have had no time, and that pass stops before judging anyone."""
    events: list[str] = []
    clock = [100.0]
    admin = SlowRowsAdmin(rows_of(steady(N1)), events, clock)
    runner = galera_runner(
        tmp_path,
        persistent,
        **ports(cast(AdminClient, admin), RecordingProber(events), monotonic=lambda: clock[0]),
    )
    budget_s = runner.settings.run.probe_budget_ms / 1000
    try:
        assert runner.run(Mode.APPLY).outcome is Outcome.UNCHANGED  # the roster learnt
        admin.seconds = budget_s * 0.9
        assert runner.run(Mode.APPLY).outcome is Outcome.UNCHANGED
        # a node new to the roster (its template row): probed only once the rows are read
        admin.rows = rows_of(steady(N1), weights={N1: 1000, N2: 500, N3: 100, N4: 10})
        result = runner.run(Mode.APPLY)
        assert result.outcome is Outcome.FAILED
        assert "to probe; nothing changed" in result.message
    finally:
        runner.close()


class CountedAdmin(MemoryAdmin):
    """An admin in memory whose rows take `seconds` of the pass's clock, and whose last
    statement may be left unanswered (`in_step` False), counting its closes."""

    def __init__(self, clock: list[float]) -> None:
        super().__init__([*templates(), *steady(N1)])
        self.clock = clock
        self.seconds = 0.0
        self.leave_out_of_step = False
        self.closes = 0

    def read_rows(self, hostgroups: Iterable[int]) -> ClusterRows:
        self.clock[0] += self.seconds
        if self.leave_out_of_step:
            self.in_step = False
        return super().read_rows(hostgroups)

    def close(self) -> None:
        self.closes += 1


def test_a_pass_cut_short_between_statements_keeps_its_connection(tmp_path: Path) -> None:
    clock = [100.0]
    admin = CountedAdmin(clock)
    connects: list[CountedAdmin] = []

    def connect() -> AdminClient:
        connects.append(admin)
        return admin

    runner = galera_runner(
        tmp_path,
        True,
        **ports(connect, RecordingProber([]), monotonic=lambda: clock[0]),
    )
    try:
        assert runner.run(Mode.APPLY).outcome is Outcome.UNCHANGED
        admin.seconds = runner.settings.run.max_runtime_ms / 1000 * 1.1
        cut = runner.run(Mode.APPLY)
        assert cut.outcome is Outcome.FAILED and "cut short" in cut.message
        assert (admin.closes, len(connects)) == (0, 1), "its statements were all answered"
        admin.leave_out_of_step = True
        assert runner.run(Mode.APPLY).outcome is Outcome.FAILED
        assert admin.closes == 1, "a statement left unanswered: the connection goes"
        admin.seconds, admin.leave_out_of_step, admin.in_step = 0.0, False, True
        assert runner.run(Mode.APPLY).outcome is Outcome.UNCHANGED
        assert len(connects) == 2
    finally:
        runner.close()


class Asked:
    """The exchange of a pass's early probes, as far as letting them go uses it."""

    def __init__(self, busy: bool) -> None:
        self.busy = busy
        self.calls: list[str] = []

    def step(self, timeout_s: float) -> list[ProbeResult]:
        self.calls.append(f"step {timeout_s}")
        return []

    def abandon(self) -> tuple[NodeAddress, ...]:
        self.calls.append("abandon")
        self.busy = False
        return ()


@pytest.mark.parametrize(("busy", "calls"), [(True, ["step 0", "abandon"]), (False, [])])
def test_probes_a_pass_never_collected_are_read_then_let_go(busy: bool, calls: list[str]) -> None:
    """Answers already in are read (their connections go back to the prober) before the
    questions still out are abandoned; probes all collected leave nothing to do."""
    pending = PendingProbes(NODES, 0.0)
    exchange = Asked(busy)
    pending.exchange = cast(Any, exchange)
    pending.release()
    assert exchange.calls == calls
