"""Shared click commands: each checker builds its group from these with its own Checker kind.

Precedence of settings: config file < environment (CHECKER_*) < command line (--set KEY=VALUE).
"""

from __future__ import annotations

import contextlib
import functools
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click

from checker_core import __version__, oneshot
from checker_core.core.schema import Checker
from checker_core.exitcodes import Exit

if TYPE_CHECKING:
    from checker_core.core.model import NodeAddress
    from checker_core.core.settings import ClusterSettings, Settings
    from checker_core.core.whatif import Assumed
    from checker_core.edges.memory import StateStore
    from checker_core.edges.proxysql import AdminClient
    from checker_core.passes.plugin import CheckerKind, SwitchoverRequest
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


@click.command("check-config")
@config_options
@click.pass_obj
def check_config(inv: Invocation, config: Path | None, overrides: tuple[str, ...]) -> None:
    """Validate the configuration; list every problem with its key (exit 2) or summarise it."""
    from checker_core.edges.memory import StateStore, unwritable
    from checker_core.report import summary

    settings = load_settings(inv.merged(config, overrides))
    # what a pass would refuse is refused here too, before an "ok": the state directory where
    # every applying pass takes its lock, then what only ProxySQL can tell
    store = StateStore(settings.run.state_dir, inv.checker, _names(settings))
    locks = [store.lock_path(cluster.name) for cluster in settings.clusters]
    problem = unwritable(settings.run.state_dir, locks)
    if problem is not None:
        _bad_input(settings, [problem])
    cluster_line, scheduler_warnings = _proxysql_cluster_line(settings)
    click.echo(f"{settings.source}: ok ({inv.checker.command})")
    proxysql = settings.proxysql
    click.echo(
        f"  proxysql admin {proxysql.host}:{proxysql.port} as {proxysql.endpoint.user}, "
        f"ssl_mode {proxysql.endpoint.tls.mode.value}"
    )
    click.echo(
        f"  monitor account {settings.monitor.user}, ssl_mode {settings.monitor.tls.mode.value}"
    )
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
    click.echo(f"  ProxySQL Cluster: {cluster_line}")
    for cluster in settings.clusters:
        if cluster.unresponsive_after_ms > 0:
            click.echo(f"  cluster {cluster.name}: {_eviction_time(store, cluster.name)}")
    for warning in (*settings.warnings, *scheduler_warnings):
        click.echo(f"warning: {warning}", err=True)
    for result in _run_passes(inv, settings, "status"):
        for advice in result.advice:
            if advice.warning:
                click.echo(f"warning: cluster {result.cluster}: {advice.text}", err=True)
            else:
                click.echo(f"  cluster {result.cluster}: {advice.text}")
        readiness = result.readiness()
        if readiness is None:
            click.echo(f"  cluster {result.cluster} failover: not checked ({summary(result)})")
        elif readiness.ready:
            click.echo(f"  cluster {result.cluster} failover: {readiness.reason}")
        else:
            click.echo(f"warning: cluster {result.cluster}: failover {readiness.reason}", err=True)


def _eviction_time(store: StateStore, cluster: str) -> str:
    """How evict_unresponsive_nodes gets the causal reads' stall wait in each mode: never from
    run.max_runtime_ms, so no cadence starves it."""
    return (
        "evict_unresponsive_nodes: the causal reads' whole stall wait is given off the pass, "
        "never cut to run.max_runtime_ms: a scheduler pass (run) evicts once its pass line is "
        f"out and its lock released, in the same process, under {store.evict_lock_path(cluster)} "
        "(ProxySQL's next run of the cluster goes on meanwhile; one that finds that lock held "
        "leaves the eviction to it); the daemon evicts on a thread of its own and its next pass "
        "says how it went"
    )


def _bad_input(settings: Settings, problems: list[str]) -> NoReturn:
    lines = [f"{settings.source}: {len(problems)} problem(s):", *(f"  {p}" for p in problems)]
    fail("\n".join(lines), Exit.BAD_INPUT)


