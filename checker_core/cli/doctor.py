"""`doctor`: everything around the checker that decides whether writes reach the writer, read
and judged, nothing changed. One line per finding, with its fix; exit 0 when nothing stops the
writes (warnings may be said), 2 when something does, 1 when ProxySQL's admin cannot be read."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from checker_core.cli.common import Invocation, config_options, fail, load_settings, run_passes
from checker_core.exitcodes import Exit

if TYPE_CHECKING:
    from checker_core.core.doctor import Finding
    from checker_core.core.model import NodeAddress
    from checker_core.core.settings import Settings
    from checker_core.edges.proxysql import AdminClient
    from checker_core.passes.result import PassResult


@click.command("doctor")
@config_options
@click.pass_obj
def doctor_command(inv: Invocation, config: Path | None, overrides: tuple[str, ...]) -> None:
    """Check what routes writes around the checker: users, query rules, monitor accounts,
    ProxySQL's monitor and native managers, the scheduler, the ProxySQL Cluster's peers.
    Reads only."""
    from checker_core.core.doctor import Severity
    from checker_core.edges.admin_errors import AdminError

    settings = load_settings(inv.merged(config, overrides))
    try:
        found, nodes, account = _proxysql_findings(settings)
    except AdminError as exc:
        fail(f"doctor: ProxySQL's admin was not read ({exc}); nothing checked", Exit.FAILED)
    found += _login_findings(account, nodes)
    found += _probe_findings(run_passes(inv, settings, "status"), inv.checker.value)
    for finding in found:
        click.echo(finding.line())
    problems = sum(1 for f in found if f.severity is Severity.PROBLEM)
    warnings = len(found) - problems
    if not found:
        click.echo(
            f"doctor: nothing found ({len(nodes)} node(s), {len(settings.clusters)} cluster(s))"
        )
        return
    click.echo(f"doctor: {problems} problem(s), {warnings} warning(s)")
    if problems:
        raise SystemExit(int(Exit.BAD_INPUT))


def _proxysql_findings(settings: Settings) -> tuple[list[Finding], list[NodeAddress], object]:
    """What ProxySQL's admin shows; the roster's nodes; ProxySQL's monitor account."""
    from checker_core.core.doctor import write_findings
    from checker_core.core.doctor_nodes import monitor_findings
    from checker_core.edges import doctor_reads as reads
    from checker_core.edges.proxysql import AdminClient

    with AdminClient.connect(settings.proxysql) as admin:
        found = write_findings(reads.users(admin), reads.rules(admin), settings.clusters)
        found += _native_findings(admin, settings)
        variables = reads.monitor_variables(admin)
        found += monitor_findings(variables)
        found += _scheduler_findings(admin, settings)
        found += _peer_findings(admin)
        nodes = _roster(admin, settings)
    return found, nodes, reads.monitor_account(variables, settings.monitor)


def _native_findings(admin: AdminClient, settings: Settings) -> list[Finding]:
    from checker_core.core.doctor import Finding, Severity
    from checker_core.edges import native

    rows = native.read(admin)
    found = []
    for cluster in settings.clusters:
        conflict = native.conflict_and_fix(cluster, rows)
        if conflict is not None:
            what, fix = conflict
            found.append(Finding(Severity.PROBLEM, f"cluster {cluster.name}", what, fix))
    return found


def _scheduler_findings(admin: AdminClient, settings: Settings) -> list[Finding]:
    from checker_core.core.doctor import Finding, Severity
    from checker_core.scheduler import legacy_warnings, rival_problem, rival_rows, scheduled_rows

    rows = scheduled_rows(admin)
    config = settings.source.resolve()
    said = [
        *legacy_warnings(rows),
        *(
            rival_problem(r, other, config)
            for r, other in rival_rows(rows, settings.checker, config)
        ),
    ]
    found = []
    for text in said:
        what, _, fix = text.rpartition("; ")
        found.append(Finding(Severity.PROBLEM, "ProxySQL's scheduler", what, fix))
    return found


def _peer_findings(admin: AdminClient) -> list[Finding]:
    from checker_core.core.doctor import peer_findings
    from checker_core.edges import doctor_reads as reads

    return peer_findings(reads.own_checksums(admin), reads.peer_checksums(admin))


def _roster(admin: AdminClient, settings: Settings) -> list[NodeAddress]:
    nodes: set[NodeAddress] = set()
    for cluster in settings.clusters:
        rows = admin.read_rows(cluster.hostgroups.all)
        nodes.update(r.node for r in (*rows.runtime, *rows.staging))
    return sorted(nodes)


def _login_findings(account: object, nodes: list[NodeAddress]) -> list[Finding]:
    from checker_core.core.doctor_nodes import login_findings
    from checker_core.core.settings import Endpoint
    from checker_core.edges.doctor_reads import monitor_login

    if not isinstance(account, Endpoint):
        return []
    return login_findings(account.user, (monitor_login(account, node) for node in nodes))


def _probe_findings(results: list[PassResult], checker: str) -> list[Finding]:
    from checker_core.core.doctor_nodes import ProbeSeen, probe_findings

    seen = [
        ProbeSeen(node, probe.error, not _no_wsrep(probe.facts))
        for result in results
        for node, probe in sorted(result.probes.items())
    ]
    return probe_findings(checker, seen)


def _no_wsrep(facts: object) -> bool:
    get = getattr(facts, "get", None)
    return callable(get) and get("wsrep_cluster_status") is None
