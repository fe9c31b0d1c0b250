"""The checker's own failure paths and the decisions they used to get wrong: drains that start
only with a LOAD, readers that drain, a lagging node not promoted over a healthy one, a GR member
the majority sees UNREACHABLE, a state dir that refuses its files."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from checker_core.core.model import NodeAddress, ServerStatus
from checker_core.core.verdict import State
from checker_core.edges.pending import PendingProbes
from checker_core.passes.result import Mode, Outcome
from checker_core.report import summary
from tests.unit import test_gr_policy as gr
from tests.unit.config_cases import galera_runner
from tests.unit.fakes import HealthyProber, MemoryAdmin, ports, retuned
from tests.unit.galera_cases import (
    HG,
    N1,
    N2,
    N3,
    apply_plan,
    hostgroup_members,
    placed,
    probe_down,
    probe_ok,
    run,
    steady,
    templates,
)

DESYNCED = {"wsrep_local_state": "2", "wsrep_desync": "ON"}
SOFT = ServerStatus.OFFLINE_SOFT


# ------------------------------------------------------------------ drains


class ScriptedProber(HealthyProber):
    """Probes answer as `facts` says per node (healthy when not named)."""

    def __init__(self) -> None:
        self.facts: dict[NodeAddress, dict[str, str]] = {}

    def start(self, nodes: Sequence[NodeAddress], deadline: float) -> PendingProbes:
        pending = PendingProbes(tuple(nodes), 0.0)
        for node in nodes:
            pending.results.put(probe_ok(node, **self.facts.get(node, {})))
        return pending


class HeldAdmin(MemoryAdmin):
    """Clients hold one connection to every server that is live (ConnUsed 1)."""

    def connections_in_use(self, hostgroups: Any) -> dict[tuple[int, NodeAddress], int]:
        wanted = set(hostgroups)
        return {
            (r.hostgroup_id, r.node): 1 for r in self.runtime.values() if r.hostgroup_id in wanted
        }


def test_a_paused_pass_starts_no_drain_clock(tmp_path: Path) -> None:
    """Paused for longer than drain_timeout_ms while the writer is desynced: once resumed, the
    writer drains for the whole drain_timeout_ms, not for what the pause left of it."""
    admin = HeldAdmin([*templates(), *steady(N1)])
    prober = ScriptedProber()
    now = [1000.0]
    runner = galera_runner(tmp_path, **ports(admin, prober, clock=lambda: now[0]))
    runner.store.pause(None, "maintenance")
    prober.facts[N1] = DESYNCED
    assert runner.run(Mode.APPLY).outcome is Outcome.PAUSED
    now[0] += 600.0
    runner.store.resume(None)
    draining = runner.run(Mode.APPLY)
    assert draining.outcome is Outcome.CHANGED
    assert admin.runtime[placed(N1, HG.writer).key].status is SOFT
    now[0] += 2.0  # well inside the 30 s drain_timeout_ms, the client still connected
    still = runner.run(Mode.APPLY)
    assert admin.runtime[placed(N1, HG.writer).key].status is SOFT, summary(still)


def test_a_reader_in_maintenance_drains_before_it_leaves() -> None:
    maint = probe_ok(N3, pxc_maint_mode="MAINTENANCE")
    first = run(steady(N1), {N3: maint})
    assert N3 in hostgroup_members(first, HG.reader, SOFT)
    assert N3 in hostgroup_members(first, HG.backup_writer, SOFT)
    assert N3 not in hostgroup_members(first, HG.reader)
    # while its clients are still connected it stays draining; once they are done it leaves
    live = apply_plan(steady(N1), first)
    held = run(live, {N3: maint}, memory=first.memory)
    assert N3 in hostgroup_members(held, HG.reader, SOFT)
    done = run(live, {N3: maint}, memory=first.memory, drained=[N3])
    assert N3 not in {r.node for r in done.plan.desired if r.hostgroup_id == HG.reader}
    assert N3 in hostgroup_members(done, HG.offline)


def test_a_reader_that_only_changes_role_does_not_drain() -> None:
    """N2 becomes the writer (writer_is_also_reader = 0): it leaves the readers at once."""
    decision = run(steady(N1), {N1: probe_down(N1)}, writer_is_also_reader=0)
    assert decision.assignment.writers == (N2,)
    assert N2 not in {r.node for r in decision.plan.desired if r.hostgroup_id == HG.reader}


# ------------------------------------------------------------------ writer choice


def test_a_lagging_node_is_not_promoted_over_a_healthy_one() -> None:
    lagging = probe_ok(N2, wsrep_local_recv_queue="5000")
    decision = run(steady(N1), {N1: probe_down(N1), N2: lagging}, max_transactions_behind=100)
    assert decision.verdicts[N2].state is State.LAGGING
    assert decision.assignment.writers == (N3,)
    assert f"{N2} passed over: wsrep_local_recv_queue=5000" in decision.assignment.why_writers


def test_a_lagging_node_still_writes_when_nobody_else_can() -> None:
    lagging = probe_ok(N2, wsrep_local_recv_queue="5000")
    decision = run(
        steady(N1),
        {N1: probe_down(N1), N2: lagging, N3: probe_down(N3)},
        max_transactions_behind=100,
    )
    assert decision.assignment.writers == (N2,)


# ------------------------------------------------------------------ GR: the majority's view


def test_a_member_the_majority_sees_unreachable_is_out_at_once_whatever_its_probe() -> None:
    majority = gr.view(gr.M1, {gr.M3: "UNREACHABLE"})
    probes = {
        gr.M1: gr.facts(gr.M1, majority),
        gr.M2: gr.facts(gr.M2, majority),
        gr.M3: probe_down(gr.M3, "no answer within the pass deadline (600 ms)"),
    }
    decision = gr.run(gr.steady(), probes, retry_down=5)
    verdict = decision.verdicts[gr.M3]
    assert verdict.state is State.OFFLINE and verdict.hard
    assert "UNREACHABLE in 2 of 2 views" in verdict.reason
    assert gr.M3 not in gr.online(decision, HG.reader)


def test_a_member_only_the_checker_cannot_reach_waits_for_retry_down() -> None:
    members = gr.view(gr.M1)
    probes = {
        gr.M1: gr.facts(gr.M1, members),
        gr.M2: gr.facts(gr.M2, members),
        gr.M3: probe_down(gr.M3),
    }
    decision = gr.run(gr.steady(), probes, retry_down=5)
    assert decision.verdicts[gr.M3].state is State.SUSPECT
    assert gr.M3 in gr.online(decision, HG.reader)


# ------------------------------------------------------------------ the state dir


def test_a_state_dir_that_refuses_the_file_after_a_load_costs_a_warning(tmp_path: Path) -> None:
    admin = MemoryAdmin([*templates(), *steady(N1)])
    prober = ScriptedProber()
    # a daemon (persistent): the counters it could not write stay with it
    runner = galera_runner(tmp_path, persistent=True, **ports(admin, prober))
    cluster = runner.settings.clusters[0]
    runner.store.ensure_dir()
    runner.store.state_path(cluster.name).mkdir()  # a directory where the file should be
    prober.facts[N1] = {"wsrep_reject_queries": "ALL"}
    result = runner.run(Mode.APPLY)
    assert result.outcome is Outcome.CHANGED
    assert f"writer {N2} (was {N1})" in summary(result)
    assert result.state_failures == 1
    assert any("not saved" in w and "retried next pass" in w for w in result.warnings)
    remembered, _ = runner.store.load(cluster.name)
    assert N1 in remembered, "kept for the daemon's next pass"
    runner.store.state_path(cluster.name).rmdir()
    again = runner.run(Mode.APPLY)
    assert again.state_failures == 0
    assert runner.store.state_path(cluster.name).is_file()


# ------------------------------------------------------------------ a switchover's pin


def test_a_pinned_writer_is_preferred_over_weight_and_fail_back() -> None:
    from checker_core.core.model import NodeAddress as Node

    pinned = run(steady(N1), fail_back=True, preferred_writer=N3)
    assert pinned.assignment.writers == (N3,)
    assert "chosen by switchover" in pinned.assignment.why_writers
    assert N1 in hostgroup_members(pinned, HG.writer, SOFT), "the old writer drains"
    down = run(steady(N3), {N3: probe_down(N3)}, fail_back=True, preferred_writer=N3)
    assert down.assignment.writers == (N1,), "a pinned node that may not write is passed over"
    stranger = run(steady(N1), preferred_writer=Node("127.0.0.1", 9))
    assert stranger.assignment.writers == (N1,)


def test_a_lagging_pinned_node_does_not_take_the_writer_back_from_a_healthy_one() -> None:
    """The switchover refuses a lagging target; the pin it left obeys the same rule: a pinned
    node whose queue is over the limit never displaces a writer that does not lag, and takes the
    role again once it has caught up."""
    queue = {"wsrep_local_recv_queue": "2500"}
    lagging = run(
        steady(N1), {N3: probe_ok(N3, **queue)}, max_transactions_behind=10, preferred_writer=N3
    )
    assert lagging.verdicts[N3].state is State.LAGGING
    assert lagging.assignment.writers == (N1,)
    assert hostgroup_members(lagging, HG.writer) == {N1}
    caught_up = run(steady(N1), max_transactions_behind=10, preferred_writer=N3)
    assert caught_up.assignment.writers == (N3,)
    alone = run(
        steady(N3),
        {N1: probe_down(N1), N2: probe_down(N2), N3: probe_ok(N3, **queue)},
        max_transactions_behind=10,
        preferred_writer=N3,
    )
    assert alone.assignment.writers == (N3,), "a lagging node is still better than no writer"


# -------------------------------------------------- a switchover decided by the policy


def test_a_switchover_refuses_what_no_pass_would_do_in_the_pass_own_words() -> None:
    """The target is judged by the decision the pin would make: a barred node (an operator's
    OFFLINE_HARD row in the writer hostgroup) is refused, as a pass with the pin would pass it
    over (the lagging case: test_a_lagging_pinned_node_...); a healthy one is accepted."""
    from galera_checker.switchover import refusal
    from tests.unit.daemon_cases import galera_pass

    barred_row = placed(N3, HG.writer, ServerStatus.OFFLINE_HARD)
    barred = galera_pass([*steady(N1), barred_row])
    found = refusal(barred, N3)
    assert found is not None
    assert "barred from writer hostgroup" in found.reason, found.reason
    pinned = barred.what_if()
    assert pinned is not None
    assert pinned.pinned(N3).assignment.writers == (N1,), "a pass with the pin agrees"

    assert refusal(galera_pass(steady(N1)), N3) is None
    unknown = refusal(barred, NodeAddress("127.0.0.1", 9))
    assert unknown is not None and "not in the roster" in unknown.reason


# -------------------------------------------------- a pass that does not load


def test_pause_restart_the_writer_resume_keeps_the_healthy_writer(tmp_path: Path) -> None:
    """With retry_up = 3: pause; the writer restarts (refused, then healthy again); resume. The
    paused passes loaded nothing, so ProxySQL still routes to the writer, and the first pass
    after the resume must not demote it for counters of a plan that never went live."""

    admin = MemoryAdmin([*templates(), *steady(N1)])
    prober = ScriptedProber()
    runner = galera_runner(tmp_path, **ports(admin, prober))
    runner = retuned(runner, retry_up=3, retry_down=0)
    cluster = runner.cluster
    assert runner.run(Mode.APPLY).outcome is Outcome.UNCHANGED
    runner.store.pause(cluster.name, "maintenance")
    prober.facts[N1] = {"wsrep_ready": "OFF", "wsrep_cluster_status": "non-Primary"}
    assert runner.run(Mode.APPLY).outcome is Outcome.PAUSED
    del prober.facts[N1]
    assert runner.run(Mode.APPLY).outcome is Outcome.PAUSED
    runner.store.resume(cluster.name)
    resumed = runner.run(Mode.APPLY)
    assert resumed.outcome is Outcome.UNCHANGED, summary(resumed)
    assert resumed.writers == (N1,)
    assert {r.node for r in admin.runtime.values() if r.hostgroup_id == HG.writer} == {N1}


def test_a_paused_pass_says_whom_proxysql_routes_to_and_names_the_plan_as_planned(
    tmp_path: Path,
) -> None:
    from checker_core.report import status_record

    admin = MemoryAdmin([*templates(), *steady(N1)])
    prober = ScriptedProber()
    runner = galera_runner(tmp_path, **ports(admin, prober))
    cluster = runner.settings.clusters[0]
    runner.store.pause(cluster.name, "maintenance")
    prober.facts[N1] = {"wsrep_reject_queries": "ALL"}
    paused = runner.run(Mode.APPLY)
    assert paused.outcome is Outcome.PAUSED
    assert f"writer {N1} (planned {N2})" in summary(paused)
    assert "(was" not in summary(paused)
    assert paused.routed_writers == (N1,) and paused.writers == (N2,)
    document = status_record(paused, HG)
    assert document["writers"] == [str(N1)]
    assert document["planned_writers"] == [str(N2)]


def test_a_pass_that_read_nothing_says_the_writers_are_unknown_not_none(tmp_path: Path) -> None:
    """Another process holds the cluster's lock (a switchover draining the old writer): the
    daemon's pass is busy and read nothing of ProxySQL, so /status says null for the writers,
    never an empty list (found by the simulated world: "no writer" for the whole drain while
    ProxySQL routed the new one)."""
    from checker_core.edges.lock import cluster_lock
    from checker_core.report import status_record

    admin = MemoryAdmin([*templates(), *steady(N1)])
    runner = galera_runner(tmp_path, **ports(admin, ScriptedProber()))
    cluster = runner.settings.clusters[0]
    runner.store.ensure_dir()
    with cluster_lock(runner.store.lock_path(cluster.name)) as held:
        assert held
        # another open file description conflicts as another process's would
        busy = galera_runner(tmp_path, **ports(admin, ScriptedProber())).run(Mode.APPLY)
    assert busy.outcome is Outcome.BUSY
    assert status_record(busy, HG)["writers"] is None
    steady_pass = runner.run(Mode.APPLY)
    assert status_record(steady_pass, HG)["writers"] == [str(N1)]


def test_no_path_swallows_the_pass_deadline(tmp_path: Path) -> None:
    """Node actions that run past run.max_runtime_ms (slow survivors of an eviction) leave the
    pass's outcome as it is, and the pass says it overran."""
    import time

    from checker_core.passes.plugin import ActionsDone, AfterPass, CheckerKind, LaterActions
    from checker_core.passes.runner import PassRunner
    from galera_checker.policy import GaleraPolicy

    base = galera_runner(tmp_path)
    late = [0.0]

    class Slow:
        def after_pass(self, after: AfterPass) -> ActionsDone:
            late[0] += 2.7  # three slow survivors
            return ActionsDone(("evicted someone",))

        def finish(self) -> tuple[LaterActions, ...]:
            return ()

    kind = CheckerKind(base.kind.checker, GaleraPolicy(), repr, new_actions=Slow)
    runner = PassRunner(
        base.settings,
        kind,
        **ports(
            MemoryAdmin([*templates(), *steady(N1)]),
            ScriptedProber(),
            monotonic=lambda: time.monotonic() + late[0],
        ),
    )
    result = runner.run(Mode.APPLY)
    assert result.outcome is Outcome.UNCHANGED
    limit = runner.settings.run.max_runtime_ms
    assert any(
        w.startswith("the pass took 27") and w.endswith(f"over run.max_runtime_ms ({limit})")
        for w in result.warnings
    ), result.warnings
