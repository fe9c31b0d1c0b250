"""galera-checker's command line (the shared click group with the Galera rules and probe)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from checker_core.core.schema import Checker

if TYPE_CHECKING:
    import click

    from checker_core.exitcodes import Exit
    from checker_core.passes.plugin import CheckerKind, SwitchoverRequest


def kind() -> CheckerKind:
    # loaded here, not with this module: the console script loads the program with the
    # cyclic collector off (oneshot.entry), and this module is loaded before that
    from checker_core.passes.plugin import CheckerKind
    from galera_checker.actions import GaleraActions
    from galera_checker.policy import GaleraPolicy
    from galera_checker.probe import probe, watch

    return CheckerKind(
        Checker.GALERA, GaleraPolicy(), probe, watch, GaleraActions, switchover=switchover
    )


def switchover(request: SwitchoverRequest) -> Exit:
    """The Galera writer moved on purpose: the target pinned, the old writer drained
    (`--release` drops the pin)."""
    from checker_core.cli.common import fail, state_dir_problem
    from checker_core.cli.switchover import move_nodes, only_for
    from checker_core.edges.memory import StateStore
    from checker_core.exitcodes import Exit
    from galera_checker import switchover as move

    only_for(
        "Group Replication",
        (
            ("--timeout", request.timeout_s is not None),
            ("--running-transactions-timeout", request.running_transactions_s is not None),
        ),
        "Galera's move is bounded by cluster.drain_timeout_ms",
    )
    settings, cluster = request.settings, request.cluster
    if request.release:
        store = StateStore(
            settings.run.state_dir, Checker.GALERA, [c.name for c in settings.clusters]
        )
        if request.dry_run:
            pinned = store.writer_pin(cluster.name)
            held = f"the pin on {pinned}" if pinned is not None else "no pin"
            request.say(f"cluster {cluster.name}: dry run: would release {held}; nothing changed")
            return Exit.OK
        try:
            store.pin_writer(cluster.name, None)
        except OSError as exc:
            fail(state_dir_problem(store.state_dir, "remove the pin", exc), Exit.BAD_INPUT)
        request.say(f"cluster {cluster.name}: switchover pin released; weights decide again")
        return Exit.OK
    target, origin = move_nodes(request)
    return move.switchover(
        settings,
        kind(),
        cluster,
        target,
        dry_run=request.dry_run,
        say=request.say,
        source=origin,
    )


def build() -> click.Group:
    from checker_core.cli import make_group

    help_text = "Keep ProxySQL's hostgroups right for a Galera / Percona XtraDB Cluster."
    return make_group(Checker.GALERA, help_text, kind)


def main() -> None:
    from checker_core import oneshot

    oneshot.entry(Checker.GALERA, kind, build)
