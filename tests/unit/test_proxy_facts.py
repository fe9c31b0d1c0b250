"""What a pass asks its proxy besides the rows is asked again on a new connection or after
RECHECK_S, never on every daemon pass; a scheduler pass (a new connection each) always asks."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from checker_core.edges import native
from checker_core.edges.admin_errors import AdminQueryFailed
from checker_core.edges.proxysql import AdminClient
from checker_core.passes.proxy_facts import RECHECK_S, ProxyFacts, Recheck, SharedFacts
from tests.unit.config_cases import galera_runner


class CountingAdmin(AdminClient):
    """Answers the runtime-variables question, counting how often it was asked."""

    def __init__(self, value: str = "10000", failing: bool = False) -> None:
        self.where = "counting admin"
        self.asked = 0
        self.value, self.failing = value, failing

    def read_runtime_variables(self, names: Sequence[str]) -> dict[str, str]:
        self.asked += 1
        if self.failing:
            raise AdminQueryFailed("counting admin: no such table")
        return dict.fromkeys(names, self.value)

    def close(self) -> None:
        pass


def facts_at(tmp_path: Path, now: list[float], persistent: bool = True) -> ProxyFacts:
    runner = galera_runner(tmp_path, persistent)
    return ProxyFacts(runner.settings, runner.store, persistent, lambda: now[0])


@pytest.mark.parametrize(
    ("steps", "asked"),
    [
        # (seconds later, a new connection?) after the first question
        ([], 1),
        ([(0.1, False), (1.0, False), (RECHECK_S - 0.01, False)], 1),
        ([(RECHECK_S, False)], 2),
        ([(0.1, True)], 2),
        ([(0.1, True), (0.2, False), (RECHECK_S + 0.05, False)], 2),
        ([(0.1, True), (0.2, False), (RECHECK_S + 0.2, False)], 3),
    ],
)
def test_runtime_variables_are_asked_per_connection_and_every_recheck(
    tmp_path: Path, steps: list[tuple[float, bool]], asked: int
) -> None:
    now = [100.0]
    facts = facts_at(tmp_path, now)
    admins = [CountingAdmin()]
    assert facts.runtime_variables(admins[-1], ["mysql-x"]) == {"mysql-x": "10000"}
    for later, new_connection in steps:
        now[0] = 100.0 + later
        if new_connection:
            admins.append(CountingAdmin())
        assert facts.runtime_variables(admins[-1], ["mysql-x"]) == {"mysql-x": "10000"}
    assert sum(a.asked for a in admins) == asked


def test_variables_that_cannot_be_read_are_none_and_not_asked_again_at_once(
    tmp_path: Path,
) -> None:
    now = [100.0]
    facts = facts_at(tmp_path, now)
    admin = CountingAdmin(failing=True)
    assert facts.runtime_variables(admin, ["mysql-x"]) == {}
    assert facts.runtime_variables(admin, ["mysql-x"]) == {}
    assert admin.asked == 1


def test_nothing_wanted_asks_nothing(tmp_path: Path) -> None:
    facts = facts_at(tmp_path, [100.0])
    admin = CountingAdmin()
    assert facts.runtime_variables(admin, []) == {}
    assert admin.asked == 0


def test_recheck_keeps_a_value_until_due() -> None:
    now = [0.0]
    recheck: Recheck[int] = Recheck(0, lambda: now[0])
    first: Any = CountingAdmin()
    assert recheck.due(first)
    assert recheck.keep(first, 7) == 7
    assert (recheck.due(first), recheck.value) == (False, 7)
    assert recheck.due(CountingAdmin()), "another connection asks again"
    now[0] = RECHECK_S
    assert recheck.due(first)


class NativeAdmin(AdminClient):
    """ProxySQL's own managers: a mysql_galera_hostgroups row over `hostgroup`, asked through
    execute; `hold`: an answer waits for it."""

    def __init__(self, hostgroup: int) -> None:
        self.where = "native admin"
        self.hostgroup = hostgroup
        self.asked = 0
        self.hold: threading.Event | None = None
        self.asking = threading.Event()

    def execute(self, sql: str, params: Sequence[object] = ()) -> list[tuple[Any, ...]]:
        assert sql == native.QUERY
        self.asked += 1
        self.asking.set()
        if self.hold is not None:
            self.hold.wait(10)
        h = self.hostgroup
        return [("runtime_mysql_galera_hostgroups", h, h + 2, h + 1, h + 900)]

    def close(self) -> None:
        pass


def test_a_fleets_native_managers_are_asked_once_and_never_waited_for_again(
    tmp_path: Path,
) -> None:
    now = [100.0]
    settings = galera_runner(tmp_path, True).settings
    cluster = settings.clusters[0]
    shared = SharedFacts(settings, lambda: now[0])
    admin = NativeAdmin(cluster.hostgroups.writer)
    assert cluster.name in shared.native_refusals(admin), "its writer hostgroup is managed"
    assert shared.native_refusals(admin) == shared.native_refusals(admin)
    assert admin.asked == 1, "asked once for every pass within RECHECK_S"
    now[0] += RECHECK_S
    admin.hold = threading.Event()
    refresher = threading.Thread(target=shared.native_refusals, args=(admin,))
    refresher.start()
    assert admin.asking.wait(5)
    # while one pass asks again, another takes what was found, without waiting or asking
    found: list[dict[str, str]] = []
    other = threading.Thread(target=lambda: found.append(shared.native_refusals(admin)))
    other.start()
    other.join(5)
    done_before_the_answer = not other.is_alive()
    admin.hold.set()
    refresher.join(5)
    other.join(5)
    assert done_before_the_answer, "the other pass waited for the one asking"
    assert cluster.name in found[0] and admin.asked == 2


def test_before_anything_is_known_every_pass_asks_for_itself(tmp_path: Path) -> None:
    settings = galera_runner(tmp_path, True).settings
    shared = SharedFacts(settings, lambda: 100.0)
    admin = NativeAdmin(settings.clusters[0].hostgroups.writer)
    admin.hold = threading.Event()
    first = threading.Thread(target=shared.native_refusals, args=(admin,))
    first.start()
    assert admin.asking.wait(5)
    admin.hold.set()  # the second pass's own question is answered at once
    assert settings.clusters[0].name in shared.native_refusals(admin)
    first.join(5)
    assert admin.asked == 2, "none may write before it knows"
