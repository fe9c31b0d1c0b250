"""Several proxies in a ProxySQL Cluster, a checker beside each, over the lab's real Galera: only
the acting proxy's checker writes and LOADs; the next one takes over when it dies, the role goes
back only after a full window, and a standby never LOADs, even when its proxy's rows differ."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from checker_core.core.model import NodeAddress
from checker_core.core.peers import ClusterTiming, is_alive
from checker_core.edges.proxysql_peers import list_peers, read_cluster_view
from tests.integration.rig import HG, PassRun, Rig, admin_for, as_configured
from tests.lab.process import LabError, wait_until
from tests.lab.proxysql_cluster import (
    CHECK_INTERVAL_MS,
    DIFFS_BEFORE_SYNC,
    STATUS_FREQUENCY,
    ProxyCluster,
)
from tests.lab.require import unavailable

pytestmark = [pytest.mark.galera, pytest.mark.proxysql]

TIMING = ClusterTiming(CHECK_INTERVAL_MS, STATUS_FREQUENCY, DIFFS_BEFORE_SYNC)
WINDOW_S = TIMING.window_ms / 1000
# long enough for a window and a few passes of every checker, short enough to fail fast
TAKEOVER_TIMEOUT = 6 * WINDOW_S
# what an acting checker's pass comes out as (deferred: a LOAD in the same second waits a pass)
ACTED = ("changed", "unchanged", "deferred")


@pytest.fixture(scope="module")
def proxy_cluster() -> Iterator[ProxyCluster]:
    cluster = ProxyCluster()
    try:
        cluster.up()
        # every checker counts its own proxy only after two windows of uptime: from then on the
        # first proxy in the order acts
        cluster.wait_up_for(2 * WINDOW_S + 1)
    except LabError as exc:
        cluster.down()
        unavailable(f"three lab proxies did not come up: {exc}")
    try:
        yield cluster
    finally:
        cluster.down()


@pytest.fixture
def rigs(
    galera: Any, proxy_cluster: ProxyCluster, tmp_path: Path, nodes: list[NodeAddress]
) -> Iterator[list[Rig]]:
    """One checker per proxy, in proxy order; the roster seeded on the first proxy and synced;
    every proxy settled (a proxy a test restarted too), so the first in the order acts."""
    proxy_cluster.wait_up_for(2 * WINDOW_S + 1)
    proxy_cluster.configure()
    made: list[Rig] = []
    try:
        for index, proxy in enumerate(proxy_cluster.proxies):
            home = tmp_path / f"proxy{index}"
            home.mkdir()
            made.append(Rig("galera-checker", home, proxy))
        n1, n2, n3 = nodes
        made[0].seed({n1: 1000, n2: 500, n3: 100})
        wait_until(lambda: converged(made), 30, "the seeded roster on every proxy")
        # configure() listed the peers anew: a real ProxySQL checks their status again only
        # after a status interval, and until then its checker sees them dead, not alive
        wait_until(
            lambda: all(sees_every_peer_alive(r, proxy_cluster) for r in made),
            30,
            "every proxy to see its peers alive",
            interval=0.2,
        )
        proxy_cluster.wait_next_second()  # so the acting checker's first LOAD is not deferred
        yield made
    finally:
        for rig in made:
            rig.close()


def sees_every_peer_alive(rig: Rig, cluster: ProxyCluster) -> bool:
    """What the rig's checker reads of its proxy's peers: every one checked within the window."""
    me = cluster.address(cluster.proxies.index(rig.proxysql))
    listed = list_peers(rig.admin)
    if set(listed) != set(cluster.addresses):
        return False  # a proxy that lists no peer would pass the check below vacuously
    view = read_cluster_view(rig.admin, me, listed)
    return all(p.address == me or is_alive(p, view.now, view.timing) for p in view.peers)


def converged(rigs: list[Rig]) -> bool:
    rows = [as_configured(rig.admin.read_rows(HG.all).runtime) for rig in rigs]
    return bool(rows[0]) and all(r == rows[0] for r in rows)


def acting_index(cluster: ProxyCluster) -> int:
    """The documented order: hostname, then port."""
    return min(range(len(cluster.proxies)), key=cluster.address)


def run_ok(rig: Rig) -> PassRun:
    result = rig.run()
    assert result.code == 0, result.stderr
    return result


def outcome(result: PassRun) -> str:
    passes = [line for line in result.logs if line.get("event") == "pass"]
    assert len(passes) == 1, result.stderr
    return str(passes[0]["outcome"])


def loaded(result: PassRun) -> bool:
    return any(line.get("loaded") for line in result.logs if line.get("event") == "pass")


def test_only_the_acting_checker_loads_through_a_failover(
    rigs: list[Rig], proxy_cluster: ProxyCluster, galera: Any, nodes: list[NodeAddress]
) -> None:
    n1, n2, _ = nodes
    acting = acting_index(proxy_cluster)
    standbys = [i for i in range(3) if i != acting]
    first = run_ok(rigs[acting])
    assert outcome(first) == "changed" and loaded(first)
    assert "acting for the ProxySQL Cluster (3 of 3 proxies alive)" in first.summary
    for i in standbys:
        seen = run_ok(rigs[i])
        assert outcome(seen) == "standby" and not loaded(seen), seen.summary
        assert f"standby: {proxy_cluster.address(acting)} acts" in seen.summary
    wait_until(lambda: converged(rigs), 30, "the acting checker's rows on every proxy")
    assert all(rig.writers == {n1} for rig in rigs)
    proxy_cluster.wait_next_second()  # past the peers' pulls, or the next LOAD waits a pass

    galera.kill(1)
    results = {i: run_ok(rigs[i]) for i in [acting, *standbys]}
    assert loaded(results[acting]) and rigs[acting].writers == {n2}
    for i in standbys:
        assert outcome(results[i]) == "standby" and not loaded(results[i])
    wait_until(lambda: converged(rigs), 30, "the failover on every proxy")
    assert all(rig.writers == {n2} for rig in rigs)


def test_when_the_acting_proxy_dies_the_next_one_acts_and_gets_the_role_back_only_later(
    rigs: list[Rig], proxy_cluster: ProxyCluster, galera: Any, nodes: list[NodeAddress]
) -> None:
    n1, n2, _ = nodes
    order = sorted(range(3), key=proxy_cluster.address)
    acting, successor, last = order
    run_ok(rigs[acting])
    for i in (successor, last):
        run_ok(rigs[i])
    wait_until(lambda: converged(rigs), 30, "the first layout on every proxy")

    with proxy_cluster.stopped(acting):
        galera.kill(1)
        passes: list[PassRun] = []

        def took_over() -> bool:
            passes.append(run_ok(rigs[successor]))
            assert outcome(run_ok(rigs[last])) == "standby"
            return outcome(passes[-1]) == "changed"

        wait_until(took_over, TAKEOVER_TIMEOUT, "the next proxy's checker to act", interval=0.5)
        assert all(not loaded(p) for p in passes[:-1]), [p.summary for p in passes]
        assert f"took over from {proxy_cluster.address(acting)}" in passes[-1].summary
        assert rigs[successor].writers == {n2}
    rigs[acting].close()  # its admin connection died with the proxy
    rigs[acting].admin = admin_for(proxy_cluster.proxies[acting])

    # back, with a fresh uptime: it stands by (first until it has checked its peers) while
    # the successor acts
    back: list[PassRun] = []

    def names_the_successor() -> bool:
        back.append(run_ok(rigs[acting]))
        return f"standby: {proxy_cluster.address(successor)} acts" in back[-1].summary

    wait_until(names_the_successor, 2 * WINDOW_S, "the restarted proxy to see who acts", 0.5)
    assert all(outcome(p) == "standby" for p in back), [p.summary for p in back]
    still = run_ok(rigs[successor])
    assert outcome(still) in ACTED and "acting for" in still.summary
    wait_until(lambda: converged(rigs), 30, "the restarted proxy to take the peers' rows")
    assert rigs[acting].writers == {n2}

    def role_back() -> bool:
        return outcome(run_ok(rigs[acting])) in ACTED

    wait_until(role_back, TAKEOVER_TIMEOUT, "the first proxy to act again", interval=0.5)
    handed = run_ok(rigs[successor])
    assert outcome(handed) == "standby", handed.summary
    assert n1 not in rigs[acting].writers


def test_a_standby_never_loads_when_its_proxys_rows_differ_and_reports_the_split(
    rigs: list[Rig], proxy_cluster: ProxyCluster, nodes: list[NodeAddress]
) -> None:
    acting = acting_index(proxy_cluster)
    standby = next(i for i in range(3) if i != acting)
    run_ok(rigs[acting])
    wait_until(lambda: converged(rigs), 30, "the first layout on every proxy")
    # someone LOADs other rows on the standby's proxy in the second the acting proxy LOADs:
    # neither epoch is newer, so neither pulls the other's rows
    proxy_cluster.load_in_one_second({standby: 7, acting: 8}, HG.writer)
    version = proxy_cluster.version(standby)
    passes: list[PassRun] = []

    def split_reported() -> bool:
        passes.append(run_ok(rigs[standby]))
        return "ProxySQL Cluster split" in passes[-1].summary

    try:
        wait_until(split_reported, 30, "the standby to report the split", interval=0.5)
    except LabError as exc:
        raise AssertionError(f"{exc}; last pass: {passes[-1].summary}") from None
    assert all(outcome(p) == "standby" and not loaded(p) for p in passes)
    warnings = [line for line in passes[-1].logs if line.get("event") == "state"]
    assert any("ProxySQL Cluster split" in str(w.get("reason")) for w in warnings)
    assert proxy_cluster.version(standby) == version, "the standby's checker never LOADs"


def test_an_address_not_in_proxysql_servers_is_refused(
    rigs: list[Rig], proxy_cluster: ProxyCluster
) -> None:
    rig = rigs[0]
    rig.proxysql_settings["cluster_address"] = "127.0.0.1:1"
    rig.write_config()
    before = proxy_cluster.version(0)
    result = rig.run()
    assert result.code == 2, result.stderr
    assert "proxysql.cluster_address 127.0.0.1:1 is not in runtime_proxysql_servers" in (
        result.summary
    )
    checked = rig.run("check-config")
    assert checked.code == 2
    assert "127.0.0.1:1 is not in runtime_proxysql_servers" in checked.stderr
    assert proxy_cluster.version(0) == before
