"""A planned move of the Group Replication primary: `gr-checker switchover` against the lab's
group. The group elects the target (group_replication_set_as_primary as node_admin), the writer
hostgroup follows without ever holding two ONLINE writers in any sample, is held empty while the
new primary catches up (brownout = hold), and a running daemon keeps the new primary; a target
that may not take over, or a config without [node_admin], is refused with nothing changed.

Member 1 is the primary in the healthy state (the `gr` fixture restores it before each test, and
this file's rig puts it back after each one). Election weights: member 3 > member 2.
"""

from __future__ import annotations

import contextlib
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from checker_core.core.model import NodeAddress, ServerStatus
from tests.integration.rig import (
    HG,
    PASS_TIMEOUT,
    Daemon,
    Rig,
    addresses,
    admin_for,
    as_configured,
    child_env,
)
from tests.integration.test_galera_checker import snapshot
from tests.lab.accounts import APP_PASSWORD, APP_USER
from tests.lab.paths import LOOPBACK
from tests.lab.process import wait_until

pytestmark = [pytest.mark.gr, pytest.mark.proxysql]

Sample = list[tuple[NodeAddress, ServerStatus]]


@pytest.fixture
def members(gr: Any) -> list[NodeAddress]:
    return addresses(gr.members)


@pytest.fixture
def rig(gr: Any, proxysql_admin: Any, tmp_path: Path, members: list[NodeAddress]) -> Iterator[Rig]:
    rig = Rig("gr-checker", tmp_path, proxysql_admin, node_admin=True)
    rig.seed(dict.fromkeys(members, 100))
    try:
        yield rig
    finally:
        rig.close()
        gr.ensure_healthy()  # member 1 primary again, for whoever comes next


class WriterSampler:
    """Reads the live writer hostgroup on a connection of its own until stopped."""

    def __init__(self, rig: Rig) -> None:
        self.admin = admin_for(rig.proxysql)
        self.samples: list[Sample] = []
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self.stopped.is_set():
            live = as_configured(self.admin.read_rows([HG.writer]).runtime)
            self.samples.append(sorted((r.node, r.status) for r in live))
            self.stopped.wait(0.02)

    def __enter__(self) -> WriterSampler:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopped.set()
        self.thread.join(timeout=10)
        self.admin.close()

    def online(self) -> list[list[NodeAddress]]:
        return [[n for n, st in s if st is ServerStatus.ONLINE] for s in self.samples]


