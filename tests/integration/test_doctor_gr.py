"""`doctor` on the lab's Group Replication group behind ProxySQL: quiet on its correct setup."""

from __future__ import annotations

import pytest

from checker_core.core.model import NodeAddress
from tests.integration.rig import Rig
from tests.integration.test_doctor import doctor

pytestmark = [pytest.mark.gr, pytest.mark.proxysql]


def test_the_gr_lab_correct_setup_says_nothing(gr_rig: tuple[Rig, list[NodeAddress]]) -> None:
    rig, members = gr_rig
    ran, found = doctor(rig)
    assert ran.code == 0, ran.stdout + ran.stderr
    assert found == []
    assert f"doctor: nothing found ({len(members)} node(s), 1 cluster(s))" in ran.stdout
