"""The auto-increment delay a switchover lowers while the old writer drains: recorded before it
changes, put back by the switchover or, when that died, by the next pass; never a LOAD that
would make an operator's other staged variables live."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

from checker_core.core.attached import AUTO_INCREMENT_DELAY
from checker_core.edges import proxysql_sessions as guard
from checker_core.edges.memory import StateStore
from checker_core.edges.proxysql import AdminClient
from checker_core.settings.schema import Checker


class VariablesAdmin:
    """global_variables (staged) and runtime_global_variables, as ProxySQL's admin keeps them."""

    def __init__(self, **values: str) -> None:
        self.staged = {AUTO_INCREMENT_DELAY: "5", "mysql-max_connections": "2048", **values}
        self.live = dict(self.staged)
        self.loads = 0

    def execute(self, sql: str, params: Sequence[object] = ()) -> list[tuple[Any, ...]]:
        if sql.startswith("UPDATE global_variables"):
            value, name = params
            self.staged[str(name)] = str(value)
        elif sql == "LOAD MYSQL VARIABLES TO RUNTIME":
            self.loads += 1
            self.live = dict(self.staged)
        elif sql == guard.STAGED_DIFFERS:
            return [(k,) for k, v in sorted(self.staged.items()) if self.live.get(k) != v]
        return []

    def read_runtime_variables(self, names: Sequence[str]) -> dict[str, str]:
        return {n: self.live[n] for n in names if n in self.live}


def admin_of(fake: VariablesAdmin) -> AdminClient:
    return cast("AdminClient", fake)


def test_lowered_for_the_drain_and_put_back_after(tmp_path: Path) -> None:
    fake, store = VariablesAdmin(), StateStore(tmp_path, Checker.GALERA)
    said = guard.lower_delay(admin_of(fake), store, "lab")
    assert said.endswith("lowered from 5 to 0 while the old writer drains")
    assert fake.live[AUTO_INCREMENT_DELAY] == "0"
    assert not guard.leftover(store, "lab"), "this process is alive and puts it back itself"
    assert (
        guard.restore_delay(admin_of(fake), store, "lab") == f"{AUTO_INCREMENT_DELAY} put back to 5"
    )
    assert fake.live[AUTO_INCREMENT_DELAY] == "5"
    assert guard.restore_delay(admin_of(fake), store, "lab") is None, "nothing left to put back"


def test_no_load_that_would_make_other_staged_variables_live(tmp_path: Path) -> None:
    fake, store = VariablesAdmin(), StateStore(tmp_path, Checker.GALERA)
    fake.staged["mysql-max_connections"] = "10"  # an operator's edit, not loaded yet
    said = guard.lower_delay(admin_of(fake), store, "lab")
    assert "left at 5" in said and "mysql-max_connections" in said
    assert fake.loads == 0 and fake.live[AUTO_INCREMENT_DELAY] == "5"
    assert guard.restore_delay(admin_of(fake), store, "lab") is None


def test_a_value_someone_set_meanwhile_is_left_as_it_is(tmp_path: Path) -> None:
    fake, store = VariablesAdmin(), StateStore(tmp_path, Checker.GALERA)
    guard.lower_delay(admin_of(fake), store, "lab")
    fake.staged[AUTO_INCREMENT_DELAY] = fake.live[AUTO_INCREMENT_DELAY] = "2"
    said = guard.restore_delay(admin_of(fake), store, "lab")
    assert said is not None and "left as it is" in said
    assert fake.live[AUTO_INCREMENT_DELAY] == "2"


def test_a_dead_switchovers_lowered_delay_is_put_back_by_the_next_pass(tmp_path: Path) -> None:
    fake, store = VariablesAdmin(), StateStore(tmp_path, Checker.GALERA)
    guard.lower_delay(admin_of(fake), store, "lab")
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        check=True,
        capture_output=True,
        text=True,
    )
    record = next(tmp_path.glob("galera.lab.auto_increment_delay"))
    record.write_text(
        record.read_text().replace(str(__import__("os").getpid()), gone.stdout.strip())
    )
    assert guard.leftover(store, "lab")
    said = guard.restore_delay(admin_of(fake), store, "lab")
    assert said is not None and "is gone" in said
    assert fake.live[AUTO_INCREMENT_DELAY] == "5"
    assert not guard.leftover(store, "lab")


def test_nothing_is_lowered_without_a_record_of_what_to_put_back(tmp_path: Path) -> None:
    fake = VariablesAdmin()
    blocked = tmp_path / "not-a-dir"
    blocked.write_text("")  # the state directory cannot be made
    said = guard.lower_delay(admin_of(fake), StateStore(blocked, Checker.GALERA), "lab")
    assert "left at 5: its value not recorded" in said
    assert fake.loads == 0 and fake.live[AUTO_INCREMENT_DELAY] == "5"


def test_a_record_naming_no_process_counts_as_left_over(tmp_path: Path) -> None:
    fake, store = VariablesAdmin(), StateStore(tmp_path, Checker.GALERA)
    guard.lower_delay(admin_of(fake), store, "lab")
    record = next(tmp_path.glob("galera.lab.auto_increment_delay"))
    record.write_text(json.dumps({"value": "5", "pid": 0}))
    assert guard.leftover(store, "lab")
    assert guard.restore_delay(admin_of(fake), store, "lab") is not None
    assert fake.live[AUTO_INCREMENT_DELAY] == "5"
