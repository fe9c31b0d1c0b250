"""gr-checker's command line (the shared click group with the Group Replication rules)."""

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
    from gr_checker.hold import HoldAdvisor
    from gr_checker.policy import GroupReplicationPolicy
    from gr_checker.probe import probe

    return CheckerKind(
        Checker.GR, GroupReplicationPolicy(), probe, advisor=HoldAdvisor(), switchover=switchover
    )


def switchover(request: SwitchoverRequest) -> Exit:
    """The group's primary moved by the group (group_replication_set_as_primary as
    [node_admin]) and followed until the writer hostgroup holds the new primary alone."""
    import math

    from checker_core.cli.common import fail
    from checker_core.cli.health import MAX_HEALTH_TIMEOUT_S
    from checker_core.cli.switchover import move_nodes
    from checker_core.exitcodes import Exit
    from gr_checker.set_primary import DEFAULT_TIMEOUT_S
    from gr_checker.set_primary import switchover as move
    from gr_checker.switchover import MAX_RUNNING_TRANSACTIONS_TIMEOUT_S as MAX_RUNNING

    if request.release:
        fail(
            "--release: a Group Replication switchover pins nothing (the checker follows "
            "the group's primary); nothing to release",
            Exit.BAD_INPUT,
        )
    target, origin = move_nodes(request)
    limit = DEFAULT_TIMEOUT_S if request.timeout_s is None else request.timeout_s
    if not math.isfinite(limit) or not 0 < limit <= MAX_HEALTH_TIMEOUT_S:
        fail(
            f"--timeout: {limit:g} is not a number of seconds between 0 and "
            f"{MAX_HEALTH_TIMEOUT_S:g} (e.g. --timeout 60)",
            Exit.BAD_INPUT,
        )
    running_s = request.running_transactions_s
    if running_s is not None and not 0 <= running_s <= MAX_RUNNING:
        fail(
            f"--running-transactions-timeout: {running_s} is not between 0 and {MAX_RUNNING} "
            "seconds",
            Exit.BAD_INPUT,
        )
    if running_s is not None and running_s >= limit:
        fail(
            f"--running-transactions-timeout: {running_s} s must be shorter than --timeout "
            f"({limit:g} s), or the command gives up before the group does",
            Exit.BAD_INPUT,
        )
    return move(
        request.settings,
        kind(),
        request.cluster,
        target=target,
        source=origin,
        dry_run=request.dry_run,
        running_transactions_timeout_s=running_s,
        timeout_s=limit,
        say=request.say,
    )


def build() -> click.Group:
    from checker_core.cli import make_group

    help_text = "Keep ProxySQL's hostgroups right for a MySQL Group Replication group."
    return make_group(Checker.GR, help_text, kind)


def main() -> None:
    from checker_core import oneshot

    oneshot.entry(Checker.GR, kind, build)
