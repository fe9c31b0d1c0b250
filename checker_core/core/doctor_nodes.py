"""What `doctor` judges on the nodes and of ProxySQL's own monitor, from records read elsewhere:
ProxySQL's monitor switched off, its account's login and grants on each node, the checker's own
probe of each node. Pure."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from checker_core.core.doctor import Finding, Severity
from checker_core.core.model import NodeAddress


@dataclass(frozen=True, slots=True)
class MonitorLogin:
    """ProxySQL's monitor account on one node: refused or not, and what its grants allow."""

    node: NodeAddress
    error: str | None  # the login's failure, in words
    replication_client: bool = False


@dataclass(frozen=True, slots=True)
class ProbeSeen:
    """The checker's own probe of one node, as `doctor` needs it."""

    node: NodeAddress
    error: str | None
    galera_status: bool = True  # the answer held wsrep_cluster_status (Galera's probe)


def monitor_findings(variables: Mapping[str, str]) -> list[Finding]:
    """ProxySQL's own monitor, as runtime_global_variables has it."""
    if variables.get("mysql-monitor_enabled", "true").lower() in ("true", "1"):
        return []
    return [
        Finding(
            Severity.WARNING,
            "ProxySQL's monitor",
            "mysql-monitor_enabled is false: ProxySQL neither pings its servers nor shuns one "
            "that stops answering between the checker's passes, and its connection pool keeps "
            "dead connections",
            "SET mysql-monitor_enabled = 'true'; LOAD MYSQL VARIABLES TO RUNTIME; "
            "SAVE MYSQL VARIABLES TO DISK",
        )
    ]


def login_findings(user: str, logins: Iterable[MonitorLogin]) -> list[Finding]:
    """ProxySQL's own monitor account on every node: a server its monitor cannot log in to is
    shunned by ProxySQL, whatever the checker decides."""
    found = []
    for login in logins:
        subject = f"node {login.node}"
        if login.error is not None:
            found.append(
                Finding(
                    Severity.PROBLEM,
                    subject,
                    f"ProxySQL's monitor account {user} cannot log in ({login.error}): "
                    "ProxySQL shuns a server its monitor cannot reach",
                    "create the account on the node for ProxySQL's address with the password "
                    "of mysql-monitor_password, or correct those variables",
                )
            )
        elif not login.replication_client:
            found.append(
                Finding(
                    Severity.WARNING,
                    subject,
                    f"ProxySQL's monitor account {user} has no REPLICATION CLIENT: "
                    "ProxySQL's replication checks (max_replication_lag) fail on this node",
                    f"GRANT REPLICATION CLIENT ON *.* TO {user} (on one node: grants replicate)",
                )
            )
    return found


def probe_findings(checker: str, probes: Iterable[ProbeSeen]) -> list[Finding]:
    """The checker's own [monitor] account, as a status pass probes with it."""
    found = []
    for probe in probes:
        subject = f"node {probe.node}"
        if probe.error is not None:
            fix = (
                "GRANT SELECT ON performance_schema.* to the [monitor] account"
                if checker == "gr" and "1142" in probe.error
                else "check the [monitor] account on the node, and the route from this host"
            )
            found.append(
                Finding(
                    Severity.PROBLEM,
                    subject,
                    f"the checker's probe as [monitor] failed: {probe.error}",
                    fix,
                )
            )
        elif checker == "galera" and not probe.galera_status:
            found.append(
                Finding(
                    Severity.PROBLEM,
                    subject,
                    "the checker's probe as [monitor] reads no Galera status "
                    "(wsrep_cluster_status): wsrep is off, or this is no Galera node",
                    "check wsrep_on and the provider on the node, or take it out of the roster",
                )
            )
    return found
