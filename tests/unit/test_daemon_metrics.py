"""The daemon's metrics, fed with real decisions: the writer gauge, failovers, verdict gauges,
series of nodes and clusters that went away."""

from __future__ import annotations

from dataclasses import replace

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from checker_core.core.leadership import ALONE, Leadership, ProxyAddress, Role
from checker_core.core.model import NodeAddress
from checker_core.passes.result import Outcome, PassResult
from checker_core.service.metrics import METRICS, DaemonMetrics, is_failover
from tests.unit.daemon_cases import after, failed_pass, galera_pass
from tests.unit.galera_cases import N1, N2, N3, probe_down, probe_ok, steady

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(metrics: DaemonMetrics) -> Samples:
    found: Samples = {}
    text = generate_latest(metrics.registry).decode()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def value(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, tuple(sorted(labels.items()))))


def writer(samples: Samples, node: NodeAddress) -> float | None:
    return value(samples, "proxysql_checker_writer", cluster="main", node=str(node))


def failovers(samples: Samples) -> float:
    return value(samples, "proxysql_checker_failovers_total", cluster="main") or 0.0


@pytest.mark.parametrize(
    ("known", "after_pass", "expected"),
    [
        ((), (N1,), False),  # the first writer placed
        ((N1,), (N1,), False),
        ((N1,), (N2,), True),
        ((N1,), (), False),  # lost, nobody to take over: not (yet) a failover
        ((N1,), (N1, N2), False),  # a second writer added
        ((N1, N2), (N2,), True),  # one of two writers taken out
    ],
)
def test_is_failover(
    known: tuple[NodeAddress, ...], after_pass: tuple[NodeAddress, ...], expected: bool
) -> None:
    assert is_failover(known, after_pass) is expected


def test_first_placement_is_not_a_failover_a_writer_death_is() -> None:
    metrics = DaemonMetrics("galera")
    first = galera_pass([])  # empty hostgroups: the first pass places everyone
    metrics.observe(first, 100.0)
    samples = scrape(metrics)
    assert (writer(samples, N1), writer(samples, N2), writer(samples, N3)) == (1, 0, 0)
    assert failovers(samples) == 0
    assert value(samples, "proxysql_checker_loads_total", cluster="main") == 1
    assert first.decision is not None
    changes = value(samples, "proxysql_checker_changes_applied_total", cluster="main")
    assert changes == len(first.decision.plan.changes) > 0

    died = galera_pass(after(first), {N1: probe_down(N1)})
    metrics.observe(died, 101.0)
    samples = scrape(metrics)
    assert (writer(samples, N1), writer(samples, N2)) == (0, 1)
    assert failovers(samples) == 1
    verdict = "proxysql_checker_node_verdict"
    assert value(samples, verdict, cluster="main", node=str(N1), verdict="down") == 1
    assert value(samples, verdict, cluster="main", node=str(N1), verdict="healthy") == 0
    assert value(samples, "proxysql_checker_probe_errors_total", cluster="main", node=str(N1)) == 1

    quiet = galera_pass(after(died), {N1: probe_down(N1)})
    metrics.observe(quiet, 102.0)
    assert failovers(scrape(metrics)) == 1, "a pass that changes nothing is no failover"


def test_not_applied_pass_reports_the_live_writer() -> None:
    metrics = DaemonMetrics("galera")
    paused = galera_pass(steady(N1), {N1: probe_down(N1)}, apply=False)
    metrics.observe(paused, 100.0)
    samples = scrape(metrics)
    assert (writer(samples, N1), writer(samples, N2)) == (1, 0)
    assert failovers(samples) == 0


def test_failed_pass_counts_and_keeps_the_last_known_layout() -> None:
    metrics = DaemonMetrics("galera")
    metrics.observe(galera_pass(steady(N1)), 100.0)
    metrics.observe(failed_pass(), 101.0)
    samples = scrape(metrics)
    assert value(samples, "proxysql_checker_passes_total", cluster="main", outcome="failed") == 1
    assert writer(samples, N1) == 1
    last = value(samples, "proxysql_checker_last_success_timestamp_seconds", cluster="main")
    assert last == 100.0, "a failed pass is not a success"


def test_nodes_and_clusters_that_go_away_lose_their_series() -> None:
    metrics = DaemonMetrics("galera")
    metrics.observe(galera_pass(steady(N1)), 100.0)
    metrics.observe(galera_pass(steady(N1), cluster="other"), 100.0)
    assert writer(scrape(metrics), N1) == 1
    metrics.forget_clusters(["other"])
    samples = scrape(metrics)
    assert all(("cluster", "main") not in labels for _, labels in samples)
    assert value(samples, "proxysql_checker_writer", cluster="other", node=str(N1)) == 1


def test_brownout_gauge_only_for_group_replication() -> None:
    galera = DaemonMetrics("galera")
    galera.observe(galera_pass(steady(N1)), 100.0)
    assert not any(name == "proxysql_checker_brownout_seconds" for name, _ in scrape(galera))
    gr = DaemonMetrics("gr")
    gr.observe(galera_pass(steady(N1)), 100.0)
    seconds = value(scrape(gr), "proxysql_checker_brownout_seconds", cluster="main", node=str(N1))
    assert seconds == 0


