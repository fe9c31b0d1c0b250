"""The scheduler's command, `CHECKER --config=FILE run`, without click.

ProxySQL starts this every interval for as long as it lives, so the pass pays for nothing it
does not use: this module reads that one command line by hand and runs the pass; anything else
(another command, --help, --dry-run, an option it does not know) goes to the click group, which
reads it the same way and says what is wrong.
"""

from __future__ import annotations

import contextlib
import gc
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TextIO

from checker_core.exitcodes import Exit

if TYPE_CHECKING:
    from checker_core.core.model import NodeAddress
    from checker_core.core.schema import Checker
    from checker_core.core.settings import Settings
    from checker_core.core.whatif import Assumed
    from checker_core.passes.announce import SchedulerHooks
    from checker_core.passes.fleet import Fleet
    from checker_core.passes.plugin import CheckerKind
    from checker_core.passes.result import PassResult

RUN = "run"
DAEMON = "daemon"
CONFIG_FLAGS = ("--config", "-c")
SET_FLAG = "--set"


@dataclass(frozen=True, slots=True)
class RunLine:
    """What a plain `run` command line says."""

    config: Path | None
    overrides: tuple[str, ...]


def parse(argv: Sequence[str]) -> RunLine | None:
    """--config/-c FILE and --set KEY=VALUE (before or after `run`, the last --config winning,
    as with click) around the single word `run`; None for any other command line."""
    config: str | None = None
    overrides: list[str] = []
    commands = 0
    rest = list(argv)
    while rest:
        token = rest.pop(0)
        if token == RUN:
            commands += 1
        elif token.startswith("--config="):
            config = token.partition("=")[2]
        elif token.startswith("--set="):
            overrides.append(token.partition("=")[2])
        elif token in (*CONFIG_FLAGS, SET_FLAG) and rest and not rest[0].startswith("-"):
            value = rest.pop(0)
            if token == SET_FLAG:
                overrides.append(value)
            else:
                config = value
        else:
            return None
    if commands != 1 or config == "":
        return None
    return RunLine(Path(config) if config is not None else None, tuple(overrides))


def config_path(given: Path | None) -> Path | None:
    """The file named on the command line, else $CHECKER_CONFIG."""
    if given is not None:
        return given
    env_config = os.environ.get("CHECKER_CONFIG")
    return Path(env_config) if env_config else None


def load_settings(
    config: Path | None, checker: Checker, overrides: Sequence[str], err: TextIO
) -> Settings | Exit:
    """Settings, or BAD_INPUT after every problem on its own line."""
    from checker_core.settings.config import ConfigError, load

    if config is None:
        err.write("no configuration file: pass --config FILE or set CHECKER_CONFIG\n")
        return Exit.BAD_INPUT
    try:
        return load(config, checker, overrides=overrides)
    except ConfigError as exc:
        lines = [f"{config}: {len(exc.problems)} problem(s):"]
        lines += [f"  {p}" for p in exc.problems]
        err.write("\n".join(lines) + "\n")
        return Exit.BAD_INPUT


def new_fleet(
    settings: Settings, kind: CheckerKind, assumed: Mapping[NodeAddress, Assumed] | None = None
) -> Fleet:
    """The runners of a one-shot process. `assumed`: failures a dry-run's what-if takes for
    real (run --dry-run --assume-...)."""
    from checker_core.passes.fleet import Fleet

    return Fleet(settings, kind, assumed=assumed)


def run_passes(
    settings: Settings,
    kind: CheckerKind,
    mode_name: str,
    assumed: Mapping[NodeAddress, Assumed] | None = None,
) -> list[PassResult]:
    """Every cluster's pass, at once."""
    from checker_core.passes.result import Mode

    fleet = new_fleet(settings, kind, assumed)
    try:
        # no alarm ends a scheduler pass: it ends by itself in bounded time because every
        # socket it opens has a timeout (the admin's bounded by what the pass has left, a
        # probe's abandoned at the probes' deadline on a daemon thread), and its steps ask the
        # deadline between them
        return fleet.run_all(Mode(mode_name))
    finally:
        fleet.close()


