"""The daemon's Prometheus metrics: declared once (METRICS, which docs/monitoring.md is generated
from) and updated from each pass's result."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
)
from prometheus_client.metrics import MetricWrapperBase
from prometheus_client.process_collector import ProcessCollector

from checker_core import __version__
from checker_core.core.events import EVENT_NAMES
from checker_core.core.model import NodeAddress
from checker_core.core.verdict import State
from checker_core.passes.result import Outcome, PassResult
from checker_core.service.health import SUCCESSFUL

if TYPE_CHECKING:
    from checker_core.core.decide import Decision
    from checker_core.core.roster import LiveLayout

PREFIX = "proxysql_checker_"
PASS_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
PROBE_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


@dataclass(frozen=True, slots=True)
class MetricSpec:
    """One metric the daemon serves: its name, type, labels and help text."""

    name: str  # without PREFIX; counters without _total (the client adds it)
    kind: type[MetricWrapperBase]
    labels: tuple[str, ...]
    doc: str
    buckets: tuple[float, ...] = ()

    @property
    def exposed(self) -> str:
        return PREFIX + self.name + ("_total" if self.kind is Counter else "")


EVICTION_REASONS = ("refused", "unresponsive")
HOOK_OUTCOMES = ("told", "failed", "dropped")
WRITABLE_STATES = (State.HEALTHY, State.LAGGING, State.LAST_RESORT)

METRICS: tuple[MetricSpec, ...] = (
    MetricSpec("info", Gauge, ("checker", "version"), "Always 1; which checker and version run."),
    MetricSpec("passes", Counter, ("cluster", "outcome"), "Passes by outcome."),
    MetricSpec(
        "evictions",
        Counter,
        ("cluster", "reason"),
        "Galera members evicted from the survivors' view, by reason: refused (its port refuses: "
        "cluster.evict_dead_nodes) or unresponsive (silent while the others stalled on it: "
        "cluster.evict_unresponsive_nodes).",
    ),
    MetricSpec(
        "evicted_needs_restart",
        Gauge,
        ("cluster", "node"),
        "Galera: 1 while the node is a process this checker evicted (its gcomm uuid the evicted "
        "one, or listed in a Primary member's eviction list) that answers out of the Primary "
        "component: it stays out until restarted; 0 for the other nodes.",
    ),
    MetricSpec(
        "early_passes",
        Counter,
        ("cause",),
        "Passes the daemon started before their time: closed (a probe connection closed by its "
        "server), changed (a writer's state changed), unanswered (a writer did not answer the "
        "watch), recheck (a probe failed: asked again at once; or a node's hysteresis is "
        "spent: asked again then).",
    ),
    MetricSpec(
        "pass_duration_seconds",
        Histogram,
        ("cluster",),
        "Time from the start of a pass to its end (read, probe, decide, apply).",
        PASS_BUCKETS,
    ),
    MetricSpec(
        "probe_duration_seconds",
        Histogram,
        ("cluster", "node"),
        "Time one node's probe took, failed probes included.",
        PROBE_BUCKETS,
    ),
    MetricSpec(
        "probe_errors",
        Counter,
        ("cluster", "node"),
        "Probes that read nothing: refused, unreachable or out of time.",
    ),
    MetricSpec(
        "node_verdict",
        Gauge,
        ("cluster", "node", "verdict"),
        "1 for the verdict the last pass acted on, 0 for the others (one series per verdict).",
    ),
    MetricSpec(
        "node_writable",
        Gauge,
        ("cluster", "node"),
        "1 when the last pass found the node fit to take writes by its own state (healthy, "
        "lagging or a donor still serving, with no read_only / super_read_only veto: a Galera "
        "node in the Primary component, a GR primary), 0 when not.",
    ),
    MetricSpec(
        "writer",
        Gauge,
        ("cluster", "node"),
        "1 for the node(s) in the writer hostgroup after the last pass, 0 for the rest.",
    ),
    MetricSpec(
        "changes_applied",
        Counter,
        ("cluster",),
        "Row changes made live (each pass that loads counts its changes).",
    ),
    MetricSpec("loads", Counter, ("cluster",), "LOAD MYSQL SERVERS TO RUNTIME issued."),
    MetricSpec(
        "failovers",
        Counter,
        ("cluster",),
        "Loaded passes that took a writer out and left another one writing.",
    ),
    MetricSpec(
        "apply_queue_transactions",
        Gauge,
        ("cluster", "node"),
        "Transactions waiting to be applied: GR applier queue, Galera wsrep_local_recv_queue.",
    ),
    MetricSpec(
        "brownout_seconds",
        Gauge,
        ("cluster", "node"),
        "GR: how long the node has been a super_read_only new primary (0 when it is not).",
    ),
    MetricSpec(
        "lock_busy_skips",
        Counter,
        ("cluster",),
        "Passes skipped because another process held the cluster's lock.",
    ),
    MetricSpec(
        "acting",
        Gauge,
        ("cluster",),
        "1 when this checker acts (alone, or the acting proxy of a ProxySQL Cluster), "
        "0 when it stands by while another proxy's checker acts.",
    ),
    MetricSpec(
        "proxysql_cluster_split",
        Gauge,
        ("cluster",),
        "1 while this standby's proxy holds other mysql_servers rows than the acting proxy "
        "beyond the sync window (a split ProxySQL Cluster), 0 otherwise.",
    ),
    MetricSpec(
        "failover_ready",
        Gauge,
        ("cluster",),
        "1 when losing the writer, or any one node, would still leave a writer and a reader "
        "(computed each pass from its probes, without acting), 0 when not.",
    ),
    MetricSpec(
        "state_save_failures",
        Counter,
        ("cluster",),
        "State files (counters, an owed SAVE) a pass could not write; the pass went on, the "
        "next one writes them again.",
    ),
    MetricSpec(
        "events",
        Counter,
        ("cluster", "event"),
        "Events of the cluster's passes (docs/hooks.md: writer_changed, node_out, node_back, "
        "eviction, switchover, blind, no_writer, recovered), told to a hook or not.",
    ),
    MetricSpec(
        "hook_deliveries",
        Counter,
        ("cluster", "event", "outcome"),
        "Events handed to the cluster's hooks, by outcome: told (every hook took it), failed "
        "(a hook failed, timed out and was killed, or a URL refused it), dropped (the hook "
        "queue was full, or the daemon stopped before it was told).",
    ),
    MetricSpec(
        "last_success_timestamp_seconds",
        Gauge,
        ("cluster",),
        "Unix time of the end of the last successful pass (changed, unchanged, paused or standby).",
    ),
)


def is_failover(known: Sequence[NodeAddress], after: Sequence[NodeAddress]) -> bool:
    """A writer the cluster had is gone and someone else writes; a first writer is not one."""
    return bool(known) and bool(after) and bool(set(known) - set(after))


class DaemonMetrics:
    """A registry of its own (not the process-global one), so tests and reloads stay apart."""

    def __init__(self, checker: str) -> None:
        disable_created_metrics()  # type: ignore[no-untyped-call]  # *_created: noise, no use
        self.brownouts = checker == "gr"  # only Group Replication has them
        self.registry = CollectorRegistry(auto_describe=True)
        ProcessCollector(registry=self.registry)
        self._metrics: dict[str, MetricWrapperBase] = {}
        for spec in METRICS:
            kwargs: dict[str, object] = {"registry": self.registry}
            if spec.buckets:
                kwargs["buckets"] = spec.buckets
            metric = spec.kind(PREFIX + spec.name, spec.doc, spec.labels, **kwargs)  # type: ignore[arg-type]
            self._metrics[spec.name] = metric
        self._gauge("info").labels(checker, __version__).set(1)
        from checker_core.service.watch import Cause

        for cause in Cause:  # every series from 0, so a rate() sees the first early pass
            self._counter("early_passes").labels(cause.label)
        self._writers: dict[str, tuple[NodeAddress, ...]] = {}  # last non-empty writer set
        self._nodes: dict[str, set[NodeAddress]] = {}
        self._outcomes: dict[str, set[str]] = {}

    def _gauge(self, name: str) -> Gauge:
        metric = self._metrics[name]
        assert isinstance(metric, Gauge)
        return metric

    def _counter(self, name: str) -> Counter:
        metric = self._metrics[name]
        assert isinstance(metric, Counter)
        return metric

    def _histogram(self, name: str) -> Histogram:
        metric = self._metrics[name]
        assert isinstance(metric, Histogram)
        return metric

    def configured(self, clusters: Iterable[tuple[str, bool]]) -> None:
        """Every cluster's counters from 0 (its passes by outcome, failovers, LOADs, events,
        and its hooks' when it has some), so that increase() and rate() see the first one,
        not only the second."""
        for name, hooked in clusters:
            for event in EVENT_NAMES:
                self._counter("events").labels(name, event)
                if hooked:
                    for outcome in HOOK_OUTCOMES:
                        self._counter("hook_deliveries").labels(name, event, outcome)
            for spec in METRICS:  # failovers, LOADs...: the first one is an increase too
                if spec.kind is Counter and spec.labels == ("cluster",):
                    self._counter(spec.name).labels(name)
            outcomes = self._outcomes.setdefault(name, set())
            for ended in Outcome:
                self._counter("passes").labels(name, ended.label)
                outcomes.add(ended.label)

    def events(self, cluster: str, names: Iterable[str]) -> None:
        for name in names:
            self._counter("events").labels(cluster, name).inc()

    def hook_told(self, cluster: str, event: str, outcome: str) -> None:
        self._counter("hook_deliveries").labels(cluster, event, outcome).inc()

    def started_early(self, cause: str) -> None:
        self._counter("early_passes").labels(cause).inc()

    def observe(self, result: PassResult, finished_at: float) -> None:
        self._observe_pass(result, finished_at)
        decision, layout = result.decision, result.layout
        if decision is None or layout is None:
            return  # nothing new is known of the nodes; their series keep the last pass's values
        writers = self._observe_cluster(result, decision, layout)
        self._observe_nodes(result, decision, writers)

    def _observe_pass(self, result: PassResult, finished_at: float) -> None:
        """The series every pass moves, whatever it got to."""
        name = result.cluster
        self._counter("passes").labels(name, result.outcome.label).inc()
        self._outcomes.setdefault(name, set()).add(result.outcome.label)
        self._histogram("pass_duration_seconds").labels(name).observe(result.duration_ms / 1000)
        if result.outcome is Outcome.BUSY:
            self._counter("lock_busy_skips").labels(name).inc()
        self._counter("state_save_failures").labels(name).inc(result.state_failures)
        unresponsive = result.unresponsive_evictions
        refused_label, unresponsive_label = EVICTION_REASONS
        self._counter("evictions").labels(name, refused_label).inc(result.evictions - unresponsive)
        self._counter("evictions").labels(name, unresponsive_label).inc(unresponsive)
        if result.outcome in SUCCESSFUL:
            self._gauge("last_success_timestamp_seconds").labels(name).set(finished_at)
        for node, probe in result.probes.items():
            self._histogram("probe_duration_seconds").labels(name, str(node)).observe(
                probe.elapsed_ms / 1000
            )
            if probe.error is not None:
                self._counter("probe_errors").labels(name, str(node)).inc()

    def _observe_cluster(
        self, result: PassResult, decision: Decision, layout: LiveLayout
    ) -> tuple[NodeAddress, ...]:
        """The cluster's role, readiness, LOADs and failovers; the writers routed now."""
        name = result.cluster
        leadership = result.leadership
        self._gauge("acting").labels(name).set(0 if result.outcome is Outcome.STANDBY else 1)
        split = leadership is not None and leadership.split is not None
        self._gauge("proxysql_cluster_split").labels(name).set(1 if split else 0)
        self._forget_nodes(name, set(decision.roster.addresses))
        readiness = result.readiness()
        if readiness is not None:
            self._gauge("failover_ready").labels(name).set(1 if readiness.ready else 0)
        loaded = bool(result.applied and result.applied.loaded)
        writers = tuple(result.writers if loaded else layout.writers)
        if loaded:
            self._counter("loads").labels(name).inc()
            self._counter("changes_applied").labels(name).inc(len(decision.plan.changes))
            if is_failover(self._writers.get(name) or tuple(layout.writers), writers):
                self._counter("failovers").labels(name).inc()
        if writers:
            self._writers[name] = writers
        return writers

    def _observe_nodes(
        self, result: PassResult, decision: Decision, writers: tuple[NodeAddress, ...]
    ) -> None:
        name = result.cluster
        for node, verdict in decision.verdicts.items():
            label = str(node)
            self._gauge("writer").labels(name, label).set(1 if node in writers else 0)
            fit = verdict.writable and verdict.state in WRITABLE_STATES
            self._gauge("node_writable").labels(name, label).set(1 if fit else 0)
            stranded = 1 if node in result.stranded else 0  # Galera's only; 0 for GR
            self._gauge("evicted_needs_restart").labels(name, label).set(stranded)
            for state in State:
                value = 1 if verdict.state is state else 0
                self._gauge("node_verdict").labels(name, label, state.value).set(value)
            # the queue as this pass read it (a decision kept from a pass before holds the
            # queue that pass read in its verdicts)
            queue = decision.raw[node].queue if node in decision.raw else verdict.queue
            if queue is not None:
                self._gauge("apply_queue_transactions").labels(name, label).set(queue)
            if self.brownouts:
                memory = decision.memory.get(node)
                samples = memory.queue_samples if memory else ()
                seconds = max(0.0, samples[-1][0] - samples[0][0]) if samples else 0.0
                self._gauge("brownout_seconds").labels(name, label).set(seconds)

    def _forget_nodes(self, cluster: str, current: set[NodeAddress]) -> None:
        """Series of nodes that left the roster go, so a changing roster cannot grow memory."""
        gone = self._nodes.get(cluster, set()) - current
        self._nodes[cluster] = current
        for node in gone:
            for spec in METRICS:
                if spec.labels[:2] == ("cluster", "node"):
                    self._remove(spec, cluster, str(node))

    def forget_clusters(self, keep: Iterable[str]) -> None:
        """After a reload: the series of clusters no longer configured go."""
        kept = set(keep)
        for cluster in list(self._nodes.keys() | self._outcomes.keys()):
            if cluster in kept:
                continue
            self._forget_nodes(cluster, set())
            self._nodes.pop(cluster, None)
            self._writers.pop(cluster, None)
            for outcome in self._outcomes.pop(cluster, set()):
                self._remove(self._spec("passes"), cluster, outcome)
            for spec in METRICS:
                if spec.labels == ("cluster",):
                    self._remove(spec, cluster)
            for reason in EVICTION_REASONS:
                self._remove(self._spec("evictions"), cluster, reason)
            for event in EVENT_NAMES:
                self._remove(self._spec("events"), cluster, event)
                for outcome in HOOK_OUTCOMES:
                    self._remove(self._spec("hook_deliveries"), cluster, event, outcome)

    @staticmethod
    def _spec(name: str) -> MetricSpec:
        return next(s for s in METRICS if s.name == name)

    def _remove(self, spec: MetricSpec, *values: str) -> None:
        metric = self._metrics[spec.name]
        if spec.labels[len(values) :] == ("verdict",):
            for state in State:
                self._remove_one(metric, *values, state.value)
            return
        self._remove_one(metric, *values)

    @staticmethod
    def _remove_one(metric: MetricWrapperBase, *values: str) -> None:
        with contextlib.suppress(KeyError):  # never set for these labels
            metric.remove(*values)
