"""Galera rules G1-G16, each case named by its rule, on MariaDB's and PXC's answers alike."""

from __future__ import annotations

import pytest

from checker_core.core.hysteresis import NodeMemory
from checker_core.core.model import ChangeKind, NodeAddress, ServerRow, ServerStatus
from checker_core.core.probes import ProbeFailure, ProbeResult
from checker_core.core.roster import BadRows
from checker_core.core.verdict import State
from galera_checker.policy import GaleraFacts, judge
from tests.unit.galera_cases import (
    HG,
    MARIADB_HEALTHY,
    N1,
    N2,
    N3,
    NODES,
    PXC_HEALTHY,
    apply_plan,
    hostgroup_members,
    placed,
    probe_down,
    probe_ok,
    run,
    steady,
)


@pytest.mark.parametrize("flavour", [MARIADB_HEALTHY, PXC_HEALTHY], ids=["mariadb", "pxc"])
@pytest.mark.parametrize(
    ("facts", "state", "reason", "hard"),
    [
        ({}, State.HEALTHY, "synced", False),  # G9
        (  # G2
            {"wsrep_cluster_status": "non-Primary"},
            State.DOWN,
            "wsrep_cluster_status=non-Primary",
            True,
        ),
        ({"wsrep_ready": "OFF"}, State.DOWN, "wsrep_ready=OFF", True),  # G2
        ({"wsrep_connected": "OFF"}, State.DOWN, "wsrep_connected=OFF", True),  # G2
        ({"wsrep_reject_queries": "ALL"}, State.OFFLINE, "wsrep_reject_queries=ALL", True),  # G4
        (  # G5
            {
                "wsrep_local_state": "2",
                "wsrep_local_state_comment": "Donor/Desynced",
                "wsrep_desync": "ON",
            },
            State.OFFLINE,
            "desynced (wsrep_desync=ON, Donor/Desynced)",
            True,
        ),
        (  # G5
            {"wsrep_local_state": "2", "wsrep_sst_donor_rejects_queries": "ON"},
            State.OFFLINE,
            "donor rejecting queries (wsrep_sst_donor_rejects_queries=ON)",
            True,
        ),
        (  # G5
            {"wsrep_local_state": "2", "wsrep_local_state_comment": "Donor/Desynced"},
            State.LAST_RESORT,
            "donor (Donor/Desynced): last resort only",
            False,
        ),
        (  # G6
            {"wsrep_local_state": "1", "wsrep_local_state_comment": "Joining"},
            State.OFFLINE,
            "wsrep_local_state=1 (Joining)",
            False,
        ),
        (  # G6
            {"wsrep_local_state": "3", "wsrep_local_state_comment": "Joined"},
            State.OFFLINE,
            "wsrep_local_state=3 (Joined)",
            False,
        ),
        ({"read_only": "ON"}, State.HEALTHY, "read_only=ON: may read, may not write", False),  # G8
    ],
)
def test_verdict_rules(
    flavour: dict[str, str], facts: dict[str, str], state: State, reason: str, hard: bool
) -> None:
    verdict = judge(N1, GaleraFacts({**flavour, **facts}), None, 0, False)
    assert (verdict.state, verdict.reason, verdict.hard) == (state, reason, hard)


# G1: down after retry_down, whatever the failure
@pytest.mark.parametrize(
    "failure",
    [
        ProbeFailure.SILENT,  # a timeout: maybe the network, maybe the checker
        ProbeFailure.ERROR,  # the server answered, but not to our probe
        None,  # an error with no kind is an ERROR
        ProbeFailure.REFUSED,  # nothing listens: stopped, or restarting for a moment
    ],
)
def test_unreachable_is_down_after_retry_down_whatever_the_failure(
    failure: ProbeFailure | None,
) -> None:
    probe = ProbeResult(N1, None, "Can't connect (error 2003)", 1.0, failure)
    verdict = judge(N1, None, probe, 0, False)
    assert (verdict.state, verdict.hard) == (State.DOWN, False)  # G1: soft evidence
    assert verdict.reason == "unreachable: Can't connect (error 2003)"


# G3, G8
def test_pxc_maintenance_and_super_read_only() -> None:
    maint = judge(N1, GaleraFacts({**PXC_HEALTHY, "pxc_maint_mode": "MAINTENANCE"}), None, 0, False)
    assert (maint.state, maint.hard, maint.drain) == (State.MAINTENANCE, True, True)
    sro = judge(N1, GaleraFacts({**PXC_HEALTHY, "super_read_only": "ON"}), None, 0, False)
    assert (sro.state, sro.writable) == (State.HEALTHY, False)


