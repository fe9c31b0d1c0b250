"""The fleet owns one runner per cluster; a runner knows its own cluster alone, and what a
cluster's node actions keep between its passes is never another cluster's."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import ClassVar, cast

import pytest

from checker_core.core.model import ClusterRows, Hostgroups, ServerRow
from checker_core.core.settings import Settings
from checker_core.edges import native
from checker_core.edges.backend import Prober
from checker_core.edges.deadline import Deadline
from checker_core.edges.proxysql import AdminClient
from checker_core.passes.fleet import Fleet
from checker_core.passes.plugin import ActionsDone, AfterPass, CheckerKind, LaterActions
from checker_core.passes.ports import Ports
from checker_core.passes.proxy_facts import RECHECK_S
from checker_core.passes.result import Mode, Outcome
from checker_core.passes.runner import PassRunner
from galera_checker.policy import GaleraPolicy
from tests.unit.config_cases import galera_kind, galera_settings
from tests.unit.fakes import HealthyProber, MemoryAdmin
from tests.unit.galera_cases import HG, N1, steady, templates


class Remembering:
    """Node actions that keep, as a checker's do, what its passes saw: the clusters it was
    given, and one piece of work left for after the passes."""

    made: ClassVar[list[Remembering]] = []

    def __init__(self) -> None:
        self.seen: list[str] = []
        Remembering.made.append(self)

    def after_pass(self, after: AfterPass) -> ActionsDone:
        self.seen.append(after.cluster.name)
        return ActionsDone()

    def finish(self) -> tuple[LaterActions, ...]:
        return tuple(LaterActions(name, ActionsDone((f"{name} later",)), 1.0) for name in self.seen)


def two_clusters(tmp_path: Path) -> Fleet:
    one = galera_settings(tmp_path)
    main = one.clusters[0]
    settings = replace(one, clusters=(main, replace(main, name="other")))
    Remembering.made = []
    kind = CheckerKind(galera_kind().checker, GaleraPolicy(), repr, new_actions=Remembering)
    admins = {c.name: MemoryAdmin([*templates(), *steady(N1)]) for c in settings.clusters}

    def connect(given: Settings, deadline: Deadline | None = None) -> AdminClient:
        # each cluster behind a ProxySQL of its own; the rosters' check sees no roster
        return admins[given.clusters[0].name] if len(given.clusters) == 1 else MemoryAdmin([])

    prober = cast(Prober, HealthyProber())
    return Fleet(settings, kind, ports=Ports(connect_admin=connect, new_prober=lambda _s: prober))


def test_a_runner_refuses_settings_of_several_clusters(tmp_path: Path) -> None:
    fleet = two_clusters(tmp_path)
    with pytest.raises(ValueError, match="a runner runs one cluster, not 2"):
        PassRunner(fleet.settings, fleet.kind)


def test_each_clusters_runner_has_node_actions_of_its_own(tmp_path: Path) -> None:
    fleet = two_clusters(tmp_path)
    try:
        results = fleet.run_all(Mode.APPLY)
        assert [r.cluster for r in results] == ["main", "other"]
        assert all(r.outcome is Outcome.UNCHANGED for r in results), results
        assert sorted(m.seen[0] for m in Remembering.made) == ["main", "other"]
        assert all(len(m.seen) == 1 for m in Remembering.made), "no object saw both clusters"
        later = fleet.finish()
        assert sorted(done.cluster for done in later) == ["main", "other"]
    finally:
        fleet.close()


def test_the_fleet_makes_a_clusters_runner_again_when_its_settings_change(
    tmp_path: Path,
) -> None:
    fleet = two_clusters(tmp_path)
    try:
        main = fleet.settings.clusters[0]
        first = fleet.runner(main)
        assert fleet.runner(main) is first
        again = fleet.runner(replace(main, retry_down=7))
        assert again is not first and again.cluster.retry_down == 7
    finally:
        fleet.close()


class OneProxy(MemoryAdmin):
    """One ProxySQL behind every connection, counting how its rows are read."""

    def __init__(self, rows: list[ServerRow]) -> None:
        super().__init__(rows)
        self.shared_reads = 0
        self.own_reads = 0

    def read_packed(self, hostgroups: Iterable[int]) -> str:
        self.shared_reads += 1
        return super().read_packed(hostgroups)

    def read_rows(self, hostgroups: Iterable[int]) -> ClusterRows:
        self.own_reads += 1
        return super().read_rows(hostgroups)


OTHER = Hostgroups(200, 201, 202, 9200, 8200, 8201)


def moved(rows: list[ServerRow], hostgroups: Hostgroups) -> list[ServerRow]:
    """The rows of a cluster on HG, as another cluster's on `hostgroups` and ports 10 higher."""
    to = dict(zip(HG.all, hostgroups.all, strict=True))
    return [replace(r, hostgroup_id=to[r.hostgroup_id], port=r.port + 10) for r in rows]


def asked(proxy: MemoryAdmin) -> tuple[int, int]:
    """How often ProxySQL's native managers and its ProxySQL Cluster peers were asked."""
    return (
        sum(1 for sql in proxy.sent if sql == native.QUERY),
        sum(1 for sql in proxy.sent if "runtime_proxysql_servers" in sql),
    )


def test_a_daemons_clusters_take_their_rows_from_one_read(tmp_path: Path) -> None:
    one = galera_settings(tmp_path)
    main = one.clusters[0]
    settings = replace(one, clusters=(main, replace(main, name="other", hostgroups=OTHER)))
    # the other cluster's writer is not yet where it belongs: its first pass loads
    proxy = OneProxy([*templates(), *steady(N1), *moved(templates(), OTHER)])
    now = [100.0]

    def connect(given: Settings, deadline: Deadline | None = None) -> AdminClient:
        return proxy

    ports = Ports(
        connect_admin=connect,
        new_prober=lambda _s: cast(Prober, HealthyProber()),
        clock=lambda: now[0],
        monotonic=lambda: now[0],
    )
    fleet = Fleet(settings, galera_kind(), persistent=True, ports=ports)
    main_runner, other_runner = (fleet.new_runner(c) for c in settings.clusters)
    try:
        assert main_runner.run(Mode.APPLY).outcome is Outcome.UNCHANGED
        now[0] += 0.001
        assert other_runner.run(Mode.APPLY).outcome is Outcome.CHANGED
        assert (proxy.shared_reads, proxy.own_reads) == (1, 0), "both from one read"
        now[0] += 0.001
        assert other_runner.run(Mode.APPLY).outcome is Outcome.UNCHANGED
        assert proxy.shared_reads == 2, "a pass after its own LOAD reads again"
        now[0] += 0.001
        assert main_runner.run(Mode.APPLY).outcome is Outcome.UNCHANGED
        assert proxy.shared_reads == 2, "the other's LOAD is not this cluster's"
        now[0] += 1.0
        for runner in (main_runner, other_runner):
            assert runner.run(Mode.APPLY).outcome is Outcome.UNCHANGED
        assert (proxy.shared_reads, proxy.own_reads) == (3, 0), "a second later: one read"
        # ProxySQL's own managers and its peers: asked once for both clusters, and again
        # for both once RECHECK_S has passed
        assert asked(proxy) == (1, 1)
        now[0] += RECHECK_S
        for runner in (main_runner, other_runner):
            assert runner.run(Mode.APPLY).outcome is Outcome.UNCHANGED
        assert asked(proxy) == (2, 2)
    finally:
        main_runner.close()
        other_runner.close()
        fleet.close()
