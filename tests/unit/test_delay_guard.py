"""The checker changes no ProxySQL global variable. An older version's record of the
auto-increment delay it lowered for a switchover is put right by the acting pass from ProxySQL's
own staged and runtime values, whatever process the record names; every outcome is one warning,
a failed statement leaves the record for the next pass, and nothing is saved to disk."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from checker_core.core.attached import AUTO_INCREMENT_DELAY
from checker_core.core.attached import AUTO_INCREMENT_DELAY_TIMEOUT as TIMEOUT
from checker_core.core.model import NodeAddress
from checker_core.core.schema import Checker
from checker_core.edges import proxysql_sessions as guard
from checker_core.edges.admin_errors import AdminQueryFailed, AdminUnreachable
from checker_core.edges.memory import StateStore
from checker_core.passes.result import Mode
from tests.unit.config_cases import galera_runner
from tests.unit.fakes import HealthyProber, MemoryAdmin, ports, retuned
from tests.unit.galera_cases import N1, N2, steady, templates

OTHER = "mysql-max_connections"


class VariablesAdmin(MemoryAdmin):
    """ProxySQL's admin with global_variables (staged) and runtime_global_variables besides
    mysql_servers, a processlist and the statements it was sent. `fail`: statements (by their
    start) that fail once, before they run; `lost`: ones that run, then lose the connection."""

    def __init__(self, **variables: str) -> None:
        super().__init__([*templates(), *steady(N1)])
        self.staged = {AUTO_INCREMENT_DELAY: "5", TIMEOUT: "10000", OTHER: "2048", **variables}
        self.live = dict(self.staged)
        self.fail: list[str] = []
        self.lost: list[str] = []
        self.processlist: list[tuple[Any, ...]] = []

    def execute(self, sql: str, params: Sequence[object] = ()) -> list[tuple[Any, ...]]:
        for broken, ran in ((self.fail, False), (self.lost, True)):
            for start in broken:
                if sql.startswith(start):
                    broken.remove(start)
                    if ran:
                        self._run(sql, params)
                    raise AdminUnreachable("memory admin: connection lost")
        return self._run(sql, params)

    def _run(self, sql: str, params: Sequence[object]) -> list[tuple[Any, ...]]:
        if "VARIABLES" not in sql and "global_variables" not in sql and "processlist" not in sql:
            return super().execute(sql, params)  # mysql_servers and the rest
        self.sent.append(sql)
        if sql == guard.MYSQL_VARIABLES:
            return [
                (n, v, self.live[n])
                for n, v in sorted(self.staged.items())
                if n in self.live and (n == params[1] or v != self.live[n])
            ]
        if sql == guard.STAGE:
            value, name = params
            self.staged[str(name)] = str(value)
            return []
        if sql == guard.LOAD_VARIABLES:
            self.live = {n: _atoi(v) if n != OTHER else v for n, v in self.staged.items()}
            return []
        if sql.startswith("SELECT variable_name, variable_value FROM runtime_global_variables"):
            return [(n, self.live[n]) for n in map(str, params) if n in self.live]
        if sql.startswith("SELECT") and "stats_mysql_processlist" in sql:
            return list(self.processlist)
        raise AdminQueryFailed(f"memory admin: not modelled: {sql}")

    def variable_writes(self) -> list[str]:
        return [s for s in self.sent if "VARIABLES" in s or s.startswith("UPDATE global_var")]


def _atoi(text: str) -> str:
    """How ProxySQL makes a staged number live (measured: '05' -> 5, 'abc' -> 0)."""
    digits = text.strip().lstrip("+")
    return str(int(digits)) if digits.isdigit() else "0"


def store_with(tmp_path: Path, value: object = "5", pid: int = 1) -> StateStore:
    """A state dir holding an older version's record; pid 1 as in a container, or init."""
    store = StateStore(tmp_path, Checker.GALERA)
    guard.record_path(store, "lab").write_text(json.dumps({"value": value, "pid": pid}))
    return store


def reconcile(fake: VariablesAdmin, store: StateStore) -> str | None:
    return guard.put_back_leftover(fake, store, "lab")


