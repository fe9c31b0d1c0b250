"""What `doctor` reads, and only reads: ProxySQL's users, query rules, monitor variables and
ProxySQL Cluster checksums through the admin; on every node, a login as ProxySQL's own monitor
account and its grants."""

from __future__ import annotations

import re
from collections.abc import Sequence

from checker_core.core.doctor import FrontendUser, QueryRule
from checker_core.core.doctor_nodes import MonitorLogin
from checker_core.core.model import NodeAddress
from checker_core.core.settings import Endpoint, Secret
from checker_core.edges import tls
from checker_core.edges.proxysql import AdminClient

USERS = (
    "SELECT username, default_hostgroup, default_schema FROM runtime_mysql_users "
    "WHERE frontend = 1 AND active = 1 ORDER BY username"
)
RULES = (
    "SELECT rule_id, username, schemaname, flagIN, flagOUT, match_digest, match_pattern, "
    "negate_match_pattern, re_modifiers, destination_hostgroup, apply, error_msg, digest, "
    "client_addr, proxy_addr, proxy_port FROM runtime_mysql_query_rules WHERE active = 1 "
    "ORDER BY rule_id"
)
MONITOR_VARIABLES = ("mysql-monitor_enabled", "mysql-monitor_username", "mysql-monitor_password")
# what a grant line must name for ProxySQL's monitor to read replication state (MariaDB names
# REPLICATION CLIENT BINLOG MONITOR since 10.5; the newer split names count too)
_REPLICATION = re.compile(
    r"\b(ALL PRIVILEGES|REPLICATION CLIENT|BINLOG MONITOR|SLAVE MONITOR|REPLICA MONITOR|SUPER)\b",
    re.IGNORECASE,
)


def users(admin: AdminClient) -> list[FrontendUser]:
    seen: dict[str, FrontendUser] = {}
    for name, hostgroup, schema in admin.execute(USERS):
        seen.setdefault(str(name), FrontendUser(str(name), int(hostgroup), _text(schema)))
    return list(seen.values())


def rules(admin: AdminClient) -> list[QueryRule]:
    found = []
    for row in admin.execute(RULES):
        (rule_id, user, schema, flag_in, flag_out, digest_re, pattern, negate, modifiers) = row[:9]
        destination, apply, error, digest, client, proxy_addr, proxy_port = row[9:]
        only = [
            f"{name} {value}"
            for name, value in (
                ("client_addr", client),
                ("proxy_addr", proxy_addr),
                ("proxy_port", proxy_port),
            )
            if _text(value) is not None
        ]
        found.append(
            QueryRule(
                rule_id=int(rule_id),
                username=_text(user),
                schemaname=_text(schema),
                flag_in=int(flag_in or 0),
                flag_out=_number(flag_out),
                match_digest=_text(digest_re),
                match_pattern=_text(pattern),
                negate_match_pattern=bool(int(negate or 0)),
                caseless="CASELESS" in str(modifiers or "").upper(),
                destination_hostgroup=_number(destination),
                apply=bool(int(apply or 0)),
                error_msg=_text(error),
                digest=_text(digest),
                only_for=", ".join(only) or None,
            )
        )
    return found


def monitor_variables(admin: AdminClient) -> dict[str, str]:
    """ProxySQL's own monitor as it runs (runtime_global_variables); the password is kept to
    log in with, never said."""
    return admin.read_runtime_variables(MONITOR_VARIABLES)


def monitor_login(account: Endpoint, node: NodeAddress) -> MonitorLogin:
    """A login as ProxySQL's monitor account and its SHOW GRANTS; nothing else is asked."""
    import pymysql

    try:
        conn = tls.connect_node(
            account,
            f"node {node} as ProxySQL's monitor account",
            node,
            account.connect_timeout_ms / 1000,
            account.read_timeout_ms / 1000,
        )
    except pymysql.MySQLError as exc:
        return MonitorLogin(node, _said(exc))
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW GRANTS")
            grants = [str(row[0]) for row in cur.fetchall()]
    except pymysql.MySQLError as exc:
        return MonitorLogin(node, _said(exc))
    finally:
        conn.close()
    return MonitorLogin(node, None, any(_REPLICATION.search(g) for g in grants))


def monitor_account(variables: dict[str, str], like: Endpoint) -> Endpoint | None:
    user = variables.get("mysql-monitor_username")
    if not user:
        return None
    password = Secret(variables.get("mysql-monitor_password", ""))
    return Endpoint(user, password, like.tls, like.connect_timeout_ms, like.read_timeout_ms)


def peer_checksums(admin: AdminClient) -> list[tuple[str, str, str]]:
    """(peer, module, checksum) of each ProxySQL Cluster peer's mysql_servers as this proxy
    last saw it; none for a proxy alone."""
    rows = admin.execute(
        "SELECT hostname, port, name, checksum FROM stats_proxysql_servers_checksums "
        "WHERE name IN ('mysql_servers', 'mysql_servers_v2')"
    )
    return [(f"{host}:{port}", str(name), str(checksum)) for host, port, name, checksum in rows]


def own_checksums(admin: AdminClient) -> dict[str, str]:
    rows = admin.execute(
        "SELECT name, checksum FROM runtime_checksums_values "
        "WHERE name IN ('mysql_servers', 'mysql_servers_v2')"
    )
    return {str(name): str(checksum) for name, checksum in rows}


def _said(exc: BaseException) -> str:
    args: Sequence[object] = getattr(exc, "args", ())
    if len(args) >= 2:
        return f"error {args[0]}: {args[1]}"
    return str(exc)


def _text(value: object) -> str | None:
    text = None if value is None else str(value)
    return text if text else None


def _number(value: object) -> int | None:
    text = _text(value)
    return int(text) if text is not None and text.lstrip("-").isdigit() else None
