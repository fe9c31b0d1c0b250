"""galera-checker's command line (the shared click group with the Galera rules and probe)."""

from __future__ import annotations

import click

from checker_core.cli import make_group
from checker_core.runner import CheckerKind
from checker_core.settings_schema import Checker


def kind() -> CheckerKind:
    from galera_checker.policy import GaleraPolicy
    from galera_checker.probe import probe

    return CheckerKind(Checker.GALERA, GaleraPolicy(), probe)


def build() -> click.Group:
    help_text = "Keep ProxySQL's hostgroups right for a Galera / Percona XtraDB Cluster."
    return make_group(Checker.GALERA, help_text, kind)


def main() -> None:
    build()()