def _proxysql_cluster_line(settings: Settings) -> tuple[str, list[str]]:
    """Whether this checker would act, and what ProxySQL's scheduler holds that warns. What
    ProxySQL says that makes a pass refuse is bad input here too (exit 2): credentials it
    refuses, a port that is not its admin, a native manager of the same hostgroups, an address
    its proxy does not list. An unreachable admin is reported, not an error here."""
    from checker_core.core.leadership import NotAPeer, PeerMemory
    from checker_core.core.peers import choose_actor
    from checker_core.edges import native
    from checker_core.edges.admin_errors import AdminAccessDenied, AdminError
    from checker_core.edges.proxysql import AdminClient
    from checker_core.edges.proxysql_peers import list_peers, read_cluster_view

    proxysql = settings.proxysql
    warnings: list[str] = []
    try:
        with AdminClient.connect(proxysql) as admin:
            refused = native.conflicts(admin, settings.clusters)
            if refused:
                _bad_input(settings, list(refused.values()))
            unreadable = _unreadable_rows(admin, settings)
            if unreadable:
                _bad_input(settings, unreadable)
            warnings = _scheduler_warnings(admin, settings)
            if proxysql.cluster == "off":
                return "off (this checker acts whatever the peers)", warnings
            listed = list_peers(admin)
            view = read_cluster_view(admin, proxysql.me, listed) if listed else None
    except AdminAccessDenied as exc:
        _bad_input(settings, [str(exc)])
    except AdminError as exc:
        if proxysql.cluster == "off":
            line = f"off (this checker acts whatever the peers); admin not checked ({exc})"
            return line, warnings
        return f"not checked ({exc})", warnings
    if view is None:
        return "no peers in runtime_proxysql_servers (this checker acts alone)", warnings
    try:
        leadership = choose_actor(view, PeerMemory())
    except NotAPeer as exc:
        _bad_input(settings, [str(exc)])
    return f"this proxy is {proxysql.me}; {leadership.reason}", warnings


def _unreadable_rows(admin: AdminClient, settings: Settings) -> list[str]:
    """Each cluster's rows read as its pass reads them: a row no pass can use is a problem."""
    from checker_core.core.model import BadRow

    problems = []
    for cluster in settings.clusters:
        try:
            admin.read_rows(cluster.hostgroups.all)
        except BadRow as exc:
            problems.append(f"cluster {cluster.name}: {exc}")
    return problems


def _scheduler_warnings(admin: AdminClient, settings: Settings) -> list[str]:
    """Active scheduler rows that manage hostgroups beside this checker: Percona's checkers,
    and the other checker run on this same configuration file (install-scheduler refuses to
    add a row beside it)."""
    from checker_core.edges.admin_errors import AdminQueryFailed
    from checker_core.scheduler import (
        legacy_warnings,
        rival_problem,
        rival_rows,
        scheduled_rows,
    )

    try:
        rows = scheduled_rows(admin)
    except AdminQueryFailed as exc:
        return [f"ProxySQL's scheduler table was not read ({exc})"]
    config = settings.source.resolve()
    rivals = rival_rows(rows, settings.checker, config)
    return [*legacy_warnings(rows), *(rival_problem(r, other, config) for r, other in rivals)]


def _setup_logs(settings: Settings, lean: bool = False) -> Any:
    from checker_core.edges.logs import get_logger

    run = settings.run
    stream = sys.stdout if run.log_stream == "stdout" else sys.stderr
    return get_logger(
        run.log_format, run.log_level, lean, stream=stream, checker=settings.checker.value
    )


def _run_passes(inv: Invocation, settings: Settings, mode_name: str) -> list[PassResult]:
    return oneshot.run_passes(settings, inv.kind(), mode_name)


def _assume_option(name: str, what: str) -> Callable[[F], F]:
    return click.option(
        f"--assume-{name}",
        f"assume_{name}",
        multiple=True,
        metavar="HOST:PORT[,HOST:PORT]",
        help=f"With --dry-run: the plan if these nodes were {what} now (what-if).",
    )


