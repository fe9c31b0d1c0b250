"""`install-scheduler`: the scheduler row printed, or inserted and loaded."""

from __future__ import annotations

from pathlib import Path

import click

from checker_core.cli.common import Invocation, admin_exit, config_options, fail, load_settings
from checker_core.exitcodes import Exit


@click.command("install-scheduler")
@config_options
@click.option("--apply", "apply_row", is_flag=True, help="Insert (or update) the row and load it.")
@click.pass_obj
def install_scheduler_command(
    inv: Invocation, config: Path | None, overrides: tuple[str, ...], apply_row: bool
) -> None:
    """Print (or with --apply, install) the ProxySQL scheduler row for this config file."""
    from checker_core.edges.admin_errors import AdminError
    from checker_core.edges.proxysql import AdminClient
    from checker_core.scheduler import (
        NoExecutable,
        executable,
        install_statements,
        legacy_warnings,
        retire_statements,
        rival_problem,
        rival_rows,
        rows_of,
        scheduled_rows,
        scheduler_row,
    )

    merged = inv.merged(config, overrides)
    settings = load_settings(merged)
    assert merged.config is not None
    try:
        script = executable(inv.checker)
    except NoExecutable as exc:
        fail(str(exc), Exit.BAD_INPUT)
    row = scheduler_row(inv.checker, merged.config, settings.run.interval_ms, script.path)
    for warning in _row_warnings(merged, script.other_on_path, row.filename):
        click.echo(f"warning: {warning}", err=True)
    if not apply_row:
        for statement in install_statements(row, None):
            click.echo(statement.render())
        return
    try:
        with AdminClient.connect(settings.proxysql) as admin:
            rows = scheduled_rows(admin)
            rivals = rival_rows(rows, inv.checker, merged.config)
            if rivals:
                problem = rival_problem(*rivals[0], merged.config.resolve())
                fail(f"{problem}; nothing changed", Exit.BAD_INPUT)
            for warning in legacy_warnings(rows):
                click.echo(f"warning: {warning}", err=True)
            found = rows_of(rows, inv.checker, merged.config)
            row_id = found[0] if found else None
            statements = install_statements(row, row_id)
            # the same file's other rows (another spelling, another path of the script) would
            # run a second checker on the same clusters: switched off in the same LOAD
            statements = statements[:1] + retire_statements(found[1:]) + statements[1:]
            for statement in statements:
                admin.execute(statement.sql, statement.params)
    except AdminError as exc:
        fail(str(exc), admin_exit(exc))
    action = f"updated (id {row_id})" if row_id else "inserted"
    click.echo(
        f"scheduler row {action}: {row.filename} {row.arg1} {row.arg2} every {row.interval_ms} ms"
    )
    for other in found[1:]:
        click.echo(f"scheduler row id {other} ran the same configuration file: set active = 0")


def _row_warnings(inv: Invocation, other: str | None, filename: str) -> list[str]:
    """What the row will not carry, or may not run, that the operator would expect."""
    import os

    from checker_core.core.keys import ENV_PREFIX
    from checker_core.settings.config import CONFIG_ENV

    found = []
    if inv.overrides:
        given = ", ".join(f"--set {o.partition('=')[0]}" for o in inv.overrides)
        found.append(
            f"{given} not in the scheduler row: it names only the configuration file, so "
            "put these settings in that file"
        )
    env = sorted(v for v in os.environ if v.startswith(ENV_PREFIX) and v != CONFIG_ENV)
    if env:
        found.append(
            f"{', '.join(env)} not in the scheduler row: ProxySQL runs it with an empty "
            "environment, so put these settings in the configuration file"
        )
    if other is not None:
        found.append(
            f"PATH's first {Path(filename).name} is {other}, another installation; the row "
            f"names this one, {filename}: remove or upgrade the other so a shell runs the same"
        )
    return found
