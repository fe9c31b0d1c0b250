"""What the benchmarks share: the lab (started if needed, stopped if started), configs, timing."""

from __future__ import annotations

import shutil
import statistics
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any

import pymysql

from checker_core.core.model import Hostgroups, NodeAddress, ServerRow, ServerStatus
from checker_core.core.schema import Checker, SslMode
from checker_core.core.settings import Endpoint, ProxySQLSettings, Secret, Tls
from checker_core.edges.proxysql import AdminClient
from checker_core.passes.fleet import Fleet
from checker_core.passes.plugin import CheckerKind
from checker_core.passes.result import Mode
from checker_core.settings.config import load
from tests.integration.rig import as_configured
from tests.lab.accounts import MONITOR_PASSWORD, MONITOR_USER
from tests.lab.checker_config import write_checker_config
from tests.lab.paths import lab_dir
from tests.lab.proxysql import ProxySQLLab

# the simulated fleet's monitor account (tests/lab/simnodes.py), no TLS, 2 s timeouts
SIM_MONITOR = Endpoint("monitor", Secret("monitor"), Tls(SslMode.DISABLED), 2000, 2000)

HG = Hostgroups(
    writer=100, reader=101, backup_writer=102, offline=9100, config_writer=8100, config_reader=8101
)


def median_ms(action: Callable[[], object], runs: int) -> float:
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        action()
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


def baseline_ms(nodes: list[NodeAddress], query: str, runs: int) -> float:
    """One bare PyMySQL connect + query to each node, one after another: the ratio's unit."""

    def once() -> None:
        for node in nodes:
            conn = pymysql.connect(
                host=node.host, port=node.port, user=MONITOR_USER, password=MONITOR_PASSWORD
            )
            with conn.cursor() as cur:
                cur.execute(query)
                cur.fetchall()
            conn.close()

    return median_ms(once, runs)


def scheduler_pass_ms(executable: str, config: Path, runs: int) -> float:
    """`CHECKER --config F run` from process start to exit, as ProxySQL's scheduler runs it."""

    def once() -> None:
        done = subprocess.run(
            [executable, f"--config={config}", "run"], env={}, capture_output=True, check=False
        )
        assert done.returncode == 0, done.stderr

    once()  # bytecode caches written, roster placed
    return median_ms(once, runs)


def daemon_pass_ms(config: Path, checker: Checker, kind: CheckerKind, runs: int) -> float:
    """One pass with the daemon's persistent connections, after a first one to open them."""
    fleet = Fleet(load(config, checker, env={}), kind, persistent=True)
    try:
        fleet.run_all(Mode.APPLY)
        return median_ms(lambda: fleet.run_all(Mode.APPLY), runs)
    finally:
        fleet.close()


def admin_client(proxysql: ProxySQLLab) -> AdminClient:
    endpoint = Endpoint(proxysql.admin_user, Secret(proxysql.admin_password), Tls(), 2000, 5000)
    return AdminClient.connect(ProxySQLSettings(proxysql.admin_host, proxysql.admin_port, endpoint))


class Lab:
    """The cluster lab and the ProxySQL endpoint for a benchmark; stops what it started."""

    def __init__(self, galera_lab: Any = None, gr_lab: Any = None) -> None:
        self.galera = galera_lab
        self.gr = gr_lab
        self.proxysql = ProxySQLLab()
        self._started: list[Any] = []

    def __enter__(self) -> Lab:
        for cluster_lab in (self.galera, self.gr):
            if cluster_lab is not None:
                if not _is_up(cluster_lab):
                    self._started.append(cluster_lab)
                cluster_lab.up()
        if self.proxysql.up():
            self._started.append(self.proxysql)
        self.proxysql.reset()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        for started in reversed(self._started):
            started.down()

    def galera_nodes(self) -> list[NodeAddress]:
        return [NodeAddress(n.host, n.port) for n in self.galera.nodes]

    def gr_nodes(self) -> list[NodeAddress]:
        return [NodeAddress(m.host, m.port) for m in self.gr.members]

    def writers(self, admin: AdminClient) -> set[NodeAddress]:
        """The ONLINE writers, a row ProxySQL's own monitor SHUNNED counted as the ONLINE it
        stands for (that status is ProxySQL's, not the checker's doing)."""
        rows = as_configured(admin.read_rows(HG.managed).runtime)
        return {
            r.node for r in rows if r.hostgroup_id == HG.writer and r.status is ServerStatus.ONLINE
        }

    def seed(self, nodes: list[NodeAddress]) -> None:
        admin = admin_client(self.proxysql)
        weights = (1000, 500, 100)
        rows = [
            ServerRow(HG.config_writer, n.host, n.port, weight=w)
            for n, w in zip(nodes, weights, strict=True)
        ]
        rows += [ServerRow(HG.config_reader, n.host, n.port, weight=100) for n in nodes]
        admin.stage(HG.all, rows)
        admin.execute("LOAD MYSQL SERVERS TO RUNTIME")
        admin.close()

    @staticmethod
    def executable(command: str) -> str:
        found = shutil.which(command)
        assert found is not None, f"{command} is not installed: pip install -e ."
        return str(Path(found).resolve())


def _is_up(cluster_lab: Any) -> bool:
    """Whether any server of the lab runs (GaleraLab lists them; GrLab answers per member)."""
    if hasattr(cluster_lab, "running"):
        return bool(cluster_lab.running())
    return any(cluster_lab.pid(m.index) is not None for m in cluster_lab.members)


def write_config(lab: Lab, name: str, interval_ms: int, max_runtime_ms: int) -> Path:
    nodes = lab.galera_nodes() if name.startswith("galera") else lab.gr_nodes()
    lab.seed(nodes)
    run = {"interval_ms": interval_ms, "max_runtime_ms": max_runtime_ms, "log_format": "json"}
    timeouts = (min(300, max_runtime_ms // 2), min(500, max_runtime_ms // 2))
    where = lab_dir() / "bench" / name
    return write_checker_config(where, lab.proxysql, HG, "bench", run, monitor_timeouts_ms=timeouts)