@click.command("run")
@config_options
@click.option(
    "--dry-run", is_flag=True, help="Print the node table, verdicts and SQL; change nothing."
)
@_assume_option("down", "down")
@_assume_option("lagging", "lagging")
@_assume_option("desync", "desynced")
@click.pass_obj
def run_command(
    inv: Invocation,
    *,
    config: Path | None,
    overrides: tuple[str, ...],
    dry_run: bool,
    assume_down: tuple[str, ...],
    assume_lagging: tuple[str, ...],
    assume_desync: tuple[str, ...],
) -> None:
    """One pass over every cluster, then exit (the scheduler entry)."""
    from checker_core.passes.result import exit_code
    from checker_core.report import render

    settings = load_settings(inv.merged(config, overrides))
    assumed = _assumed(assume_down, assume_lagging, assume_desync)
    if assumed and not dry_run:
        fail("--assume-down, --assume-lagging and --assume-desync need --dry-run", Exit.BAD_INPUT)
    if not dry_run:
        # what the scheduler runs; oneshot.main runs it without click when the line is plain
        sys.exit(int(oneshot.run(settings, inv.kind)))
    results = oneshot.run_passes(settings, inv.kind(), "dry_run", assumed)
    judged = {n for r in results if r.decision for n in r.decision.roster.addresses}
    unknown = sorted(set(assumed) - judged)
    # a cluster whose pass stopped early (bad input, unreachable) says why below instead
    if unknown and all(r.decision is not None for r in results):
        fail(
            f"--assume-{assumed[unknown[0]].label}: {', '.join(map(str, unknown))} is in no "
            "cluster's roster; nothing assumed",
            Exit.BAD_INPUT,
        )
    by_name = {c.name: c for c in settings.clusters}
    for result in results:
        click.echo(render(result, by_name[result.cluster].hostgroups, with_sql=True))
    sys.exit(int(exit_code(results)))


def _assumed(
    down: tuple[str, ...], lagging: tuple[str, ...], desync: tuple[str, ...]
) -> dict[NodeAddress, Assumed]:
    """HOST:PORT lists of the --assume-* options; one line and exit 2 for a bad one."""
    from checker_core.core.whatif import Assumed

    found: dict[NodeAddress, Assumed] = {}
    options = ((Assumed.DOWN, down), (Assumed.LAGGING, lagging), (Assumed.DESYNC, desync))
    for what, values in options:
        for text in (part.strip() for value in values for part in value.split(",")):
            node = node_argument(f"--assume-{what.label}", text)
            if node in found and found[node] is not what:
                fail(
                    f"--assume-{what.label} {text}: already assumed {found[node].label}",
                    Exit.BAD_INPUT,
                )
            found[node] = what
    return found


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


@click.command("status")
@config_options
@click.option(
    "--format",
    "output",
    type=click.Choice(["table", "json"]),
    default="table",
    show_default=True,
    help="json: the document the daemon serves on /status.",
)
@click.pass_obj
def status_command(
    inv: Invocation, config: Path | None, overrides: tuple[str, ...], output: str
) -> None:
    """The current layout and every node's verdict, as a table; changes nothing."""
    import json

    from checker_core.passes.result import exit_code
    from checker_core.report import render, status_document

    settings = load_settings(inv.merged(config, overrides))
    results = _run_passes(inv, settings, "status")
    hostgroups = {c.name: c.hostgroups for c in settings.clusters}
    if output == "json":
        document = status_document(inv.checker.value, results, hostgroups)
        click.echo(json.dumps(document, indent=2))
    else:
        for result in results:
            click.echo(render(result, hostgroups[result.cluster], with_sql=False))
    sys.exit(int(exit_code(results)))


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
    log = _setup_logs(settings)
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


