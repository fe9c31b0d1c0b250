"""pytest fixtures of a galera-checker rig on the lab: the roster seeded with weights 1000, 500,
100 on nodes 1, 2, 3, and the managed hostgroups empty."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from checker_core.core.model import NodeAddress
from tests.integration.rig import Rig, addresses


@pytest.fixture
def nodes(galera: Any) -> list[NodeAddress]:
    return addresses(galera.nodes)


@pytest.fixture
def rig(
    galera: Any, proxysql_admin: Any, tmp_path: Path, nodes: list[NodeAddress]
) -> Iterator[Rig]:
    rig = Rig("galera-checker", tmp_path, proxysql_admin)
    n1, n2, n3 = nodes
    rig.seed({n1: 1000, n2: 500, n3: 100})
    yield rig
    rig.close()
