"""`pause` returns once no pass or eviction already under way can still change anything (S5):
it waits for the cluster's locks, and says which holder is still running when its wait ends."""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from checker_core.edges.lock import cluster_lock, wait_free
from galera_checker.cli import build as build_galera
from tests.unit.config_cases import CONFIG, MAIN_CLUSTER, config_file


class FakeClock:
    """A monotonic clock that moves only when the wait sleeps."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps = 0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps += 1
        self.now += seconds


@contextlib.contextmanager
def held_elsewhere(path: Path, pid: bytes = b"4242\n") -> Iterator[Path]:
    """The lock at `path` held as another process's pass holds it (another open file
    description conflicts as another process does), its pid written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o640)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.pwrite(fd, pid, 0)
        yield path
    finally:
        os.close(fd)


@pytest.fixture
def held(tmp_path: Path) -> Iterator[Path]:
    with held_elsewhere(tmp_path / "galera.main.lock") as path:
        yield path


def test_a_free_lock_is_free_at_once(tmp_path: Path) -> None:
    path = tmp_path / "galera.main.lock"
    with cluster_lock(path):
        pass
    clock = FakeClock()
    assert wait_free(path, 5.0, clock.monotonic, clock.sleep) is None
    assert clock.sleeps == 0


def test_no_lock_file_is_a_free_lock_and_none_is_made(tmp_path: Path) -> None:
    path = tmp_path / "galera.main.lock"
    assert wait_free(path, 5.0) is None
    assert not path.exists()


def test_a_lock_held_past_the_wait_names_its_holder(held: Path) -> None:
    clock = FakeClock()
    assert wait_free(held, 1.0, clock.monotonic, clock.sleep) == "4242"
    assert clock.now == pytest.approx(1.0)
    assert clock.sleeps > 1, "asked once only"


def test_a_lock_let_go_during_the_wait_is_free(tmp_path: Path) -> None:
    path = tmp_path / "galera.main.lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o640)
    fcntl.flock(fd, fcntl.LOCK_EX)
    clock = FakeClock()

    def sleep(seconds: float) -> None:
        clock.sleep(seconds)
        if clock.sleeps == 3:
            os.close(fd)  # the pass under way ends

    assert wait_free(path, 10.0, clock.monotonic, sleep) is None
    assert clock.sleeps == 3


TWO = CONFIG + MAIN_CLUSTER.replace('"main"', '"second"').replace("= 10", "= 20").replace(
    "9100", "9200"
)


def _pause(tmp_path: Path, *args: str) -> tuple[int, str]:
    path = config_file(tmp_path, TWO)
    result = CliRunner().invoke(build_galera(), ["--config", str(path), "pause", *args])
    return result.exit_code, result.output


def test_pause_fails_naming_the_pass_still_under_way_and_keeps_the_pause(tmp_path: Path) -> None:
    state = tmp_path / "state"
    with held_elsewhere(state / "galera.second.lock", b"777\n"):
        code, output = _pause(tmp_path, "--wait", "0.2")
    assert code == 1, output
    assert "cluster second: its pass (pid 777)" in output
    assert "cluster main" not in output.split("still under way")[1]
    assert (state / "galera.paused").exists(), "the pause itself was taken back"


def test_pause_of_one_cluster_waits_for_its_pass_only(tmp_path: Path) -> None:
    state = tmp_path / "state"
    with held_elsewhere(state / "galera.second.lock"):
        code, output = _pause(tmp_path, "--cluster", "main", "--wait", "0.2")
    assert code == 0, output
    assert (state / "galera.main.paused").exists()


def test_pause_returns_once_the_eviction_under_way_ends(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    fd = os.open(state / "galera.main.evict.lock", os.O_RDWR | os.O_CREAT, 0o640)
    fcntl.flock(fd, fcntl.LOCK_EX)
    order: list[str] = []
    gone = threading.Event()

    def end_the_eviction() -> None:
        # the eviction under way ends a while after the pause file is there
        for _ in range(500):
            if (state / "galera.main.paused").exists():
                break
            gone.wait(0.01)
        gone.wait(0.3)
        order.append("eviction ended")
        os.close(fd)

    worker = threading.Thread(target=end_the_eviction)
    worker.start()
    code, output = _pause(tmp_path, "--cluster", "main", "--wait", "30")
    order.append("pause returned")
    worker.join()
    assert code == 0, output
    assert order == ["eviction ended", "pause returned"]
