"""Command line of the checker (a click group built from checker_core.cli)."""

from __future__ import annotations

import click

from checker_core.cli import make_group
from checker_core.settings_schema import Checker


def build() -> click.Group:
    return make_group(
        Checker.GR, "Keep ProxySQL's hostgroups right for a MySQL Group Replication group."
    )


def main() -> None:
    build()()
