"""A planned move of the Galera writer: `switchover --to HOST:PORT` against the lab. The old writer
drains before it moves, the writer hostgroup never holds two ONLINE writers in any sample, the
move is refused for a target that may not write, and neither a later pass nor a running daemon
with fail_back on moves the writer back until the pin is released."""

from __future__ import annotations

import subprocess
import time
from datetime import datetime
from typing import Any

import pytest

from checker_core.core.model import NodeAddress, ServerStatus
from tests.integration.rig import HG, PASS_TIMEOUT, Daemon, Rig, child_env
from tests.integration.test_galera_checker import snapshot
from tests.lab.process import wait_until

pytestmark = [pytest.mark.galera, pytest.mark.proxysql]

SAMPLES = 600  # at most, one per poll: the move is bounded by drain_timeout_ms


def writer_rows(rig: Rig) -> list[tuple[NodeAddress, ServerStatus]]:
    return sorted((r.node, r.status) for r in rig.live() if r.hostgroup_id == HG.writer)


def test_switchover_drains_the_old_writer_and_never_shows_two_writers(
    rig: Rig, nodes: list[NodeAddress]
) -> None:
    n1, n2, _ = nodes
    rig.write_config(drain_timeout_ms=20000, fail_back=True)
    rig.passes(1)
    samples: list[list[tuple[NodeAddress, ServerStatus]]] = []
    with rig.proxysql.hold(HG.writer, n1.host, n1.port) as held:
        move = subprocess.Popen(
            rig.argv("switchover", f"--to={n2}"),
            env=child_env(None),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            for _ in range(SAMPLES):
                samples.append(writer_rows(rig))
                if (n1, ServerStatus.OFFLINE_SOFT) in samples[-1]:
                    held.release()  # the client's transaction ends: the drain is done
                if move.poll() is not None:
                    break
                time.sleep(0.05)
            out, err = move.communicate(timeout=PASS_TIMEOUT)
        finally:
            if move.poll() is None:
                move.kill()
    assert move.returncode == 0, out + err
    assert f"switchover to {n2} done" in out
    for sample in samples:
        online = [n for n, status in sample if status is ServerStatus.ONLINE]
        assert len(online) <= 1, sample
    assert any(
        (n1, ServerStatus.OFFLINE_SOFT) in s and (n2, ServerStatus.ONLINE) in s for s in samples
    )
    assert rig.writers == {n2}
    assert n1 in rig.backups and n1 in rig.readers
    # fail_back is on and node1 is heavier: the pin holds the writer where the operator put it
    again = rig.passes(2)
    assert rig.writers == {n2}, again[-1].summary
    released = rig.run("switchover", "--release")
    assert released.code == 0, released.stderr
    rig.passes(3)
    assert rig.writers == {n1}, "released: fail_back and weights decide again"


def test_switchover_is_refused_for_a_target_that_may_not_write(
    rig: Rig, galera: Any, nodes: list[NodeAddress]
) -> None:
    n2 = nodes[1]
    rig.passes(1)
    galera.desync(2, True)
    before = snapshot(rig)
    result = rig.run("switchover", f"--to={n2}")
    assert result.code == 2, result.stdout + result.stderr
    assert f"switchover to {n2} refused: {n2} is offline: desynced" in result.stdout
    assert snapshot(rig) == before
    assert not (rig.state_dir / "galera.lab.writer").exists()
    unknown = rig.run("switchover", "--to=127.0.0.1:9")
    assert unknown.code == 2
    assert "is not in the roster" in unknown.stdout


def test_a_running_daemon_follows_the_switchover_and_does_not_move_it_back(
    rig: Rig, nodes: list[NodeAddress]
) -> None:
    n1, n2, _ = nodes
    rig.run_settings.update(interval_ms=500, max_runtime_ms=450)
    rig.write_config(fail_back=True, drain_timeout_ms=1000)
    rig.passes(1)
    daemon = Daemon(rig)
    try:
        daemon.next_pass()
        result = rig.run("switchover", f"--to={n2}")
        assert result.code == 0, result.stdout + result.stderr
        # the passes after the switchover ended: one that ended before it may still say the
        # writer it had (the daemon passes every 500 ms, the command takes a moment to start)
        done_at = time.time()
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            entry = daemon.next_pass()
            ended = datetime.fromisoformat(entry["ts"].replace("Z", "+00:00")).timestamp()
            if entry["outcome"] != "busy" and ended > done_at:
                assert entry["writers"] == [str(n2)], entry["summary"]
        assert daemon.proc.poll() is None
    finally:
        assert daemon.stop() == 0
    wait_until(lambda: rig.writers == {n2}, 10, "node 2 to stay the writer")
    assert n1 in rig.backups


def test_switchover_from_the_writer_chooses_the_next_as_a_failover_would(
    rig: Rig, nodes: list[NodeAddress]
) -> None:
    n1, n2, _ = nodes
    rig.passes(1)
    before = snapshot(rig)
    dry = rig.run("switchover", f"--from={n1}", "--dry-run")
    assert dry.code == 0, dry.stdout + dry.stderr
    assert f"switchover from {n1}: the next writer is {n2}" in dry.stdout
    assert snapshot(rig) == before
    wrong = rig.run("switchover", f"--from={n2}")
    assert wrong.code == 2
    assert f"{n2} is not the writer; the writer is {n1}" in wrong.stdout
    assert snapshot(rig) == before


def test_a_dry_run_changes_nothing_anywhere(rig: Rig, nodes: list[NodeAddress]) -> None:
    """No pin written for the current writer, none removed by --release: a later failure of the
    writer must not fail back because a dry run was typed."""
    n1, n2, _ = nodes
    rig.passes(1)
    pin = rig.state_dir / "galera.lab.writer"
    state = sorted(p.name for p in rig.state_dir.iterdir())
    dry = rig.run("switchover", f"--to={n1}", "--dry-run")
    assert dry.code == 0, dry.stdout + dry.stderr
    assert not pin.exists()
    assert sorted(p.name for p in rig.state_dir.iterdir()) == state
    pin.write_text(f"{n2}\n")
    released = rig.run("switchover", "--release", "--dry-run")
    assert released.code == 0, released.stdout + released.stderr
    assert f"would release the pin on {n2}; nothing changed" in released.stdout
    assert pin.read_text() == f"{n2}\n"


def test_a_target_the_operator_barred_is_refused(rig: Rig, nodes: list[NodeAddress]) -> None:
    """An operator's OFFLINE_HARD row in the writer hostgroup bars the node from writing (S5): the
    switchover refuses it at once, leaves no pin, and changes nothing."""
    n3 = nodes[2]
    rig.passes(1)
    rig.admin.execute(
        "REPLACE INTO mysql_servers (hostgroup_id, hostname, port, status) "
        "VALUES (%s, %s, %s, 'OFFLINE_HARD')",
        (HG.writer, n3.host, n3.port),
    )
    rig.admin.execute("LOAD MYSQL SERVERS TO RUNTIME")
    before = snapshot(rig)
    result = rig.run("switchover", f"--to={n3}")
    assert result.code == 2, result.stdout + result.stderr
    assert f"switchover to {n3} refused: {n3} is barred from writer hostgroup" in result.stdout
    assert not (rig.state_dir / "galera.lab.writer").exists()
    assert snapshot(rig) == before
