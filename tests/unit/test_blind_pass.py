"""A pass that could not see must not act (issue: probe timeouts on every node emptied the writer
hostgroup). Silence from every node, or from most of them, is the checker's own blindness: the
layout is kept, nothing is loaded, no hysteresis counter moves."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import pymysql
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from checker_core.core.hysteresis import NodeMemory
from checker_core.core.model import ClusterRows, NodeAddress, ServerRow, ServerStatus
from checker_core.core.probes import ProbeFailure, ProbeResult, Sight, sight_of
from checker_core.core.verdict import State
from checker_core.edges.failures import failure_of
from checker_core.edges.proxysql import AdminClient
from checker_core.passes.result import Mode, Outcome
from checker_core.passes.runner import PassRunner
from checker_core.report import render, summary
from tests.unit.config_cases import galera_runner
from tests.unit.fakes import ports
from tests.unit.galera_cases import (
    HG,
    N1,
    N2,
    N3,
    NODES,
    hostgroup_members,
    placed,
    probe_ok,
    rows_of,
    run,
    steady,
)

ROUTED = (HG.writer, HG.backup_writer, HG.reader)


def failed(node: NodeAddress, failure: ProbeFailure) -> ProbeResult:
    return ProbeResult(node, None, f"no answer ({failure.label})", 55.0, failure)


def silent(node: NodeAddress) -> ProbeResult:
    return failed(node, ProbeFailure.SILENT)


def routed(rows: Iterable[ServerRow]) -> set[tuple[int, NodeAddress]]:
    return {
        (r.hostgroup_id, r.node)
        for r in rows
        if r.hostgroup_id in ROUTED and r.status is ServerStatus.ONLINE
    }


layouts = st.sampled_from(
    [
        steady(N1),
        steady(N2),
        [placed(N1, HG.writer), placed(N2, HG.reader), placed(N3, HG.offline)],
        [placed(N2, HG.writer), placed(N1, HG.offline), placed(N3, HG.reader)],
        [],  # nothing placed yet: still nothing to load without an answer
    ]
)
memories = st.dictionaries(
    st.sampled_from(NODES),
    st.builds(
        NodeMemory,
        routable=st.booleans(),
        good_streak=st.integers(0, 3),
        bad_streak=st.integers(0, 3),
    ),
)


@settings(max_examples=200, deadline=None)
@given(
    live=layouts,
    failures=st.lists(st.sampled_from(list(ProbeFailure)), min_size=3, max_size=3),
    memory=memories,
    retry_down=st.integers(0, 2),
    mode=st.integers(0, 2),
)
def test_a_pass_where_every_probe_failed_changes_nothing_and_counts_nothing(
    live: list[ServerRow],
    failures: list[ProbeFailure],
    memory: dict[NodeAddress, NodeMemory],
    retry_down: int,
    mode: int,
) -> None:
    probes = {n: failed(n, f) for n, f in zip(NODES, failures, strict=True)}
    decision = run(live, probes, memory, retry_down=retry_down, writer_is_also_reader=mode)
    assert decision.blind
    assert decision.plan.changes == ()
    assert not decision.plan.needs_load, "a pass that heard no node never LOADs"
    assert routed(decision.plan.desired) == routed(live), "no writer, reader or backup removed"
    assert decision.memory == memory, "no hysteresis counter moves on a blind pass"
    assert {v.state for v in decision.verdicts.values()} == {State.UNSEEN}
    assert decision.sight.reason.startswith("blind: no node answered within 55 ms")


@settings(max_examples=100, deadline=None)
@given(live=layouts, memory=memories, retry_down=st.integers(0, 2))
def test_every_probe_a_timeout_never_removes_anyone(
    live: list[ServerRow], memory: dict[NodeAddress, NodeMemory], retry_down: int
) -> None:
    decision = run(live, {n: silent(n) for n in NODES}, memory, retry_down=retry_down)
    for hostgroup in ROUTED:
        before = {r.node for r in live if r.hostgroup_id == hostgroup}
        assert before <= hostgroup_members(decision, hostgroup)


def test_most_nodes_silent_keep_their_place_and_their_counters() -> None:
    remembered = {N1: NodeMemory(routable=True, bad_streak=1)}
    probes = {N1: silent(N1), N2: silent(N2)}  # N3 answers
    decision = run(steady(N1), probes, remembered, retry_down=0)
    assert decision.sight.sight is Sight.PARTIAL
    assert not decision.blind
    assert decision.verdicts[N1].state is State.UNSEEN
    assert decision.verdicts[N3].state is State.HEALTHY
    assert hostgroup_members(decision, HG.writer) == {N1}, "the writer is not taken out"
    assert decision.plan.changes == ()
    assert decision.memory[N1] == remembered[N1]
    assert "partly blind: 2 of 3 nodes silent" in decision.sight.reason


def test_a_silent_writer_alone_is_replaced_as_before() -> None:
    decision = run(steady(N1), {N1: silent(N1)}, retry_down=0)
    assert decision.sight.sight is Sight.CLEAR
    assert decision.verdicts[N1].state is State.DOWN
    assert hostgroup_members(decision, HG.writer) == {N2}


def test_a_silent_writer_alone_waits_for_retry_down() -> None:
    decision = run(steady(N1), {N1: silent(N1)}, retry_down=2)
    assert decision.verdicts[N1].state is State.SUSPECT
    assert hostgroup_members(decision, HG.writer) == {N1}


@pytest.mark.parametrize(
    ("failures", "sight"),
    [
        ((ProbeFailure.REFUSED, ProbeFailure.REFUSED, None), Sight.CLEAR),  # answers, not silence
        ((ProbeFailure.SILENT, None, None), Sight.CLEAR),
        ((ProbeFailure.SILENT, ProbeFailure.SILENT, None), Sight.PARTIAL),
        ((ProbeFailure.SILENT, ProbeFailure.REFUSED, ProbeFailure.ERROR), Sight.BLIND),
        ((ProbeFailure.SILENT,) * 3, Sight.BLIND),
    ],
)
def test_sight_of_a_pass(failures: Sequence[ProbeFailure | None], sight: Sight) -> None:
    probes = {
        n: probe_ok(n) if f is None else failed(n, f) for n, f in zip(NODES, failures, strict=True)
    }
    assert sight_of(probes, NODES).sight is sight


# ------------------------------------------------------------------- the runner: no LOAD at all


class FakeAdmin:
    """The admin client as far as a pass uses it; applying is what must not happen."""

    def __init__(self, rows: ClusterRows) -> None:
        self.rows = rows
        self.applied: list[object] = []

    def read_rows(self, hostgroups: Iterable[int]) -> ClusterRows:
        return self.rows

    def connections_in_use(self, hostgroup: int) -> dict[NodeAddress, int]:
        return {}

    def execute(self, sql: str, params: Sequence[object] = ()) -> list[tuple[Any, ...]]:
        return []  # a proxy without ProxySQL Cluster peers

    def apply(self, *args: Any) -> Any:
        self.applied.append(args)
        raise AssertionError("a blind pass applied a plan")

    round_trip_s = 0.0

    def fresh_round_trip_s(self) -> float:
        return self.round_trip_s

    def bound_by(self, deadline: object) -> None:
        pass  # instant: no deadline to keep

    def close(self) -> None:
        pass


class FakeProber:
    def __init__(self, results: Mapping[NodeAddress, ProbeResult]) -> None:
        self.results = results

    def probe_all(
        self, nodes: Sequence[NodeAddress], deadline: float
    ) -> dict[NodeAddress, ProbeResult]:
        return {n: self.results[n] for n in nodes}

    def close(self) -> None:
        pass


def blind_runner(tmp_path: Path) -> tuple[PassRunner, FakeAdmin]:
    admin = FakeAdmin(rows_of(steady(N1)))
    prober = FakeProber({n: silent(n) for n in NODES})
    runner = galera_runner(tmp_path, **ports(cast(AdminClient, admin), prober))
    return runner, admin


def test_the_runner_loads_nothing_and_saves_no_counter_on_a_blind_pass(tmp_path: Path) -> None:
    runner, admin = blind_runner(tmp_path)
    result = runner.run(Mode.APPLY)

    assert result.outcome is Outcome.BLIND
    assert result.outcome.exit_code == 0
    assert admin.applied == []
    assert result.statements == ()
    assert not runner.store.state_path("main").exists(), "no counter saved"
    assert "blind: no node answered within 55 ms (3 silent); layout kept" in summary(result)


def test_a_blind_dry_run_says_why_it_has_no_sql(tmp_path: Path) -> None:
    runner, _ = blind_runner(tmp_path)
    result = runner.run(Mode.DRY_RUN)
    assert result.outcome is Outcome.BLIND
    text = render(result, HG, with_sql=True)
    assert "SQL: none (no node answered: a blind pass changes nothing)" in text
    assert "unseen" in text


def _wrapped(inner: BaseException, outer: BaseException) -> BaseException:
    """`outer` raised while handling `inner`, as PyMySQL raises its OperationalError."""
    try:
        try:
            raise inner
        except BaseException:
            raise outer  # noqa: B904  # the implicit context is the point
    except BaseException as caught:
        return caught


@pytest.mark.parametrize(
    ("exc", "failure"),
    [
        (TimeoutError("timed out"), ProbeFailure.SILENT),
        (ConnectionRefusedError(111, "Connection refused"), ProbeFailure.REFUSED),
        (
            _wrapped(TimeoutError(), pymysql.err.OperationalError(2003, "Can't connect")),
            ProbeFailure.SILENT,
        ),
        (
            _wrapped(
                ConnectionRefusedError(111, "refused"),
                pymysql.err.OperationalError(2003, "Can't connect"),
            ),
            ProbeFailure.REFUSED,
        ),
        (
            pymysql.err.OperationalError(2013, "Lost connection to MySQL server (timed out)"),
            ProbeFailure.SILENT,
        ),
        (
            pymysql.err.OperationalError(1045, "Access denied for user 'monitor'"),
            ProbeFailure.ERROR,
        ),
        (pymysql.err.OperationalError(1040, "Too many connections"), ProbeFailure.ERROR),
    ],
)
def test_how_a_probe_failed_is_read_from_the_driver_and_the_os(
    exc: BaseException, failure: ProbeFailure
) -> None:
    assert failure_of(exc) is failure
