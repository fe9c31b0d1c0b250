"""Runtime is ProxySQL's state, mysql_servers is intent.

A status only runtime shows (ProxySQL's shun, a removed server it keeps OFFLINE_HARD while
clients hold connections) is never staged, never bars a node and never makes a pass refuse;
the statements that stage a plan never hold more ONLINE writers than before or after them; the
templates a LOAD carries are the ones the pass read; a SAVE that failed is retried.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from checker_core.core.decide import view_of
from checker_core.core.hysteresis import NodeMemory
from checker_core.core.model import ClusterRows, NodeAddress, ServerRow, ServerStatus, sort_rows
from checker_core.core.roster import roster_templates
from checker_core.core.staging import set_aside
from checker_core.core.statements import LOAD_SERVERS, SAVE_SERVERS, Statement, staging_statements
from checker_core.edges.admin_errors import AdminUnreachable, ApplyFailed
from checker_core.edges.deadline import PassTimeout
from checker_core.passes.result import Mode, Outcome
from checker_core.passes.runner import PassRunner
from checker_core.report import summary
from galera_checker.policy import GaleraPolicy
from tests.unit.config_cases import galera_runner
from tests.unit.fakes import HealthyProber, MemoryAdmin, ProberSaying, ports
from tests.unit.galera_cases import (
    HG,
    N1,
    N2,
    N3,
    WEIGHTS,
    cluster_settings,
    placed,
    probe_down,
    probe_ok,
    steady,
    templates,
)
from tests.unit.test_galera_invariants import cluster_states, decide_state, online

N4 = NodeAddress("127.0.0.1", 3314)
HARD = ServerStatus.OFFLINE_HARD


def decide_rows(
    runtime: Iterable[ServerRow],
    staging: Iterable[ServerRow],
    probes: dict[NodeAddress, Any] | None = None,
    memory: dict[NodeAddress, NodeMemory] | None = None,
    **changes: object,
) -> Any:
    from checker_core.core.decide import decide

    cluster = cluster_settings(**changes)
    all_probes = {n: probe_ok(n) for n in WEIGHTS}
    all_probes.update(probes or {})
    rows = ClusterRows(sort_rows(runtime), sort_rows(staging))
    return decide(
        GaleraPolicy(),
        view_of(rows, cluster),
        all_probes,
        memory=memory or {},
        cluster=cluster,
        in_use={},
        now=1000.0,
    )


# ------------------------------------------------------------------ one rule, property


@st.composite
def runtime_and_staging(draw: st.DrawFn) -> tuple[dict[str, object], list[ServerRow]]:
    """A cluster state whose runtime adds ProxySQL's own states to what is staged."""
    state = draw(cluster_states())
    staged = state["live"]
    assert isinstance(staged, list)
    staged = [r for r in staged if r.status is not ServerStatus.SHUNNED]
    runtime = list(staged)
    for row in staged:
        if row.status is ServerStatus.ONLINE and draw(st.booleans()):
            runtime[runtime.index(row)] = row.moved(row.hostgroup_id, ServerStatus.SHUNNED)
    for node in draw(st.lists(st.sampled_from([N1, N2, N3, N4]), max_size=3, unique=True)):
        hostgroup = draw(st.sampled_from(HG.managed))
        leftover = ServerRow(hostgroup, node.host, node.port, status=HARD)
        if leftover.key not in {r.key for r in runtime}:
            runtime.append(leftover)
    return state, runtime


@settings(max_examples=300, deadline=None)
@given(runtime_and_staging())
def test_no_plan_stages_a_status_that_came_from_runtime_only(
    case: tuple[dict[str, object], list[ServerRow]],
) -> None:
    state, runtime = case
    staged = state["live"]
    assert isinstance(staged, list)
    staged = [r for r in staged if r.status is not ServerStatus.SHUNNED]
    args = dict(state)
    args.pop("live")
    weights = args.pop("weights")
    probes = args.pop("probes")
    assert isinstance(weights, dict) and isinstance(probes, dict)
    cluster = cluster_settings(**args)
    from checker_core.core.decide import decide

    rows = ClusterRows(
        sort_rows([*_templates(weights), *runtime]), sort_rows([*_templates(weights), *staged])
    )
    decision = decide(
        GaleraPolicy(),
        view_of(rows, cluster),
        probes,
        memory={},
        cluster=cluster,
        in_use={},
        now=1000.0,
    )
    staged_hard = {r for r in staged if r.status is HARD}
    for row in decision.plan.desired:
        assert row.status is not ServerStatus.SHUNNED, row
        if row.status is HARD:
            assert row in staged_hard, f"{row.describe()} came from runtime only"
    # what a LOAD by another cluster's pass stages for these rows while it sets them aside
    for row in set_aside(rows, HG.templates).live:
        assert row.status is not ServerStatus.SHUNNED
        assert row.status is not HARD or row in staged_hard


