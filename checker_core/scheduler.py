"""The ProxySQL scheduler row that runs a checker: only the config file is named in it (S10)."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from checker_core.core.schema import Checker
from checker_core.core.statements import Statement
from checker_core.edges.proxysql import AdminClient


@dataclass(frozen=True, slots=True)
class SchedulerRow:
    """A row of ProxySQL's scheduler table that runs a checker."""

    interval_ms: int
    filename: str
    arg1: str
    arg2: str
    comment: str


class NoExecutable(Exception):
    """No script of this checker to name in the row; the message says where it was looked for."""


@dataclass(frozen=True, slots=True)
class Executable:
    """The checker's script a scheduler row names, and another on PATH if any."""

    path: str
    # another installation's script that PATH would find first, if any: the operator may be
    # running one version while a shell (or an older row) runs another
    other_on_path: str | None = None


def executable(checker: Checker) -> Executable:
    """The absolute path of this installation's script of the checker: ProxySQL runs it with
    an empty environment (no PATH). This installation's: the script that started us, else the
    one beside this Python (a venv's bin, also when run as `python -m` with that bin not on
    PATH), and only then PATH's."""
    argv0 = Path(sys.argv[0])
    beside = Path(sys.executable).parent / checker.command
    chosen: Path | None = None
    if argv0.name == checker.command and argv0.is_file():
        chosen = argv0
    elif beside.is_file():
        chosen = beside
    found = shutil.which(checker.command)
    if chosen is None:
        if found is None:
            raise NoExecutable(
                f"no {checker.command} script beside this Python ({sys.executable}) nor on "
                f"PATH: run install-scheduler with the {checker.command} script itself, the "
                "one the scheduler row must name"
            )
        return Executable(str(Path(found).resolve()))
    path = str(chosen.resolve())
    other = None if found is None else str(Path(found).resolve())
    return Executable(path, other if other not in (None, path) and not _shim(other) else None)


def _shim(path: str | None) -> bool:
    """A version manager's shim (pyenv's, for one) hands over to the active Python's script: not
    another installation."""
    return path is not None and "/shims/" in path


def scheduler_row(checker: Checker, config: Path, interval_ms: int, filename: str) -> SchedulerRow:
    return SchedulerRow(
        interval_ms=interval_ms,
        filename=filename,
        arg1=f"--config={config.resolve()}",
        arg2="run",
        comment=f"proxysql-checkers {checker.value}",
    )


def install_statements(row: SchedulerRow, existing_id: int | None) -> tuple[Statement, ...]:
    if existing_id is None:
        write = Statement(
            "INSERT INTO scheduler (active, interval_ms, filename, arg1, arg2, comment) "
            "VALUES (1, %s, %s, %s, %s, %s)",
            (row.interval_ms, row.filename, row.arg1, row.arg2, row.comment),
        )
    else:
        write = Statement(
            "UPDATE scheduler SET active = 1, interval_ms = %s, filename = %s, arg1 = %s, "
            "arg2 = %s, comment = %s WHERE id = %s",
            (row.interval_ms, row.filename, row.arg1, row.arg2, row.comment, existing_id),
        )
    return (write, Statement("LOAD SCHEDULER TO RUNTIME"), Statement("SAVE SCHEDULER TO DISK"))


def config_named(args: Sequence[object]) -> str | None:
    """The configuration file a scheduler row's arguments name, however spelt: `--config=PATH`,
    `--config PATH` and `-c PATH` (two arguments), `-cPATH`, or `--config PATH` typed into one
    argument."""
    words: list[str] = []
    for arg in args:
        if arg is None:
            continue
        words.extend(str(arg).split())
    for index, word in enumerate(words):
        if word.startswith("--config="):
            return word.partition("=")[2]
        if word in ("--config", "-c") and index + 1 < len(words):
            return words[index + 1]
        if word.startswith("-c") and len(word) > 2 and not word.startswith("--"):
            return word[2:]
    return None


def _same_file(named: str, config: Path) -> bool:
    try:
        return Path(named).resolve() == config.resolve()
    except (OSError, ValueError):
        return False


