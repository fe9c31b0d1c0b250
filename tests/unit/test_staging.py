"""mysql_servers is a staging area others write too (rules S2, S5).

A pass that holds (paused, standby, deferred, clock skew), a dry run and `status` write
nothing to ProxySQL. A pass cut short between its first staging write and its LOAD puts back
what it wrote, as it read it. A LOAD carries none of the staged rows this pass does not manage
(an operator's edit in progress): they stay staged, neither loaded nor undone.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from checker_core.core.leadership import ALONE, Role
from checker_core.core.model import ServerRow, ServerStatus, sort_rows
from checker_core.core.statements import LOAD_SERVERS, SAVE_SERVERS, staging_statements
from checker_core.edges.admin_errors import AdminQueryFailed, AdminUnreachable
from checker_core.edges.deadline import PassTimeout
from checker_core.passes.result import Mode, Outcome, PassResult
from checker_core.passes.runner import PassRunner
from checker_core.report import summary
from tests.unit.config_cases import galera_runner
from tests.unit.fakes import HealthyProber, MemoryAdmin, ProberSaying, ports
from tests.unit.galera_cases import HG, N1, N2, N3, placed, steady, templates

SOFT = ServerStatus.OFFLINE_SOFT
HARD = ServerStatus.OFFLINE_HARD
OTHER = 500  # a hostgroup no checker manages


def writes(admin: MemoryAdmin) -> list[str]:
    return [sql for sql in admin.sent if not sql.startswith("SELECT")]


# ------------------------------------------------------------------ modes that change nothing


def held_by_leadership(runner: PassRunner, **changes: Any) -> None:
    leadership = replace(ALONE, **changes)
    runner.facts.leadership = lambda *_a, **_k: leadership  # type: ignore[method-assign]


@pytest.mark.parametrize(
    ("hold", "outcome"),
    [
        (lambda r: r.store.pause(r.settings.clusters[0].name, "maintenance"), Outcome.PAUSED),
        (lambda r: held_by_leadership(r, role=Role.STANDBY), Outcome.STANDBY),
        (lambda r: held_by_leadership(r, load_wait="same second"), Outcome.DEFERRED),
        (
            lambda r: held_by_leadership(r, load_wait="ahead 30 s", clock_skew_s=30),
            Outcome.CLOCK_SKEW,
        ),
    ],
    ids=["paused", "standby", "deferred", "clock skew"],
)
@pytest.mark.parametrize(
    "staged",
    [
        [placed(N1, HG.writer, SOFT)],  # the DBA's drain of the writer, not loaded yet
        [placed(N2, HG.writer)],  # a dead pass's promotion, never loaded
    ],
    ids=["operator's drain", "dead pass's half-write"],
)
def test_a_held_pass_writes_nothing_staging_included(
    tmp_path: Path, hold: Any, outcome: Outcome, staged: list[ServerRow]
) -> None:
    admin = MemoryAdmin([*templates(), *steady(N1)])
    for row in staged:
        admin.staging[row.key] = row
    before = dict(admin.staging)
    # N1 refused: a pass that acted would move the writer (every hold holds a LOAD)
    runner = galera_runner(tmp_path, **ports(admin, ProberSaying({N1})))
    hold(runner)
    result = runner.run(Mode.APPLY)
    assert result.outcome is outcome, summary(result)
    assert writes(admin) == [], "nothing written, staging included"
    assert admin.staging == before
    assert not [w for w in result.warnings if "put back" in w], result.warnings


@pytest.mark.parametrize("mode", [Mode.DRY_RUN, Mode.STATUS])
def test_a_dry_run_and_status_only_read(tmp_path: Path, mode: Mode) -> None:
    admin = MemoryAdmin([*templates(), *steady(N1)])
    half = placed(N2, HG.writer)
    admin.staging[half.key] = half
    operator = ServerRow(OTHER, "10.0.0.9", 3306, weight=7)
    admin.staging[operator.key] = operator
    before = dict(admin.staging)
    runner = galera_runner(tmp_path, **ports(admin, ProberSaying({N1})))
    result = runner.run(mode)
    assert result.outcome is Outcome.PLANNED
    assert admin.sent, "its questions went through the admin connection"
    assert all(sql.startswith("SELECT") for sql in admin.sent), admin.sent
    assert admin.staging == before


# ------------------------------------------------------------------ cut short before the LOAD


class FailingAt(MemoryAdmin):
    """The `at`-th write statement (0: the first; the LOAD counts) fails with `failure`,
    `times` times in a row (each call after that fails until then)."""

    def __init__(
        self, rows: Iterable[ServerRow], at: int, failure: Exception, times: int = 1
    ) -> None:
        super().__init__(rows)
        self.at, self.failure, self.times = at, failure, times
        self.seen = 0
        self.connects = 0
        self.failed_on: list[str] = []

    def execute(self, sql: str, params: Sequence[object] = ()) -> list[tuple[Any, ...]]:
        if not sql.startswith("SELECT"):
            if self.seen >= self.at and self.times > 0:
                self.times -= 1
                self.failed_on.append(sql)
                raise self.failure
            self.seen += 1
        return super().execute(sql, params)

    def connected(self) -> FailingAt:
        self.connects += 1
        return self


FAILURES = [
    AdminQueryFailed("memory admin: refused"),
    AdminUnreachable("memory admin: connection lost (gone)"),
    PassTimeout("pass cut short after 1800 ms (run.max_runtime_ms 2000)"),
    RuntimeError("a bug between two statements"),
]


def failover_case(tmp_path: Path, at: int, failure: Exception, times: int = 1) -> Any:
    """A failover (N1 refused) whose `at`-th write fails; the staging holds an operator's
    edit of the managed rows (a heavier reader) that the pass's plan overwrites."""
    admin = FailingAt([*templates(), *steady(N1)], at, failure, times)
    heavier = replace(placed(N3, HG.reader), weight=77)
    admin.staging[heavier.key] = heavier
    runner = galera_runner(tmp_path, **ports(admin.connected, ProberSaying({N1})))
    return admin, runner


