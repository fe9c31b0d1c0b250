"""`daemon`: the passes on the configured cadence until SIGTERM."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from checker_core.cli.common import Invocation, config_options, fail, load_settings, setup_logs
from checker_core.exitcodes import Exit

if TYPE_CHECKING:
    from checker_core.core.settings import Settings


@click.command("daemon")
@config_options
@click.pass_obj
def daemon_command(inv: Invocation, config: Path | None, overrides: tuple[str, ...]) -> None:
    """Run passes every run.interval_ms until SIGTERM; SIGHUP reloads the configuration."""
    from checker_core.service.daemon import run_daemon
    from checker_core.service.listener import ListenError
    from checker_core.settings.config import load

    merged = inv.merged(config, overrides)
    settings = load_settings(merged)
    log = setup_logs(settings)
    assert merged.config is not None
    path = merged.config
    first = [settings]

    def load_again() -> Settings:
        if first:
            return first.pop()
        return load(path, inv.checker, overrides=merged.overrides)

    try:
        code = run_daemon(load_again, inv.kind(), log)
    except ListenError as exc:
        fail(f"run.metrics_listen: {exc}", Exit.BAD_INPUT)
    sys.exit(code)
