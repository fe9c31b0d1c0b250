"""What-if and readiness: the plan for assumed failures is the plan of a pass whose probes say
those nodes failed (the pass that acts on them), and a cluster is ready exactly when losing any
one node leaves a writer and a reader."""

from __future__ import annotations

from collections.abc import Mapping

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from checker_core.core.decide import decide, view_of
from checker_core.core.model import ClusterRows, NodeAddress, ServerRow, ServerStatus, sort_rows
from checker_core.core.probes import ProbeResult
from checker_core.core.whatif import Assumed, WhatIf, WhatIfRefused, acting_memory, refused_probe
from galera_checker.policy import GaleraPolicy
from gr_checker.policy import GroupReplicationPolicy
from tests.unit import test_gr_policy as gr
from tests.unit.galera_cases import (
    HG,
    N1,
    N2,
    N3,
    WEIGHTS,
    cluster_settings,
    probe_ok,
    rows_of,
    steady,
    templates,
)
from tests.unit.test_galera_invariants import ROUTED, cluster_states

POLICY = GaleraPolicy()


def what_if_of(
    live: list[ServerRow],
    probes: Mapping[NodeAddress, ProbeResult],
    weights: Mapping[NodeAddress, int] = WEIGHTS,
    **changes: object,
) -> WhatIf:
    cluster = cluster_settings(**changes)
    view = view_of(rows_of(live, weights), cluster)
    return WhatIf(POLICY, POLICY, view, probes, {}, cluster, 1000.0)


def what_if_of_state(state: dict[str, object], **changes: object) -> WhatIf:
    """A what-if over a random cluster state (test_galera_invariants.cluster_states)."""
    weights, probes, live = state["weights"], state["probes"], state["live"]
    assert isinstance(weights, dict) and isinstance(probes, dict) and isinstance(live, list)
    rest = {k: v for k, v in state.items() if k not in ("live", "weights", "probes")}
    cluster = cluster_settings(**rest, **changes)
    view = view_of(rows_of(live, weights), cluster)
    return WhatIf(POLICY, POLICY, view, probes, {}, cluster, 1000.0)


def healthy() -> dict[NodeAddress, ProbeResult]:
    return {n: probe_ok(n) for n in WEIGHTS}


@settings(max_examples=200, deadline=None)
@given(cluster_states(), st.data())
def test_the_what_if_plan_is_the_plan_of_a_pass_whose_probes_say_those_nodes_are_down(
    state: dict[str, object], data: st.DataObject
) -> None:
    what_if = what_if_of_state(state, retry_down=data.draw(st.integers(0, 3)))
    view, probes, cluster = what_if.view, what_if.probes, what_if.cluster
    nodes = sorted(view.roster.addresses)
    down = data.draw(st.lists(st.sampled_from(nodes), min_size=1, max_size=len(nodes), unique=True))
    assumed = dict.fromkeys(down, Assumed.DOWN)
    got = what_if.decision(assumed)

    failed = {**probes, **{n: refused_probe(n) for n in down}}
    routed = {n: view.layout.routed(n) for n in nodes}
    memory = acting_memory({}, assumed, cluster, routed)
    expected = decide(POLICY, view, failed, memory=memory, cluster=cluster, in_use={}, now=1000.0)
    assert got.plan == expected.plan
    # and it acts: an assumed-down node is routed nowhere (unless every node is down, when
    # the pass that heard nobody keeps the layout)
    if not got.blind:
        for row in got.plan.desired:
            if row.node in assumed and row.hostgroup_id in ROUTED:
                assert row.status is not ServerStatus.ONLINE, row.describe()


@settings(max_examples=200, deadline=None)
@given(cluster_states())
def test_ready_exactly_when_every_single_loss_leaves_a_writer_and_a_reader(
    state: dict[str, object],
) -> None:
    what_if = what_if_of_state(state)
    view, probes, cluster = what_if.view, what_if.probes, what_if.cluster
    current = decide(POLICY, view, probes, memory={}, cluster=cluster, in_use={}, now=1000.0)
    readiness = what_if.readiness(current)
    expected = bool(current.assignment.writers)
    for node in sorted(view.roster.addresses):
        after = what_if.decision({node: Assumed.DOWN}).plan.desired
        writers = [r for r in after if r.hostgroup_id == HG.writer and r.status.value == "ONLINE"]
        readers = [r for r in after if r.hostgroup_id == HG.reader and r.status.value == "ONLINE"]
        expected = expected and bool(writers) and bool(readers)
    assert readiness.ready is expected


def test_a_healthy_three_node_cluster_is_ready_and_names_the_next_writer() -> None:
    what_if = what_if_of(steady(N1), healthy())
    current = what_if.decision({})
    readiness = what_if.readiness(current)
    assert readiness.ready
    assert readiness.next_writers == (N2,)
    assert f"next writer {N2}" in readiness.reason


def test_not_ready_when_no_other_node_may_write() -> None:
    probes = {**healthy(), N2: probe_ok(N2, read_only="ON"), N3: probe_ok(N3, read_only="ON")}
    what_if = what_if_of(steady(N1), probes)
    readiness = what_if.readiness(what_if.decision({}))
    assert not readiness.ready
    assert readiness.next_writers == ()
    assert f"losing {N1} leaves no writer" in readiness.reason


def test_assume_the_writer_down_shows_the_failover() -> None:
    decision = what_if_of(steady(N1), healthy()).decision({N1: Assumed.DOWN})
    assert decision.assignment.writers == (N2,)
    assert N1 in {r.node for r in decision.plan.desired if r.hostgroup_id == HG.offline}


def test_assume_desync_and_lagging() -> None:
    what_if = what_if_of(steady(N1), healthy(), max_transactions_behind=10)
    desynced = what_if.decision({N1: Assumed.DESYNC})
    assert desynced.verdicts[N1].reason.startswith("desynced")
    assert desynced.assignment.writers == (N2,)
    lagging = what_if.decision({N3: Assumed.LAGGING})
    assert lagging.verdicts[N3].state.value == "lagging"


def test_assumptions_that_cannot_hold_are_refused() -> None:
    what_if = what_if_of(steady(N1), healthy())  # max_transactions_behind 0: no limit
    with pytest.raises(WhatIfRefused, match="max_transactions_behind is 0"):
        what_if.decision({N2: Assumed.LAGGING})
    with pytest.raises(WhatIfRefused, match="not in the roster"):
        what_if.decision({NodeAddress("127.0.0.1", 9999): Assumed.DOWN})


def test_gr_losing_the_primary_elects_another_while_a_majority_holds() -> None:
    policy = GroupReplicationPolicy()
    cluster = cluster_settings()
    runtime = sort_rows([*templates(gr.WEIGHTS), *gr.steady()])
    view = view_of(ClusterRows(runtime, runtime), cluster)
    what_if = WhatIf(policy, policy, view, gr.healthy_group(), {}, cluster, 100.0)
    after = what_if.decision({gr.M1: Assumed.DOWN})
    assert after.assignment.writers == (gr.M2,)  # uuid-2 is the lowest left
    readiness = what_if.readiness(what_if.decision({}))
    assert readiness.ready
    assert readiness.next_writers == (gr.M2,)
    both = what_if.decision({gr.M1: Assumed.DOWN, gr.M2: Assumed.DOWN})
    assert both.assignment.writers == ()  # a minority elects nobody
    with pytest.raises(WhatIfRefused, match="no desync"):
        what_if.decision({gr.M2: Assumed.DESYNC})