@pytest.mark.parametrize("failure", FAILURES, ids=lambda f: type(f).__name__)
@pytest.mark.parametrize("at", [1, 2, 3, 4])
def test_a_pass_cut_short_before_its_load_puts_back_what_it_read(
    tmp_path: Path, at: int, failure: Exception
) -> None:
    admin, runner = failover_case(tmp_path, at, failure)
    before, live = dict(admin.staging), dict(admin.runtime)
    result = runner.run(Mode.APPLY)
    assert result.outcome is Outcome.FAILED, summary(result)
    assert LOAD_SERVERS.sql not in admin.sent
    assert admin.runtime == live
    assert admin.staging == before, "staging as the pass read it, the operator's edit too"
    assert not [w for w in result.warnings if "half-written" in w], result.warnings
    # a refusal leaves the connection in step: put back on it; anything else on a new one
    assert admin.connects == (1 if isinstance(failure, AdminQueryFailed) else 2)


@pytest.mark.parametrize("failure", FAILURES, ids=lambda f: type(f).__name__)
def test_a_refused_load_puts_back_what_the_pass_staged(tmp_path: Path, failure: Exception) -> None:
    (tmp_path / "whole").mkdir()
    whole, runner = failover_case(tmp_path / "whole", 10**6, failure)
    runner.run(Mode.APPLY)
    assert writes(whole)[-2:] == [LOAD_SERVERS.sql, "SAVE MYSQL SERVERS TO DISK"]
    admin, runner = failover_case(tmp_path, len(writes(whole)) - 2, failure)
    before, live = dict(admin.staging), dict(admin.runtime)
    result = runner.run(Mode.APPLY)
    assert result.outcome is Outcome.FAILED, summary(result)
    assert admin.failed_on == [LOAD_SERVERS.sql]
    assert admin.runtime == live
    if isinstance(failure, AdminQueryFailed):  # refused by ProxySQL: nothing went live
        assert admin.staging == before, summary(result)
    else:  # the LOAD may have run before the answer was lost: staging left as written
        assert admin.staging != before


