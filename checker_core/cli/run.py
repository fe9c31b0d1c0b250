"""`run` (one pass) and `status` (the layout and every verdict), with their what-if options."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import click

from checker_core import oneshot
from checker_core.cli.common import (
    F,
    Invocation,
    config_options,
    fail,
    load_settings,
    node_argument,
    run_passes,
)
from checker_core.exitcodes import Exit

if TYPE_CHECKING:
    from checker_core.core.model import NodeAddress
    from checker_core.core.whatif import Assumed


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
    results = run_passes(inv, settings, "status")
    hostgroups = {c.name: c.hostgroups for c in settings.clusters}
    if output == "json":
        document = status_document(inv.checker.value, results, hostgroups)
        click.echo(json.dumps(document, indent=2))
    else:
        for result in results:
            click.echo(render(result, hostgroups[result.cluster], with_sql=False))
    sys.exit(int(exit_code(results)))
