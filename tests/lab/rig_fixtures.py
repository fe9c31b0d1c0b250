"""pytest fixtures of a galera-checker rig on the lab: the roster seeded with weights 1000, 500,
100 on nodes 1, 2, 3, and the managed hostgroups empty."""

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
