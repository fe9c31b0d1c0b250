"""Telling hooks, with real programs and a real HTTP server on 127.0.0.1: what a program gets
(the event on stdin, nothing of the checker's environment), a hook that hangs (killed with
everything it started), one that fails, one that floods the queue, a URL that refuses or
never answers, and a scheduler's detached hand-over (bounded, secrets off argv)."""

from __future__ import annotations

import fcntl
import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest

from checker_core.core.settings import HookSettings, Secret
from checker_core.edges.hooks import HookQueue, Told, send_detached, tell
from tests.lab.process import wait_until

EVENT = {"event": "writer_changed", "cluster": "main", "writers_after": ["127.0.0.1:3312"]}


def script(tmp_path: Path, name: str, body: str) -> Path:
    path = tmp_path / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return path


def test_the_program_gets_the_event_on_stdin_and_nothing_of_ours(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CHECKER_MONITOR_PASSWORD", "monitor-secret")
    out = tmp_path / "out"
    program = script(
        tmp_path, "hook.sh", f'cat > {out}.json\nenv > {out}.env\necho "$@" > {out}.argv\n'
    )
    told = tell(HookSettings(command=(str(program), "--zone", "east")), EVENT, "main")
    assert told.ok, told.describe()
    assert json.loads(Path(f"{out}.json").read_text()) == EVENT
    names = {line.split("=", 1)[0] for line in Path(f"{out}.env").read_text().splitlines()}
    assert names <= {"PATH", "LANG", "HOME", "PWD", "SHLVL", "_"}, names
    assert "monitor-secret" not in Path(f"{out}.env").read_text()
    assert Path(f"{out}.argv").read_text() == "--zone east\n"


def test_a_hook_that_hangs_is_killed_with_all_it_started(tmp_path: Path) -> None:
    pid_file = tmp_path / "sleeper.pid"
    program = script(tmp_path, "hang.sh", f"sleep 300 &\necho $! > {pid_file}\nwait\n")
    told = tell(HookSettings(command=(str(program),), timeout_ms=500), EVENT, "main")
    assert not told.ok
    assert told.failures == ("hook_command hang.sh still ran after 500 ms: killed",)
    sleeper = int(pid_file.read_text())
    # the sleep it left behind went with its process group
    wait_until(lambda: _zombie(sleeper), 10, "the hook's own child to end")


def _zombie(pid: int) -> bool:
    """Gone, or dead and waiting for its reaper (init reaps what a killed group leaves)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
    except OSError:
        return True


def test_a_hook_that_fails_is_said_with_its_stderr(tmp_path: Path) -> None:
    program = script(tmp_path, "fail.sh", "cat >/dev/null\necho 'dns update refused' >&2\nexit 3\n")
    told = tell(HookSettings(command=(str(program),)), EVENT, "main")
    assert told.failures == ("hook_command fail.sh exited 3: dns update refused",)


def test_a_program_that_cannot_start_is_a_failure_not_an_exception(tmp_path: Path) -> None:
    gone = tmp_path / "gone.sh"
    told = tell(HookSettings(command=(str(gone),)), EVENT, "main")
    assert told.failures and "could not start" in told.failures[0]


def test_a_flood_fills_the_queue_the_rest_is_dropped_counted_and_said(tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    seen = tmp_path / "seen"
    program = script(
        tmp_path,
        "slow.sh",
        f"cat >> {seen}\nwhile [ ! -e {gate} ]; do sleep 0.05; done\n",
    )
    said: list[Told] = []
    hooks = HookSettings(command=(str(program),), timeout_ms=20000, queue=3)
    hook_queue = HookQueue(hooks, "main", said.append)
    try:
        offered = [hook_queue.offer({**EVENT, "n": n}) for n in range(20)]
        # one is being told, three wait: every other offer came back at once, dropped
        wait_until(lambda: seen.exists() and seen.read_text().count("\n") == 1, 10, "one told")
        assert offered.count(True) in (3, 4)
        full = [t for t in said if t.dropped == "the hook queue is full"]
        assert hook_queue.dropped == offered.count(False) == len(full)
        gate.touch()
        wait_until(lambda: seen.read_text().count("\n") == offered.count(True), 20, "the rest")
        told_in_order = [json.loads(line)["n"] for line in seen.read_text().splitlines()]
        assert told_in_order == sorted(told_in_order)
    finally:
        gate.touch()
        hook_queue.close(5)


def test_closing_tells_what_it_can_and_says_the_rest(tmp_path: Path) -> None:
    program = script(tmp_path, "slow.sh", "cat >/dev/null\nsleep 2\n")
    said: list[Told] = []
    hook_queue = HookQueue(HookSettings(command=(str(program),), queue=10), "main", said.append)
    for n in range(5):
        assert hook_queue.offer({**EVENT, "n": n})
    left = hook_queue.close(0.5)
    assert left >= 3
    stopped = [t for t in said if t.dropped == "the daemon stopped before it was told"]
    assert len(stopped) == left


class Receiver(http.server.BaseHTTPRequestHandler):
    bodies: ClassVar[list[bytes]] = []
    status: ClassVar[int] = 200
    hang: ClassVar[threading.Event] = threading.Event()

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        if self.path.endswith("/hang"):
            Receiver.hang.wait(30)
            return
        Receiver.bodies.append(body)
        self.send_response(Receiver.status)
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[str]:
    Receiver.bodies, Receiver.status = [], 200
    Receiver.hang.clear()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        Receiver.hang.set()
        server.shutdown()
        server.server_close()


def test_the_url_gets_the_same_json(receiver: str) -> None:
    told = tell(HookSettings(url=Secret(f"{receiver}/hooks/T0KEN")), EVENT, "main")
    assert told.ok, told.describe()
    assert [json.loads(b) for b in Receiver.bodies] == [EVENT]


def test_a_url_that_refuses_or_never_answers_fails_without_its_path(receiver: str) -> None:
    Receiver.status = 500
    refused = tell(HookSettings(url=Secret(f"{receiver}/hooks/T0KEN")), EVENT, "main")
    assert refused.failures == ("hook_url (host 127.0.0.1) answered 500 Internal Server Error",)
    silent = tell(HookSettings(url=Secret(f"{receiver}/T0KEN/hang"), timeout_ms=300), EVENT, "m")
    assert silent.failures == ("hook_url (host 127.0.0.1) did not answer within 300 ms",)
    assert all("T0KEN" not in f for f in (*refused.failures, *silent.failures))


def test_a_scheduler_hand_over_tells_after_it_returns_and_is_bounded(
    tmp_path: Path, receiver: str
) -> None:
    out = tmp_path / "out.json"
    gate = tmp_path / "gate"
    program = script(
        tmp_path,
        "hook.sh",
        f"cat >> {out}\ntr '\\0' ' ' < /proc/$PPID/cmdline > {out}.parent\n"
        f"while [ ! -e {gate} ]; do sleep 0.05; done\n",
    )
    hooks = HookSettings(
        command=(str(program),), url=Secret(f"{receiver}/hooks/T0KEN"), queue=1, timeout_ms=20000
    )
    log = tmp_path / "galera.main.hook-outcomes"

    def slot(k: int) -> Path:
        return tmp_path / f"galera.main.hook.{k}"

    assert send_detached(hooks, [EVENT], slot, log) is None
    wait_until(lambda: out.exists() and out.read_text().strip() != "", 20, "the hook's event")
    assert json.loads(out.read_text()) == EVENT
    parent = Path(f"{out}.parent").read_text()
    assert "hook_process" in parent and "T0KEN" not in parent  # the URL went on its stdin
    # its one slot is held while it runs: the next pass's events are dropped, and said
    dropped = send_detached(hooks, [EVENT, EVENT], slot, log)
    assert dropped == "2 event(s) dropped: 1 hook process(es) still run (cluster.hook_queue)"
    gate.touch()
    wait_until(lambda: len(Receiver.bodies) == 1, 20, "the URL's event")
    assert json.loads(Receiver.bodies[0]) == EVENT
    wait_until(lambda: _free(slot(0)), 20, "its slot given back as the process ends")
    # what it did is there for the next pass to say
    (outcome,) = [json.loads(line) for line in log.read_text().splitlines()]
    assert outcome == {"ok": True, "hook_event": "writer_changed", "summary": outcome["summary"]}
    assert outcome["summary"].startswith("writer_changed: told in ")


def _free(path: Path) -> bool:
    with path.open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return False
        return True
