"""The [node_admin] account: the one connection the checker opens to act on a node itself
(a Galera eviction, a GR switchover), never to probe it. Opened when needed, closed after."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from checker_core.core.model import NodeAddress
from checker_core.edges import tls

if TYPE_CHECKING:
    import pymysql

    from checker_core.core.settings import Endpoint


class NoNodeAdmin(Exception):
    """An action on a node was asked for and no [node_admin] account is configured."""


@contextlib.contextmanager
def session(
    account: Endpoint | None,
    node: NodeAddress,
    *,
    timeout_s: float | None = None,
    wait_s: float | None = None,
) -> Iterator[pymysql.connections.Connection[Any]]:
    """A connection to `node` as node_admin (autocommit); `timeout_s` caps the account's own
    timeouts (an action inside a pass must end before the pass does); `wait_s` replaces its read
    timeout for a statement known to wait (group_replication_set_as_primary waits for the old
    primary's transactions)."""
    if account is None:
        raise NoNodeAdmin("no [node_admin] account is configured")
    connect_s = account.connect_timeout_ms / 1000
    read_s = account.read_timeout_ms / 1000
    if timeout_s is not None:
        connect_s, read_s = min(connect_s, timeout_s), min(read_s, timeout_s)
    if wait_s is not None:
        read_s = wait_s
    conn = tls.connect_node(
        account, f"node {node} as node_admin", node, max(0.05, connect_s), max(0.05, read_s)
    )
    try:
        yield conn
    finally:
        with contextlib.suppress(Exception):
            conn.close()
