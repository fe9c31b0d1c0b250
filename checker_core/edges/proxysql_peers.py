"""Reads what the local ProxySQL knows of its ProxySQL Cluster peers (a few small queries, only
when runtime_proxysql_servers lists any)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from checker_core.core.leadership import ProxyAddress

if TYPE_CHECKING:
    from checker_core.core.peers import Checksum, ClusterTiming, ProxyClusterView
    from checker_core.edges.proxysql import AdminClient

MODULE = "mysql_servers"
TIMING_VARIABLES = (
    "admin-cluster_check_interval_ms",
    "admin-cluster_check_status_frequency",
    "admin-cluster_mysql_servers_diffs_before_sync",
)


def read_checksum(admin: AdminClient) -> Checksum | None:
    """The local proxy's mysql_servers checksum, version and epoch (None before any LOAD)."""
    from checker_core.core.peers import Checksum

    rows = admin.execute(
        "SELECT version, epoch, checksum FROM runtime_checksums_values WHERE name = %s",
        (MODULE,),
    )
    if not rows:
        return None
    version, epoch, checksum = rows[0]
    return Checksum(int(version), int(epoch), str(checksum))


def loaded_this_second(admin: AdminClient) -> bool:
    """Whether mysql_servers was loaded in the proxy's current second (its epoch), by the proxy's
    own clock: a LOAD now would carry no newer epoch."""
    own = read_checksum(admin)
    return own is not None and own.epoch is not None and own.epoch >= _now(admin)


def list_peers(admin: AdminClient) -> tuple[ProxyAddress, ...]:
    """The proxies of the ProxySQL Cluster the local proxy is in (none for a proxy alone)."""
    return tuple(
        ProxyAddress(str(host), int(port))
        for host, port in admin.execute("SELECT hostname, port FROM runtime_proxysql_servers")
    )


def read_cluster_view(
    admin: AdminClient, me: ProxyAddress, listed: tuple[ProxyAddress, ...]
) -> ProxyClusterView:
    """The view of the peers list_peers found (only asked of a proxy that has some)."""
    # the rule's records are built only once the proxy turns out to have peers
    from checker_core.core.peers import PeerView, ProxyClusterView

    metrics = {
        ProxyAddress(str(host), int(port)): (_int(uptime), _int(last_check))
        for host, port, uptime, last_check in admin.execute(
            "SELECT hostname, port, Uptime_s, last_check_ms FROM stats_proxysql_servers_metrics"
        )
    }
    checks = {
        ProxyAddress(str(host), int(port)): (
            str(checksum),
            _int(updated),
            _int(diff) or 0,
            _int(epoch),
        )
        for host, port, checksum, updated, diff, epoch in admin.execute(
            "SELECT hostname, port, checksum, updated_at, diff_check, epoch "
            "FROM stats_proxysql_servers_checksums WHERE name = %s",
            (MODULE,),
        )
    }
    peers = []
    for address in sorted(set(listed)):
        uptime, last_check = metrics.get(address, (None, None))
        checksum, updated_at, diff_check, epoch = checks.get(address, (None, None, 0, None))
        peers.append(PeerView(address, uptime, last_check, updated_at, checksum, diff_check, epoch))
    own = read_checksum(admin)
    return ProxyClusterView(
        me=me,
        peers=tuple(peers),
        now=_now(admin),
        own_uptime_s=_own_uptime(admin),
        own_checksum=own.checksum if own else None,
        timing=_timing(admin),
        own_epoch=own.epoch if own else None,
    )


def _int(value: object) -> int | None:
    try:
        return int(str(value))
    except ValueError:
        return None


def _now(admin: AdminClient) -> int:
    # the proxy's clock, which its updated_at columns use (the admin has no unix_timestamp())
    rows = admin.execute("SELECT strftime('%s','now')")
    return (_int(rows[0][0]) or 0) if rows else 0


def _own_uptime(admin: AdminClient) -> int:
    rows = admin.execute(
        "SELECT Variable_Value FROM stats_mysql_global WHERE Variable_Name = %s",
        ("ProxySQL_Uptime",),
    )
    return (_int(rows[0][0]) or 0) if rows else 0


def _timing(admin: AdminClient) -> ClusterTiming:
    from checker_core.core.peers import ClusterTiming

    marks = ", ".join(["%s"] * len(TIMING_VARIABLES))
    values = {
        str(name): _int(value)
        for name, value in admin.execute(
            f"SELECT variable_name, variable_value FROM global_variables "  # noqa: S608
            f"WHERE variable_name IN ({marks})",
            TIMING_VARIABLES,
        )
    }
    default = ClusterTiming()
    interval, frequency, diffs = (values.get(name) for name in TIMING_VARIABLES)
    return ClusterTiming(
        check_interval_ms=interval if interval and interval > 0 else default.check_interval_ms,
        status_frequency=frequency if frequency and frequency > 0 else default.status_frequency,
        diffs_before_sync=diffs if diffs is not None and diffs >= 0 else default.diffs_before_sync,
    )
