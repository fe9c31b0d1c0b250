"""What-if and readiness against the lab's real Galera cluster and GR group: the plan if nodes
failed now, from the real probes of the others, and whether losing any one node would leave a
writer and a reader. Neither changes anything in ProxySQL."""

from __future__ import annotations

import json
from typing import Any

import pytest

from checker_core.core.model import NodeAddress
from tests.integration.rig import HG, Rig
from tests.integration.test_galera_checker import snapshot


@pytest.mark.galera
@pytest.mark.proxysql
def test_assume_the_writer_down_prints_the_failover_and_changes_nothing(
    rig: Rig, nodes: list[NodeAddress]
) -> None:
    n1, n2, _ = nodes
    rig.passes(1)
    before = snapshot(rig)
    result = rig.run("run", "--dry-run", f"--assume-down={n1}")
    assert result.code == 0, result.stderr
    assert snapshot(rig) == before
    assert f"writer {n2} (was {n1})" in result.stdout
    assert f"what-if: assuming {n1} down" in result.stdout
    assert "LOAD MYSQL SERVERS TO RUNTIME;" in result.stdout
    both = rig.run("run", "--dry-run", f"--assume-down={n1},{n2}")
    assert both.code == 0, both.stderr
    assert f"writer {nodes[2]} (was {n1})" in both.stdout


@pytest.mark.galera
@pytest.mark.proxysql
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("run", "--assume-down=127.0.0.1:3311"), "need --dry-run"),
        (("run", "--dry-run", "--assume-down=nohostport"), "expected HOST:PORT"),
        (("run", "--dry-run", "--assume-down=127.0.0.1:9"), "in no cluster's roster"),
        (("run", "--dry-run", "--assume-lagging=127.0.0.1:3312"), "max_transactions_behind is 0"),
    ],
)
def test_what_if_refuses_what_it_cannot_assume(
    rig: Rig, nodes: list[NodeAddress], args: tuple[str, ...], message: str
) -> None:
    rig.passes(1)
    before = snapshot(rig)
    result = rig.run(*args)
    assert result.code == 2, result.stderr
    assert message in result.stderr + result.stdout
    assert "Traceback" not in result.stderr
    assert snapshot(rig) == before


@pytest.mark.galera
@pytest.mark.proxysql
def test_status_says_whether_a_failover_would_leave_a_writer(
    rig: Rig, galera: Any, nodes: list[NodeAddress]
) -> None:
    n1, n2, _ = nodes
    rig.passes(1)
    ready = rig.run("status", "--format", "json")
    assert ready.code == 0, ready.stderr
    [cluster] = json.loads(ready.stdout)["clusters"]
    assert cluster["failover_ready"] is True
    assert cluster["next_writers"] == [str(n2)]
    checked = rig.run("check-config")
    assert checked.code == 0, checked.stderr
    assert (
        f"cluster lab failover: ready: losing any one node leaves a writer and a reader; "
        f"next writer {n2}" in checked.stdout
    )
    galera.set_read_only(2, True)
    galera.set_read_only(3, True)
    table = rig.run("status")
    assert table.code == 0, table.stderr
    assert f"failover: not ready: losing {n1} leaves no writer" in table.stdout
    checked = rig.run("check-config")
    assert checked.code == 0, checked.stderr
    assert f"warning: cluster lab: failover not ready: losing {n1} leaves no writer" in (
        checked.stderr
    )
    [cluster] = json.loads(rig.run("status", "--format", "json").stdout)["clusters"]
    assert cluster["failover_ready"] is False
    assert cluster["next_writers"] == []
    assert rig.writers == {n1}


@pytest.mark.gr
@pytest.mark.proxysql
def test_gr_assume_the_primary_down(gr: Any, gr_rig: tuple[Rig, list[NodeAddress]]) -> None:
    rig, members = gr_rig
    rig.passes(1)
    [primary] = rig.members(HG.writer)
    assert primary in members
    before = rig.admin.read_rows(HG.all)
    result = rig.run("run", "--dry-run", f"--assume-down={primary}")
    assert result.code == 0, result.stderr
    assert f"(was {primary})" in result.stdout
    assert "writer none" not in result.stdout
    assert rig.admin.read_rows(HG.all) == before
