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
from tests.unit.fakes import ports
from tests.unit.galera_cases import N1, N2, N3, NODES, probe_ok, rows_of, steady

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
