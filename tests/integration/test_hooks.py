"""Hooks on the lab's Galera cluster behind ProxySQL: the daemon tells a killed writer's move to
a program and a URL; a hook that hangs, fails or floods costs the passes nothing and is
said; a scheduler pass hands its events to a process of their own and exits; a switchover's
end is told."""

from __future__ import annotations

import http.server
import json
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

from checker_core.core.model import NodeAddress
from tests.integration.rig import Daemon, Rig
from tests.lab.process import wait_until

pytestmark = [pytest.mark.galera, pytest.mark.proxysql]

# a minute between regular passes: a kill is acted on by the watch, at once
RUN = {"interval_ms": 60000, "max_runtime_ms": 1800}


def hook(tmp_path: Path, body: str) -> Path:
    """A hook program that appends the event it reads to events.jsonl, then runs `body`."""
    path = tmp_path / "hook.sh"
    events = tmp_path / "events.jsonl"
    path.write_text(f"#!/bin/sh\ncat >> {events}\necho >> {events}\n{body}")
    path.chmod(0o755)
    return path


def held_by(gate: Path) -> str:
    """A hook body's wait until the test opens the gate."""
    return f"while [ ! -e {gate} ]; do sleep 0.05; done\n"


def told(tmp_path: Path) -> list[dict[str, Any]]:
    path = tmp_path / "events.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def events_named(tmp_path: Path, name: str) -> list[dict[str, Any]]:
    return [e for e in told(tmp_path) if e["event"] == name]