# G7
def test_lagging_until_under_half() -> None:
    def state(queue: int, was: bool) -> State:
        facts = GaleraFacts({**MARIADB_HEALTHY, "wsrep_local_recv_queue": str(queue)})
        return judge(N1, facts, None, 100, was).state

    assert state(101, False) is State.LAGGING
    assert state(100, False) is State.HEALTHY
    assert state(60, True) is State.LAGGING
    assert state(49, True) is State.HEALTHY


def test_segment_is_read_from_provider_options() -> None:
    facts = GaleraFacts(
        {**MARIADB_HEALTHY, "wsrep_provider_options": "a = 1; gmcast.segment = 3; b = 2"}
    )
    assert judge(N1, facts, None, 0, False).segment == 3


# ----------------------------------------------------------------- roles


# G14
@pytest.mark.parametrize(
    ("mode", "readers"),
    [(0, {N2, N3}), (1, {N1, N2, N3}), (2, {N2, N3})],
)
def test_writer_is_also_reader(mode: int, readers: set[NodeAddress]) -> None:
    decision = run(steady(), writer_is_also_reader=mode)
    assert hostgroup_members(decision, HG.writer) == {N1}
    assert hostgroup_members(decision, HG.backup_writer) == {N2, N3}
    # 0 keeps reads off the writer and backup writers read; on a cluster where every node may
    # write, 2 (ProxySQL's native meaning) gives the same layout
    assert hostgroup_members(decision, HG.reader) == readers
    assert decision.assignment.why_readers == ""


@pytest.mark.parametrize("mode", [0, 2])
def test_writer_is_also_reader_with_a_read_only_node(mode: int) -> None:
    decision = run(steady(), {N3: probe_ok(N3, read_only="ON")}, writer_is_also_reader=mode)
    assert hostgroup_members(decision, HG.writer) == {N1}
    assert hostgroup_members(decision, HG.backup_writer) == {N2}
    assert hostgroup_members(decision, HG.reader) == {N2, N3}


def test_writer_is_also_reader_0_and_2_differ_on_a_writable_node_that_is_no_backup() -> None:
    # an operator parked N2's backup-writer row (OFFLINE_HARD): N2 may still write, so under
    # ProxySQL's native 2 it does not read; under 0 every node but the writer reads
    parked = ServerRow(HG.backup_writer, N2.host, N2.port, status=ServerStatus.OFFLINE_HARD)
    live = [r for r in steady() if r.key != parked.key] + [parked]
    zero = run(live, writer_is_also_reader=0)
    two = run(live, writer_is_also_reader=2)
    assert hostgroup_members(zero, HG.reader) == {N2, N3}
    assert hostgroup_members(two, HG.reader) == {N3}


@pytest.mark.parametrize("mode", [0, 2])
def test_the_writer_reads_when_no_other_node_can_and_the_pass_says_so(mode: int) -> None:
    decision = run(steady(), {N2: probe_down(N2), N3: probe_down(N3)}, writer_is_also_reader=mode)
    assert hostgroup_members(decision, HG.writer) == {N1}
    assert hostgroup_members(decision, HG.reader) == {N1}
    assert decision.assignment.why_readers == "the writer reads too: no other node can"


def test_writer_is_also_reader_1_with_one_node_left_says_nothing_special() -> None:
    decision = run(steady(), {N2: probe_down(N2), N3: probe_down(N3)}, writer_is_also_reader=1)
    assert hostgroup_members(decision, HG.reader) == {N1}
    assert decision.assignment.why_readers == ""


def test_steady_state_has_no_changes() -> None:
    assert run(steady()).plan.changes == ()


def test_first_pass_from_empty_hostgroups_picks_the_heaviest() -> None:
    decision = run([])
    assert hostgroup_members(decision, HG.writer) == {N1}
    assert {c.kind for c in decision.plan.changes} == {ChangeKind.ADD}


# G10, G16: the next heaviest writes in the same pass, on the checker's own probe
def test_writer_down_promotes_next_weight_at_once() -> None:
    decision = run(steady(), {N1: probe_down(N1)})
    assert hostgroup_members(decision, HG.writer) == {N2}
    assert N1 not in hostgroup_members(decision, HG.reader)
    assert hostgroup_members(decision, HG.offline) == {N1}
    # unreachable: nothing to drain, the row leaves the writer hostgroup in the same pass
    assert not any(r.node == N1 and r.hostgroup_id == HG.writer for r in decision.plan.desired)


