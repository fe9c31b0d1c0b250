"""How long the daemon's watch waits for a node's answer: the monitor's read timeout, whatever
cluster.unresponsive_after_ms says. A node that answers within its timeouts is never silent."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest

from checker_core.service.daemon import Daemon
from checker_core.service.watch import answer_budget_s
from tests.unit.config_cases import galera_kind, galera_settings


@pytest.mark.parametrize(
    ("read_ms", "connect_ms", "after_ms"),
    [
        (800, 500, 1000),  # the defaults with evict_unresponsive_nodes: a quarter was 250 ms
        (800, 500, 0),
        (50, 50, 200),  # the 200 ms cadence of the issue
        (3000, 500, 1000),  # a read timeout above the silence's threshold
    ],
)
def test_the_watch_waits_the_read_timeout_for_an_answer(
    tmp_path: Path, read_ms: int, connect_ms: int, after_ms: int
) -> None:
    """The daemon's wait gives each question the read timeout: a node answering in 0.45 s with
    a read timeout of 0.8 s was counted silent after 250 ms (a quarter of
    unresponsive_after_ms), its connection closed, and flapped out of every hostgroup."""
    settings = galera_settings(tmp_path)
    monitor = replace(settings.monitor, read_timeout_ms=read_ms, connect_timeout_ms=connect_ms)
    clusters = tuple(replace(c, unresponsive_after_ms=after_ms) for c in settings.clusters)
    settings = replace(settings, monitor=monitor, clusters=clusters)
    daemon = SimpleNamespace(kind=galera_kind(), hub=object())
    runner = SimpleNamespace(settings=settings, prober=object())
    wait = Daemon.between_for(daemon, runner)  # type: ignore[arg-type]
    assert wait.answer_budget_s == read_ms / 1000 == answer_budget_s(monitor)
    assert wait.everyone is bool(after_ms), "with the option on, every member is asked"
