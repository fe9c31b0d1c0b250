"""Detection between passes: the daemon acts on a dead or changed writer before its next pass
would have started. The interval is a minute, so a pass that comes sooner came from the watch.
"""

from __future__ import annotations

from typing import Any

import pytest

from checker_core.core.model import NodeAddress
from tests.integration.rig import Daemon, Rig

pytestmark = [pytest.mark.galera, pytest.mark.proxysql]

LONG_INTERVAL = {"interval_ms": 60000, "max_runtime_ms": 1800}
# well under the interval: a pass seen within this was started early
SOON_S = 20.0


def started(rig: Rig, **run: object) -> Daemon:
    rig.run_settings.update(LONG_INTERVAL, **run)
    rig.write_config()
    daemon = Daemon(rig)
    first = daemon.next_pass()
    assert first["outcome"] in ("changed", "unchanged"), first
    return daemon


def said(daemon: Daemon, rig: Rig) -> str:
    """What the daemon logged and what ProxySQL holds, for a failure's message."""
    rows = "\n".join(f"  {r.hostgroup_id} {r.node} {r.status.value}" for r in rig.live_raw())
    return "".join(daemon.output) + "runtime rows:\n" + rows


def pass_after_watch(daemon: Daemon) -> tuple[dict[str, Any], dict[str, Any]]:
    watch = daemon.next_event("watch", timeout=SOON_S)
    return watch, daemon.next_pass(timeout=SOON_S)


def test_a_killed_writer_is_acted_on_at_once(
    rig: Rig, galera: Any, nodes: list[NodeAddress]
) -> None:
    n1, n2, _ = nodes
    daemon = started(rig)
    try:
        assert rig.writers == {n1}
        galera.kill(1)
        watch, after = pass_after_watch(daemon)
        assert f"probe connection to {n1} closed" in watch["summary"], watch
        assert f"writer {n2} (was {n1})" in after["summary"], after
        assert rig.writers == {n2}
        assert n1 in rig.offline
    finally:
        assert daemon.stop() == 0


@pytest.mark.parametrize(
    "fault",
    [
        ("wsrep_reject_queries", "ALL", "NONE"),
        ("read_only", "ON", "OFF"),
        ("wsrep_desync", "ON", "OFF"),
    ],
    ids=lambda fault: str(fault[0]),
)
def test_a_writer_that_stops_taking_writes_is_acted_on_at_once(
    rig: Rig, galera: Any, nodes: list[NodeAddress], fault: tuple[str, str, str]
) -> None:
    variable, value, restore = fault
    n1, n2, _ = nodes
    daemon = started(rig)
    try:
        galera.sql(1, f"SET GLOBAL {variable} = {value}")
        watch, after = pass_after_watch(daemon)
        assert f"writer {n1} changed state" in watch["summary"], watch
        assert f"writer {n2} (was {n1})" in after["summary"], after
        assert n1 not in rig.writers
    finally:
        galera.sql(1, f"SET GLOBAL {variable} = {restore}")
        assert daemon.stop() == 0


def test_a_failed_probe_is_asked_again_at_once_and_the_node_leaves_when_retry_down_is_spent(
    rig: Rig, galera: Any, nodes: list[NodeAddress]
) -> None:
    """retry_down 2 at an 8 s interval: the first refused probe only counts; the watch asks again
    at once, which counts but cannot spend retry_down's 4 s; the node leaves in the pass the
    watch starts once they are spent, before the next regular pass."""
    _, _, n3 = nodes
    rig.write_config(retry_down=2)
    daemon = started(rig, watch_interval_ms=0, interval_ms=8000)
    try:
        galera.kill(3)
        # its connection closed: a pass at once, where one bad probe of two only counts
        closed = daemon.next_event("watch", timeout=SOON_S)
        assert f"probe connection to {n3} closed" in closed["summary"], closed
        counted = daemon.next_pass(timeout=SOON_S)
        assert counted["outcome"] == "unchanged", said(daemon, rig)
        recheck = daemon.next_event("watch", timeout=SOON_S)
        assert f"probe of {n3} failed" in recheck["summary"], said(daemon, rig)
        second = daemon.next_pass(timeout=SOON_S)
        assert second["outcome"] == "unchanged", said(daemon, rig)
        assert n3 not in rig.offline, "two probes at once must not spend retry_down"
        spent = daemon.next_event("watch", timeout=SOON_S)
        assert f"{n3}: its hysteresis is spent" in spent["summary"], said(daemon, rig)
        third = daemon.next_pass(timeout=SOON_S)
        assert third["outcome"] == "changed", said(daemon, rig)
        assert n3 in rig.offline
    finally:
        assert daemon.stop() == 0
