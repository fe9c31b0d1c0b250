"""An operator's edit staged in mysql_servers and not loaded is his, on a real ProxySQL: a
paused pass writes nothing, and a failover's LOAD carries none of it and leaves it staged.
Hostgroups and weights as in test_galera_checker: node1 1000 > node2 500 > node3 100."""

from __future__ import annotations

from typing import Any

import pytest

from checker_core.core.model import NodeAddress, ServerStatus
from tests.integration.rig import HG, Rig

pytestmark = [pytest.mark.galera, pytest.mark.proxysql]


def settled(rig: Rig) -> None:
    result = rig.run()
    assert result.code == 0, result.stderr


def test_a_paused_pass_leaves_an_operators_staged_drain_untouched(
    rig: Rig, nodes: list[NodeAddress]
) -> None:
    n1 = nodes[0]
    settled(rig)
    assert rig.writers == {n1}
    paused = rig.run("pause", "--reason", "draining node1 by hand")
    assert paused.code == 0, paused.stderr
    rig.admin.execute(
        "UPDATE mysql_servers SET status = 'OFFLINE_SOFT' "
        "WHERE hostgroup_id = %s AND hostname = %s AND port = %s",
        (HG.writer, n1.host, n1.port),
    )
    staged, version = rig.staged(), rig.load_version()
    result = rig.run()
    assert result.code == 0, result.stderr
    assert "paused" in result.summary
    assert rig.staged() == staged, "the drain is staged as the operator left it"
    assert rig.load_version() == version
    assert rig.writers == {n1}, "nothing loaded: node1 still takes the writes"
    rig.run("resume")


def test_a_failover_leaves_an_operators_staged_template_edit_staged_and_not_live(
    rig: Rig, galera: Any, nodes: list[NodeAddress]
) -> None:
    n1, n2, n3 = nodes
    settled(rig)
    assert rig.writers == {n1}
    # half of taking node3 out: its template rows staged away, its managed rows still there
    rig.admin.execute(
        "DELETE FROM mysql_servers WHERE hostgroup_id IN (%s, %s) AND hostname = %s AND port = %s",
        (*HG.templates, n3.host, n3.port),
    )
    staged_templates = rig.admin.read_rows(HG.templates).staging
    galera.kill(1)
    failover = rig.run()
    assert failover.code == 0, failover.stderr
    assert rig.writers == {n2}, failover.summary
    assert "hostgroup 8100 (1 row), hostgroup 8101 (1 row) kept staged, not loaded" in (
        failover.stderr
    ), failover.stderr
    rows = rig.admin.read_rows(HG.templates)
    assert rows.staging == staged_templates, "the operator's edit is still staged"
    assert {r.node for r in rows.runtime} == {n1, n2, n3}, "and not live"
    after = rig.run()
    assert after.code == 0, after.summary + after.stderr
    assert "not in the roster" not in after.summary
    assert all(r.status is not ServerStatus.OFFLINE_HARD for r in rig.staged())