def test_a_put_back_that_fails_too_says_which_rows_and_the_next_acting_pass_repairs(
    tmp_path: Path,
) -> None:
    failure = AdminUnreachable("memory admin: connection lost (gone)")
    admin, runner = failover_case(tmp_path, 2, failure, times=10)
    before = dict(admin.staging)
    result = runner.run(Mode.APPLY)
    assert result.outcome is Outcome.FAILED
    [said] = [w for w in result.warnings if "half-written" in w]
    assert said.startswith("staged rows left half-written: ")
    assert said.endswith("; the next acting pass puts them back")
    assert str(failure) in said
    assert admin.staging != before
    admin.times = 0
    again = runner.run(Mode.APPLY)
    assert again.outcome is Outcome.CHANGED, summary(again)
    assert {r.node for r in admin.runtime.values() if r.hostgroup_id == HG.writer} == {N2}


@st.composite
def staged_and_wanted(draw: st.DrawFn) -> tuple[list[ServerRow], list[ServerRow]]:
    rows = st.builds(
        ServerRow,
        hostgroup_id=st.sampled_from(HG.managed),
        hostname=st.just("127.0.0.1"),
        port=st.sampled_from([N1.port, N2.port, N3.port]),
        status=st.sampled_from(list(ServerStatus)),
        weight=st.integers(1, 3),
    )
    before = list({r.key: r for r in draw(st.lists(rows, max_size=8))}.values())
    wanted = list({r.key: r for r in draw(st.lists(rows, max_size=8))}.values())
    return before, wanted


@settings(max_examples=300, deadline=None)
@given(staged_and_wanted(), st.integers(0, 30), st.booleans())
def test_a_put_back_after_any_prefix_is_what_was_read(
    case: tuple[list[ServerRow], list[ServerRow]], cut: int, meddled: bool
) -> None:
    """Whatever number of a pass's statements went out, the put-back gives the staging it
    read; a row someone else wrote since stays theirs."""
    from checker_core.core.staging import undone
    from checker_core.edges.proxysql_apply import Writes

    before, wanted = case
    writes = Writes()
    writes.note(HG.managed, before, wanted)
    statements = staging_statements(HG.managed, before, wanted, writer=HG.writer)
    admin = MemoryAdmin(before)
    for statement in statements[:cut]:
        admin.execute(statement.sql, statement.params)
    theirs = ServerRow(HG.reader, "10.9.9.9", 3306, weight=5)
    if meddled:
        admin.staging[theirs.key] = theirs
    now = sort_rows(admin.staging.values())
    put_back = undone(writes.before, writes.wrote, now)
    expected = sort_rows([*before, theirs] if meddled else before)
    assert put_back == expected


# ------------------------------------------------------------------ what a LOAD carries


def other_rows() -> list[ServerRow]:
    return [ServerRow(OTHER, "10.0.0.1", 3306), ServerRow(OTHER, "10.0.0.2", 3306)]


# (name, what the operator staged over the live rows: key -> row or None, hostgroups set aside)
EDITS: list[tuple[str, dict[tuple[int, str, int], ServerRow | None], tuple[int, ...]]] = [
    (
        "template weight",
        {
            (HG.config_writer, N3.host, N3.port): ServerRow(
                HG.config_writer, N3.host, N3.port, weight=9
            )
        },
        (HG.config_writer,),
    ),
    (
        "node half taken out of the roster",
        {
            (HG.config_writer, N3.host, N3.port): None,
            (HG.config_reader, N3.host, N3.port): None,
        },
        (HG.config_writer, HG.config_reader),
    ),
    (
        "row added elsewhere",
        {(OTHER, "10.0.0.3", 3306): ServerRow(OTHER, "10.0.0.3", 3306)},
        (OTHER,),
    ),
    (
        "row drained elsewhere",
        {(OTHER, "10.0.0.1", 3306): ServerRow(OTHER, "10.0.0.1", 3306, status=SOFT)},
        (OTHER,),
    ),
    ("nothing staged", {}, ()),
]


