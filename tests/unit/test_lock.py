"""The pass lock names its holder's pid (what an operator reads in a stuck case), and the
daemon, which takes it every pass, does not rewrite an unchanged file."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from checker_core.edges.lock import cluster_lock


def test_the_lock_file_names_the_holder_and_is_rewritten_only_for_a_new_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    writes: list[bytes] = []
    real_pwrite = os.pwrite

    def counted(fd: int, data: bytes, offset: int) -> int:
        writes.append(data)
        return real_pwrite(fd, data, offset)

    monkeypatch.setattr(os, "pwrite", counted)
    path = tmp_path / "galera.main.lock"
    path.write_text("4194304\n12345678\n")  # a stale holder's pid, longer than ours
    with cluster_lock(path) as held:
        assert held
        assert path.read_text() == f"{os.getpid()}\n"
    for _ in range(3):
        with cluster_lock(path) as held:
            assert held
    assert path.read_text() == f"{os.getpid()}\n"
    assert writes == [f"{os.getpid()}\n".encode()], "the same holder rewrote the file"