def _templates(weights: dict[NodeAddress, int]) -> list[ServerRow]:
    return templates(weights)


# ------------------------------------------------------------------ statement order


def online_writers(rows: Iterable[ServerRow]) -> int:
    return sum(1 for r in rows if r.hostgroup_id == HG.writer and r.status is ServerStatus.ONLINE)


def replay(staging: Sequence[ServerRow], statements: Iterable[Statement]) -> list[int]:
    """ONLINE writers staged after each statement, as ProxySQL's mysql_servers would hold."""
    rows = {r.key: r for r in staging}
    counts = [online_writers(rows.values())]
    for statement in statements:
        if statement.sql.startswith("DELETE"):
            del rows[statement.params]  # type: ignore[arg-type]
        else:
            row = ServerRow.from_admin(statement.params)
            rows[row.key] = row
        counts.append(online_writers(rows.values()))
    return counts


def test_the_old_writer_is_demoted_before_a_lighter_named_one_is_added() -> None:
    """The new writer sorts first (3311 < 3312): staged in key order it would be ONLINE beside
    the old writer until the next statement."""
    before = [placed(N2, HG.writer), placed(N1, HG.backup_writer)]
    after = [placed(N1, HG.writer), placed(N2, HG.writer, ServerStatus.OFFLINE_SOFT)]
    statements = staging_statements(HG.managed, before, after, writer=HG.writer)
    assert max(replay(before, statements)) == 1
    assert replay(before, statements)[-1] == 1


@settings(max_examples=300, deadline=None)
@given(cluster_states())
def test_every_prefix_of_the_statements_holds_no_more_online_writers(
    state: dict[str, object],
) -> None:
    staged = [r for r in state["live"] if r.status is not ServerStatus.SHUNNED]  # type: ignore[attr-defined]
    decision = decide_state(state, staged)
    statements = staging_statements(HG.managed, staged, decision.plan.desired, writer=HG.writer)
    counts = replay(staged, statements)
    max_writers = state["max_writers"]
    assert isinstance(max_writers, int)
    assert counts[-1] == len(online(decision, HG.writer))
    assert max(counts) <= max(max_writers, counts[0]), counts


# ------------------------------------------------------------------ one case per relative


def test_a_writer_removed_while_held_is_not_staged_and_not_barred() -> None:
    """The checker removed writer N1 while a client held it: ProxySQL shows (100, N1,
    OFFLINE_HARD) in runtime. N1 is healthy again and N2, the writer, dies: N1, the heaviest,
    writes again."""
    live = [placed(N2, HG.writer), placed(N3, HG.backup_writer), placed(N3, HG.reader)]
    live += [placed(N1, HG.offline)]
    leftover = placed(N1, HG.writer, HARD)
    runtime = [*templates(), *live, leftover]
    staging = [*templates(), *live]
    decision = decide_rows(runtime, staging, {N2: probe_down(N2)})
    assert decision.assignment.writers == (N1,)
    assert not [r for r in decision.plan.desired if r.status is HARD]
    assert decision.plan.changes, "N1 back in the writer hostgroup is a change to load"


def test_a_leftover_alone_is_no_change_and_no_load() -> None:
    """N1 is down and parked; ProxySQL still keeps its old reader row OFFLINE_HARD for a client:
    a second pass has nothing to do."""
    first = decide_rows(
        [*templates(), *steady(N1)], [*templates(), *steady(N1)], {N1: probe_down(N1)}
    )
    settled = [*templates(), *first.plan.desired]
    leftover = placed(N1, HG.reader, HARD)
    assert leftover.key not in {r.key for r in settled}
    second = decide_rows([*settled, leftover], settled, {N1: probe_down(N1)})
    assert not second.plan.needs_load, [c.describe() for c in second.plan.changes]
    assert leftover not in second.plan.desired
    assert second.plan.desired == first.plan.desired


