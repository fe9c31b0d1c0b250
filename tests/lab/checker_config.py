"""A checker configuration file pointing at the lab (the demo and the benchmarks use it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from checker_core.core.model import Hostgroups
from tests.lab.accounts import (
    MONITOR_PASSWORD,
    MONITOR_USER,
    NODE_ADMIN_PASSWORD,
    NODE_ADMIN_USER,
)


def write_checker_config(
    where: Path,
    proxysql: Any,
    hostgroups: Hostgroups,
    cluster: str,
    run: dict[str, object],
    *,
    monitor_timeouts_ms: tuple[int, int] = (300, 400),
    node_admin: bool = False,
    cluster_extra: dict[str, object] | None = None,
) -> Path:
    """`where/checker.toml` (mode 600) with the passwords in files beside it."""
    where.mkdir(parents=True, exist_ok=True)
    (where / "admin.pw").write_text(proxysql.admin_password + "\n")
    (where / "monitor.pw").write_text(MONITOR_PASSWORD + "\n")
    (where / "node_admin.pw").write_text(NODE_ADMIN_PASSWORD + "\n")
    connect_ms, read_ms = monitor_timeouts_ms
    lines = [
        "[proxysql]",
        f'host = "{proxysql.admin_host}"',
        f"port = {proxysql.admin_port}",
        f'user = "{proxysql.admin_user}"',
        f'password_file = "{where / "admin.pw"}"',
        "[monitor]",
        f'user = "{MONITOR_USER}"',
        f'password_file = "{where / "monitor.pw"}"',
        f"connect_timeout_ms = {connect_ms}",
        f"read_timeout_ms = {read_ms}",
        *(
            [
                "[node_admin]",
                f'user = "{NODE_ADMIN_USER}"',
                f'password_file = "{where / "node_admin.pw"}"',
            ]
            if node_admin
            else []
        ),
        "[run]",
        f'state_dir = "{where / "state"}"',
        *(f"{k} = {v!r}".replace("'", '"') for k, v in run.items()),
        "[[cluster]]",
        f'name = "{cluster}"',
        f"writer_hostgroup = {hostgroups.writer}",
        f"reader_hostgroup = {hostgroups.reader}",
        f"backup_writer_hostgroup = {hostgroups.backup_writer}",
        f"offline_hostgroup = {hostgroups.offline}",
        *(
            f"{k} = {v!r}".replace("'", '"').replace("True", "true").replace("False", "false")
            for k, v in (cluster_extra or {}).items()
        ),
    ]
    path = where / "checker.toml"
    path.write_text("\n".join(lines) + "\n")
    path.chmod(0o600)
    return path