@click.command("adopt")
@config_options
@click.option("--force", is_flag=True, help="Rebuild templates that already hold rows.")
@click.option("--dry-run", is_flag=True, help="Print the SQL only.")
@click.pass_obj
def adopt_command(
    inv: Invocation, config: Path | None, overrides: tuple[str, ...], force: bool, dry_run: bool
) -> None:
    """Build the roster templates from the rows the operator already has in the hostgroups."""
    from checker_core.core.model import BadRow
    from checker_core.edges.admin_errors import AdminError
    from checker_core.edges.memory import StateStore
    from checker_core.edges.proxysql import AdminClient

    settings = load_settings(inv.merged(config, overrides))
    store = StateStore(settings.run.state_dir, inv.checker, _names(settings))
    from checker_core.edges import native

    try:
        with AdminClient.connect(settings.proxysql) as admin:
            refused = native.conflicts(admin, settings.clusters)
            if refused:
                fail("\n".join(f"{r} (nothing changed)" for r in refused.values()), Exit.BAD_INPUT)
            for cluster in settings.clusters:
                if dry_run:
                    _adopt(admin, cluster, force, dry_run=True)
                    continue
                with contextlib.ExitStack() as stack:
                    _take_adopt_locks(stack, store, settings, cluster.name)
                    _adopt(
                        admin,
                        cluster,
                        force,
                        dry_run=False,
                        reconnect=functools.partial(AdminClient.connect, settings.proxysql),
                    )
    except AdminError as exc:
        fail(str(exc), _admin_exit(exc))
    except BadRow as exc:
        fail(f"bad input, nothing changed: {exc}", Exit.BAD_INPUT)


def _take_adopt_locks(
    stack: contextlib.ExitStack[bool | None], store: StateStore, settings: Settings, cluster: str
) -> None:
    """The cluster's pass lock (never a LOAD beside one of its passes) and the ProxySQL's
    write lock (never beside another process's apply: the other checker's), or the command
    ends saying which is held."""
    from checker_core.edges.lock import cluster_lock, write_lock

    lock_path = store.lock_path(cluster)
    try:
        store.ensure_dir()
        held = stack.enter_context(cluster_lock(lock_path))
    except OSError as exc:
        fail(
            f"run.state_dir {store.state_dir}: cannot create or write the lock "
            f"file ({exc.strerror or exc}); nothing changed",
            Exit.BAD_INPUT,
        )
    if not held:
        fail(
            f"cluster {cluster}: a pass holds the lock {lock_path}; nothing changed, try again",
            Exit.FAILED,
        )
    write_path = store.write_lock_path(settings.proxysql.host, settings.proxysql.port)
    wait_s = (settings.run.max_runtime_ms + settings.run.interval_ms) / 1000
    if not stack.enter_context(write_lock(write_path, wait_s)):
        fail(
            f"cluster {cluster}: another process held the write lock {write_path} for "
            f"{wait_s:g} s; nothing changed, try again",
            Exit.FAILED,
        )


def _adopt(
    admin: AdminClient,
    cluster: ClusterSettings,
    force: bool,
    *,
    dry_run: bool,
    reconnect: Callable[[], AdminClient] | None = None,
) -> None:
    """One cluster's adoption: templates written, read back, then loaded and saved as a pass's
    plan is (other hostgroups' staged edits set aside, a failure put back: on a new connection
    from `reconnect` when this one is lost, a LOAD's answer with it)."""
    from checker_core.core.model import Plan
    from checker_core.core.roster import adopt_templates
    from checker_core.core.statements import LOAD_SERVERS, SAVE_SERVERS, staging_statements
    from checker_core.edges.admin_errors import AdminError

    hg = cluster.hostgroups
    rows = admin.read_rows(hg.all)
    live, staged = rows.live(hg.templates), rows.staged(hg.templates)
    if (live or staged) and not force:
        held = (
            f"already hold {len(live)} row(s)"
            if live
            else f"hold {len(staged)} row(s) staged in mysql_servers and not loaded (an "
            "operator's roster: LOAD MYSQL SERVERS TO RUNTIME makes it live)"
        )
        click.echo(
            f"cluster {cluster.name}: templates {hg.config_writer}/{hg.config_reader} {held}; "
            "--force rebuilds them"
        )
        return
    adopted = adopt_templates(rows.live(hg.managed), hg)
    if not adopted:
        managed = ", ".join(map(str, hg.managed))
        fail(
            f"cluster {cluster.name}: hostgroups {managed} hold no server to adopt",
            Exit.BAD_INPUT,
        )
    writes = staging_statements(hg.templates, rows.staging, adopted)
    click.echo(f"cluster {cluster.name}: roster of {len({r.node for r in adopted})} node(s):")
    for row in adopted:
        click.echo(f"  {row.describe()} weight {row.weight}")
    if dry_run:
        for statement in (*writes, LOAD_SERVERS, SAVE_SERVERS):
            click.echo(f"  {statement.render()}")
        return
    # as a pass applies: the templates staged and read back, staged rows of other hostgroups
    # (an operator's edit, another cluster's) set aside for the LOAD, a failure put back
    plan = Plan(hg, desired=rows.staged(hg.managed), adopted=adopted, templates=adopted)
    try:
        admin.apply(plan, persist=True, warn=click.echo, reconnect=reconnect)
    except AdminError as exc:
        fail(f"cluster {cluster.name}: adopt failed: {exc}", Exit.FAILED)


