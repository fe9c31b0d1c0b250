"""`check-config`: the configuration, ProxySQL and the state directory checked, nothing changed."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from checker_core.cli.common import (
    Invocation,
    bad_input,
    config_options,
    load_settings,
    names_of,
    run_passes,
)

if TYPE_CHECKING:
    from checker_core.core.settings import HookSettings, Settings
    from checker_core.edges.memory import StateStore
    from checker_core.edges.proxysql import AdminClient


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
    store = StateStore(settings.run.state_dir, inv.checker, names_of(settings))
    locks = [store.lock_path(cluster.name) for cluster in settings.clusters]
    problem = unwritable(settings.run.state_dir, locks)
    if problem is not None:
        bad_input(settings, [problem])
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
    for line in _cluster_lines(settings):
        click.echo(line)
    click.echo(f"  ProxySQL Cluster: {cluster_line}")
    for cluster in settings.clusters:
        if cluster.unresponsive_after_ms > 0:
            click.echo(f"  cluster {cluster.name}: {_eviction_time(store, cluster.name)}")
    for warning in (*settings.warnings, *scheduler_warnings):
        click.echo(f"warning: {warning}", err=True)
    for result in run_passes(inv, settings, "status"):
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


def _cluster_lines(settings: Settings) -> list[str]:
    """Each cluster's hostgroups and rules, and its hooks when it has some."""
    lines = []
    for cluster in settings.clusters:
        hg = cluster.hostgroups
        lines.append(
            f"  cluster {cluster.name}: writer {hg.writer}, reader {hg.reader}, "
            f"backup {hg.backup_writer}, offline {hg.offline}, "
            f"templates {hg.config_writer}/{hg.config_reader}, max_writers {cluster.max_writers}, "
            f"writer_is_also_reader {cluster.writer_is_also_reader}"
        )
        if cluster.hooks is not None:
            lines.append(f"  cluster {cluster.name}: {_hooks_line(cluster.hooks)}")
    return lines


def _hooks_line(hooks: HookSettings) -> str:
    """The cluster's hooks as check-config says them: the URL by its host only (its path may
    hold a token)."""
    from urllib.parse import urlsplit

    told = []
    if hooks.command:
        told.append(f"command {hooks.command[0]}")
    if hooks.url is not None:
        told.append(f"URL at host {urlsplit(hooks.url.reveal()).hostname}")
    events = ", ".join(sorted(hooks.events)) if hooks.events else "every event"
    return (
        f"hooks: {' and '.join(told)}, told {events}, timeout {hooks.timeout_ms} ms, "
        f"queue {hooks.queue} (docs/hooks.md)"
    )


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
                bad_input(settings, list(refused.values()))
            unreadable = _unreadable_rows(admin, settings)
            if unreadable:
                bad_input(settings, unreadable)
            warnings = _scheduler_warnings(admin, settings)
            if proxysql.cluster == "off":
                return "off (this checker acts whatever the peers)", warnings
            listed = list_peers(admin)
            view = read_cluster_view(admin, proxysql.me, listed) if listed else None
    except AdminAccessDenied as exc:
        bad_input(settings, [str(exc)])
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
        bad_input(settings, [str(exc)])
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