# G16: on its own probes, whatever ProxySQL's monitor did
def test_shunned_writer_that_is_down_is_removed() -> None:
    live = [placed(N1, HG.writer, ServerStatus.SHUNNED), *steady()[1:]]
    decision = run(live, {N1: probe_down(N1)})
    assert not any(r.node == N1 and r.hostgroup_id == HG.writer for r in decision.plan.desired)


def test_shunned_by_proxysql_but_healthy_is_no_change() -> None:
    live = [placed(N1, HG.writer, ServerStatus.SHUNNED), *steady()[1:]]
    assert run(live).plan.changes == ()


# G8, G15
def test_read_only_writer_is_drained_and_stays_reader() -> None:
    decision = run(steady(), {N1: probe_ok(N1, read_only="ON")})
    assert hostgroup_members(decision, HG.writer) == {N2}
    assert hostgroup_members(decision, HG.writer, ServerStatus.OFFLINE_SOFT) == {N1}
    assert N1 in hostgroup_members(decision, HG.reader)
    # next pass: drained (no connections left) -> out of the writer hostgroup
    after = run(apply_plan(steady(), decision), {N1: probe_ok(N1, read_only="ON")}, drained=[N1])
    assert not any(r.node == N1 and r.hostgroup_id == HG.writer for r in after.plan.desired)
    assert N1 in hostgroup_members(after, HG.reader)


def test_kill_demoted_writer_connections_moves_at_once() -> None:
    decision = run(
        steady(), {N1: probe_ok(N1, read_only="ON")}, kill_demoted_writer_connections=True
    )
    assert not any(r.node == N1 and r.hostgroup_id == HG.writer for r in decision.plan.desired)


def test_reject_queries_on_writer_fails_over_whatever_retry_down() -> None:
    decision = run(steady(), {N1: probe_ok(N1, wsrep_reject_queries="ALL")}, retry_down=5)
    assert hostgroup_members(decision, HG.writer) == {N2}


def test_retry_down_holds_an_unreachable_writer() -> None:
    probes = {N1: probe_down(N1)}
    first = run(steady(), probes, retry_down=2)
    assert hostgroup_members(first, HG.writer) == {N1}
    assert first.verdicts[N1].state is State.SUSPECT
    second = run(steady(), probes, memory=first.memory, retry_down=2)
    assert hostgroup_members(second, HG.writer) == {N2}


# G12
def test_fail_back_off_keeps_new_writer_and_on_gives_it_back_after_retry_up() -> None:
    failed_over = [
        placed(N2, HG.writer),
        placed(N2, HG.reader),
        placed(N3, HG.reader),
        placed(N3, HG.backup_writer),
        placed(N1, HG.offline),
    ]
    memory = {N1: NodeMemory(routable=False)}
    kept = run(failed_over, memory=memory)
    assert hostgroup_members(kept, HG.writer) == {N2}
    assert hostgroup_members(kept, HG.backup_writer) == {N1, N3}

    first = run(failed_over, memory=memory, fail_back=True, retry_up=2)
    assert hostgroup_members(first, HG.writer) == {N2}
    assert first.verdicts[N1].state is State.RECOVERING
    second = run(failed_over, memory=first.memory, fail_back=True, retry_up=2)
    assert hostgroup_members(second, HG.writer) == {N1}
    assert hostgroup_members(second, HG.writer, ServerStatus.OFFLINE_SOFT) == {N2}


# G11, G13
def test_max_writers_two_highest_weights() -> None:
    decision = run(steady(), max_writers=2)
    assert hostgroup_members(decision, HG.writer) == {N1, N2}
    assert hostgroup_members(decision, HG.backup_writer) == {N3}


# G11
def test_too_many_writers_are_cut_to_max_writers() -> None:
    live = [placed(n, HG.writer) for n in NODES]
    decision = run(live, max_writers=1)
    assert hostgroup_members(decision, HG.writer) == {N1}


def test_non_primary_survivor_routes_nothing() -> None:
    probes = {
        N1: probe_down(N1),
        N2: probe_down(N2),
        N3: probe_ok(N3, wsrep_cluster_status="non-Primary"),
    }
    decision = run(steady(), probes)
    assert hostgroup_members(decision, HG.writer) == set()
    assert hostgroup_members(decision, HG.reader) == set()
    assert hostgroup_members(decision, HG.offline) == {N1, N2, N3}


# G5, G10
def test_donor_is_last_resort_writer_only() -> None:
    donor = {"wsrep_local_state": "2", "wsrep_local_state_comment": "Donor/Desynced"}
    decision = run(steady(), {N1: probe_down(N1), N2: probe_down(N2), N3: probe_ok(N3, **donor)})
    assert hostgroup_members(decision, HG.writer) == {N3}
    with_healthy = run(steady(), {N1: probe_down(N1), N3: probe_ok(N3, **donor)})
    assert hostgroup_members(with_healthy, HG.writer) == {N2}


