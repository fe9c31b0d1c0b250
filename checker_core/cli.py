"""Shared click commands: each checker builds its group from these with its own Checker kind.

Precedence of settings: config file < environment (CHECKER_*) < command line (--set KEY=VALUE).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click

from checker_core import __version__
from checker_core.exitcodes import Exit
from checker_core.settings_schema import Checker

if TYPE_CHECKING:
    from checker_core.config import Settings


@dataclass(frozen=True, slots=True)
class Invocation:
    """What the options said; commands load the settings from it when they need them."""

    checker: Checker
    config: Path | None
    overrides: tuple[str, ...]

    def merged(self, config: Path | None, overrides: tuple[str, ...]) -> Invocation:
        """Options given after the command name win over those given before it."""
        return Invocation(self.checker, config or self.config, self.overrides + overrides)


def fail(message: str, code: Exit) -> NoReturn:
    click.echo(message, err=True)
    sys.exit(int(code))


def load_settings(inv: Invocation) -> Settings:
    """Settings, or exit 2 with every problem on its own line."""
    from checker_core.config import ConfigError, load

    if inv.config is None:
        fail("no configuration file: pass --config FILE or set CHECKER_CONFIG", Exit.BAD_INPUT)
    try:
        return load(inv.config, inv.checker, overrides=inv.overrides)
    except ConfigError as exc:
        lines = [f"{inv.config}: {len(exc.problems)} problem(s):"] + [
            f"  {p}" for p in exc.problems
        ]
        fail("\n".join(lines), Exit.BAD_INPUT)


F = TypeVar("F", bound=Callable[..., Any])


def config_options(func: F) -> F:
    """--config and --set, accepted before and after the command name."""
    func = click.option(
        "--set",
        "overrides",
        multiple=True,
        metavar="KEY=VALUE",
        help="Override a setting, e.g. --set run.log_level=debug or --set cluster[0].retry_down=2.",
    )(func)
    return click.option(
        "--config",
        "-c",
        "config",
        type=click.Path(dir_okay=False, path_type=Path),
        help="TOML configuration file (default: $CHECKER_CONFIG).",
    )(func)


def make_group(checker: Checker, help_text: str) -> click.Group:
    @click.group(help=help_text, context_settings={"help_option_names": ["-h", "--help"]})
    @click.version_option(__version__, prog_name=checker.command)
    @config_options
    @click.pass_context
    def group(ctx: click.Context, config: Path | None, overrides: tuple[str, ...]) -> None:
        env_config = os.environ.get("CHECKER_CONFIG")
        ctx.obj = Invocation(
            checker, config or (Path(env_config) if env_config else None), overrides
        )

    group.add_command(check_config)
    return group


@click.command("check-config")
@config_options
@click.pass_obj
def check_config(inv: Invocation, config: Path | None, overrides: tuple[str, ...]) -> None:
    """Validate the configuration; list every problem with its key (exit 2) or summarise it."""
    settings = load_settings(inv.merged(config, overrides))
    click.echo(f"{settings.source}: ok ({inv.checker.command})")
    proxysql = settings.proxysql
    click.echo(f"  proxysql admin {proxysql.host}:{proxysql.port} as {proxysql.endpoint.user}")
    click.echo(f"  monitor account {settings.monitor.user}")
    run = settings.run
    click.echo(
        f"  run every {run.interval_ms} ms, max {run.max_runtime_ms} ms per pass, "
        f"state in {run.state_dir}, persist={'on' if run.persist else 'off'}"
    )
    for cluster in settings.clusters:
        hg = cluster.hostgroups
        click.echo(
            f"  cluster {cluster.name}: writer {hg.writer}, reader {hg.reader}, "
            f"backup {hg.backup_writer}, offline {hg.offline}, "
            f"templates {hg.config_writer}/{hg.config_reader}, max_writers {cluster.max_writers}, "
            f"writer_is_also_reader {cluster.writer_is_also_reader}"
        )
    for warning in settings.warnings:
        click.echo(f"warning: {warning}", err=True)
