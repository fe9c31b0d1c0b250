"""cluster.evict_dead_nodes on the lab's real MariaDB Galera: a killed member leaves the
survivors' view through the checker's eviction (it is in their evs evict list, which only an
eviction fills), long before evs.suspect_timeout (3 s in the lab) would have dropped it; the
entry is cleared once the member is out of the view; a frozen node (SIGSTOP) is never evicted.
With cluster.evict_unresponsive_nodes a frozen member is evicted once the others stall on it,
and rejoins once woken (or restarted); a member frozen for less than unresponsive_after_ms is
not.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from checker_core.core.model import NodeAddress
from tests.integration.rig import Daemon, Rig
from tests.lab.accounts import NODE_ADMIN_PASSWORD, NODE_ADMIN_USER
from tests.lab.process import wait_until

pytestmark = [pytest.mark.galera, pytest.mark.proxysql]

# the lab's evs.suspect_timeout: an eviction seen within it was not the cluster's own
SUSPECT_TIMEOUT_S = 3.0
SOON_S = 20.0
REJOIN_S = 90.0  # a member merging back after an eviction: a state transfer, on a busy machine


def status(galera: Any, n: int, name: str) -> str:
    rows = galera.sql(n, "SHOW GLOBAL STATUS LIKE %s", (name,))
    return str(rows[0][1]) if rows else ""


def evict_list(galera: Any, n: int) -> str:
    return status(galera, n, "wsrep_evs_evict_list")


def evicting_daemon(rig: Rig, interval_ms: int = 2000, **cluster: object) -> Daemon:
    secret = rig.tmp / "secrets" / "node_admin"
    secret.parent.mkdir(exist_ok=True)
    secret.write_text(NODE_ADMIN_PASSWORD + "\n")
    rig.proxysql_settings.clear()
    # the watch brings the eviction; the cadence the clearing (a returning reader is no writer)
    rig.run_settings.update(interval_ms=interval_ms, max_runtime_ms=interval_ms * 9 // 10)
    rig.write_config(**(cluster or {"evict_dead_nodes": True}))
    text = rig.config.read_text().replace(
        "[run]\n",
        f'[node_admin]\nuser = "{NODE_ADMIN_USER}"\npassword_file = "{secret}"\n[run]\n',
    )
    rig.config.write_text(text)
    daemon = Daemon(rig)
    daemon.next_pass()
    return daemon


def test_a_killed_writer_is_evicted_and_the_entry_cleared_before_it_returns(
    rig: Rig, galera: Any, nodes: list[NodeAddress]
) -> None:
    n1, n2, _ = nodes
    old_uuid = status(galera, 1, "wsrep_gcomm_uuid")
    daemon = evicting_daemon(rig)
    try:
        galera.kill(1)
        moved = daemon.next_pass(timeout=SOON_S)
        assert f"writer {n2} (was {n1})" in moved["summary"], moved
        # a connect in the moment the process dies may be reset rather than refused: proof
        # comes with the probe asked again at once
        evicted = moved
        for _ in range(3):
            if "evicted" in evicted["summary"]:
                break
            evicted = daemon.next_pass(timeout=SOON_S)
        assert f"evicted {n1} (gcomm uuid {old_uuid})" in evicted["summary"], evicted
        wait_until(
            lambda: status(galera, 2, "wsrep_cluster_size") == "2",
            SUSPECT_TIMEOUT_S,
            "the survivors' view to drop the killed writer before suspect_timeout",
        )
        # the entry goes as soon as the member is out of the view: Galera would take the
        # restarted node for the evicted one while it stands
        wait_until(
            lambda: all(evict_list(galera, n) == "" for n in (2, 3)),
            SOON_S,
            "the eviction lists to be cleared once the member is out of the view",
        )
        assert "cleared the eviction list" in "".join(daemon.output)
        galera.start(1)  # a new process: a new gcomm uuid
        assert status(galera, 1, "wsrep_gcomm_uuid") != old_uuid
        assert evict_list(galera, 1) == ""
    finally:
        assert daemon.stop() == 0


def test_a_frozen_node_is_never_evicted(rig: Rig, galera: Any, nodes: list[NodeAddress]) -> None:
    _, _, n3 = nodes
    daemon = evicting_daemon(rig)
    try:
        galera.freeze(3)
        try:
            # the watch or the cadence notices it; either way the pass takes it out as silent
            wait_until(lambda: n3 in rig.offline, SOON_S, "the frozen node to be taken out")
            # the cluster drops it by itself after suspect_timeout: not an eviction
            wait_until(
                lambda: status(galera, 1, "wsrep_cluster_size") == "2",
                SOON_S,
                "the cluster to drop the frozen node by itself",
            )
        finally:
            galera.thaw(3)
        assert evict_list(galera, 1) == ""
        assert "evicted" not in "".join(daemon.output)
    finally:
        assert daemon.stop() == 0


@pytest.mark.parametrize("n", [1, 3], ids=["writer", "reader"])
def test_a_killed_member_restarted_at_once_rejoins_and_its_new_process_is_never_evicted(
    rig: Rig, galera: Any, nodes: list[NodeAddress], n: int
) -> None:
    """As a service manager does: kill -9, started again at once under a new gcomm uuid, its
    client port closed while it joins. Only the dead process may be evicted; the new one
    rejoins (start() waits until it is Synced)."""
    node = nodes[n - 1]
    old_uuid = status(galera, n, "wsrep_gcomm_uuid")
    daemon = evicting_daemon(rig)
    try:
        galera.kill(n)
        galera.start(n)  # returns once the new process is Synced in the Primary component
        new_uuid = status(galera, n, "wsrep_gcomm_uuid")
        assert new_uuid != old_uuid
        galera.wait_cluster([1, 2, 3], SOON_S)
        said = "".join(daemon.output)
        assert new_uuid not in said, said
        for other in (1, 2, 3):
            assert new_uuid not in evict_list(galera, other)
        evictions = [line for line in said.splitlines() if f"evicted {node}" in line]
        assert all(old_uuid in line for line in evictions), evictions
        wait_until(lambda: node in rig.readers, SOON_S, f"{node} to read again")
    finally:
        assert daemon.stop() == 0


def unresponsive_daemon(rig: Rig, after_ms: int) -> Daemon:
    """Regular passes every second: a frozen reader is noticed by the cadence (the watch asks
    the writer only)."""
    return evicting_daemon(rig, 1000, evict_unresponsive_nodes=True, unresponsive_after_ms=after_ms)


@pytest.mark.parametrize("n", [1, 3], ids=["writer", "reader"])
def test_a_frozen_member_is_evicted_once_the_others_stall_on_it_and_rejoins_when_restarted(
    rig: Rig, galera: Any, nodes: list[NodeAddress], n: int
) -> None:
    node = nodes[n - 1]
    survivor = 2
    old_uuid = status(galera, n, "wsrep_gcomm_uuid")
    daemon = unresponsive_daemon(rig, 500)
    try:
        galera.freeze(n)
        try:
            wait_until(
                lambda: f"evicted {node}" in "".join(daemon.output),
                SOON_S,
                f"the frozen node{n} to be evicted",
            )
            said = next(line for line in daemon.output if f"evicted {node}" in line)
            assert f"gcomm uuid {old_uuid}" in said and "silent for" in said, said
            assert "stalled" in said, said
            assert node not in rig.writers, "no write goes to a member the others gave up on"
            wait_until(
                lambda: status(galera, survivor, "wsrep_cluster_size") == "2",
                SOON_S,
                f"the survivors' view to drop node{n}",
            )
            wait_until(
                lambda: all(evict_list(galera, k) == "" for k in (1, 2, 3) if k != n),
                SOON_S,
                "the survivors' eviction lists to be cleared once it is out of the view",
            )
        finally:
            galera.thaw(n, wait=False)
        if n == 1:
            # restarted, as an operator (or its service manager) would: a new process
            galera.kill(n)
            galera.start(n)
            assert status(galera, n, "wsrep_gcomm_uuid") != old_uuid
        # woken and out of the view, the same process merges back as after a partition (the
        # entries that would have kept it out are gone)
        galera.wait_cluster([1, 2, 3], REJOIN_S)
        wait_until(lambda: node in rig.readers, SOON_S, f"{node} to read again")
    finally:
        assert daemon.stop() == 0


def test_a_member_frozen_for_less_than_the_time_is_not_evicted(
    rig: Rig, galera: Any, nodes: list[NodeAddress]
) -> None:
    daemon = unresponsive_daemon(rig, 3000)
    try:
        galera.freeze(3)
        time.sleep(1.0)  # frozen a third of unresponsive_after_ms, then back
        galera.thaw(3)
        galera.wait_cluster([1, 2, 3], SOON_S)
        daemon.next_pass(timeout=SOON_S)
        daemon.next_pass(timeout=SOON_S)
    finally:
        assert daemon.stop() == 0
    assert "evicted" not in "".join(daemon.output)
    assert all(evict_list(galera, n) == "" for n in (1, 2, 3))
    assert status(galera, 1, "wsrep_cluster_size") == "3"


# a uuid no process of the lab ever had: an entry only a hand (or a lost memory) leaves
MADE_UP = "0badc0de-0000-11ef-8000-0123456789ab"


def test_stale_entries_are_cleared_by_one_pass_without_a_state_dir(
    rig: Rig, galera: Any, nodes: list[NodeAddress]
) -> None:
    """The lists themselves show an entry stale (in no view, no member's own uuid): one acting
    pass with an empty state dir clears every member's list."""
    for n in (1, 2, 3):
        galera.sql(n, "SET GLOBAL wsrep_provider_options = %s", (f"evs.evict={MADE_UP}",))
    try:
        wait_until(
            lambda: all(MADE_UP in evict_list(galera, n) for n in (1, 2, 3)),
            SOON_S,
            "the made-up uuid to be listed by every member",
        )
        rig.node_admin = True
        rig.write_config(evict_dead_nodes=True)
        assert not rig.state_dir.exists() or not any(rig.state_dir.iterdir())
        done = rig.run()
        assert done.code == 0, done.stderr
        assert all(evict_list(galera, n) == "" for n in (1, 2, 3)), done.stderr
        assert done.stderr.count("cleared the eviction list") == 3, done.stderr
        assert status(galera, 1, "wsrep_cluster_size") == "3"
    finally:
        for n in (1, 2, 3):
            galera.sql(n, "SET GLOBAL wsrep_provider_options = %s", ("evs.evict=",))
