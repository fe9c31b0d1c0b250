"""pytest fixtures of a checker rig on the lab: galera-checker's roster seeded with weights 1000,
500, 100 on nodes 1, 2, 3 (gr-checker's with 100 on every member), the managed hostgroups empty."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from checker_core.core.model import NodeAddress
from tests.integration.rig import Rig, addresses, seeded_rig


@pytest.fixture
def nodes(galera: Any) -> list[NodeAddress]:
    return addresses(galera.nodes)


@pytest.fixture
def rig(
    galera: Any, proxysql_admin: Any, tmp_path: Path, nodes: list[NodeAddress]
) -> Iterator[Rig]:
    with seeded_rig(tmp_path, proxysql_admin, nodes) as rig:
        yield rig


@pytest.fixture
def gr_rig(gr: Any, proxysql_admin: Any, tmp_path: Path) -> Iterator[tuple[Rig, list[NodeAddress]]]:
    """A gr-checker rig on the lab's group: every member in the roster with weight 100."""
    members = addresses(gr.members)
    rig = Rig("gr-checker", tmp_path, proxysql_admin)
    try:
        rig.seed(dict.fromkeys(members, 100))
        yield rig, members
    finally:
        rig.close()
