"""pytest fixtures of the lab's ProxySQL admin endpoint (real proxysql if installed, else the
emulator): one endpoint per test session, a known empty configuration for every test."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator

import pytest

from tests.lab.process import LabError
from tests.lab.proxysql import ProxySQLLab, find_proxysql_binary
from tests.lab.require import unavailable


@pytest.fixture(scope="session")
def proxysql_lab() -> Iterator[ProxySQLLab]:
    """The running endpoint. Stopped at the end only if this session started it, so an endpoint
    a human brought up with `python -m tests.lab proxysql up` survives a test run."""
    if find_proxysql_binary() is None and importlib.util.find_spec("mysql_mimic") is None:
        unavailable("no proxysql binary and no mysql-mimic for the admin emulator")
    lab = ProxySQLLab()
    try:
        started = lab.up()
    except LabError as exc:
        unavailable(f"ProxySQL admin endpoint did not come up: {exc}")
    try:
        yield lab
    finally:
        if started:
            lab.down()


@pytest.fixture
def proxysql_admin(proxysql_lab: ProxySQLLab) -> Iterator[ProxySQLLab]:
    """The endpoint with no servers, scheduler jobs, Galera/GR hostgroups or cluster peers in
    main, runtime and disk."""
    proxysql_lab.reset()
    yield proxysql_lab


@pytest.fixture(scope="module")
def private_proxysql(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProxySQLLab]:
    """An endpoint of the test module's own (the emulator, or a real proxysql, on free ports)
    under a directory of its own: apart from the lab's, so it needs no lab lock. Empty it per
    test with reset()."""
    lab = ProxySQLLab(tmp_path_factory.mktemp("proxysql-admin"))
    try:
        lab.up()
    except LabError as exc:
        unavailable(f"a private ProxySQL admin endpoint did not come up: {exc}")
    try:
        yield lab
    finally:
        lab.down()