@click.command("pause")
@config_options
@click.option(
    "--cluster",
    "cluster_names",
    multiple=True,
    help="Pause this cluster (repeat for several; default: all).",
)
@click.option("--reason", default="paused by an operator", help="Kept in the pause file.")
@click.option(
    "--wait",
    "wait_s",
    type=click.FloatRange(min=0),
    default=60.0,
    show_default=True,
    help="Seconds to wait for a pass or command already under way to end: the pause holds "
    "once this command returns 0 (0: do not wait).",
)
@click.pass_obj
def pause_command(  # noqa: PLR0917 - click hands every option over
    inv: Invocation,
    config: Path | None,
    overrides: tuple[str, ...],
    cluster_names: tuple[str, ...],
    reason: str,
    wait_s: float,
) -> None:
    """Passes observe and log, and change nothing, until resume.

    A pass that began before the pause file appeared may still apply what it planned: this
    command returns once every pass and command under way on the paused clusters has ended
    (exit 1, the pause file kept, when one is still running after --wait seconds)."""
    from checker_core.edges.memory import StateStore

    settings = load_settings(inv.merged(config, overrides))
    _known_clusters(settings, cluster_names)
    if "\n" in reason or "\x00" in reason:
        fail("--reason: one line, without control characters", Exit.BAD_INPUT)
    store = StateStore(settings.run.state_dir, inv.checker, _names(settings))
    for name in _targets(cluster_names):
        try:
            path = store.pause(name, reason)
        except OSError as exc:
            fail(state_dir_problem(store.state_dir, "write the pause file", exc), Exit.BAD_INPUT)
        click.echo(f"paused {name or 'all clusters'}: {path}")
    busy = _still_acting(store, list(cluster_names) or _names(settings), wait_s)
    if busy:
        fail(
            "the pause holds for every pass that starts from now; still under way after "
            f"{wait_s:g}s, and free to finish what it began: {'; '.join(busy)}",
            Exit.FAILED,
        )


def _still_acting(store: StateStore, names: list[str], wait_s: float) -> list[str]:
    """Wait for each cluster's pass and off-pass eviction under way to end, in one shared
    time budget; what is still running when it is spent, named with its holder's pid."""
    import time

    from checker_core.edges.lock import wait_free

    if wait_s <= 0:
        return []
    end = time.monotonic() + wait_s
    busy = []
    for name in names:
        for what, path in (
            ("its pass", store.lock_path(name)),
            ("its eviction", store.evict_lock_path(name)),
        ):
            holder = wait_free(path, max(0.0, end - time.monotonic()))
            if holder is not None:
                busy.append(f"cluster {name}: {what} (pid {holder or 'unknown'})")
    return busy


def _targets(names: tuple[str, ...]) -> tuple[str | None, ...]:
    """Each named cluster once, in the order given; none named: the all-clusters switch."""
    return tuple(dict.fromkeys(names)) or (None,)