# staged and live of the delay (and optionally the other variable), what ends staged and live,
# whether the record is gone, the statements that write, and a piece of the one warning
CASES = [
    pytest.param(
        {"staged": "0", "live": "0"},
        ("5", "5"),
        True,
        [guard.STAGE, guard.LOAD_VARIABLES],
        "put back to 5 (an older checker's switchover lowered it to 0)",
        id="lowered-and-left",
    ),
    pytest.param(
        {"staged": "5", "live": "0"},
        ("5", "5"),
        True,
        [guard.LOAD_VARIABLES],
        "put back to 5",
        id="our-put-back-whose-load-failed",
    ),
    pytest.param(
        {"staged": "0", "live": "5"},
        ("5", "5"),
        True,
        [guard.STAGE],
        "staged and never loaded set back to 5 in global_variables (nothing loaded)",
        id="update-without-its-load",
    ),
    pytest.param(
        {"staged": "5", "live": "5"},
        ("5", "5"),
        True,
        [],
        "is 5, as before an older checker's switchover",
        id="already-right",
    ),
    pytest.param(
        {"staged": "7", "live": "7"},
        ("7", "7"),
        True,
        [],
        "is 7, set by someone since an older checker's switchover lowered it: left as it is",
        id="operator-set-it",
    ),
    pytest.param(
        {"staged": "9", "live": "0"},
        ("9", "0"),
        False,
        [],
        "'9' is staged for it by someone, for their LOAD",
        id="operator-staged-a-value-while-lowered",
    ),
    pytest.param(
        {"staged": "9", "live": "5"},
        ("9", "5"),
        True,
        [],
        "'9' staged for it is someone's edit, left as it is",
        id="operator-staged-a-value-after",
    ),
    pytest.param(
        {"staged": "0", "live": "0", "other": "10"},
        ("0", "0"),
        False,
        [],
        f"would also make the staged, unloaded value of {OTHER} live",
        id="another-variable-staged",
    ),
    pytest.param(
        {"staged": "0", "live": "0", "other": "02048"},
        ("5", "5"),
        True,
        [guard.STAGE, guard.LOAD_VARIABLES],
        "put back to 5",
        id="another-variable-staged-as-typed-but-loaded",
    ),
]


@pytest.mark.parametrize(("state", "ends", "dropped", "writes", "says"), CASES)
def test_an_older_versions_record_is_put_right_from_proxysqls_own_values(
    tmp_path: Path,
    *,
    state: dict[str, str],
    ends: tuple[str, str],
    dropped: bool,
    writes: list[str],
    says: str,
) -> None:
    fake, store = VariablesAdmin(), store_with(tmp_path)
    fake.staged[AUTO_INCREMENT_DELAY], fake.live[AUTO_INCREMENT_DELAY] = (
        state["staged"],
        state["live"],
    )
    if "other" in state:
        fake.staged[OTHER] = state["other"]
    said = reconcile(fake, store)
    assert said is not None and says in said
    assert (fake.staged[AUTO_INCREMENT_DELAY], fake.live[AUTO_INCREMENT_DELAY]) == ends
    assert [s for s in fake.sent if s != guard.MYSQL_VARIABLES] == writes
    assert not any("SAVE" in s for s in fake.sent), "nothing is saved to ProxySQL's disk"
    assert guard.record_path(store, "lab").exists() is not dropped
    if dropped:
        assert reconcile(fake, store) is None, "said once"


@pytest.mark.parametrize("pid", [1, 0, 2**22 + 1])
def test_no_process_the_record_names_keeps_it_from_being_put_back(tmp_path: Path, pid: int) -> None:
    """A switchover run as pid 1 of its container left a record naming pid 1: pids mean nothing
    across pid namespaces, and nothing lowers the delay any more."""
    fake, store = VariablesAdmin(), store_with(tmp_path, pid=pid)
    fake.staged[AUTO_INCREMENT_DELAY] = fake.live[AUTO_INCREMENT_DELAY] = "0"
    assert reconcile(fake, store) is not None
    assert fake.live[AUTO_INCREMENT_DELAY] == "5"