def _runs_checker(filename: object, args: Sequence[object], checker: Checker) -> bool:
    """A row of this checker: its script (any path to it), or its module under a Python."""
    if Path(str(filename or "")).name == checker.command:
        return True
    module = checker.command.replace("-", "_")
    return any(str(a or "") == module for a in args)


# Percona's checkers, each a manager of the hostgroups it is given: with one of them active
# beside this checker, two programs move the same servers
LEGACY_CHECKERS = frozenset(
    ("pxc_scheduler_handler", "proxysql_galera_checker", "galera_check.pl",
     "proxysql_galera_checker.sh")
)  # fmt: skip
SCHEDULER_ROWS = (
    "SELECT id, active, filename, arg1, arg2, arg3, arg4, arg5 FROM scheduler ORDER BY id"
)


@dataclass(frozen=True, slots=True)
class ScheduledRow:
    """A row of ProxySQL's scheduler table (the one a LOAD SCHEDULER makes live)."""

    row_id: int
    active: bool
    filename: str
    args: tuple[object, ...]

    def runs(self, checker: Checker, config: Path) -> bool:
        """This checker's row on this configuration file, however spelt."""
        named = config_named(self.args)
        return (
            named is not None
            and _same_file(named, config)
            and _runs_checker(self.filename, self.args, checker)
        )

    @property
    def legacy(self) -> str | None:
        """The Percona checker this row runs (its script, or a script an interpreter runs)."""
        for word in (self.filename, *(str(a) for a in self.args if a is not None)):
            for part in str(word).split():
                if Path(part).name in LEGACY_CHECKERS:
                    return Path(part).name
        return None


def scheduled_rows(admin: AdminClient) -> tuple[ScheduledRow, ...]:
    return tuple(
        ScheduledRow(int(row_id), bool(int(active or 0)), str(filename or ""), tuple(args))
        for row_id, active, filename, *args in admin.execute(SCHEDULER_ROWS)
    )


def rows_of(rows: Sequence[ScheduledRow], checker: Checker, config: Path) -> list[int]:
    """The ids of the rows already running this checker with this config file, whatever path
    of the script they name and however they spell the argument (so install is idempotent and
    never adds a second checker running the same file)."""
    return [r.row_id for r in rows if r.runs(checker, config)]


def existing_row_ids(admin: AdminClient, checker: Checker, config: Path) -> list[int]:
    return rows_of(scheduled_rows(admin), checker, config)


def rival_rows(
    rows: Sequence[ScheduledRow], checker: Checker, config: Path
) -> list[tuple[ScheduledRow, Checker]]:
    """Active rows of another checker on the same configuration file: its passes would manage
    the same hostgroups under another lock (a row of this checker is replaced instead)."""
    return [
        (r, other)
        for other in Checker
        if other is not checker
        for r in rows
        if r.active and r.runs(other, config)
    ]


def rival_problem(row: ScheduledRow, other: Checker, config: Path) -> str:
    return (
        f"scheduler row id {row.row_id} ({row.filename}) is active and runs {other.command} on "
        f"the same configuration file {config}: two checkers would manage the same hostgroups "
        "under different locks; set that row active = 0 and LOAD SCHEDULER TO RUNTIME"
    )


def legacy_warnings(rows: Sequence[ScheduledRow]) -> list[str]:
    """One line per active row of a Percona checker: it manages hostgroups too."""
    return [
        f"scheduler row id {r.row_id} ({r.filename}) is active and runs {name}, Percona's "
        "checker: it manages hostgroups too; if they are this checker's, the two move the same "
        "servers: set that row active = 0"
        for r in rows
        if r.active and (name := r.legacy) is not None
    ]


def retire_statements(ids: Sequence[int]) -> tuple[Statement, ...]:
    """The rows beyond the one kept: switched off (kept for the operator to delete)."""
    return tuple(Statement("UPDATE scheduler SET active = 0 WHERE id = %s", (i,)) for i in ids)