def run(settings: Settings, kind: Callable[[], CheckerKind]) -> Exit:
    """One pass over every cluster, one log line each; the exit code of the worst."""
    from checker_core.edges import driver
    from checker_core.edges.logs import get_logger
    from checker_core.passes.result import Mode, exit_code
    from checker_core.report import log_later, log_pass

    # loading the driver is the program's start, not the pass's work: duration_ms is the pass
    driver.load()

    stream = sys.stdout if settings.run.log_stream == "stdout" else sys.stderr
    log = get_logger(
        settings.run.log_format,
        settings.run.log_level,
        lean=True,
        stream=stream,
        checker=settings.checker.value,
    )
    fleet = new_fleet(settings, kind())
    settled()
    hooks = _scheduler_hooks(settings, fleet)
    try:
        results = fleet.run_all(Mode.APPLY)
        for result in results:
            log_pass(log, result)
        if hooks is not None:  # handed to a process of their own: this one does not wait
            _hooks_net(log, lambda: _say_earlier(log, hooks))
            _hooks_net(log, lambda: _say_hooks(log, hooks.after_passes(results)))
        # the passes are over and their locks released: ProxySQL's next run of a cluster goes
        # on while what they left for after them (an eviction's stall wait) takes its own time
        finished = fleet.finish()
        for later in finished:
            log_later(log, later)
        if hooks is not None and finished:
            done = [(f.cluster, f.done) for f in finished]
            _hooks_net(log, lambda: _say_hooks(log, hooks.after_actions(done)))
    finally:
        fleet.close()
    # what was done after the passes is said, never the exit code: that is the passes'
    return exit_code(results)


def _scheduler_hooks(settings: Settings, fleet: Fleet) -> SchedulerHooks | None:
    """The clusters' hooks, when one has any (the hooks' modules are loaded only then)."""
    if all(c.hooks is None for c in settings.clusters):
        return None
    from checker_core.passes.announce import SchedulerHooks

    return SchedulerHooks(settings, fleet.store)


def _hooks_net(log: Any, tell: Callable[[], None]) -> None:
    """The hooks come after the passes' lines, which already say what ProxySQL has: whatever
    goes wrong with them is a line of its own, never the exit code (that is the passes')."""
    try:
        tell()
    except Exception as exc:  # the net: a hook is a notification, the pass is done
        log.warning("hook", summary=f"hooks not told: {exc!r}")


def _say_earlier(log: Any, hooks: SchedulerHooks) -> None:
    """What the hook processes of the passes before did, said by this one."""
    for cluster, outcome in hooks.earlier():
        method = log.info if outcome.get("ok") else log.warning
        summary = f"cluster {cluster}: after an earlier pass: {outcome.get('summary')}"
        method("hook", cluster=cluster, hook_event=outcome.get("hook_event"), summary=summary)


def _say_hooks(log: Any, said: list[tuple[str, str]]) -> None:
    for cluster, text in said:
        log.warning("hook", cluster=cluster, summary=f"cluster {cluster}: hooks: {text}")


def settled() -> None:
    """The program's modules are loaded: what they made is set aside from the cyclic
    collector for good (it is never garbage; a daemon's collections then walk only what its
    passes make), and the collector is on again. Called once, where a command's work begins."""
    gc.freeze()
    gc.enable()


def exit_now(code: int) -> NoReturn:
    """End the process without tearing the interpreter down module by module (about 10 ms
    of a pass's wall time): the pass is over, its state file written and closed, its lock
    dropped by the kernel; only the output streams still hold anything."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)


def main(argv: Sequence[str], checker: Checker, kind: Callable[[], CheckerKind]) -> int | None:
    """The exit code of a plain `run`; None when argv is another command line."""
    line = parse(argv)
    if line is None:
        return None
    settings = load_settings(config_path(line.config), checker, line.overrides, sys.stderr)
    if isinstance(settings, Exit):
        return int(settings)
    return int(run(settings, kind))


DEBUG_FLAG = "--debug"


def entry(
    checker: Checker, kind: Callable[[], CheckerKind], build: Callable[[], Callable[[], object]]
) -> None:
    """A checker's console script: the scheduler's plain `run` without click; every other
    command line goes to the click group `build` makes.

    Every input has a clear refusal of its own; should one still escape as an exception, the
    user reads one line and how to see the rest (--debug, anywhere on the line), never a Python
    traceback (a net, not the way any input is meant to be refused)."""
    if DAEMON in sys.argv[1:]:
        # before anything slow: a SIGHUP while the daemon starts must not end it
        from checker_core.edges import hangup

        hangup.hold()
    # the program's modules are loaded with the cyclic collector off: its collections while
    # the records' classes are made found nothing to free and cost a scheduler pass about a
    # tenth of its run. It is on again, the loaded objects set aside from it, before any
    # command's work begins (settled)
    gc.disable()
    debug = DEBUG_FLAG in sys.argv[1:]
    if debug:
        sys.argv = [sys.argv[0], *(a for a in sys.argv[1:] if a != DEBUG_FLAG)]
    try:
        code = main(sys.argv[1:], checker, kind)
        if code is not None:
            exit_now(code)
        group = build()
        settled()
        group()
    except (SystemExit, KeyboardInterrupt):
        raise
    except Exception as exc:
        if debug:
            raise
        sys.stderr.write(
            f"{checker.command}: internal error: {type(exc).__name__}: {exc}; "
            f"run it again with {DEBUG_FLAG} for the traceback, and report it\n"
        )
        exit_now(int(Exit.FAILED))