@pytest.mark.parametrize(
    ("fail", "lost"),
    [
        ([guard.MYSQL_VARIABLES], []),
        ([guard.STAGE], []),
        ([guard.LOAD_VARIABLES], []),
        ([], [guard.STAGE]),
        ([], [guard.LOAD_VARIABLES]),
    ],
    ids=["read-fails", "update-fails", "load-fails", "lost-after-update", "lost-after-load"],
)
def test_a_put_back_cut_at_any_statement_is_finished_by_the_next_pass(
    tmp_path: Path, fail: list[str], lost: list[str]
) -> None:
    fake, store = VariablesAdmin(), store_with(tmp_path)
    fake.staged[AUTO_INCREMENT_DELAY] = fake.live[AUTO_INCREMENT_DELAY] = "0"
    fake.fail, fake.lost = list(fail), list(lost)
    said = reconcile(fake, store)
    assert said is not None and "not put back to 5 yet" in said and "next pass tries" in said
    assert guard.record_path(store, "lab").exists(), "kept for the next pass"
    said = reconcile(fake, store)
    assert said is not None
    assert (fake.staged[AUTO_INCREMENT_DELAY], fake.live[AUTO_INCREMENT_DELAY]) == ("5", "5")
    assert not guard.record_path(store, "lab").exists()
    assert reconcile(fake, store) is None


def test_a_recorded_value_is_compared_as_proxysql_shows_it(tmp_path: Path) -> None:
    fake, store = VariablesAdmin(), store_with(tmp_path, value=5)
    fake.staged[AUTO_INCREMENT_DELAY] = fake.live[AUTO_INCREMENT_DELAY] = "0"
    assert "put back to 5" in str(reconcile(fake, store))
    store = store_with(tmp_path, value="05")
    said = str(reconcile(fake, store))
    assert "is 5, as before" in said, "not someone else's value"


@pytest.mark.parametrize("content", ["{", json.dumps({"pid": 1}), json.dumps({"value": "x"})])
def test_an_unreadable_record_is_removed_with_one_warning_and_nothing_changed(
    tmp_path: Path, content: str
) -> None:
    fake, store = VariablesAdmin(), StateStore(tmp_path, Checker.GALERA)
    guard.record_path(store, "lab").write_text(content)
    fake.staged[AUTO_INCREMENT_DELAY] = fake.live[AUTO_INCREMENT_DELAY] = "0"
    said = reconcile(fake, store)
    assert said is not None and "unreadable" in said and "nothing changed" in said
    assert fake.sent == [] and fake.live[AUTO_INCREMENT_DELAY] == "0"
    assert not guard.record_path(store, "lab").exists()


def test_no_record_costs_no_statement(tmp_path: Path) -> None:
    fake = VariablesAdmin()
    assert reconcile(fake, StateStore(tmp_path, Checker.GALERA)) is None
    assert fake.sent == []


@pytest.mark.parametrize(
    ("staged", "live", "same"),
    [
        # what a real ProxySQL (2.7.2 and 3.0.1) kept staged beside its runtime after a LOAD
        ("05", "5", True),
        (" 5", "5", True),
        ("5 ", "5", True),
        ("+5", "5", True),
        ("5.0", "5", True),
        ("0x5", "0", True),
        ("true", "0", True),
        ("abc", "0", True),
        ("", "0", True),
        ("TRUE", "true", True),
        ("1", "true", True),
        ("utf8mb4", "utf8mb4", True),
        # an edit a LOAD would make live
        ("9", "7", False),
        ("abc", "5", False),
        ("0", "true", False),
        ("yes", "true", False),
        ("UTF8MB4", "utf8mb4", False),
    ],
)
def test_a_staged_value_as_typed_is_not_an_unloaded_edit(
    staged: str, live: str, same: bool
) -> None:
    assert guard.loads_as(staged, live) is same


# ------------------------------------------------------------------ who calls it, and who not


def runner_with(tmp_path: Path, fake: VariablesAdmin) -> Any:
    return galera_runner(tmp_path, **ports(fake, HealthyProber()))


