"""Fixtures of the lab's real clusters and ProxySQL admin endpoint (session-scoped servers,
per-test healthy state), for every test directory that asks for them."""

import pytest

from tests.lab.docker_fixtures import checker_image, docker_engine, galera_image
from tests.lab.galera_fixtures import galera, galera_lab
from tests.lab.gr_fixtures import gr, gr_lab
from tests.lab.proxysql_fixtures import private_proxysql, proxysql_admin, proxysql_lab
from tests.lab.rig_fixtures import gr_rig, nodes, rig

__all__ = [
    "checker_image",
    "docker_engine",
    "galera",
    "galera_image",
    "galera_lab",
    "gr",
    "gr_lab",
    "gr_rig",
    "nodes",
    "private_proxysql",
    "proxysql_admin",
    "proxysql_lab",
    "rig",
]


def pytest_report_header(config: pytest.Config) -> str:
    """One line at the start of every run: the ProxySQL its tests talk to."""
    from tests.lab.process import LabError
    from tests.lab.proxysql import which_line

    try:
        return which_line()
    except LabError as exc:
        return f"proxysql: {exc}"


_TIER_SECONDS: dict[str, float] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    parts = report.nodeid.split("/")
    tier = parts[1] if len(parts) > 2 and parts[0] == "tests" else parts[0]
    _TIER_SECONDS[tier] = _TIER_SECONDS.get(tier, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The time each tier took (setup, call and teardown of its tests, lab starts included)."""
    if _TIER_SECONDS:
        spent = ", ".join(
            f"{tier} {seconds:.0f}s" for tier, seconds in sorted(_TIER_SECONDS.items())
        )
        terminalreporter.write_line(f"time per tier: {spent}")