@click.command("resume")
@config_options
@click.option(
    "--cluster",
    "cluster_names",
    multiple=True,
    help="Resume this cluster (repeat for several; default: the all-clusters switch).",
)
@click.pass_obj
def resume_command(
    inv: Invocation, config: Path | None, overrides: tuple[str, ...], cluster_names: tuple[str, ...]
) -> None:
    """Undo pause."""
    from checker_core.edges.memory import StateStore

    settings = load_settings(inv.merged(config, overrides))
    _known_clusters(settings, cluster_names)
    store = StateStore(settings.run.state_dir, inv.checker, _names(settings))
    for name in _targets(cluster_names):
        target = name or "all clusters"
        try:
            removed = store.resume(name)
        except OSError as exc:
            fail(state_dir_problem(store.state_dir, "remove the pause file", exc), Exit.BAD_INPUT)
        click.echo(f"resumed {target}" if removed else f"{target} was not paused")


def state_dir_problem(state_dir: Path, what: str, exc: OSError) -> str:
    return f"run.state_dir {state_dir}: cannot {what} ({exc.strerror or exc}); nothing changed"


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
        fail(str(exc), _admin_exit(exc))
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


DEFAULT_LISTEN = "127.0.0.1:9140"
MAX_HEALTH_TIMEOUT_S = 3600.0


@click.command("healthcheck")
@click.option(
    "--listen",
    envvar="CHECKER_RUN_METRICS_LISTEN",
    metavar="HOST:PORT",
    help="The daemon's listener (default: $CHECKER_RUN_METRICS_LISTEN, else run.metrics_listen "
    "of the configuration file, else 127.0.0.1:9140).",
)
@click.option("--timeout", "timeout_s", default=3.0, show_default=True, help="Seconds to wait.")
@click.pass_obj
def healthcheck_command(inv: Invocation, listen: str | None, timeout_s: float) -> None:
    """Ask a running daemon's /health: exit 0 when healthy, 1 otherwise (for HEALTHCHECK)."""
    import http.client
    import math
    import urllib.error
    import urllib.request

    from checker_core.core.settings import ListenAddress

    if not math.isfinite(timeout_s) or timeout_s <= 0 or timeout_s > MAX_HEALTH_TIMEOUT_S:
        fail(
            f"--timeout: {timeout_s} is not a number of seconds between 0 and "
            f"{MAX_HEALTH_TIMEOUT_S:g} (e.g. --timeout 3)",
            Exit.BAD_INPUT,
        )
    if listen is not None and any(c.isspace() for c in listen):
        fail(f"--listen: {listen!r} holds a space: expected HOST:PORT", Exit.BAD_INPUT)

    if listen is None and inv.config is not None:
        configured = load_settings(inv).run.metrics_listen
        listen = None if configured is None else str(configured)
    try:
        address = ListenAddress.parse(listen or DEFAULT_LISTEN)
    except ValueError as exc:
        fail(f"--listen: {exc}", Exit.BAD_INPUT)
    url = address.url("/health")
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as answer:  # noqa: S310 (http only)
            click.echo(answer.read().decode(errors="replace").strip())
    except urllib.error.HTTPError as exc:
        fail(exc.read().decode(errors="replace").strip() or f"{url}: {exc}", Exit.FAILED)
    except (http.client.HTTPException, UnicodeError) as exc:
        # something answers there, but not the daemon's HTTP listener
        fail(
            f"{url}: the service there does not answer HTTP ({type(exc).__name__}); "
            "is --listen (run.metrics_listen) the daemon's listener?",
            Exit.FAILED,
        )
    except OSError as exc:
        fail(f"{url}: no answer ({exc})", Exit.FAILED)


