"""`adopt`: the roster templates built from the rows an operator already has."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import click

from checker_core.cli.common import (
    Invocation,
    admin_exit,
    config_options,
    fail,
    load_settings,
    names_of,
)
from checker_core.exitcodes import Exit

if TYPE_CHECKING:
    from checker_core.core.settings import ClusterSettings, Settings
    from checker_core.edges.memory import StateStore
    from checker_core.edges.proxysql import AdminClient


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
    store = StateStore(settings.run.state_dir, inv.checker, names_of(settings))
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
        fail(str(exc), admin_exit(exc))
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
