"""Fixtures of the lab's real clusters and ProxySQL admin endpoint (session-scoped servers,
per-test healthy state)."""

from tests.lab.galera_fixtures import galera, galera_lab
from tests.lab.gr_fixtures import gr, gr_lab
from tests.lab.proxysql_fixtures import proxysql_admin, proxysql_lab

__all__ = ["galera", "galera_lab", "gr", "gr_lab", "proxysql_admin", "proxysql_lab"]