def test_every_declared_metric_gets_a_sample() -> None:
    metrics = DaemonMetrics("gr")
    metrics.configured([("main", True)])  # what the board does for its clusters
    first = galera_pass([])
    died = galera_pass(after(first), {N1: probe_down(N1)})
    busy = PassResult("main", "p3", Outcome.BUSY, 0.1, "another pass holds the lock; skipped")
    for at, result in enumerate((first, died, busy)):
        metrics.observe(result, 100.0 + at)
    names = {name for name, _ in scrape(metrics)}
    for spec in METRICS:
        wanted = {spec.exposed, spec.exposed + "_count"}  # a histogram's samples end in _count
        assert names & wanted, f"{spec.exposed}: no sample after placement, failover and busy"


def test_acting_and_split_follow_the_checkers_role() -> None:
    """1 for a checker that acts (alone or acting), 0 for a standby; the split alarm only while
    a standby's proxy holds other rows than the acting proxy's beyond the sync window."""
    acting_proxy = ProxyAddress("127.0.0.1", 6032)
    standby = Leadership(Role.STANDBY, acting_proxy, (acting_proxy,), "standby", None, None)
    split = replace(standby, split="rows differ from 127.0.0.1:6032's for 9 checks")
    metrics = DaemonMetrics("galera")
    steady_pass = galera_pass(steady(N1), apply=False)
    expected = [
        (replace(steady_pass, leadership=ALONE), 1, 0),
        (replace(steady_pass, outcome=Outcome.STANDBY, leadership=standby), 0, 0),
        (replace(steady_pass, outcome=Outcome.STANDBY, leadership=split), 0, 1),
        (replace(steady_pass, leadership=replace(ALONE, role=Role.ACTING)), 1, 0),
    ]
    for at, (result, acting, split_flag) in enumerate(expected):
        metrics.observe(result, 100.0 + at)
        samples = scrape(metrics)
        assert value(samples, "proxysql_checker_acting", cluster="main") == acting
        assert value(samples, "proxysql_checker_proxysql_cluster_split", cluster="main") == (
            split_flag
        )


def test_the_queue_shown_is_the_one_this_pass_read() -> None:
    """A decision kept from an earlier pass (its verdicts hold that pass's queues) beside the
    verdicts judged now: the gauge shows the queue read now."""
    metrics = DaemonMetrics("galera")
    first = galera_pass(steady(N1), {N2: probe_ok(N2, wsrep_local_recv_queue="4")})
    metrics.observe(first, 100.0)
    queue = "proxysql_checker_apply_queue_transactions"
    assert value(scrape(metrics), queue, cluster="main", node=str(N2)) == 4
    now = galera_pass(steady(N1), {N2: probe_ok(N2, wsrep_local_recv_queue="9")})
    assert first.decision is not None and now.decision is not None
    kept = replace(first.decision, raw=now.decision.raw)
    metrics.observe(replace(now, decision=kept), 101.0)
    assert value(scrape(metrics), queue, cluster="main", node=str(N2)) == 9


def test_evictions_are_counted_by_reason() -> None:
    metrics = DaemonMetrics("galera")
    evicting = replace(galera_pass(steady(N1)), evictions=3, unresponsive_evictions=1)
    metrics.observe(evicting, 100.0)
    samples = scrape(metrics)
    name = "proxysql_checker_evictions_total"
    assert value(samples, name, cluster="main", reason="refused") == 2
    assert value(samples, name, cluster="main", reason="unresponsive") == 1
    metrics.forget_clusters(())
    assert value(scrape(metrics), name, cluster="main", reason="unresponsive") is None


def test_counters_start_at_zero_and_go_with_their_cluster() -> None:
    metrics = DaemonMetrics("galera")
    metrics.configured([("main", True), ("quiet", False)])
    samples = scrape(metrics)
    name = "proxysql_checker_hook_deliveries_total"
    assert value(samples, name, cluster="main", event="writer_changed", outcome="failed") == 0
    # a cluster without hooks has no hook series, but its events are counted from 0
    assert not any(("cluster", "quiet") in labels for n, labels in samples if n == name)
    assert value(samples, "proxysql_checker_events_total", cluster="quiet", event="blind") == 0
    # a first failover, a first blind pass are increases too
    assert value(samples, "proxysql_checker_failovers_total", cluster="quiet") == 0
    passes = "proxysql_checker_passes_total"
    assert value(samples, passes, cluster="quiet", outcome="blind") == 0
    metrics.events("main", ["writer_changed", "node_out"])
    metrics.hook_told("main", "writer_changed", "failed")
    samples = scrape(metrics)
    events = "proxysql_checker_events_total"
    assert value(samples, events, cluster="main", event="writer_changed") == 1
    assert value(samples, name, cluster="main", event="writer_changed", outcome="failed") == 1
    metrics.forget_clusters(["quiet"])
    assert all(("cluster", "main") not in labels for _, labels in scrape(metrics))