@pytest.mark.parametrize(("name", "edit", "aside"), EDITS, ids=[e[0] for e in EDITS])
def test_a_failover_loads_none_of_an_operators_staged_edit_and_keeps_it_staged(
    tmp_path: Path,
    name: str,
    edit: dict[tuple[int, str, int], ServerRow | None],
    aside: tuple[int, ...],
) -> None:
    admin = MemoryAdmin([*templates(), *steady(N1), *other_rows()])
    for key, row in edit.items():
        if row is None:
            del admin.staging[key]
        else:
            admin.staging[key] = row
    edited = {k: r for k, r in admin.staging.items() if k[0] not in HG.managed}
    live = {k: r for k, r in admin.runtime.items() if k[0] not in HG.managed}
    runner = galera_runner(tmp_path, **ports(admin, ProberSaying({N1})))
    failover = runner.run(Mode.APPLY)
    assert failover.outcome is Outcome.CHANGED, summary(failover)
    assert {r.node for r in admin.runtime.values() if r.hostgroup_id == HG.writer} == {N2}
    assert {k: r for k, r in admin.runtime.items() if k[0] not in HG.managed} == live
    assert {k: r for k, r in admin.staging.items() if k[0] not in HG.managed} == edited
    kept = [w for w in failover.warnings if "kept staged, not loaded" in w]
    assert bool(kept) == bool(aside), failover.warnings
    for hostgroup in aside:
        assert f"hostgroup {hostgroup} (" in kept[0]
    assert not [w for w in failover.warnings if "made live the roster" in w]
    after = runner.run(Mode.APPLY)
    assert after.outcome is Outcome.UNCHANGED, summary(after)


def test_runtime_states_are_no_staged_edit(tmp_path: Path) -> None:
    """A row ProxySQL's monitor SHUNNED, and a server a LOAD removed that ProxySQL keeps
    OFFLINE_HARD for its clients, differ from staging without being anyone's edit."""
    admin = MemoryAdmin([*templates(), *steady(N1), *other_rows()])
    shunned, leaving = ServerRow(OTHER, "10.0.0.1", 3306), ServerRow(OTHER, "10.0.0.7", 3306)
    admin.runtime[shunned.key] = replace(shunned, status=ServerStatus.SHUNNED)
    admin.runtime[leaving.key] = replace(leaving, status=HARD)
    runner = galera_runner(tmp_path, **ports(admin, ProberSaying({N1})))
    failover = runner.run(Mode.APPLY)
    assert failover.outcome is Outcome.CHANGED
    assert not [w for w in failover.warnings if "kept staged" in w], failover.warnings
    assert leaving.key not in admin.staging


def test_an_edit_that_cannot_be_staged_again_is_said_lost_and_runtime_stays(
    tmp_path: Path,
) -> None:
    admin = MemoryAdmin([*templates(), *steady(N1), *other_rows()])
    added = ServerRow(OTHER, "10.0.0.3", 3306)
    admin.staging[added.key] = added
    result = failover_with_lost_write_back(tmp_path, admin)
    assert result.outcome is Outcome.CHANGED, summary(result)
    assert added.key not in admin.runtime and added.key not in admin.staging
    [said] = [w for w in result.warnings if "could not be staged again" in w]
    assert f"hostgroup {OTHER}" in said and "runtime unchanged" in said


def lose_connection_after_save(admin: MemoryAdmin) -> None:
    """The connection breaks at the first write after the SAVE, and every connection after."""
    real = admin.execute
    saved = [False]

    def execute(sql: str, params: Sequence[object] = ()) -> list[tuple[Any, ...]]:
        if saved[0] and not sql.startswith("SELECT"):
            raise AdminUnreachable("memory admin: connection lost (gone)")
        found = real(sql, params)
        saved[0] = saved[0] or sql.startswith("SAVE")
        return found

    admin.execute = execute  # type: ignore[method-assign]


