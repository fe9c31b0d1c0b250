"""The state file is rewritten (write, fsync, rename) only when its counters change: a steady
scheduler pass, a new process every interval, reads it and leaves it as it was."""

from __future__ import annotations

from pathlib import Path

from checker_core.core.hysteresis import NodeMemory
from checker_core.core.schema import Checker
from checker_core.edges.memory import StateStore
from tests.unit.galera_cases import N1, N2


def identity(path: Path) -> tuple[int, int]:
    stat = path.stat()
    return stat.st_ino, stat.st_mtime_ns


def test_a_pass_that_changes_no_counter_leaves_the_file_alone(tmp_path: Path) -> None:
    memory = {N1: NodeMemory(routable=True, good_streak=3), N2: NodeMemory(routable=False)}
    StateStore(tmp_path, Checker.GALERA).save("main", memory)
    path = StateStore(tmp_path, Checker.GALERA).state_path("main")
    before = identity(path)

    next_pass = StateStore(tmp_path, Checker.GALERA)  # a new process: nothing written yet
    loaded, warning = next_pass.load("main")
    assert (loaded, warning) == (memory, None)
    next_pass.save("main", loaded)
    assert identity(path) == before, "the same counters were written again"

    changed = {**loaded, N2: NodeMemory(routable=False, bad_streak=1)}
    next_pass.save("main", changed)
    assert identity(path) != before
    assert StateStore(tmp_path, Checker.GALERA).load("main") == (changed, None)


def test_a_file_gone_since_it_was_read_is_written_again(tmp_path: Path) -> None:
    memory = {N1: NodeMemory(routable=True)}
    store = StateStore(tmp_path, Checker.GALERA)
    store.save("main", memory)
    store.load("main")
    store.state_path("main").unlink()
    store.save("main", memory)
    assert store.load("main") == (memory, None)


def test_a_file_another_process_rewrote_is_read_again(tmp_path: Path) -> None:
    daemon = StateStore(tmp_path, Checker.GALERA)
    first = {N1: NodeMemory(routable=True)}
    daemon.save("main", first)
    assert daemon.load("main") == (first, None)

    other = {N1: NodeMemory(routable=False, bad_streak=2)}
    StateStore(tmp_path, Checker.GALERA).save("main", other)  # e.g. a manual `run` meanwhile

    assert daemon.load("main") == (other, None)
    daemon.save("main", first)
    assert StateStore(tmp_path, Checker.GALERA).load("main") == (first, None)


def test_the_counters_handed_out_are_the_callers_own(tmp_path: Path) -> None:
    store = StateStore(tmp_path, Checker.GALERA)
    store.save("main", {N1: NodeMemory(routable=True)})
    loaded, _ = store.load("main")
    loaded[N2] = NodeMemory(routable=False)
    assert store.load("main") == ({N1: NodeMemory(routable=True)}, None)


def test_the_peers_file_is_kept_as_the_counters_are(tmp_path: Path) -> None:
    from checker_core.core.leadership import PeerMemory, ProxyAddress

    me, other = ProxyAddress("127.0.0.1", 6032), ProxyAddress("127.0.0.2", 6032)
    memory = PeerMemory({me: 100.0, other: 90.0}, other, seen=True)
    StateStore(tmp_path, Checker.GALERA).save_peers(me, memory)
    path = StateStore(tmp_path, Checker.GALERA).peers_path(me)
    before = identity(path)

    next_pass = StateStore(tmp_path, Checker.GALERA)
    loaded = next_pass.load_peers(me)
    assert loaded == memory
    next_pass.save_peers(me, loaded)
    assert identity(path) == before, "the same peers were written again"
    moved_on = PeerMemory({me: 100.0}, me, True, True, gone={other: 90.0}, checked_at=130.0)
    next_pass.save_peers(me, moved_on)
    assert StateStore(tmp_path, Checker.GALERA).load_peers(me) == moved_on
