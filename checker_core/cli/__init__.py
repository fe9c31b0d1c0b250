"""Shared click commands: each checker builds its group from these with its own Checker kind.

Precedence of settings: config file < environment (CHECKER_*) < command line (--set KEY=VALUE).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import click

from checker_core import __version__, oneshot
from checker_core.cli.adopt import adopt_command
from checker_core.cli.check_config import check_config
from checker_core.cli.common import Invocation, config_options
from checker_core.cli.daemon import daemon_command
from checker_core.cli.doctor import doctor_command
from checker_core.cli.health import healthcheck_command
from checker_core.cli.pause import pause_command, resume_command
from checker_core.cli.run import run_command, status_command
from checker_core.cli.scheduler_row import install_scheduler_command
from checker_core.cli.switchover import switchover_command

if TYPE_CHECKING:
    from checker_core.core.schema import Checker
    from checker_core.passes.plugin import CheckerKind


def make_group(checker: Checker, help_text: str, kind: Callable[[], CheckerKind]) -> click.Group:
    @click.group(help=help_text, context_settings={"help_option_names": ["-h", "--help"]})
    @click.version_option(__version__, prog_name=checker.command)
    @config_options
    @click.pass_context
    def group(ctx: click.Context, config: Path | None, overrides: tuple[str, ...]) -> None:
        ctx.obj = Invocation(checker, oneshot.config_path(config), overrides, kind)

    for command in COMMANDS:
        group.add_command(command)
    return group


COMMANDS = (
    switchover_command,
    check_config,
    doctor_command,
    run_command,
    status_command,
    daemon_command,
    adopt_command,
    pause_command,
    resume_command,
    install_scheduler_command,
    healthcheck_command,
)
