"""One round trip per Galera node: wsrep status and the variables the rules need.

`SHOW GLOBAL STATUS/VARIABLES WHERE ...` works on MariaDB Galera 10.x and on Percona XtraDB
Cluster 5.7/8.x alike; a variable one flavour lacks (pxc_maint_mode and super_read_only on
MariaDB) is simply absent from the answer. Both statements go in one multi-statement query.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from galera_checker.policy import GaleraFacts

if TYPE_CHECKING:
    import pymysql

STATUS_NAMES = (
    "wsrep_cluster_status",
    "wsrep_ready",
    "wsrep_connected",
    "wsrep_local_state",
    "wsrep_local_state_comment",
    "wsrep_local_recv_queue",
    "wsrep_cluster_size",
)
VARIABLE_NAMES = (
    "read_only",
    "super_read_only",
    "wsrep_reject_queries",
    "wsrep_sst_donor_rejects_queries",
    "wsrep_desync",
    "pxc_maint_mode",
    "wsrep_provider_options",
    "wsrep_on",
)


def _marks(count: int) -> str:
    return ", ".join(["%s"] * count)


PROBE_SQL = (
    f"SHOW GLOBAL STATUS WHERE Variable_name IN ({_marks(len(STATUS_NAMES))}); "
    f"SHOW GLOBAL VARIABLES WHERE Variable_name IN ({_marks(len(VARIABLE_NAMES))})"
)


def probe(conn: pymysql.connections.Connection[Any]) -> GaleraFacts:
    values: dict[str, str] = {}
    with conn.cursor() as cur:
        cur.execute(PROBE_SQL, STATUS_NAMES + VARIABLE_NAMES)
        while True:
            for name, value in cur.fetchall():
                values[str(name).lower()] = "" if value is None else str(value)
            if not cur.nextset():
                break
    return GaleraFacts(values)