class Receiver(http.server.BaseHTTPRequestHandler):
    bodies: ClassVar[list[dict[str, Any]]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        Receiver.bodies.append(json.loads(body))
        self.send_response(204)
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[str]:
    Receiver.bodies = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/chat/T0KEN"
    finally:
        server.shutdown()
        server.server_close()


def started(rig: Rig, **cluster: object) -> Daemon:
    rig.run_settings.update(RUN)
    rig.write_config(**cluster)
    daemon = Daemon(rig)
    first = daemon.next_pass()
    assert first["outcome"] == "changed", first
    return daemon


def test_the_daemon_tells_a_killed_writer_move_to_the_program_and_the_url(
    rig: Rig, galera: Any, nodes: list[NodeAddress], tmp_path: Path, receiver: str
) -> None:
    n1, n2, _ = nodes
    program = hook(tmp_path, "")
    daemon = started(rig, hook_command=str(program), hook_url=receiver)
    try:
        checked = rig.run("check-config")
        assert checked.code == 0, checked.stdout + checked.stderr
        assert f"cluster lab: hooks: command {program} and URL at host 127.0.0.1" in checked.stdout
        assert "T0KEN" not in checked.stdout + checked.stderr
        # the first pass placed every node: the writer and each node routed, told
        first = wait_until(lambda: events_named(tmp_path, "writer_changed"), 20, "first writer")
        assert first[0]["writers_before"] == [] and first[0]["writers_after"] == [str(n1)]
        galera.kill(1)
        daemon.next_event("watch", timeout=20)
        moved = wait_until(
            lambda: [e for e in events_named(tmp_path, "writer_changed") if e["writers_before"]],
            20,
            "the move told",
        )
        assert moved[0]["writers_before"] == [str(n1)] and moved[0]["writers_after"] == [str(n2)]
        assert rig.writers == {n2}, "told what ProxySQL routes now"
        out = wait_until(lambda: events_named(tmp_path, "node_out"), 20, "the node out")
        assert out[0]["node"] == str(n1) and out[0]["state"] == "down"
        for event in (moved[0], out[0]):
            assert event["cluster"] == "lab" and event["checker"] == "galera"
            assert event["hostgroups"]["writer"] == rig.hostgroups.writer
        # the URL got the same documents, in the same order
        wait_until(lambda: len(Receiver.bodies) == len(told(tmp_path)), 20, "the URL's POSTs")
        assert Receiver.bodies == told(tmp_path)
        line = daemon.next_event("hook", timeout=20)
        assert line["level"] == "info" and "T0KEN" not in "".join(daemon.output)
    finally:
        assert daemon.stop() == 0


def test_a_hook_that_hangs_or_fails_never_holds_a_failover(
    rig: Rig, galera: Any, nodes: list[NodeAddress], tmp_path: Path
) -> None:
    n1, n2, _ = nodes
    gate = tmp_path / "gate"
    # every call hangs until the gate opens, then fails
    program = hook(tmp_path, held_by(gate) + "echo refused >&2\nexit 1\n")
    daemon = started(rig, hook_command=str(program), hook_timeout_ms=600000)
    try:
        wait_until(lambda: told(tmp_path), 20, "the first event's hook running")
        galera.kill(1)
        daemon.next_event("watch", timeout=20)
        after = daemon.next_pass(timeout=20)
        assert f"writer {n2} (was {n1})" in after["summary"], after
        assert rig.writers == {n2}
        # the hook still hangs on the first pass's first event: nothing of the move told yet
        assert len(told(tmp_path)) == 1
        gate.touch()
        failed = daemon.next_event("hook", timeout=20)
        assert failed["level"] == "warning"
        assert "hook_command hook.sh exited 1: refused" in failed["summary"]
        # every event waiting was told afterwards, in order, the move among them
        wait_until(
            lambda: any(
                e["writers_before"] == [str(n1)] for e in events_named(tmp_path, "writer_changed")
            ),
            20,
            "the move told after the hang",
        )
    finally:
        gate.touch()
        assert daemon.stop() == 0


def test_a_reload_is_not_held_by_a_hook_that_hangs(rig: Rig, tmp_path: Path) -> None:
    """A reload that changes the cluster's settings replaces its loop; the new loop's first
    pass does not wait for the old loop's hook queue, whose hook hangs."""
    gate = tmp_path / "gate"
    program = hook(tmp_path, held_by(gate))
    daemon = started(rig, hook_command=str(program), hook_timeout_ms=600000)
    try:
        wait_until(lambda: told(tmp_path), 20, "the first event's hook running")
        rig.write_config(retry_down=1)  # the cluster's own settings: its loop is replaced
        daemon.proc.send_signal(signal.SIGHUP)
        daemon.next_event("reload", timeout=20)
        daemon.next_pass(timeout=30)  # the new loop's first pass
        assert len(told(tmp_path)) == 1 and not gate.exists(), "the hook still hangs"
    finally:
        gate.touch()
        assert daemon.stop() == 0


def test_a_flood_is_dropped_counted_and_said(
    rig: Rig, nodes: list[NodeAddress], tmp_path: Path
) -> None:
    """The first pass places three nodes: four events (the writer, three nodes routed) for a
    queue of one behind a hook that hangs: the first told, one waiting (unless the pass
    offered it before the hook's thread took the first), the rest dropped."""
    gate = tmp_path / "gate"
    program = hook(tmp_path, held_by(gate))
    daemon = started(rig, hook_command=str(program), hook_queue=1, hook_timeout_ms=600000)
    try:
        dropped = [daemon.next_event("hook", timeout=20) for _ in range(2)]
        assert all(d["summary"].endswith("dropped, the hook queue is full") for d in dropped)
        assert all(d["level"] == "warning" for d in dropped)
        gate.touch()

        def accounted() -> bool:
            said = "".join(daemon.output).count("dropped, the hook queue is full")
            return len(told(tmp_path)) + said == 4

        wait_until(accounted, 20, "every event told or said dropped")
        events = [e["event"] for e in told(tmp_path)]
        assert events in (["writer_changed"], ["writer_changed", "node_back"]), events
    finally:
        gate.touch()
        assert daemon.stop() == 0


def test_a_scheduler_pass_hands_its_events_over_and_exits(
    rig: Rig, galera: Any, nodes: list[NodeAddress], tmp_path: Path
) -> None:
    n1, n2, _ = nodes
    gate = tmp_path / "gate"
    program = hook(tmp_path, held_by(gate) + f"touch {tmp_path / 'done'}\n")
    rig.write_config(
        hook_command=str(program), hook_timeout_ms=600000, hook_events="writer_changed"
    )
    try:
        first = rig.run("run")
        assert first.code == 0, first.stderr
        # the pass ended while its hook still runs: the hook's process is its own
        wait_until(lambda: told(tmp_path), 20, "the placement told")
        assert not (tmp_path / "done").exists()
        assert told(tmp_path)[0]["writers_after"] == [str(n1)]
        gate.touch()
        outcomes = rig.state_dir / "galera.lab.hook-outcomes"
        wait_until(outcomes.exists, 20, "the hook process's outcome")
        galera.kill(1)
        moved = rig.run("run")
        assert moved.code == 0, moved.stderr
        # the next pass says what the hook process did after the pass before
        said = [line["summary"] for line in moved.logs if line.get("event") == "hook"]
        assert said and "after an earlier pass: writer_changed: told in" in said[0], said
        assert rig.writers == {n2}
        wait_until(lambda: len(told(tmp_path)) == 2, 20, "the move told")
        assert told(tmp_path)[1]["writers_before"] == [str(n1)]
        # an unchanged pass tells nothing
        rig.run("run")
        assert len(told(tmp_path)) == 2
    finally:
        gate.touch()


def test_a_switchover_end_is_told(rig: Rig, nodes: list[NodeAddress], tmp_path: Path) -> None:
    n1, n2, _ = nodes
    program = hook(tmp_path, "")
    rig.write_config(
        hook_command=str(program), hook_events="writer_changed,switchover", drain_timeout_ms=0
    )
    assert rig.run("run").code == 0
    try:
        result = rig.run("switchover", f"--to={n2}")
        assert result.code == 0, result.stdout + result.stderr
        wait_until(lambda: events_named(tmp_path, "switchover"), 20, "the switchover told")
        (switch,) = events_named(tmp_path, "switchover")
        assert (switch["from"], switch["to"], switch["outcome"]) == (str(n1), str(n2), "done")
        assert any(
            e["writers_after"] == [str(n2)] for e in events_named(tmp_path, "writer_changed")
        )
    finally:
        rig.run("switchover", "--release")
