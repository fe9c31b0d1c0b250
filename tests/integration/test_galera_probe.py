"""On the real Galera nodes, the probe's later form (SELECT @@global of the variables the
first probe found) reads the same facts as its first form (SHOW VARIABLES)."""

from __future__ import annotations

import pymysql
import pytest
from pymysql.constants import CLIENT

from galera_checker import probe as galera_probe
from tests.lab.accounts import MONITOR_PASSWORD, MONITOR_USER
from tests.lab.galera import GaleraLab

pytestmark = pytest.mark.galera


@pytest.mark.parametrize("read_only", [False, True])
def test_both_forms_of_the_probe_read_the_same_facts(galera: GaleraLab, read_only: bool) -> None:
    node = galera.node(1)
    galera.set_read_only(1, read_only)
    try:
        conn = pymysql.connect(
            host=node.host,
            port=node.port,
            user=MONITOR_USER,
            password=MONITOR_PASSWORD,
            client_flag=CLIENT.MULTI_STATEMENTS,
            autocommit=True,
            connect_timeout=5,
            read_timeout=5,
        )
        with conn:
            first = galera_probe.probe(conn)
            learnt = galera_probe._known[conn]
            later = galera_probe.probe(conn)
    finally:
        galera.set_read_only(1, False)

    # MariaDB has neither super_read_only nor pxc_maint_mode: the later probe does not ask
    assert "super_read_only" not in learnt
    assert "pxc_maint_mode" not in learnt
    assert set(learnt) <= set(first.values)
    assert later.values == first.values
    assert later.read_only is read_only
    assert later.get("wsrep_cluster_status") == "Primary"
