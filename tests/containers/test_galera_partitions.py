"""galera-checker against a MariaDB Galera cluster in containers, under real network faults.

Three nodes on a Docker network of their own (tests/containers/cluster.py); ProxySQL's admin is
an emulator of this module's own (private_proxysql: not the lab's, so no lab port is used).
Hostgroups: writer 100, reader 101, backup writer 102, offline 9100; writer weights node1 1000 >
node2 500 > node3 100. Every scenario asserts runtime_mysql_servers after its passes, and a
sampler reads the writer hostgroup every 100 ms through the whole fault: it must never hold two
ONLINE writers."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.containers.cluster import GaleraContainers, cluster_settled
from tests.containers.scenario import WriterSampler, one_pass, routed, verdict_of
from tests.integration.rig import HG, Rig, seeded_rig
from tests.lab.proxysql import ProxySQLLab

pytestmark = [pytest.mark.docker]

SLOW = 1.5  # s: above the rig's connect (0.4 s) and read (0.6 s) timeouts and the pass deadline


# ============================================================================ fixtures


@pytest.fixture(scope="module")
def cluster(galera_image: str) -> Iterator[GaleraContainers]:
    containers = GaleraContainers(galera_image)
    try:
        containers.start()
        yield containers
    finally:
        containers.remove()


@pytest.fixture
def crig(cluster: GaleraContainers, private_proxysql: ProxySQLLab, tmp_path: Path) -> Iterator[Rig]:
    """The cluster whole and without faults, an empty admin endpoint, the roster seeded."""
    cluster_settled(cluster)
    private_proxysql.reset()
    with seeded_rig(tmp_path, private_proxysql, cluster.addresses()) as rig:
        yield rig


# ============================================================================ partitions


def test_writer_cut_from_its_peers_is_parked_and_the_majority_promoted(
    crig: Rig, cluster: GaleraContainers
) -> None:
    n1, n2, n3 = cluster.addresses()
    one_pass(crig)
    assert crig.writers == {n1}
    with WriterSampler(crig.proxysql) as sampler, cluster.fault():
        cluster.cut_from_peers(1)
        cluster.wait_state(1, "non-Primary")
        cluster.wait_state(2, "Primary")
        result = one_pass(crig)
        acted = sampler.mark()
        # the checker still reaches node1: its answer (non-Primary) is hard evidence, acted on
        # in this pass whatever retry_down says
        assert verdict_of(result, n1) == ("down", "wsrep_cluster_status=non-Primary")
        assert crig.writers == {n2}
        assert crig.backups == {n3}
        assert n1 in crig.offline
        assert routed(crig, n1) == set()
        assert f"writer {n2} (was {n1})" in result.summary
        version = crig.load_version()
        one_pass(crig)
        assert crig.load_version() == version, "the partition, unchanged, must not LOAD again"
    sampler.assert_never_two_writers()
    sampler.assert_not_writer_since(acted, n1)


@pytest.mark.parametrize("fail_back", [False, True])
def test_partition_heals_and_the_writer_rejoins_without_a_second_writer(
    crig: Rig, cluster: GaleraContainers, fail_back: bool
) -> None:
    n1, n2, n3 = cluster.addresses()
    crig.write_config(fail_back=fail_back, retry_up=2)
    crig.paced = True  # retry_up counts in time: passes one interval apart, as the scheduler's
    one_pass(crig)
    with WriterSampler(crig.proxysql) as sampler:
        with cluster.fault():
            cluster.cut_from_peers(1)
            cluster.wait_state(1, "non-Primary")
            cluster.wait_state(2, "Primary")
            one_pass(crig)
            assert crig.writers == {n2}
        cluster.wait_formed()  # node1 rejoined: Synced in a Primary component of 3
        first = one_pass(crig)
        verdict, reason = verdict_of(first, n1)
        assert verdict == "recovering", reason  # retry_up=2: one good probe is not enough
        assert routed(crig, n1) == set()
        assert crig.writers == {n2}
        for _ in range(3):
            one_pass(crig)
        if fail_back:
            # node1 takes the writer back; node2 drains before it leaves, never ONLINE beside it
            assert crig.writers == {n1}
            assert crig.backups >= {n3}
        else:
            assert crig.writers == {n2}
            assert crig.backups == {n1, n3}
        assert n1 not in crig.offline
    sampler.assert_never_two_writers()


def test_split_where_the_checker_reaches_only_the_minority_routes_nothing_to_it(
    crig: Rig, cluster: GaleraContainers
) -> None:
    """node1 (the writer) alone on one side; node2 and node3 form the Primary component on the
    other, which the checker cannot reach."""
    n1 = cluster.address(1)
    one_pass(crig)
    with WriterSampler(crig.proxysql) as sampler, cluster.fault():
        cluster.cut_from_peers(1)
        cluster.cut_from_checker(2)
        cluster.cut_from_checker(3)
        cluster.wait_state(1, "non-Primary")
        results = [one_pass(crig)]
        acted = sampler.mark()
        results.append(one_pass(crig))
        for result in results:
            assert verdict_of(result, n1)[0] == "down"
        # nothing is routed to the minority, and the writer hostgroup stays empty rather than
        # pointing at a node the checker cannot see
        assert crig.writers == set()
        assert routed(crig, n1) == set()
        assert n1 in crig.offline
        assert crig.in_hostgroup(HG.writer).keys() <= {n1}
    sampler.assert_never_two_writers()
    assert all(not s or s == {n1} for s in sampler.samples), "a writer the checker cannot see"
    sampler.assert_not_writer_since(acted, n1)


def test_reader_cut_from_its_peers_leaves_at_once_whatever_retry_down(
    crig: Rig, cluster: GaleraContainers
) -> None:
    n1, n2, n3 = cluster.addresses()
    crig.write_config(retry_down=3, writer_is_also_reader=1)
    one_pass(crig)
    assert crig.readers == {n1, n2, n3}
    with WriterSampler(crig.proxysql) as sampler, cluster.fault():
        cluster.cut_from_peers(3)
        cluster.wait_state(3, "non-Primary")
        result = one_pass(crig)
        assert verdict_of(result, n3) == ("down", "wsrep_cluster_status=non-Primary")
        assert crig.readers == {n1, n2}
        assert crig.writers == {n1}
        assert n3 in crig.offline
    sampler.assert_never_two_writers()


# ============================================================================ slow and lossy links


@pytest.mark.parametrize(("retry_down", "loads", "leaves"), [(0, 4, True), (2, 0, False)])
def test_slow_link_to_a_reader_flaps_only_without_retry_down(
    crig: Rig, cluster: GaleraContainers, retry_down: int, loads: int, leaves: bool
) -> None:
    """The link to node3 is slow for one pass, fast, slow again for one pass, fast: with
    retry_down=0 the reader leaves and returns each time (4 LOADs); with retry_down=2 a single
    slow probe moves nothing (no LOAD)."""
    n1, n2, n3 = cluster.addresses()
    crig.write_config(retry_down=retry_down, writer_is_also_reader=1)
    crig.paced = True
    one_pass(crig)
    assert crig.readers == {n1, n2, n3}
    version = crig.load_version()
    with WriterSampler(crig.proxysql) as sampler:
        for _ in range(2):
            with cluster.relays[3].slowed(SLOW):
                slow = one_pass(crig)
            verdict, reason = verdict_of(slow, n3)
            assert "unreachable" in reason, reason
            if leaves:
                assert verdict == "down"
                assert crig.readers == {n1, n2}
                assert n3 in crig.offline
            else:
                assert verdict == "suspect"
                assert "(1 of 2 bad probes before demotion)" in reason
                assert crig.readers == {n1, n2, n3}
            one_pass(crig)
            assert crig.readers == {n1, n2, n3}
            assert crig.writers == {n1}
    assert crig.load_version() - version == loads
    sampler.assert_never_two_writers()


def test_writer_cut_from_the_checker_only_is_replaced_while_the_cluster_stays_whole(
    crig: Rig, cluster: GaleraContainers
) -> None:
    """All packets between the checker and node1 dropped, the cluster healthy (G1, G16): after
    retry_down bad probes the writer is replaced, and the pass lines say why."""
    n1, n2 = cluster.address(1), cluster.address(2)
    crig.write_config(retry_down=2)
    crig.paced = True
    one_pass(crig)
    with WriterSampler(crig.proxysql) as sampler, cluster.fault():
        cluster.cut_from_checker(1)
        first = one_pass(crig)
        verdict, reason = verdict_of(first, n1)
        assert verdict == "suspect"
        assert "unreachable" in reason and "(1 of 2 bad probes before demotion)" in reason
        assert crig.writers == {n1}
        second = one_pass(crig)
        acted = sampler.mark()
        assert verdict_of(second, n1)[0] == "down"
        assert crig.writers == {n2}
        assert f"writer {n2} (was {n1})" in second.summary
        assert cluster.node_state(1).synced_primary, "the fault was meant for the link only"
    sampler.assert_never_two_writers()
    sampler.assert_not_writer_since(acted, n1)


def test_lossy_link_to_the_writer_moves_it_only_after_retry_down_bad_probes_in_a_row(
    crig: Rig, cluster: GaleraContainers
) -> None:
    """A share of the packets between the checker and node1 dropped at random: whatever the
    draw, node1 leaves the writer hostgroup in the pass of its second bad probe in a row, never
    earlier, and every pass line names its verdict (S4, G1)."""
    n1 = cluster.address(1)
    crig.write_config(retry_down=2)
    crig.paced = True
    one_pass(crig)
    streak = 0
    with WriterSampler(crig.proxysql) as sampler, cluster.fault():
        cluster.cut_from_checker(1, loss=0.3)
        for _ in range(8):
            was_writer = n1 in crig.writers
            result = one_pass(crig)
            verdict, reason = verdict_of(result, n1)
            if verdict in ("suspect", "down"):
                streak += 1
                assert "unreachable" in reason, reason
            else:
                streak = 0
            if was_writer:
                assert (n1 in crig.writers) == (streak < 2), (streak, verdict, reason)
            assert len(crig.writers) == 1
    sampler.assert_never_two_writers()
