"""An older version's lowered mysql-auto_increment_delay_multiplex, put right by one acting pass
against a ProxySQL of this module's own: from ProxySQL's staged and runtime values, whatever pid
the record names, with nothing saved to ProxySQL's disk. A real ProxySQL keeps a staged value as
typed after a LOAD ('02048' beside a runtime 2048): that is no unloaded edit, and does not stop
the put-back."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from checker_core.core.attached import AUTO_INCREMENT_DELAY
from checker_core.edges.proxysql_sessions import record_path
from checker_core.passes.result import Mode, PassResult
from checker_core.passes.runner import PassRunner
from tests.integration.sim_runner import sim_runner
from tests.lab.proxysql import ProxySQLLab, admin_cursor

pytestmark = [pytest.mark.proxysql]

OTHER = "mysql-max_connections"


def value(lab: ProxySQLLab, table: str, name: str = AUTO_INCREMENT_DELAY) -> str:
    with admin_cursor(lab) as cur:
        cur.execute(f"SELECT variable_value FROM {table} WHERE variable_name = %s", (name,))
        (row,) = cur.fetchall()
    return str(row[0])


def stage(lab: ProxySQLLab, name: str, text: str, *, load: bool) -> None:
    with admin_cursor(lab) as cur:
        cur.execute(
            "UPDATE global_variables SET variable_value = %s WHERE variable_name = %s",
            (text, name),
        )
        if load:
            cur.execute("LOAD MYSQL VARIABLES TO RUNTIME")


@pytest.fixture
def runner(private_proxysql: ProxySQLLab, tmp_path: Path) -> Iterator[PassRunner]:
    lab = private_proxysql
    lab.reset()
    delay, other = (
        value(lab, "runtime_global_variables"),
        value(lab, "runtime_global_variables", OTHER),
    )
    try:
        with sim_runner(lab, tmp_path / "checker") as (_, made):
            yield made
    finally:
        stage(lab, OTHER, other, load=False)
        stage(lab, AUTO_INCREMENT_DELAY, delay, load=True)


def acting_pass(runner: PassRunner) -> PassResult:
    result = runner.run(Mode.APPLY)
    return result


@pytest.mark.parametrize(
    "left",
    ["lowered", "staged-never-loaded", "put-back-never-loaded", "another-staged-as-typed"],
)
def test_one_acting_pass_puts_an_older_versions_lowered_delay_right(
    private_proxysql: ProxySQLLab, runner: PassRunner, left: str
) -> None:
    lab = private_proxysql
    operators = value(lab, "runtime_global_variables")
    on_disk = value(lab, "disk.global_variables")
    assert operators != "0", "ProxySQL's default keeps a connection attached after an INSERT"
    (cluster,) = runner.settings.clusters
    record = record_path(runner.store, cluster.name)
    runner.store.ensure_dir()
    # pid 1: a switchover run as its container's first process, or init on the host
    record.write_text(json.dumps({"value": operators, "pid": 1}))
    if left == "staged-never-loaded":  # killed between its UPDATE and its LOAD
        stage(lab, AUTO_INCREMENT_DELAY, "0", load=False)
    else:
        stage(lab, AUTO_INCREMENT_DELAY, "0", load=True)
    if left == "put-back-never-loaded":  # an older put-back whose LOAD failed
        stage(lab, AUTO_INCREMENT_DELAY, operators, load=False)
    if left == "another-staged-as-typed":
        other = value(lab, "runtime_global_variables", OTHER)
        stage(lab, OTHER, f"0{other}", load=True)
        if lab.is_real:
            assert value(lab, "global_variables", OTHER) == f"0{other}", "kept as typed"
    result = acting_pass(runner)
    assert result.outcome.exit_code == 0, result.message
    said = [w for w in result.warnings if AUTO_INCREMENT_DELAY in w]
    assert len(said) == 1, result.warnings
    assert value(lab, "runtime_global_variables") == operators
    assert value(lab, "global_variables") == operators
    assert value(lab, "disk.global_variables") == on_disk, "nothing saved to disk"
    assert not record.exists()
    again = acting_pass(runner)
    assert not [w for w in again.warnings if AUTO_INCREMENT_DELAY in w], "said once"


def test_an_operators_unloaded_edit_keeps_the_delay_lowered_and_says_why(
    private_proxysql: ProxySQLLab, runner: PassRunner
) -> None:
    lab = private_proxysql
    operators = value(lab, "runtime_global_variables")
    (cluster,) = runner.settings.clusters
    record = record_path(runner.store, cluster.name)
    runner.store.ensure_dir()
    record.write_text(json.dumps({"value": operators, "pid": 1}))
    stage(lab, AUTO_INCREMENT_DELAY, "0", load=True)
    stage(lab, OTHER, "77", load=False)  # someone's edit, not loaded yet
    said = " ".join(acting_pass(runner).warnings)
    assert f"the staged, unloaded value of {OTHER} live" in said
    assert value(lab, "runtime_global_variables", OTHER) != "77", "their edit is not loaded"
    assert value(lab, "runtime_global_variables") == "0" and record.exists()
    with admin_cursor(lab) as cur:
        cur.execute("LOAD MYSQL VARIABLES TO MEMORY")  # the edit given up
    acting_pass(runner)
    assert value(lab, "runtime_global_variables") == operators and not record.exists()