# G10
def test_main_segment_preferred() -> None:
    other = "gmcast.segment = 1"
    probes = {
        N1: probe_ok(N1, wsrep_provider_options=other),
        N2: probe_ok(N2, wsrep_provider_options=other),
    }
    decision = run([], probes, main_segment=0)
    assert hostgroup_members(decision, HG.writer) == {N3}


def test_operator_offline_hard_row_stays() -> None:
    live = [r for r in steady() if not (r.node == N3 and r.hostgroup_id == HG.reader)]
    live.append(placed(N3, HG.reader, ServerStatus.OFFLINE_HARD))
    decision = run(live)
    assert placed(N3, HG.reader, ServerStatus.OFFLINE_HARD) in decision.plan.desired
    assert decision.plan.changes == ()


def test_operator_offline_hard_writer_is_replaced() -> None:
    live = [placed(N1, HG.writer, ServerStatus.OFFLINE_HARD), *steady()[1:]]
    decision = run(live)
    assert hostgroup_members(decision, HG.writer) == {N2}
    assert placed(N1, HG.writer, ServerStatus.OFFLINE_HARD) in decision.plan.desired


def test_foreign_row_in_managed_hostgroup_is_bad_input() -> None:
    stranger = placed(NodeAddress("10.0.0.9", 3306), HG.reader)
    with pytest.raises(BadRows, match=r"row \(101, 10.0.0.9, 3306\) in runtime_mysql_servers"):
        run([*steady(), stranger])


def test_empty_templates_are_adopted_from_managed_rows() -> None:
    from checker_core.core.decide import decide, view_of
    from checker_core.core.model import ClusterRows
    from galera_checker.policy import GaleraPolicy
    from tests.unit.galera_cases import cluster_settings

    live = tuple(steady())
    settings = cluster_settings()
    decision = decide(
        GaleraPolicy(),
        view_of(ClusterRows(runtime=live, staging=live), settings),
        {n: probe_ok(n) for n in NODES},
        memory={},
        cluster=settings,
        in_use={},
        now=0.0,
    )
    assert {r.hostgroup_id for r in decision.adopted} == {HG.config_writer, HG.config_reader}
    assert decision.plan.needs_load
    assert hostgroup_members(decision, HG.writer) == {N1}


def test_adoption_takes_each_weight_from_its_own_hostgroup() -> None:
    from checker_core.core.model import ServerRow
    from checker_core.core.roster import adopt_templates

    live = [
        ServerRow(HG.writer, N1.host, N1.port, weight=1000),
        ServerRow(HG.reader, N1.host, N1.port, weight=100),
        ServerRow(HG.backup_writer, N2.host, N2.port, weight=500),
        ServerRow(HG.reader, N3.host, N3.port, weight=70),
        ServerRow(HG.offline, "127.0.0.1", 3399, weight=5),
    ]
    got = {(r.hostgroup_id, r.port): r.weight for r in adopt_templates(live, HG)}
    assert got == {
        (HG.config_writer, 3311): 1000,
        (HG.config_reader, 3311): 100,  # its reader row, not its writer weight
        (HG.config_writer, 3312): 500,
        (HG.config_reader, 3312): 500,  # no reader row: reads with its writer weight
        (HG.config_reader, 3313): 70,  # only a reader: not a writer candidate
        (HG.config_writer, 3399): 5,  # only parked offline: both
        (HG.config_reader, 3399): 5,
    }


# G15
def test_drain_ends_when_connections_are_done_or_time_runs_out() -> None:
    from checker_core.core.decide import drained
    from checker_core.core.roster import LiveLayout
    from tests.unit.galera_cases import cluster_settings, rows_of

    layout = LiveLayout.of(rows_of([placed(N1, HG.writer, ServerStatus.OFFLINE_SOFT)]), HG)
    cluster = cluster_settings(drain_timeout_ms=30000)
    started = {N1: NodeMemory(routable=True, drain_since=1000.0)}
    w = HG.writer
    assert drained(layout, {(w, N1): 3}, started, cluster, now=1010.0) == frozenset()
    assert drained(layout, {(w, N1): 0}, started, cluster, now=1010.0) == {(w, N1)}
    assert drained(layout, {(w, N1): 3}, started, cluster, now=1030.0) == {(w, N1)}
    assert drained(layout, {(HG.reader, N1): 3}, started, cluster, now=1010.0) == {(w, N1)}
