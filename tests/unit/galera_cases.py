"""Builders for Galera unit tests: a healthy node's answers, a cluster's rows, settings."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace

from checker_core.core.decide import Decision, decide, view_of
from checker_core.core.hysteresis import NodeMemory
from checker_core.core.model import (
    ClusterRows,
    Hostgroups,
    NodeAddress,
    ServerRow,
    ServerStatus,
    sort_rows,
)
from checker_core.core.probes import ProbeResult
from checker_core.core.settings import ClusterSettings
from galera_checker.policy import GaleraFacts, GaleraPolicy

HG = Hostgroups(
    writer=100, reader=101, backup_writer=102, offline=9100, config_writer=8100, config_reader=8101
)
N1, N2, N3 = (NodeAddress("127.0.0.1", p) for p in (3311, 3312, 3313))
NODES = (N1, N2, N3)
WEIGHTS = {N1: 1000, N2: 500, N3: 100}

# what a healthy MariaDB Galera node answers (no pxc_maint_mode, no super_read_only)
MARIADB_HEALTHY = {
    "wsrep_cluster_status": "Primary",
    "wsrep_ready": "ON",
    "wsrep_connected": "ON",
    "wsrep_local_state": "4",
    "wsrep_local_state_comment": "Synced",
    "wsrep_local_recv_queue": "0",
    "wsrep_cluster_size": "3",
    "read_only": "OFF",
    "wsrep_reject_queries": "NONE",
    "wsrep_sst_donor_rejects_queries": "OFF",
    "wsrep_desync": "OFF",
    "wsrep_provider_options": "base_port = 4567; gmcast.segment = 0; pc.weight = 1",
    "wsrep_on": "ON",
}
# Percona XtraDB Cluster 8.0 answers the same names plus these
PXC_HEALTHY = {**MARIADB_HEALTHY, "pxc_maint_mode": "DISABLED", "super_read_only": "OFF"}


def cluster_settings(**changes: object) -> ClusterSettings:
    base = ClusterSettings(
        name="main",
        hostgroups=HG,
        max_writers=1,
        writer_is_also_reader=1,
        max_transactions_behind=0,
        retry_up=0,
        retry_down=0,
        fail_back=False,
        kill_demoted_writer_connections=False,
        drain_timeout_ms=30000,
        main_segment=None,
        brownout="hold",
    )
    return replace(base, **changes)  # type: ignore[arg-type]


def templates(weights: Mapping[NodeAddress, int] = WEIGHTS) -> list[ServerRow]:
    rows = []
    for node, weight in weights.items():
        rows.append(ServerRow(HG.config_writer, node.host, node.port, weight=weight))
        rows.append(ServerRow(HG.config_reader, node.host, node.port, weight=100))
    return rows


def placed(
    node: NodeAddress, hostgroup: int, status: ServerStatus = ServerStatus.ONLINE
) -> ServerRow:
    weight = WEIGHTS.get(node, 1) if hostgroup in (HG.writer, HG.backup_writer) else 100
    if hostgroup == HG.offline:
        weight = WEIGHTS.get(node, 1)
    return ServerRow(hostgroup, node.host, node.port, status=status, weight=weight)


def rows_of(live: Iterable[ServerRow], weights: Mapping[NodeAddress, int] = WEIGHTS) -> ClusterRows:
    runtime = sort_rows([*templates(weights), *live])
    return ClusterRows(runtime=runtime, staging=runtime)


def steady(writer: NodeAddress = N1) -> list[ServerRow]:
    """The layout a healthy 3-node cluster settles in (writer also reads)."""
    rows = [placed(writer, HG.writer)]
    for node in NODES:
        rows.append(placed(node, HG.reader))
        if node != writer:
            rows.append(placed(node, HG.backup_writer))
    return rows


def probe_ok(node: NodeAddress, **facts: str) -> ProbeResult:
    return ProbeResult(node, GaleraFacts({**MARIADB_HEALTHY, **facts}), None, 1.0)


def probe_down(node: NodeAddress, error: str = "Can't connect (error 2003)") -> ProbeResult:
    return ProbeResult(node, None, error, 1.0)


def run(
    live: Iterable[ServerRow],
    probes: Mapping[NodeAddress, ProbeResult] | None = None,
    memory: Mapping[NodeAddress, NodeMemory] | None = None,
    drained: Iterable[NodeAddress] = (),
    weights: Mapping[NodeAddress, int] = WEIGHTS,
    **settings: object,
) -> Decision:
    all_probes = {n: probe_ok(n) for n in weights}
    all_probes.update(probes or {})
    cluster = cluster_settings(**settings)
    done = set(drained)
    return decide(
        GaleraPolicy(),
        view_of(rows_of(live, weights), cluster),
        all_probes,
        memory=memory or {},
        cluster=cluster,
        # a draining row not named as drained still has a client connection
        in_use={(hg, n): 0 if n in done else 1 for hg in HG.managed for n in weights},
        now=1000.0,
    )


def hostgroup_members(
    decision: Decision, hostgroup: int, status: ServerStatus = ServerStatus.ONLINE
) -> set[NodeAddress]:
    return {
        r.node for r in decision.plan.desired if r.hostgroup_id == hostgroup and r.status is status
    }


def apply_plan(live: Iterable[ServerRow], decision: Decision) -> list[ServerRow]:
    """The managed rows ProxySQL holds after the plan is loaded."""
    managed = set(HG.managed)
    others = [r for r in live if r.hostgroup_id not in managed]
    return [*others, *decision.plan.desired]
