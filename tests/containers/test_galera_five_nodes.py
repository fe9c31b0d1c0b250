"""galera-checker against a 5-node MariaDB Galera cluster in containers: a 2|3 split with the
writer on the minority side (tests/containers/cluster.py; a ProxySQL admin emulator of the
module's own). A sampler reads the writer hostgroup every 100 ms through the fault and the heal.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.containers.cluster import GaleraContainers
from tests.containers.scenario import WriterSampler, one_pass, verdict_of
from tests.integration.rig import Rig
from tests.lab.proxysql import ProxySQLLab

pytestmark = [pytest.mark.docker]


@pytest.fixture(scope="module")
def five(galera_image: str) -> Iterator[GaleraContainers]:
    containers = GaleraContainers(galera_image, size=5)
    try:
        containers.start()
        yield containers
    finally:
        containers.remove()


def test_five_nodes_split_two_three_with_the_writer_in_the_minority(
    five: GaleraContainers, private_proxysql: ProxySQLLab, tmp_path: Path
) -> None:
    """node1 (the writer) and node2 on one side, nodes 3-5 on the other; the checker reaches
    all five. Both minority nodes go non-Primary and are parked in the same pass; the heaviest
    majority node takes the writer; healed, both rejoin as backups."""
    private_proxysql.reset()
    rig = Rig("galera-checker", tmp_path, private_proxysql)
    n1, n2, n3, n4, n5 = five.addresses()
    try:
        rig.seed({n1: 1000, n2: 500, n3: 300, n4: 200, n5: 100})
        one_pass(rig)
        assert rig.writers == {n1}
        assert rig.backups == {n2, n3, n4, n5}
        with WriterSampler(rig.proxysql) as sampler:
            with five.fault():
                five.split({1, 2})
                for n in (1, 2):
                    five.wait_state(n, "non-Primary")
                five.wait_state(3, "Primary")
                result = one_pass(rig)
                acted = sampler.mark()
                for node in (n1, n2):
                    assert verdict_of(result, node) == (
                        "down",
                        "wsrep_cluster_status=non-Primary",
                    )
                assert rig.writers == {n3}
                assert rig.backups == {n4, n5}
                assert rig.offline >= {n1, n2}
                assert f"writer {n3} (was {n1})" in result.summary
            five.wait_formed()
            for _ in range(2):
                one_pass(rig)
            assert rig.writers == {n3}
            assert rig.backups == {n1, n2, n4, n5}
        sampler.assert_never_two_writers()
        sampler.assert_not_writer_since(acted, n1)
    finally:
        rig.close()
