"""Pytest fixtures of the lab's real MySQL Group Replication group.

`gr_lab` starts the group once per session and shuts it down at the end; `gr` hands each test the
same group restored to its healthy state (3 ONLINE, member 1 PRIMARY, no backlog), so a test may
break it freely.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.lab import require
from tests.lab.gr import GrLab
from tests.lab.mysql_dist import ensure_mysql
from tests.lab.process import LabError


@pytest.fixture(scope="session")
def gr_lab() -> Iterator[GrLab]:
    try:
        dist = ensure_mysql()
    except (LabError, OSError) as exc:
        require.unavailable(f"MySQL for the Group Replication lab could not be fetched: {exc}")
    lab = GrLab(dist=dist)
    try:
        lab.up()
    except BaseException:
        # a half-started group must not outlive the session
        lab.down()
        raise
    try:
        yield lab
    finally:
        lab.down()


@pytest.fixture
def gr(gr_lab: GrLab) -> GrLab:
    gr_lab.ensure_healthy()
    return gr_lab
