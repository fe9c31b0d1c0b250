"""A SAVE MYSQL SERVERS TO DISK owed by an earlier pass, retried by a pass with nothing to load,
on a ProxySQL of this module's own: an operator's edit staged in a hostgroup no checker manages
goes neither live nor to disk, and stays staged (rule S2). A ProxySQL restart loads the disk,
so a SAVE that carried the edit would make it live."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from checker_core.passes.result import Outcome
from checker_core.passes.runner import PassRunner
from tests.integration.sim_runner import one_pass, reset_sim_runner
from tests.lab.proxysql import ProxySQLLab, admin_cursor

pytestmark = [pytest.mark.proxysql]

OTHER = 9500  # a hostgroup no checker manages


@pytest.fixture
def runner(private_proxysql: ProxySQLLab, tmp_path: Path) -> Iterator[PassRunner]:
    with reset_sim_runner(private_proxysql, tmp_path / "checker") as made:
        yield made


def rows(lab: ProxySQLLab, table: str) -> list[tuple[str, int, int]]:
    """Hostgroup OTHER's servers in `table` (a runtime status is ProxySQL's monitor's, so
    the rows are compared by address and weight)."""
    with admin_cursor(lab) as cur:
        cur.execute(
            f"SELECT hostname, port, weight FROM {table} WHERE hostgroup_id = %s "
            "ORDER BY hostname, port",
            (OTHER,),
        )
        return [(str(h), int(p), int(w)) for h, p, w in cur.fetchall()]


def test_an_owed_save_keeps_an_operators_staged_edit_off_disk_and_staged(
    private_proxysql: ProxySQLLab, runner: PassRunner
) -> None:
    lab = private_proxysql
    assert runner.settings.run.persist
    for _ in range(20):  # until the layout is placed and the counters settled
        if one_pass(runner).outcome is Outcome.UNCHANGED:
            break
    else:
        pytest.fail("the checker never settled")
    with admin_cursor(lab) as cur:
        # live and saved: the operator's hostgroup as it stands
        cur.execute(
            "INSERT INTO mysql_servers (hostgroup_id, hostname, port, weight) "
            "VALUES (%s, '127.0.0.9', 3306, 10), (%s, '127.0.0.10', 3306, 10)",
            (OTHER, OTHER),
        )
        cur.execute("LOAD MYSQL SERVERS TO RUNTIME")
        cur.execute("SAVE MYSQL SERVERS TO DISK")
        # his edit in progress: one weight changed, one server added, neither loaded
        cur.execute(
            "UPDATE mysql_servers SET weight = 77 WHERE hostgroup_id = %s AND hostname = %s",
            (OTHER, "127.0.0.9"),
        )
        cur.execute(
            "INSERT INTO mysql_servers (hostgroup_id, hostname, port, weight) "
            "VALUES (%s, '127.0.0.11', 3306, 5)",
            (OTHER,),
        )
    live, edit = rows(lab, "runtime_mysql_servers"), rows(lab, "mysql_servers")
    assert live != edit
    (cluster,) = runner.settings.clusters
    assert runner.store.owe_save(cluster.name, True) is None  # an earlier SAVE failed
    result = one_pass(runner)
    assert result.outcome is Outcome.UNCHANGED, result.message
    assert result.applied is not None and result.applied.saved, result.warnings
    assert not runner.store.save_owed(cluster.name)
    assert rows(lab, "disk.mysql_servers") == live, "disk holds what is live"
    assert rows(lab, "runtime_mysql_servers") == live, "nothing loaded"
    assert rows(lab, "mysql_servers") == edit, "the edit is staged still"
    kept = [w for w in result.warnings if "kept staged, not saved to disk" in w]
    assert kept and f"hostgroup {OTHER} (2 rows)" in kept[0], result.warnings
    again = one_pass(runner)
    assert again.outcome is Outcome.UNCHANGED
    assert rows(lab, "mysql_servers") == edit