def failover_with_lost_write_back(tmp_path: Path, admin: MemoryAdmin) -> PassResult:
    """A failover whose connection breaks at the first write after its SAVE."""
    lose_connection_after_save(admin)
    runner = galera_runner(tmp_path, **ports(admin, ProberSaying({N1})))
    return runner.run(Mode.APPLY)


def test_a_healthy_pass_with_nothing_to_load_leaves_an_edit_elsewhere_alone(
    tmp_path: Path,
) -> None:
    admin = MemoryAdmin([*templates(), *steady(N1), *other_rows()])
    added = ServerRow(OTHER, "10.0.0.3", 3306)
    admin.staging[added.key] = added
    runner = galera_runner(tmp_path, **ports(admin, HealthyProber()))
    result = runner.run(Mode.APPLY)
    assert result.outcome is Outcome.UNCHANGED
    assert writes(admin) == []
    assert admin.staging[added.key] == added


# ------------------------------------------------------------------ what a SAVE writes to disk


def owing_a_save(tmp_path: Path, admin: MemoryAdmin) -> PassRunner:
    """A runner whose state dir owes a SAVE (an earlier one failed); every node healthy, so the
    pass has nothing to load."""
    runner = galera_runner(tmp_path, **ports(admin, HealthyProber()))
    assert runner.settings.run.persist
    assert runner.store.owe_save(runner.settings.clusters[0].name, True) is None
    return runner


def edited(edit: dict[tuple[int, str, int], ServerRow | None]) -> MemoryAdmin:
    """ProxySQL with the operator's `edit` staged over live rows (and saved ones) that agree."""
    admin = MemoryAdmin([*templates(), *steady(N1), *other_rows()])
    for key, row in edit.items():
        if row is None:
            del admin.staging[key]
        else:
            admin.staging[key] = row
    return admin


def foreign(rows: dict[tuple[int, str, int], ServerRow]) -> dict[tuple[int, str, int], ServerRow]:
    return {k: r for k, r in rows.items() if k[0] not in HG.managed}


@pytest.mark.parametrize(("name", "edit", "aside"), EDITS, ids=[e[0] for e in EDITS])
def test_an_owed_save_writes_what_is_live_and_keeps_an_operators_edit_staged(
    tmp_path: Path,
    name: str,
    edit: dict[tuple[int, str, int], ServerRow | None],
    aside: tuple[int, ...],
) -> None:
    admin = edited(edit)
    staged, live = dict(admin.staging), dict(admin.runtime)
    runner = owing_a_save(tmp_path, admin)
    cluster = runner.settings.clusters[0]
    result = runner.run(Mode.APPLY)
    assert result.outcome is Outcome.UNCHANGED, summary(result)
    assert "SAVE MYSQL SERVERS TO DISK retried and done" in summary(result)
    assert not runner.store.save_owed(cluster.name)
    assert admin.runtime == live
    assert admin.disk == live, "disk holds what is live, never an edit nobody loaded"
    assert admin.staging == staged, "the operator's edit is staged still, as he left it"
    kept = [w for w in result.warnings if "kept staged, not saved to disk" in w]
    assert bool(kept) == bool(aside), result.warnings
    for hostgroup in aside:
        assert f"hostgroup {hostgroup} (" in kept[0]
    if not aside:
        assert writes(admin) == [SAVE_SERVERS.sql], "no edit elsewhere: the SAVE alone"
    else:
        assert writes(admin).count(SAVE_SERVERS.sql) == 1
        assert LOAD_SERVERS.sql not in admin.sent