def switchover(rig: Rig, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        rig.argv("switchover", *args),
        env=child_env(None),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(move: subprocess.Popen[str]) -> tuple[int, str]:
    try:
        out, err = move.communicate(timeout=PASS_TIMEOUT * 2)
    finally:
        if move.poll() is None:
            move.kill()
    return move.returncode, out + err


def test_switchover_moves_the_primary_and_the_writer_follows(
    rig: Rig, gr: Any, members: list[NodeAddress]
) -> None:
    m1, m2, _ = members
    rig.passes(1)
    assert rig.writers == {m1}
    with WriterSampler(rig) as sampler:
        code, out = finish(switchover(rig, f"--to={m2}"))
    assert code == 0, out
    assert f"switchover to {m2} done" in out
    assert "group_replication_set_as_primary" in out
    assert gr.primary_index() == 2
    assert rig.writers == {m2}
    assert m1 not in rig.in_hostgroup(HG.writer)
    assert m1 in rig.readers  # a secondary now
    assert sampler.samples, "the sampler read nothing"
    for online in sampler.online():
        assert len(online) <= 1, online
    assert [m1] in sampler.online() and [m2] in sampler.online()
    # in GR the group's primary is the writer: a later pass keeps it, nothing is pinned
    again = rig.passes(1)
    assert rig.writers == {m2}, again[-1].summary
    assert not list(rig.state_dir.glob("*.writer"))


def test_switchover_holds_writes_while_the_new_primary_catches_up(
    rig: Rig, gr: Any, members: list[NodeAddress]
) -> None:
    m1, m2, _ = members
    rig.passes(1)
    hold = gr.hold_applier(2)
    gr.write_transactions(300)
    gr.wait_applier_queue(2, lambda q: q >= 300, "a backlog of 300 on member 2")
    # nothing but this test's passes may have changed the hostgroups (a stray checker would)
    assert rig.writers == {m1}, rig.live_raw()
    # the queue is over max_transactions_behind = 0 (no limit): member 2 does not lag, it may
    # take over, and stays super_read_only until its backlog is applied
    with WriterSampler(rig) as sampler:
        move = switchover(rig, f"--to={m2}", "--timeout=90")
        try:
            wait_until(
                lambda: gr.primary_index() == 2 and gr.member_status(2).super_read_only,
                60,
                "member 2 elected, still super_read_only",
            )
            wait_until(lambda: not rig.writers, 30, "the writer hostgroup held empty")
        finally:
            hold.release()
        code, out = finish(move)
    assert code == 0, out
    assert f"switchover to {m2} done" in out
    assert "brownout" in out
    assert rig.writers == {m2}
    online = sampler.online()
    assert all(len(o) <= 1 for o in online), online
    first_empty = online.index([])
    assert [m1] in online[:first_empty], sampler.samples[: first_empty + 3]
    assert all(o in ([], [m2]) for o in online[first_empty:]), "never back to member 1"


def test_switchover_is_refused_for_an_unfit_target_and_without_node_admin(
    rig: Rig, gr: Any, members: list[NodeAddress]
) -> None:
    m1, m2, m3 = members
    gr.stop(3)
    rig.passes(1)
    before = snapshot(rig)
    stopped = rig.run("switchover", f"--to={m3}")
    assert stopped.code == 2, stopped.stdout + stopped.stderr
    assert f"switchover to {m3} refused: {m3} is not an ONLINE SECONDARY" in stopped.stdout
    assert "nothing changed" in stopped.stdout
    unknown = rig.run("switchover", "--to=127.0.0.1:9")
    assert unknown.code == 2
    assert "is not in the roster" in unknown.stdout
    not_primary = rig.run("switchover", f"--from={m2}")
    assert not_primary.code == 2
    assert f"{m2} is not the primary; the primary is {m1}" in not_primary.stdout
    rig.node_admin = False
    rig.write_config()
    without = rig.run("switchover", f"--to={m2}")
    assert without.code == 2, without.stdout + without.stderr
    assert "node_admin: no [node_admin] account is configured" in without.stdout
    assert snapshot(rig) == before
    assert gr.primary_index() == 1


def test_dry_run_prints_the_call_and_changes_nothing(
    rig: Rig, gr: Any, members: list[NodeAddress]
) -> None:
    m1, _, m3 = members
    rig.passes(1)
    before = snapshot(rig)
    uuid = gr.member_status(3).server_uuid
    # --from: the member the group would elect (member 3 outweighs member 2 in the lab)
    dry = rig.run("switchover", f"--from={m1}", "--dry-run", "--running-transactions-timeout=5")
    assert dry.code == 0, dry.stdout + dry.stderr
    assert f"switchover from {m1} to {m3}" in dry.stdout
    assert f"SELECT group_replication_set_as_primary('{uuid}', 5);" in dry.stdout
    assert "dry run: nothing changed" in dry.stdout
    assert snapshot(rig) == before
    assert gr.primary_index() == 1


def test_a_running_daemon_keeps_the_new_primary(
    rig: Rig, gr: Any, members: list[NodeAddress]
) -> None:
    m1, m2, _ = members
    rig.run_settings.update(interval_ms=500, max_runtime_ms=450)
    rig.write_config()
    daemon = Daemon(rig)
    try:
        assert daemon.next_pass()["writers"] == [str(m1)]
        code, out = finish(switchover(rig, f"--to={m2}"))
        assert code == 0, out
        seen = 0
        while seen < 4:
            entry = daemon.next_pass()
            if entry["outcome"] != "busy":
                seen += 1
                assert entry["writers"] == [str(m2)], entry["summary"]
        assert daemon.proc.poll() is None
    finally:
        assert daemon.stop() == 0
    assert rig.writers == {m2}
    assert gr.primary_index() == 2


@contextlib.contextmanager
def held_outside_a_transaction(rig: Rig, node: NodeAddress) -> Iterator[None]:
    """A client holding a backend connection to `node` in the writer hostgroup with no
    transaction open (the group does not wait for it): a user variable stops ProxySQL from
    multiplexing the session, so the connection stays in use. The emulator routes nothing and
    plays the held connection with its lab statement."""
    import pymysql

    lab = rig.proxysql
    if not lab.is_real:
        with lab.hold(HG.writer, node.host, node.port):
            yield
        return
    port = lab.route_app_user(HG.writer)
    client = pymysql.connect(
        host=LOOPBACK, port=port, user=APP_USER, password=APP_PASSWORD, connect_timeout=5
    )
    try:
        with client.cursor() as cur:
            cur.execute("SET @held = 1")
            cur.execute("SELECT @@port")
            row = cur.fetchone()
        assert row is not None and int(row[0]) == node.port, row
        yield
    finally:
        client.close()


def test_switchover_is_done_while_a_client_still_holds_the_old_primary(
    rig: Rig, gr: Any, members: list[NodeAddress]
) -> None:
    """ProxySQL keeps the old primary OFFLINE_HARD in runtime while a client holds a connection
    to it. That row routes nothing and the pass never counts it (nor stages it), so the move is
    done, exit 0, instead of waiting for the row to go until --timeout."""
    m1, m2, _ = members
    rig.passes(1)
    assert rig.writers == {m1}
    with held_outside_a_transaction(rig, m1):
        code, out = finish(switchover(rig, f"--to={m2}", "--timeout=20"))
        left = [r.status for r in rig.live_raw() if (r.hostgroup_id, r.node) == (HG.writer, m1)]
    assert code == 0, out
    assert f"switchover to {m2} done" in out
    assert left == [ServerStatus.OFFLINE_HARD], out
    assert gr.primary_index() == 2
    assert rig.writers == {m2}
