"""pytest fixtures of the lab's real 3-node MariaDB Galera cluster.

`galera_lab` starts the cluster once per session and stops it at the end; `galera` hands each test
the same cluster restored to its known-good state, whatever the previous test broke.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.lab import require
from tests.lab.galera import GaleraLab, missing_prerequisite


@pytest.fixture(scope="session")
def galera_lab() -> Iterator[GaleraLab]:
    reason = missing_prerequisite()
    if reason is not None:
        require.unavailable(f"MariaDB Galera lab: {reason}")
    lab = GaleraLab()
    try:
        lab.up()
        yield lab
    finally:
        # also after a failed up(): no mariadbd of the lab may outlive the session
        lab.down()


@pytest.fixture
def galera(galera_lab: GaleraLab) -> GaleraLab:
    galera_lab.ensure_healthy()
    return galera_lab
