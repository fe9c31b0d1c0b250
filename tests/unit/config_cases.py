"""Checker config texts the unit tests share, and a Galera pass runner built from one."""

from __future__ import annotations

from pathlib import Path

from checker_core.core.schema import Checker
from checker_core.core.settings import Settings
from checker_core.passes.plugin import CheckerKind
from checker_core.passes.ports import Ports
from checker_core.passes.runner import PassRunner
from checker_core.settings.config import load
from galera_checker.policy import GaleraPolicy

# the one cluster every config below names (the hostgroups of galera_cases.HG)
MAIN_CLUSTER = """
[[cluster]]
name = "main"
writer_hostgroup = 100
reader_hostgroup = 101
backup_writer_hostgroup = 102
offline_hostgroup = 9100
"""

# a whole config; "{state}" is the state directory (config_file puts one under tmp_path)
CONFIG = (
    """
[proxysql]
host = "127.0.0.1"
port = 6032
user = "admin"
password = "admin-pw"

[monitor]
user = "monitor"
password = "monitor-pw"

[run]
state_dir = "{state}"
"""
    + MAIN_CLUSTER
)


def config_file(tmp_path: Path, text: str) -> Path:
    """`text` as tmp_path/checker.toml (owner-only), its "{state}" under tmp_path."""
    path = tmp_path / "checker.toml"
    path.write_text(text.replace("{state}", str(tmp_path / "state")))
    path.chmod(0o600)
    return path


def galera_settings(tmp_path: Path, proxysql: str = "") -> Settings:
    """CONFIG's settings for a Galera checker, with `proxysql` lines added to its [proxysql]."""
    text = CONFIG.replace("[proxysql]\n", f"[proxysql]\n{proxysql}\n", 1)
    return load(config_file(tmp_path, text), Checker.GALERA, env={})


def galera_kind() -> CheckerKind:
    return CheckerKind(Checker.GALERA, GaleraPolicy(), repr)


def galera_runner(
    tmp_path: Path,
    persistent: bool = False,
    proxysql: str = "",
    *,
    settings: Settings | None = None,
    ports: Ports | None = None,
) -> PassRunner:
    """A Galera checker's runner on CONFIG (or on `settings`), with `proxysql` lines added to
    its [proxysql]; `ports`: its fakes (tests.unit.fakes.ports)."""
    settings = settings or galera_settings(tmp_path, proxysql)
    return PassRunner(settings, galera_kind(), persistent, ports=ports)