@pytest.mark.parametrize(("name", "edit", "aside"), EDITS, ids=[e[0] for e in EDITS])
def test_the_save_after_a_load_writes_what_is_live_for_an_operators_edit(
    tmp_path: Path,
    name: str,
    edit: dict[tuple[int, str, int], ServerRow | None],
    aside: tuple[int, ...],
) -> None:
    admin = edited(edit)
    staged = foreign(admin.staging)
    runner = galera_runner(tmp_path, **ports(admin, ProberSaying({N1})))
    failover = runner.run(Mode.APPLY)
    assert failover.outcome is Outcome.CHANGED, summary(failover)
    assert SAVE_SERVERS.sql in admin.sent
    assert admin.disk == admin.runtime, "the SAVE went out while the edit was set aside"
    assert foreign(admin.staging) == staged


def test_an_owed_save_whose_set_aside_is_disturbed_saves_nothing_and_stays_owed(
    tmp_path: Path,
) -> None:
    """Someone writes mysql_servers while the pass sets the operator's edit aside: the SAVE
    would carry rows nobody checked, so it does not go out, and the next pass owes it still."""
    weight = ServerRow(HG.config_writer, N3.host, N3.port, weight=9)
    admin = edited({weight.key: weight})
    theirs = ServerRow(OTHER, "10.0.0.4", 3306)
    admin.meddle = [theirs]
    disk = dict(admin.disk)
    runner = owing_a_save(tmp_path, admin)
    cluster = runner.settings.clusters[0]
    result = runner.run(Mode.APPLY)
    assert SAVE_SERVERS.sql not in admin.sent
    assert admin.disk == disk
    assert runner.store.save_owed(cluster.name)
    [said] = [w for w in result.warnings if "still owed" in w]
    assert said.startswith("SAVE MYSQL SERVERS TO DISK still owed, not run: "), said
    assert "changed under us" in said
    assert admin.staging[weight.key] == weight, "the operator's edit put back"
    assert admin.staging[theirs.key] == theirs, "the other writer's row stays theirs"
    admin.sent.clear()
    again = runner.run(Mode.APPLY)
    assert writes(admin).count(SAVE_SERVERS.sql) == 1, summary(again)
    assert not runner.store.save_owed(cluster.name)
    assert admin.disk == admin.runtime


def test_an_edit_that_cannot_be_staged_again_after_an_owed_save_is_said_lost(
    tmp_path: Path,
) -> None:
    admin = edited({})
    added = ServerRow(OTHER, "10.0.0.3", 3306)
    admin.staging[added.key] = added
    lose_connection_after_save(admin)
    runner = owing_a_save(tmp_path, admin)
    result = runner.run(Mode.APPLY)
    assert added.key not in admin.runtime and added.key not in admin.disk
    assert added.key not in admin.staging
    [said] = [w for w in result.warnings if "could not be staged again" in w]
    assert f"hostgroup {OTHER}" in said and "after the SAVE" in said
    assert said.endswith("it is gone from mysql_servers; runtime unchanged, disk as runtime")


def test_an_owed_save_whose_set_aside_cannot_be_undone_says_the_edit_lost_and_stays_owed(
    tmp_path: Path,
) -> None:
    """The connection is lost after the first of the two statements that set an operator's
    template edit aside, and stays lost: no SAVE goes out, and the edit's loss is said as the
    operator's (his rows are no half-written plan of the checker's)."""
    failure = AdminUnreachable("memory admin: connection lost (gone)")
    admin = FailingAt([*templates(), *steady(N1), *other_rows()], 1, failure, times=10)
    for hostgroup in HG.templates:
        del admin.staging[(hostgroup, N3.host, N3.port)]
    disk = dict(admin.disk)
    runner = galera_runner(tmp_path, **ports(admin.connected, HealthyProber()))
    cluster = runner.settings.clusters[0]
    assert runner.store.owe_save(cluster.name, True) is None
    result = runner.run(Mode.APPLY)
    assert result.outcome is Outcome.FAILED, summary(result)
    assert SAVE_SERVERS.sql not in admin.sent
    assert admin.disk == disk
    assert runner.store.save_owed(cluster.name)
    assert not [w for w in result.warnings if "half-written" in w], result.warnings
    [said] = [w for w in result.warnings if "could not be written back" in w]
    groups = ", ".join(str(hg) for hg in HG.templates)
    assert said.startswith(f"an operator's staged edit of hostgroup {groups} was set aside")
    assert "for a SAVE that did not go out" in said and str(failure) in said
    assert said.endswith("it is gone from mysql_servers; runtime and disk unchanged")