def test_a_decommissioned_node_clients_still_hold_does_not_stop_the_pass() -> None:
    """N4 was the writer; an operator deleted its template and live rows and LOADed while a
    client held a connection: only ProxySQL's runtime leftover is left."""
    runtime = [*templates(), placed(N2, HG.backup_writer), placed(N3, HG.reader)]
    runtime.append(ServerRow(HG.writer, N4.host, N4.port, status=HARD))
    decision = decide_rows(runtime, [r for r in runtime if r.status is not HARD])
    assert decision.assignment.writers == (N1,)
    assert all(r.node != N4 for r in decision.plan.desired)


def test_adoption_takes_no_node_that_is_only_offline_hard() -> None:
    live = [placed(N1, HG.writer), placed(N2, HG.reader)]
    runtime = [*live, ServerRow(HG.writer, N4.host, N4.port, status=HARD)]
    template_rows, adopted = roster_templates(ClusterRows(sort_rows(runtime), sort_rows(live)), HG)
    assert {r.node for r in adopted} == {N1, N2}
    assert template_rows == adopted


def test_adoption_keeps_the_templates_an_operator_staged() -> None:
    live = [placed(N1, HG.writer), placed(N2, HG.reader)]
    staged_roster = [
        ServerRow(HG.config_writer, N1.host, N1.port, weight=700),
        ServerRow(HG.config_reader, N3.host, N3.port, weight=50),
    ]
    rows = ClusterRows(sort_rows(live), sort_rows([*live, *staged_roster]))
    template_rows, adopted = roster_templates(rows, HG)
    assert adopted == ()
    assert template_rows == sort_rows(staged_roster)


