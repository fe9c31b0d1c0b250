"""galera-checker's command line (the shared click group with the Galera rules and probe)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from checker_core.passes.plugin import CheckerKind
from checker_core.settings.schema import Checker

if TYPE_CHECKING:
    import click


def kind() -> CheckerKind:
    from galera_checker.actions import GaleraActions
    from galera_checker.policy import GaleraPolicy
    from galera_checker.probe import probe, watch

    return CheckerKind(Checker.GALERA, GaleraPolicy(), probe, watch, GaleraActions())


def build() -> click.Group:
    from checker_core.cli import make_group

    help_text = "Keep ProxySQL's hostgroups right for a Galera / Percona XtraDB Cluster."
    return make_group(Checker.GALERA, help_text, kind)


def main() -> None:
    from checker_core import oneshot

    oneshot.entry(Checker.GALERA, kind, build)
