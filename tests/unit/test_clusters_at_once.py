"""Clusters are independent: one cluster's hung nodes or slow ProxySQL reads never hold up
another cluster's pass (its failover above all), and each pass keeps its own deadline on
whatever thread it runs."""

from __future__ import annotations

import threading
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

from checker_core.core.model import NodeAddress
from checker_core.core.probes import ProbeResult
from checker_core.core.settings import Settings
from checker_core.core.statements import LOAD_SERVERS
from checker_core.edges.backend import Prober
from checker_core.edges.deadline import Deadline
from checker_core.edges.pending import PendingProbes
from checker_core.edges.proxysql import AdminClient
from checker_core.passes.fleet import Fleet
from checker_core.passes.ports import Ports
from checker_core.passes.result import Mode, Outcome, PassResult
from tests.lab.process import wait_until
from tests.unit.config_cases import galera_kind, galera_settings
from tests.unit.fakes import HealthyProber, MemoryAdmin, hung_admin
from tests.unit.galera_cases import HG, N1, N2, NODES, probe_down, probe_ok, steady, templates

RELEASE_TIMEOUT_S = 30.0


class HeldPending(PendingProbes):
    """Probes whose answers come only once the test releases them (nodes that hang)."""

    def __init__(self, nodes: tuple[NodeAddress, ...], release: threading.Event) -> None:
        super().__init__(nodes, time.monotonic())
        self.answers = release

    def collect(
        self,
        deadline: float,
        only: Collection[NodeAddress] | None = None,
        enough: Mapping[NodeAddress, float] | None = None,
    ) -> dict[NodeAddress, ProbeResult]:
        self.answers.wait(RELEASE_TIMEOUT_S)
        return {n: probe_ok(n) for n in self.nodes if only is None or n in only}


class HangingProber(HealthyProber):
    def __init__(self, release: threading.Event) -> None:
        self.answers = release

    def start(self, nodes: Sequence[NodeAddress], deadline: float) -> PendingProbes:
        return HeldPending(tuple(nodes), self.answers)


class WriterDownProber(HealthyProber):
    def start(self, nodes: Sequence[NodeAddress], deadline: float) -> PendingProbes:
        pending = PendingProbes(tuple(nodes), time.monotonic())
        for node in nodes:
            pending.results.put(probe_down(node) if node == N1 else probe_ok(node))
        return pending


def two_clusters(
    tmp_path: Path,
    max_runtime_ms: int = 60000,
    *,
    admins: Mapping[str, AdminClient] | None = None,
    probers: Mapping[str, HealthyProber] | None = None,
    overlap: AdminClient | None = None,
) -> Fleet:
    """A fleet of clusters "main" and "other": each cluster's runner connects to its admin in
    `admins` and probes with its prober in `probers` (healthy when not named); the fleet
    connects to `overlap` for its roster-overlap check (by default an admin with no roster to
    compare)."""
    one = galera_settings(tmp_path)
    main = one.clusters[0]
    settings = replace(
        one,
        clusters=(main, replace(main, name="other")),
        run=replace(one.run, max_runtime_ms=max_runtime_ms),
    )
    overlap = overlap or MemoryAdmin([])

    def connect_admin(given: Settings, deadline: Deadline | None = None) -> AdminClient:
        if len(given.clusters) > 1:
            return overlap
        return (admins or {})[given.clusters[0].name]

    def new_prober(given: Settings) -> Prober:
        named = (probers or {}).get(given.clusters[0].name) if len(given.clusters) == 1 else None
        return cast(Prober, named or HealthyProber())

    return Fleet(settings, galera_kind(), ports=Ports(connect_admin, new_prober))


def run_in_background(fleet: Fleet) -> tuple[threading.Thread, list[list[PassResult]]]:
    results: list[list[PassResult]] = []
    thread = threading.Thread(target=lambda: results.append(fleet.run_all(Mode.APPLY)))
    thread.start()
    return thread, results


def test_a_cluster_whose_nodes_hang_does_not_hold_up_another_clusters_failover(
    tmp_path: Path,
) -> None:
    release = threading.Event()
    failing_admin = MemoryAdmin([*templates(), *steady(N1)])
    fleet = two_clusters(
        tmp_path,
        admins={"main": MemoryAdmin([*templates(), *steady(N1)]), "other": failing_admin},
        probers={"main": HangingProber(release), "other": WriterDownProber()},
    )

    thread, results = run_in_background(fleet)
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
    fine = MemoryAdmin([*templates(), *steady(N1)])
    with hung_admin() as slow:
        fleet = two_clusters(
            tmp_path,
            max_runtime_ms=300,
            admins={"main": slow, "other": fine},
            probers={"main": HealthyProber(), "other": HealthyProber()},
        )

        thread, results = run_in_background(fleet)
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
    fleet = two_clusters(tmp_path, overlap=BrokenAdmin([]))
    first = fleet.settings.clusters[0]

    result = fleet.refusal(first)

    assert result is not None and result.outcome is Outcome.FAILED
    assert "a bug in reading the rosters" in result.message
