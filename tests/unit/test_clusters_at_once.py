"""Clusters are independent: one cluster's hung nodes or slow ProxySQL reads never hold up
another cluster's pass (its failover above all), and each pass keeps its own deadline on
whatever thread it runs."""

from __future__ import annotations

import threading
import time
from collections.abc import Collection, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from checker_core.core.model import NodeAddress
from checker_core.core.probes import ProbeResult
from checker_core.edges.backend import PendingProbes
from checker_core.edges.proxysql import LOAD_SERVERS
from checker_core.passes.result import Mode, Outcome, PassResult
from checker_core.passes.runner import PassRunner
from tests.lab.process import wait_until
from tests.unit.config_cases import galera_runner
from tests.unit.galera_cases import HG, N1, N2, NODES, probe_down, probe_ok, steady, templates
from tests.unit.test_intent import HealthyProber, MemoryAdmin

RELEASE_TIMEOUT_S = 30.0


class HeldPending(PendingProbes):
    """Probes whose answers come only once the test releases them (nodes that hang)."""

    def __init__(self, nodes: tuple[NodeAddress, ...], release: threading.Event) -> None:
        super().__init__(nodes, time.monotonic())
        self.release = release

    def collect(
        self, deadline: float, only: Collection[NodeAddress] | None = None
    ) -> dict[NodeAddress, ProbeResult]:
        self.release.wait(RELEASE_TIMEOUT_S)
        return {n: probe_ok(n) for n in self.nodes if only is None or n in only}


class HangingProber(HealthyProber):
    def __init__(self, release: threading.Event) -> None:
        self.release = release

    def start(self, nodes: Sequence[NodeAddress], deadline: float) -> PendingProbes:
        return HeldPending(tuple(nodes), self.release)


class WriterDownProber(HealthyProber):
    def start(self, nodes: Sequence[NodeAddress], deadline: float) -> PendingProbes:
        pending = PendingProbes(tuple(nodes), time.monotonic())
        for node in nodes:
            pending.results.put(probe_down(node) if node == N1 else probe_ok(node))
        return pending


class SlowAdmin(MemoryAdmin):
    """A ProxySQL whose reads never end (Python-level waits, as a blocked read's timeout)."""

    def read_rows(self, hostgroups: Any) -> Any:
        while True:
            time.sleep(0.01)


def two_clusters(tmp_path: Path, max_runtime_ms: int = 60000) -> PassRunner:
    runner = galera_runner(tmp_path)
    main = runner.settings.clusters[0]
    settings = replace(
        runner.settings,
        clusters=(main, replace(main, name="other")),
        run=replace(runner.settings.run, max_runtime_ms=max_runtime_ms),
    )
    runner = PassRunner(settings, runner.kind)
    runner._admin = MemoryAdmin([])  # the roster-overlap check finds no roster to compare
    return runner


def run_in_background(runner: PassRunner) -> tuple[threading.Thread, list[list[PassResult]]]:
    results: list[list[PassResult]] = []
    thread = threading.Thread(target=lambda: results.append(runner.run_all(Mode.APPLY)))
    thread.start()
    return thread, results


def test_a_cluster_whose_nodes_hang_does_not_hold_up_another_clusters_failover(
    tmp_path: Path,
) -> None:
    runner = two_clusters(tmp_path)
    hung, failing = runner.settings.clusters
    release = threading.Event()
    first, second = runner.runner_for(hung), runner.runner_for(failing)
    first._admin = MemoryAdmin([*templates(), *steady(N1)])
    first.prober = HangingProber(release)  # type: ignore[assignment]
    failing_admin = MemoryAdmin([*templates(), *steady(N1)])
    second._admin = failing_admin
    second.prober = WriterDownProber()  # type: ignore[assignment]

    thread, results = run_in_background(runner)
    try:
        # the failover is loaded while the first cluster's nodes still hang
        wait_until(lambda: LOAD_SERVERS.sql in failing_admin.sent, 20, "the other cluster's LOAD")
        writers = {r.node for r in failing_admin.runtime.values() if r.hostgroup_id == HG.writer}
        assert writers == {N2}
        assert not release.is_set()
    finally:
        release.set()
        thread.join(RELEASE_TIMEOUT_S)
    (passes,) = results
    assert [p.cluster for p in passes] == ["main", "other"], "results in the configured order"
    assert passes[0].outcome is Outcome.UNCHANGED
    assert passes[1].outcome is Outcome.CHANGED


def test_a_pass_on_a_thread_of_its_own_is_cut_short_at_its_deadline(tmp_path: Path) -> None:
    runner = two_clusters(tmp_path, max_runtime_ms=300)
    slow, fine = runner.settings.clusters
    runner.runner_for(slow)._admin = SlowAdmin([*templates(), *steady(N1)])
    runner.runner_for(slow).prober = HealthyProber()  # type: ignore[assignment]
    runner.runner_for(fine)._admin = MemoryAdmin([*templates(), *steady(N1)])
    runner.runner_for(fine).prober = HealthyProber()  # type: ignore[assignment]

    thread, results = run_in_background(runner)
    thread.join(RELEASE_TIMEOUT_S)

    (passes,) = results
    cut, done = passes
    assert cut.outcome is Outcome.FAILED
    assert "pass cut short after" in cut.message and "nothing loaded" in cut.message
    assert done.outcome is Outcome.UNCHANGED
    assert set(NODES) == set(done.probes)


class BrokenAdmin(MemoryAdmin):
    def read_rows(self, hostgroups: Any) -> Any:
        raise RuntimeError("a bug in reading the rosters")


def test_a_failure_in_the_daemons_roster_overlap_check_is_that_clusters_failed_pass(
    tmp_path: Path,
) -> None:
    runner = two_clusters(tmp_path)
    runner._admin = BrokenAdmin([])
    first = runner.settings.clusters[0]

    result = runner.run_one(first, Mode.APPLY)

    assert result.outcome is Outcome.FAILED
    assert "a bug in reading the rosters" in result.message
