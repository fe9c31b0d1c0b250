"""The lab's process tracking: a pid file names one process, and a child's end is told exactly.

These start short-lived local programs (sleep, sh) and nothing else.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.lab import process


@pytest.fixture
def sleeper(tmp_path: Path) -> Iterator[tuple[int, Path]]:
    pid_path = tmp_path / "sleeper.pid"
    pid = process.spawn(["sleep", "60"], tmp_path / "sleeper.out", pid_path)
    try:
        yield pid, pid_path
    finally:
        # a child not yet collected keeps its pid: no other process can have it to be signalled
        if process.ended(pid) is None:
            process.stop(pid, timeout=5.0)


def _ended_soon(pid: int) -> str:
    return process.wait_until(lambda: process.ended(pid), 10.0, f"pid {pid} to be collected")


def test_a_pid_file_names_its_process_by_pid_and_start_time(sleeper: tuple[int, Path]) -> None:
    pid, pid_path = sleeper

    assert pid_path.read_text().split() == [str(pid), str(process.start_ticks(pid))]
    # no marker at all: the start time alone says the process is the one spawned
    assert process.tracked_pid(pid_path) == pid


def test_a_pid_file_whose_start_time_differs_names_a_recycled_pid_not_ours(
    sleeper: tuple[int, Path],
) -> None:
    pid, pid_path = sleeper
    start = process.start_ticks(pid)
    assert start is not None
    pid_path.write_text(f"{pid} {start + 1}\n")

    assert process.tracked_pid(pid_path, marker="sleep") is None


def test_a_pid_file_without_a_start_time_still_needs_its_marker(
    sleeper: tuple[int, Path],
) -> None:
    pid, pid_path = sleeper
    pid_path.write_text(f"{pid}\n")

    assert process.tracked_pid(pid_path, marker="sleep") == pid
    assert process.tracked_pid(pid_path, marker="mariadbd") is None


def test_a_stopped_process_is_no_longer_tracked(sleeper: tuple[int, Path]) -> None:
    pid, pid_path = sleeper

    process.stop(pid, timeout=5.0)

    assert process.tracked_pid(pid_path) is None
    assert _ended_soon(pid) == "killed by SIGTERM"


@pytest.mark.parametrize(
    ("script", "told"),
    [("kill -KILL $$", "killed by SIGKILL"), ("exit 3", "exit code 3"), ("true", "exit code 0")],
)
def test_a_child_that_ended_says_how(tmp_path: Path, script: str, told: str) -> None:
    pid = process.spawn(["sh", "-c", script], tmp_path / "out", tmp_path / "pid")

    assert _ended_soon(pid) == told


def test_a_running_child_has_not_ended(sleeper: tuple[int, Path]) -> None:
    pid, _ = sleeper

    assert process.ended(pid) is None


def test_an_ending_kept_for_a_pid_is_not_told_of_a_new_child_given_that_pid(
    tmp_path: Path,
) -> None:
    # pids come round again: mark every pid the next child may get as ended already
    last = int(Path("/proc/sys/kernel/ns_last_pid").read_text())
    pid_max = int(Path("/proc/sys/kernel/pid_max").read_text())
    stale = {(last + step) % pid_max: 0 for step in range(1, 2000)}
    kept = {pid: status for pid, status in process._ENDINGS.items() if pid in stale}
    process._ENDINGS.update(stale)
    try:
        pid = process.spawn(["sleep", "60"], tmp_path / "out", tmp_path / "pid")
        try:
            assert pid in stale, "the new child took a pid outside the marked range"
            assert process.ended(pid) is None
        finally:
            process.stop(pid, timeout=5.0)
    finally:
        for old in stale:
            process._ENDINGS.pop(old, None)
        process._ENDINGS.update(kept)
