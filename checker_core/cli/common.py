"""What every command shares: the invocation, the config options, one way to fail."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click

from checker_core import oneshot
from checker_core.core.schema import Checker
from checker_core.exitcodes import Exit

if TYPE_CHECKING:
    from checker_core.core.model import NodeAddress
    from checker_core.core.settings import Settings
    from checker_core.passes.plugin import CheckerKind
    from checker_core.passes.result import PassResult


@dataclass(frozen=True, slots=True)
class Invocation:
    """What the options said; commands load the settings from it when they need them."""

    checker: Checker
    config: Path | None
    overrides: tuple[str, ...]
    kind: Callable[[], CheckerKind]  # imported only by the commands that run passes

    def merged(self, config: Path | None, overrides: tuple[str, ...]) -> Invocation:
        """Options given after the command name win over those given before it."""
        return replace(self, config=config or self.config, overrides=self.overrides + overrides)


def fail(message: str, code: Exit) -> NoReturn:
    click.echo(message, err=True)
    sys.exit(int(code))


def load_settings(inv: Invocation) -> Settings:
    """Settings, or exit 2 with every problem on its own line."""
    settings = oneshot.load_settings(inv.config, inv.checker, inv.overrides, sys.stderr)
    if isinstance(settings, Exit):
        sys.exit(int(settings))
    return settings


F = TypeVar("F", bound=Callable[..., Any])


class ConfigPath(click.Path):
    """--config's file: an empty argument is named as such, not read as the current directory
    (a Path of "" is ".")."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and not value:
            fail("--config: empty path", Exit.BAD_INPUT)
        return super().convert(value, param, ctx)


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
        type=ConfigPath(dir_okay=False, path_type=Path),
        help="TOML configuration file (default: $CHECKER_CONFIG).",
    )(func)


def bad_input(settings: Settings, problems: list[str]) -> NoReturn:
    lines = [f"{settings.source}: {len(problems)} problem(s):", *(f"  {p}" for p in problems)]
    fail("\n".join(lines), Exit.BAD_INPUT)


def setup_logs(settings: Settings, lean: bool = False) -> Any:
    from checker_core.edges.logs import get_logger

    run = settings.run
    stream = sys.stdout if run.log_stream == "stdout" else sys.stderr
    return get_logger(
        run.log_format, run.log_level, lean, stream=stream, checker=settings.checker.value
    )


def run_passes(inv: Invocation, settings: Settings, mode_name: str) -> list[PassResult]:
    return oneshot.run_passes(settings, inv.kind(), mode_name)


def node_argument(flag: str, text: str) -> NodeAddress:
    """A HOST:PORT argument, or one line naming the flag and exit 2."""
    from checker_core.core.hostname import host_problem
    from checker_core.core.model import NodeAddress

    host, _, port = text.rpartition(":")
    problem = None if host and port.isdigit() else "expected HOST:PORT"
    if problem is None:
        problem = host_problem(host) or (None if 0 < int(port) < 65536 else "port out of range")
    if problem is not None:
        fail(f"{flag} {text!r}: {problem}", Exit.BAD_INPUT)
    return NodeAddress(host, int(port))


def state_dir_problem(state_dir: Path, what: str, exc: OSError) -> str:
    return f"run.state_dir {state_dir}: cannot {what} ({exc.strerror or exc}); nothing changed"


def names_of(settings: Settings) -> list[str]:
    return [c.name for c in settings.clusters]


def known_clusters(settings: Settings, names: tuple[str, ...]) -> None:
    """Every name checked before anything is written: one unknown name changes nothing."""
    known = {c.name for c in settings.clusters}
    for name in names:
        if name not in known:
            listed = ", ".join(c.name for c in settings.clusters)
            fail(f"--cluster {name}: no such cluster (known: {listed})", Exit.BAD_INPUT)


def admin_exit(exc: Exception) -> Exit:
    from checker_core.edges.admin_errors import AdminAccessDenied

    return Exit.BAD_INPUT if isinstance(exc, AdminAccessDenied) else Exit.FAILED