@click.command("switchover")
@config_options
@click.option("--to", "to", metavar="HOST:PORT", help="The node that is to write.")
@click.option(
    "--from",
    "source",
    metavar="HOST:PORT",
    help="The node that writes now: the next writer is the one a failover would choose.",
)
@click.option("--cluster", "cluster_name", help="The cluster (needed when the file has several).")
@click.option("--release", is_flag=True, help="Drop the switchover's pin: weights decide again.")
@click.option(
    "--timeout",
    "timeout_s",
    type=float,
    metavar="SECONDS",
    help="Group Replication: how long the whole move may take (default 60).",
)
@click.option(
    "--running-transactions-timeout",
    "running_s",
    type=int,
    metavar="SECONDS",
    help="Group Replication (8.0.29+): seconds the old primary waits for its running "
    "transactions before disconnecting those not yet committing (default: no limit).",
)
@click.option(
    "--keep-auto-increment-delay",
    "keep_delay",
    is_flag=True,
    hidden=True,
    # what it asked for is what every switchover does now: accepted so that scripts still run
    help="No effect: a switchover changes no ProxySQL variable.",
)
@click.option("--dry-run", is_flag=True, help="Print the plan and the SQL; change nothing.")
@click.pass_obj
def switchover_command(
    inv: Invocation,
    *,
    config: Path | None,
    overrides: tuple[str, ...],
    to: str | None,
    source: str | None,
    cluster_name: str | None,
    release: bool,
    timeout_s: float | None,
    running_s: int | None,
    keep_delay: bool,
    dry_run: bool,
) -> None:
    """Move the writer on purpose: Galera's old writer drains, then reads; Group Replication's
    primary is moved by the group (group_replication_set_as_primary) and followed."""
    from checker_core.passes.plugin import SwitchoverRequest

    settings = load_settings(inv.merged(config, overrides))
    _known_clusters(settings, () if cluster_name is None else (cluster_name,))
    if cluster_name is None and len(settings.clusters) > 1:
        fail("switchover: --cluster NAME is needed with several clusters", Exit.BAD_INPUT)
    cluster = next(c for c in settings.clusters if cluster_name in (None, c.name))
    move = inv.kind().switchover
    if move is None:
        fail(f"switchover: {inv.checker.value} has no planned move", Exit.BAD_INPUT)
    request = SwitchoverRequest(
        settings,
        cluster,
        to,
        source,
        release=release,
        timeout_s=timeout_s,
        running_transactions_s=running_s,
        dry_run=dry_run,
        say=click.echo,
    )
    sys.exit(int(move(request)))


def only_for(checker: str, given: tuple[tuple[str, bool], ...], why: str) -> None:
    """A switchover option of the other checker given: one line naming it and exit 2."""
    for flag, was_given in given:
        if was_given:
            fail(f"{flag}: {checker} only ({why})", Exit.BAD_INPUT)


def move_nodes(request: SwitchoverRequest) -> tuple[NodeAddress | None, NodeAddress | None]:
    """--to and --from: exactly one of them, as a node."""
    to, source = request.to, request.source
    if (to is None) == (source is None):
        fail(
            "switchover: give either --to HOST:PORT or --from HOST:PORT (or --release)",
            Exit.BAD_INPUT,
        )
    target = None if to is None else node_argument("--to", to)
    origin = None if source is None else node_argument("--from", source)
    return target, origin


def _names(settings: Settings) -> list[str]:
    return [c.name for c in settings.clusters]


def _known_clusters(settings: Settings, names: tuple[str, ...]) -> None:
    """Every name checked before anything is written: one unknown name changes nothing."""
    known = {c.name for c in settings.clusters}
    for name in names:
        if name not in known:
            listed = ", ".join(c.name for c in settings.clusters)
            fail(f"--cluster {name}: no such cluster (known: {listed})", Exit.BAD_INPUT)


def _admin_exit(exc: Exception) -> Exit:
    from checker_core.edges.admin_errors import AdminAccessDenied

    return Exit.BAD_INPUT if isinstance(exc, AdminAccessDenied) else Exit.FAILED


COMMANDS = (
    switchover_command,
    check_config,
    run_command,
    status_command,
    daemon_command,
    adopt_command,
    pause_command,
    resume_command,
    install_scheduler_command,
    healthcheck_command,
)
