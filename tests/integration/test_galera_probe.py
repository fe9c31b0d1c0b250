"""On the real Galera nodes, the probe's later form (SELECT @@global of the variables the
first probe found, and the status from MariaDB's status table, in one row) reads the same facts
as its first form (SHOW STATUS, SHOW VARIABLES)."""

from __future__ import annotations

from typing import Any

import pymysql
import pytest
from pymysql.constants import CLIENT

from galera_checker import probe as galera_probe
from tests.lab.accounts import MONITOR_PASSWORD, MONITOR_USER
from tests.lab.galera import GaleraLab
from tests.lab.process import wait_until

pytestmark = pytest.mark.galera


def monitor_connection(galera: GaleraLab) -> pymysql.connections.Connection[Any]:
    """Node 1 as the monitor account, as the checker connects (multi-statements on)."""
    node = galera.node(1)
    return pymysql.connect(
        host=node.host,
        port=node.port,
        user=MONITOR_USER,
        password=MONITOR_PASSWORD,
        client_flag=CLIENT.MULTI_STATEMENTS,
        autocommit=True,
        connect_timeout=5,
        read_timeout=5,
    )


@pytest.mark.parametrize("read_only", [False, True])
def test_both_forms_of_the_probe_read_the_same_facts(galera: GaleraLab, read_only: bool) -> None:
    galera.set_read_only(1, read_only)
    try:
        with monitor_connection(galera) as conn:
            first = galera_probe.probe(conn)
            learnt = galera_probe.learnt_names(conn)
            assert learnt is not None, "the first probe learnt the variables"
            later = galera_probe.probe(conn)
            later_sql, _ = galera_probe.probe.ask(conn)
    finally:
        galera.set_read_only(1, False)

    # MariaDB has neither super_read_only nor pxc_maint_mode: the later probe does not ask
    assert "super_read_only" not in learnt
    assert "pxc_maint_mode" not in learnt
    assert set(learnt) <= set(first.values)
    assert "information_schema.GLOBAL_STATUS" in later_sql, "asked in one row, and kept so"
    assert later.values == first.values
    assert later.read_only is read_only
    assert later.get("wsrep_cluster_status") == "Primary"


@pytest.mark.parametrize(
    "fault",
    [None, ("read_only", "ON", "OFF"), ("wsrep_reject_queries", "ALL", "NONE")],
    ids=lambda fault: "healthy" if fault is None else str(fault[0]),
)
def test_the_watch_question_reads_the_state_the_probe_reads(
    galera: GaleraLab, fault: tuple[str, str, str] | None
) -> None:
    """The daemon's watch compares its one-row answer with the last probe's facts: both must
    make the same key, or a healthy writer would start a pass every time it is asked."""
    from galera_checker.policy import GaleraPolicy

    policy = GaleraPolicy()
    with monitor_connection(galera) as conn:
        probed = galera_probe.probe(conn)
        asked = galera_probe.watch(conn)
        assert policy.watch_key(asked) == policy.watch_key(probed)
        if fault is None:
            return
        variable, value, restore = fault
        try:
            galera.sql(1, f"SET GLOBAL {variable} = {value}")
            # MariaDB desyncs a node for a moment while it sets read_only: wait for Synced
            wait_until(
                lambda: galera_probe.probe(conn).get("wsrep_local_state") == "4",
                10.0,
                "node 1 to be Synced again",
            )
            faulted = galera_probe.watch(conn)
            probed_faulted = galera_probe.probe(conn)
        finally:
            galera.sql(1, f"SET GLOBAL {variable} = {restore}")
        assert policy.watch_key(faulted) != policy.watch_key(probed)
        assert policy.watch_key(faulted) == policy.watch_key(probed_faulted)
