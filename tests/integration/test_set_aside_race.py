"""An operator's staged edit set aside around a pass's LOAD, edited again while it is set
aside, on a ProxySQL of this module's own: his newest edit is what stays staged, and nothing
of it is loaded (rules S5, S11). The operator's UPDATE runs on his own admin connection the
moment the pass first writes his hostgroup after its LOAD (the write-back)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pymysql
import pytest

from checker_core.passes.result import Outcome
from checker_core.passes.runner import PassRunner
from tests.integration.sim_runner import one_pass, reset_sim_runner
from tests.lab.proxysql import ProxySQLLab, admin_cursor

pytestmark = [pytest.mark.proxysql]

OTHER = 10040  # a hostgroup no checker manages
HOST = "127.0.0.9"


@pytest.fixture
def runner(private_proxysql: ProxySQLLab, tmp_path: Path) -> Iterator[PassRunner]:
    with reset_sim_runner(private_proxysql, tmp_path / "checker") as made:
        yield made


def weights(lab: ProxySQLLab, table: str) -> list[int]:
    with admin_cursor(lab) as cur:
        cur.execute(f"SELECT weight FROM {table} WHERE hostgroup_id = %s", (OTHER,))
        return [int(w) for (w,) in cur.fetchall()]


def test_an_edit_made_while_set_aside_is_kept_as_the_operator_wrote_it(
    private_proxysql: ProxySQLLab, runner: PassRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    lab = private_proxysql
    for _ in range(20):  # until the layout is placed
        if one_pass(runner).outcome is Outcome.UNCHANGED:
            break
    else:
        pytest.fail("the checker never settled")
    managed = runner.settings.clusters[0].hostgroups.managed
    marks = ", ".join(["%s"] * len(managed))
    with admin_cursor(lab) as cur:
        cur.execute(
            "INSERT INTO mysql_servers (hostgroup_id, hostname, port, weight) "
            "VALUES (%s, %s, 3306, 10)",
            (OTHER, HOST),
        )
        # the managed rows gone from runtime: the next pass places them again, with a LOAD
        cur.execute(f"DELETE FROM mysql_servers WHERE hostgroup_id IN ({marks})", managed)
        cur.execute("LOAD MYSQL SERVERS TO RUNTIME")
        # his edit in progress, not loaded
        cur.execute(
            "UPDATE mysql_servers SET weight = 518 WHERE hostgroup_id = %s AND hostname = %s",
            (OTHER, HOST),
        )
    assert weights(lab, "mysql_servers") == [518]

    real = pymysql.cursors.Cursor.execute
    state = {"loaded": False, "edited": False}

    def execute(cur: pymysql.cursors.Cursor, query: str, args: Any = None) -> int:
        if query.startswith("LOAD MYSQL SERVERS"):
            state["loaded"] = True
        elif (
            state["loaded"]
            and not state["edited"]
            and not query.startswith(("SELECT", "SAVE"))
            and args is not None
            and OTHER in tuple(args)
        ):
            state["edited"] = True  # before the write-back's first statement: his next edit
            mine = lab.connect()
            try:
                with mine.cursor() as theirs:
                    real(
                        theirs,
                        "UPDATE mysql_servers SET weight = 600 "
                        "WHERE hostgroup_id = %s AND hostname = %s",
                        (OTHER, HOST),
                    )
            finally:
                mine.close()
        return real(cur, query, args)

    monkeypatch.setattr(pymysql.cursors.Cursor, "execute", execute)
    result = one_pass(runner)
    monkeypatch.undo()
    assert state["loaded"] and state["edited"], (state, result.warnings)
    assert weights(lab, "mysql_servers") == [600], "his newest edit stays staged"
    assert weights(lab, "runtime_mysql_servers") == [10], "and nothing of it is loaded"
    said = [w for w in result.warnings if "changed while it was set aside" in w]
    assert said == [
        f"an operator's staged edit of hostgroup {OTHER} changed while it was set aside: "
        "kept as they wrote it"
    ], result.warnings
