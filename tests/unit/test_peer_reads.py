"""How often a pass asks its proxy about ProxySQL Cluster peers: a scheduler pass every time,
a daemon without peers only now and then (a steady daemon pass pays for no extra query)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from checker_core.core.leadership import Role
from checker_core.passes.proxy_facts import RECHECK_S
from tests.unit.config_cases import galera_runner
from tests.unit.fakes import ports


class PeerlessAdmin:
    """A proxy with no peers that counts what it was asked."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def execute(self, sql: str, params: Sequence[object] = ()) -> list[tuple[Any, ...]]:
        self.asked.append(sql)
        return []


def test_a_daemon_without_peers_asks_again_only_after_a_while(tmp_path: Path) -> None:
    clock = [100.0]
    daemon = galera_runner(tmp_path, persistent=True, **ports(monotonic=lambda: clock[0]))
    admin = PeerlessAdmin()
    for _ in range(3):
        listed = daemon.facts.listed_peers(admin)  # type: ignore[arg-type]
        assert listed == ()
        assert daemon.facts.leadership(admin, listed, remember=True).role is Role.ALONE  # type: ignore[arg-type]
    assert len(admin.asked) == 1
    clock[0] += RECHECK_S
    daemon.facts.listed_peers(admin)  # type: ignore[arg-type]
    assert len(admin.asked) == 2


def test_a_scheduler_pass_asks_every_time(tmp_path: Path) -> None:
    one_shot = galera_runner(tmp_path, persistent=False)
    admin = PeerlessAdmin()
    for _ in range(2):
        assert one_shot.facts.listed_peers(admin) == ()  # type: ignore[arg-type]
    assert len(admin.asked) == 2
