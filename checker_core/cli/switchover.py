"""`switchover`: the writer moved on purpose, by the checker's own plugin."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from checker_core.cli.common import (
    Invocation,
    config_options,
    fail,
    known_clusters,
    load_settings,
    node_argument,
)
from checker_core.exitcodes import Exit

if TYPE_CHECKING:
    from checker_core.core.model import NodeAddress
    from checker_core.passes.plugin import SwitchoverRequest


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
    known_clusters(settings, () if cluster_name is None else (cluster_name,))
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
