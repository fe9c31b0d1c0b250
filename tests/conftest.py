"""Fixtures of the lab's real clusters and ProxySQL admin endpoint (session-scoped servers,
per-test healthy state), for every test directory that asks for them."""

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
