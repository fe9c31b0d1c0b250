"""The ProxySQL scheduler row that runs a checker: only the config file is named in it (S10)."""

from __future__ import annotations

import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from checker_core.edges.proxysql import AdminClient, Statement
from checker_core.settings.schema import Checker


@dataclass(frozen=True, slots=True)
class SchedulerRow:
    interval_ms: int
    filename: str
    arg1: str
    arg2: str
    comment: str


def executable(checker: Checker) -> str:
    """The absolute path of the checker: ProxySQL runs it with an empty environment (no PATH)."""
    argv0 = Path(sys.argv[0])
    if argv0.name == checker.command and argv0.exists():
        return str(argv0.resolve())
    found = shutil.which(checker.command)
    if found is None:
        raise FileNotFoundError(f"{checker.command} is not on PATH; install the package first")
    return str(Path(found).resolve())


def scheduler_row(checker: Checker, config: Path, interval_ms: int) -> SchedulerRow:
    return SchedulerRow(
        interval_ms=interval_ms,
        filename=executable(checker),
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


def existing_row_id(admin: AdminClient, row: SchedulerRow) -> int | None:
    """A scheduler row already running this checker with this config (so install is idempotent)."""
    found = admin.execute(
        "SELECT id FROM scheduler WHERE filename = %s AND arg1 = %s ORDER BY id",
        (row.filename, row.arg1),
    )
    return int(found[0][0]) if found else None