def test_a_load_whose_answer_is_lost_gives_the_operator_his_edit_back(tmp_path: Path) -> None:
    """The LOAD ran and its answer was lost (found by the simulated world: the operator's edit
    stayed replaced by what is live): his rows set aside are staged again as he left them, on
    a new connection, and nothing of them is live."""
    admin = MemoryAdmin([*templates(), *steady(N1), *other_rows()])
    edit = ServerRow(OTHER, "10.0.0.1", 3306, weight=77)
    admin.staging[edit.key] = edit
    live_before = admin.runtime[edit.key]
    real = admin.execute
    lost = [False]

    def execute(sql: str, params: Sequence[object] = ()) -> list[tuple[Any, ...]]:
        found = real(sql, params)
        if sql.startswith("LOAD MYSQL SERVERS") and not lost[0]:
            lost[0] = True
            raise AdminUnreachable("memory admin: connection lost after the LOAD")
        return found

    admin.execute = execute  # type: ignore[method-assign]
    runner = galera_runner(tmp_path, **ports(admin, ProberSaying({N1})))
    runner.run(Mode.APPLY)
    assert lost[0]
    assert admin.staging[edit.key] == edit
    assert admin.runtime[edit.key] == live_before


class LosesTheLoadsAnswer(MemoryAdmin):
    """The first LOAD runs and its answer is lost with the connection: every later statement
    on that first connection fails; a new connection (`connect`) works."""

    def __init__(self, staging: Iterable[ServerRow]) -> None:
        super().__init__(staging)
        self.connections = 0
        self.lost = False

    def connect_again(self, *_args: object) -> LosesTheLoadsAnswer:
        self.connections += 1
        return self

    def execute(self, sql: str, params: Sequence[object] = ()) -> list[tuple[Any, ...]]:
        if self.lost and self.connections == 1:
            raise AdminUnreachable("memory admin: this connection is gone")
        found = super().execute(sql, params)
        if sql.startswith("LOAD MYSQL SERVERS") and not self.lost:
            self.lost = True
            raise AdminUnreachable("memory admin: connection lost after the LOAD")
        return found


def test_adopt_force_whose_load_answer_is_lost_gives_the_operator_his_edit_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """adopt --force sets an operator's edit elsewhere aside for its LOAD; the LOAD ran and its
    answer was lost (found by the simulated world: the command, unlike a pass, had no second
    connection, and the edit stayed replaced by what is live). It is staged again as he left
    it, on a new connection, and the command exits 1."""
    from click.testing import CliRunner

    from checker_core.edges.proxysql import AdminClient
    from galera_checker.cli import build as build_galera
    from tests.unit.config_cases import CONFIG, config_file

    admin = LosesTheLoadsAnswer([*templates(), *steady(N1), *other_rows()])
    edit = ServerRow(OTHER, "10.0.0.1", 3306, weight=77)
    admin.staging[edit.key] = edit
    live_before = admin.runtime[edit.key]
    monkeypatch.setattr(AdminClient, "connect", classmethod(lambda _c, *a: admin.connect_again()))
    path = config_file(tmp_path, CONFIG)
    done = CliRunner().invoke(build_galera(), ["--config", str(path), "adopt", "--force"])
    assert admin.lost, done.output
    assert done.exit_code == 1, done.output
    assert admin.connections == 2, "no new connection for the write-back"
    assert admin.staging[edit.key] == edit
    assert admin.runtime[edit.key] == live_before