def test_an_adoption_that_died_half_way_is_completed() -> None:
    live = [placed(N1, HG.writer), placed(N2, HG.reader)]
    _, full = roster_templates(ClusterRows(sort_rows(live), sort_rows(live)), HG)
    half = full[: len(full) // 2]
    template_rows, adopted = roster_templates(
        ClusterRows(sort_rows(live), sort_rows([*live, *half])), HG
    )
    assert adopted == full == template_rows


def test_a_held_writer_the_operator_set_offline_hard_is_not_kept() -> None:
    """N1 is suspect (retry_down tolerates one bad probe) and the operator has set it
    OFFLINE_HARD in mysql_servers: a healthy node writes, the operator's row stays."""
    hard = placed(N1, HG.writer, HARD)
    runtime = [*templates(), *steady(N1)]
    staging = [*templates(), *[r for r in steady(N1) if r.key != hard.key], hard]
    decision = decide_rows(runtime, staging, {N1: probe_down(N1)}, retry_down=2)
    assert decision.assignment.writers == (N2,)
    assert hard in decision.plan.desired
    assert online_writers(decision.plan.desired) == 1


# ------------------------------------------------------------------ the admin side


def test_template_rows_written_during_the_pass_are_not_loaded() -> None:
    admin = MemoryAdmin([*templates(), *steady(N2)])
    rows = admin.read_rows(HG.all)
    decision = decide_rows(rows.runtime, rows.staging, {N2: probe_down(N2)})
    assert decision.plan.needs_load
    admin.meddle = [ServerRow(HG.config_writer, N4.host, N4.port, weight=9999)]
    with pytest.raises(ApplyFailed, match="changed under us"):
        admin.apply(decision.plan, persist=False, staging_seen=rows.staging)
    assert LOAD_SERVERS.sql not in admin.sent


def test_a_save_that_failed_after_its_load_is_retried_by_the_next_pass(tmp_path: Path) -> None:
    admin = MemoryAdmin(templates(), failing_saves=1)
    runner = galera_runner(tmp_path, **ports(admin, HealthyProber()))
    assert runner.settings.run.persist

    first = runner.run(Mode.APPLY)
    assert first.outcome is Outcome.CHANGED
    assert any("SAVE MYSQL SERVERS TO DISK failed" in w for w in first.warnings)
    admin.sent.clear()
    second = runner.run(Mode.APPLY)
    assert second.outcome is Outcome.UNCHANGED
    assert admin.writes() == [SAVE_SERVERS.sql], "nothing to load, but disk is behind runtime"
    assert "SAVE MYSQL SERVERS TO DISK retried" in summary(second)
    admin.sent.clear()
    third = runner.run(Mode.APPLY)
    assert third.outcome is Outcome.UNCHANGED
    assert admin.writes() == [], "saved: converged"


# ------------------------------------------------------------------ after the LOAD


class FailingAfterLoad(MemoryAdmin):
    """The LOAD goes out, then the pass fails: its deadline fires, or ProxySQL goes away."""

    def __init__(self, staging: Iterable[ServerRow], failure: Exception) -> None:
        super().__init__(staging)
        self.failure: Exception | None = failure

    def execute(self, sql: str, params: Sequence[object] = ()) -> list[tuple[Any, ...]]:
        if sql == SAVE_SERVERS.sql and self.failure is not None:
            failure, self.failure = self.failure, None
            raise failure
        return super().execute(sql, params)


@pytest.mark.parametrize(
    "failure",
    [
        PassTimeout("pass cut short after 1800 ms (run.max_runtime_ms)"),
        AdminUnreachable("ProxySQL admin 127.0.0.1:6032: connection lost (gone)"),
    ],
    ids=["deadline", "connection lost"],
)
def test_a_pass_that_fails_after_its_load_reports_the_failover(
    tmp_path: Path, failure: Exception
) -> None:
    admin = FailingAfterLoad([*templates(), *steady(N1)], failure)
    # every connect reaches `admin`: after the runner drops a broken connection, its next
    # pass connects again and finds the proxy back
    runner = galera_runner(tmp_path, **ports(admin, ProberSaying({N1})))
    cluster = runner.settings.clusters[0]
    result = runner.run(Mode.APPLY)
    assert LOAD_SERVERS.sql in admin.sent
    assert result.outcome is Outcome.CHANGED, summary(result)
    assert f"writer {N2} (was {N1})" in summary(result)
    assert "change(s) loaded" in summary(result)
    [said] = [w for w in result.warnings if "after its LOAD" in w]
    assert str(failure) in said and "SAVE MYSQL SERVERS TO DISK owed" in said
    assert runner.store.save_owed(cluster.name)
    remembered, _ = runner.store.load(cluster.name)
    assert N1 in remembered, "the pass's counters were saved"
    # the runner dropped its broken connection; the proxy is back (its next connect)
    admin.sent.clear()
    again = runner.run(Mode.APPLY)
    assert again.outcome is Outcome.UNCHANGED
    assert admin.writes() == [SAVE_SERVERS.sql]
    assert not runner.store.save_owed(cluster.name)


def test_a_pass_that_only_adopts_the_roster_says_so(tmp_path: Path) -> None:
    runner = runner_with(tmp_path, MemoryAdmin(steady(N1)))
    first = runner.run(Mode.APPLY)
    assert first.outcome is Outcome.CHANGED
    assert "roster loaded, no other change" in summary(first)
    assert "adopted into empty templates" in summary(first)


def runner_with(tmp_path: Path, admin: MemoryAdmin) -> PassRunner:
    return galera_runner(tmp_path, **ports(admin, HealthyProber()))


def test_an_unexpected_error_after_the_load_still_reports_the_failover(tmp_path: Path) -> None:
    """The last-resort net lives inside the pass: a LOAD that went out is never reported as
    'nothing done', whatever fails after it."""
    test_a_pass_that_fails_after_its_load_reports_the_failover(
        tmp_path, RuntimeError("a bug after the LOAD")
    )


def test_a_template_row_proxysql_shunned_is_no_roster_edit(tmp_path: Path) -> None:
    """ProxySQL's monitor SHUNs a server it cannot reach in every hostgroup, the templates'
    too: the LOAD that moves the writer off it made no roster edit live."""
    admin = MemoryAdmin(templates())
    prober = ProberSaying(set())
    runner = galera_runner(tmp_path, **ports(admin, prober))
    assert runner.run(Mode.APPLY).outcome is Outcome.CHANGED
    for key, row in list(admin.runtime.items()):
        if row.node == N1:
            admin.runtime[key] = replace(row, status=ServerStatus.SHUNNED)
    assert any(r.hostgroup_id == HG.config_writer and r.node == N1 for r in admin.runtime.values())
    prober.down = {N1}
    moved = runner.run(Mode.APPLY)
    assert moved.outcome is Outcome.CHANGED
    assert not [w for w in moved.warnings if "roster edits" in w], moved.warnings
