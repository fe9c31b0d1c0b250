"""Simulated clusters (tests/lab/simnodes.py) in ProxySQL and in a checker configuration: each
cluster's roster seeded in its template hostgroups, one [[cluster]] section each."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from checker_core.core.model import NodeAddress, ServerRow
from checker_core.edges.proxysql import AdminClient
from tests.lab.accounts import MONITOR_PASSWORD, MONITOR_USER
from tests.lab.simnodes import SimNodes


@dataclass(frozen=True)
class Fleet:
    """Simulated clusters as the checker's configuration names them: cluster i writes to
    hostgroup 1000 + 10 i, reads from the next one; backup writer and offline follow."""

    clusters: tuple[tuple[str, tuple[NodeAddress, ...]], ...]

    @staticmethod
    def of(sim: SimNodes) -> Fleet:
        found = []
        for cluster in sim.clusters:
            nodes = tuple(NodeAddress(*SimNodes.address(n)) for n in cluster.nodes)
            found.append((cluster.name, nodes))
        return Fleet(tuple(found))

    @staticmethod
    def writer_hostgroup(index: int) -> int:
        return 1000 + 10 * index

    def nodes(self, name: str) -> tuple[NodeAddress, ...]:
        return dict(self.clusters)[name]


def seed(admin: AdminClient, fleet: Fleet) -> None:
    """Every cluster's roster in its template hostgroups, weights falling in node order."""
    rows = []
    hostgroups = []
    for index, (_, nodes) in enumerate(fleet.clusters):
        writer = Fleet.writer_hostgroup(index)
        config_writer, config_reader = 8000 + writer, 8000 + writer + 1
        hostgroups += [writer, writer + 1, writer + 2, writer + 3, config_writer, config_reader]
        for rank, node in enumerate(nodes):
            rows.append(ServerRow(config_writer, node.host, node.port, weight=1000 - rank))
            rows.append(ServerRow(config_reader, node.host, node.port, weight=100))
    admin.stage(hostgroups, rows)
    admin.execute("LOAD MYSQL SERVERS TO RUNTIME")


def write_config(
    proxysql: Any, fleet: Fleet, where: Path, interval_ms: int, watch_ms: int = 40
) -> Path:
    """`where/checker.toml` (mode 600) naming every cluster of the fleet, TLS off (the fleet
    offers none), passwords in files beside it."""
    where.mkdir(parents=True, exist_ok=True)
    max_runtime_ms = min(interval_ms - 100, 1800)
    (where / "admin.pw").write_text(proxysql.admin_password + "\n")
    (where / "monitor.pw").write_text(MONITOR_PASSWORD + "\n")
    lines = [
        "[proxysql]",
        f'host = "{proxysql.admin_host}"',
        f"port = {proxysql.admin_port}",
        f'user = "{proxysql.admin_user}"',
        f'password_file = "{where / "admin.pw"}"',
        'ssl_mode = "disabled"',
        "[monitor]",
        f'user = "{MONITOR_USER}"',
        f'password_file = "{where / "monitor.pw"}"',
        'ssl_mode = "disabled"',
        # within the pass's time at a short interval too (the configuration refuses more)
        f"connect_timeout_ms = {min(300, max_runtime_ms // 2)}",
        f"read_timeout_ms = {min(400, max_runtime_ms // 2)}",
        "[run]",
        f'state_dir = "{where / "state"}"',
        f"interval_ms = {interval_ms}",
        f"watch_interval_ms = {watch_ms}",
        f"max_runtime_ms = {max_runtime_ms}",
        'log_format = "json"',
    ]
    for index, (name, _) in enumerate(fleet.clusters):
        writer = Fleet.writer_hostgroup(index)
        lines += [
            "[[cluster]]",
            f'name = "{name}"',
            f"writer_hostgroup = {writer}",
            f"reader_hostgroup = {writer + 1}",
            f"backup_writer_hostgroup = {writer + 2}",
            f"offline_hostgroup = {writer + 3}",
        ]
    path = where / "checker.toml"
    path.write_text("\n".join(lines) + "\n")
    path.chmod(0o600)
    return path
