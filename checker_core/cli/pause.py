"""`pause` and `resume`: the checker observes and changes nothing while paused."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from checker_core.cli.common import (
    Invocation,
    config_options,
    fail,
    known_clusters,
    load_settings,
    names_of,
    state_dir_problem,
)
from checker_core.exitcodes import Exit

if TYPE_CHECKING:
    from checker_core.edges.memory import StateStore


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
    known_clusters(settings, cluster_names)
    if "\n" in reason or "\x00" in reason:
        fail("--reason: one line, without control characters", Exit.BAD_INPUT)
    store = StateStore(settings.run.state_dir, inv.checker, names_of(settings))
    for name in _targets(cluster_names):
        try:
            path = store.pause(name, reason)
        except OSError as exc:
            fail(state_dir_problem(store.state_dir, "write the pause file", exc), Exit.BAD_INPUT)
        click.echo(f"paused {name or 'all clusters'}: {path}")
    busy = _still_acting(store, list(cluster_names) or names_of(settings), wait_s)
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
    known_clusters(settings, cluster_names)
    store = StateStore(settings.run.state_dir, inv.checker, names_of(settings))
    for name in _targets(cluster_names):
        target = name or "all clusters"
        try:
            removed = store.resume(name)
        except OSError as exc:
            fail(state_dir_problem(store.state_dir, "remove the pause file", exc), Exit.BAD_INPUT)
        click.echo(f"resumed {target}" if removed else f"{target} was not paused")
