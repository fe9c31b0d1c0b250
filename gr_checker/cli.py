"""gr-checker's command line (the shared click group with the Group Replication rules)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from checker_core.passes.plugin import CheckerKind
from checker_core.settings.schema import Checker

if TYPE_CHECKING:
    import click


def kind() -> CheckerKind:
    from gr_checker.hold import HoldAdvisor
    from gr_checker.policy import GroupReplicationPolicy
    from gr_checker.probe import probe

    return CheckerKind(Checker.GR, GroupReplicationPolicy(), probe, advisor=HoldAdvisor())


def build() -> click.Group:
    from checker_core.cli import make_group

    help_text = "Keep ProxySQL's hostgroups right for a MySQL Group Replication group."
    return make_group(Checker.GR, help_text, kind)


def main() -> None:
    from checker_core import oneshot

    oneshot.entry(Checker.GR, kind, build)