def lowered_by_an_older_version(tmp_path: Path) -> tuple[VariablesAdmin, Path]:
    fake = VariablesAdmin()
    fake.staged[AUTO_INCREMENT_DELAY] = fake.live[AUTO_INCREMENT_DELAY] = "0"
    record = guard.record_path(StateStore(tmp_path / "state", Checker.GALERA), "main")
    record.parent.mkdir(parents=True, exist_ok=True)
    record.write_text(json.dumps({"value": "5", "pid": 1}))
    return fake, record


def test_the_acting_pass_puts_it_back_with_one_warning(tmp_path: Path) -> None:
    fake, record = lowered_by_an_older_version(tmp_path)
    runner = runner_with(tmp_path, fake)
    result = runner.run(Mode.APPLY)
    assert f"{AUTO_INCREMENT_DELAY} put back to 5" in " ".join(result.warnings)
    assert fake.live[AUTO_INCREMENT_DELAY] == "5" and not record.exists()


@pytest.mark.parametrize("how", ["dry-run", "status", "paused"])
def test_a_pass_that_promises_no_change_leaves_the_variables_and_the_record(
    tmp_path: Path, how: str
) -> None:
    fake, record = lowered_by_an_older_version(tmp_path)
    runner = runner_with(tmp_path, fake)
    if how == "paused":
        runner.store.pause(None, "maintenance")
    mode = {"dry-run": Mode.DRY_RUN, "status": Mode.STATUS, "paused": Mode.APPLY}[how]
    runner.run(mode)
    assert fake.variable_writes() == []
    assert guard.MYSQL_VARIABLES not in fake.sent
    assert fake.live[AUTO_INCREMENT_DELAY] == "0" and record.exists()


def held_by_the_delay(writer: NodeAddress) -> tuple[Any, ...]:
    info = {"backends": [{"conn": {"auto_increment_delay_token": 4, "status": {}}}]}
    return (7, "app", "10.0.0.9", 40000, 100, writer.host, writer.port, "Sleep", json.dumps(info))


@pytest.mark.parametrize("dry_run", [False, True])
def test_no_switchover_path_changes_a_proxysql_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, dry_run: bool
) -> None:
    """A client held by the auto-increment delay on the old writer: the switchover says what it
    will see, and sends no UPDATE of global_variables and no LOAD MYSQL VARIABLES."""
    from galera_checker import switchover as move
    from tests.unit.config_cases import galera_kind

    fake = VariablesAdmin()
    fake.processlist = [held_by_the_delay(N1)]
    runner = runner_with(tmp_path, fake)
    monkeypatch.setattr(move, "PassRunner", lambda settings, kind: runner)
    runner = retuned(runner, drain_timeout_ms=1000)
    cluster = runner.cluster
    said: list[str] = []
    move.switchover(runner.settings, galera_kind(), cluster, N2, dry_run=dry_run, say=said.append)
    assert any(
        "a session held by the auto-increment delay lets go after 5" in s and "(10000 ms)" in s
        for s in said
    )
    assert fake.variable_writes() == []
    assert not (tmp_path / "state").exists() or not list(
        (tmp_path / "state").glob("*.auto_increment_delay")
    ), "nothing recorded"
    assert fake.live[AUTO_INCREMENT_DELAY] == fake.staged[AUTO_INCREMENT_DELAY] == "5"


def test_a_switchover_whose_pass_fails_says_its_pin_stays(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A LOAD refused under the switchover: it exits 1 and says the pin stays, so the operator
    knows the next passes (a daemon's) go on with the move, and how to drop it."""
    from galera_checker import switchover as move
    from tests.unit.config_cases import galera_kind

    fake = VariablesAdmin()
    fake.fail = ["LOAD MYSQL SERVERS"]
    runner = runner_with(tmp_path, fake)
    monkeypatch.setattr(move, "PassRunner", lambda settings, kind: runner)
    runner = retuned(runner, drain_timeout_ms=1000)
    cluster = runner.cluster
    said: list[str] = []
    code = move.switchover(
        runner.settings, galera_kind(), cluster, N2, dry_run=False, say=said.append
    )
    assert code == 1
    assert any("the pin stays" in s and "--release" in s for s in said), said
    assert runner.store.writer_pin(cluster.name) == N2
