"""What `doctor` judges around the checker, from records read elsewhere: where ProxySQL sends each
user's writes (its query rules, as ProxySQL applies them), and what each finding is. Pure."""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from checker_core.core.settings import ClusterSettings


class Severity(enum.Enum):
    PROBLEM = ("problem", "writes may not reach the writer, or a checker cannot do its work")
    WARNING = ("warning", "worth a look; writes still reach the writer")

    def __init__(self, label: str, reason: str) -> None:
        self.label = label
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Finding:
    """One thing found around the checker, with its fix: one line of `doctor`."""

    severity: Severity
    subject: str  # what it is about: a user, a rule, a node, a variable
    text: str
    fix: str

    def line(self) -> str:
        return f"{self.severity.label}: {self.subject}: {self.text}; fix: {self.fix}"


@dataclass(frozen=True, slots=True)
class FrontendUser:
    """A row of runtime_mysql_users that clients log in with (frontend, active)."""

    name: str
    default_hostgroup: int
    default_schema: str | None


@dataclass(frozen=True, slots=True)
class QueryRule:
    """An active row of runtime_mysql_query_rules, with what decides whether it matches."""

    rule_id: int
    username: str | None = None
    schemaname: str | None = None
    flag_in: int = 0
    flag_out: int | None = None
    match_digest: str | None = None
    match_pattern: str | None = None
    negate_match_pattern: bool = False
    caseless: bool = True  # re_modifiers has CASELESS (ProxySQL's default)
    destination_hostgroup: int | None = None
    apply: bool = False
    error_msg: str | None = None
    digest: str | None = None  # a digest hash: matched only by the very statement
    # set on a rule that matches only some clients (client_addr, proxy_addr, proxy_port)
    only_for: str | None = None


@dataclass(frozen=True, slots=True)
class Statement:
    """A write as a client sends it, with the digest text ProxySQL makes of it."""

    kind: str  # as a line names it, with its article: "an INSERT"
    query: str
    digest: str


WRITES = (
    Statement("an INSERT", "INSERT INTO t (a) VALUES (1)", "INSERT INTO t (a) VALUES (?)"),
    Statement("an UPDATE", "UPDATE t SET a = 1 WHERE id = 2", "UPDATE t SET a = ? WHERE id = ?"),
    Statement("a DELETE", "DELETE FROM t WHERE id = 2", "DELETE FROM t WHERE id = ?"),
    Statement(
        "a SELECT ... FOR UPDATE",
        "SELECT a FROM t WHERE id = 2 FOR UPDATE",
        "SELECT a FROM t WHERE id = ? FOR UPDATE",
    ),
)


@dataclass(frozen=True, slots=True)
class Routed:
    """Where ProxySQL sends a statement: a hostgroup (or an error), and the rules that did it."""

    hostgroup: int
    by: tuple[QueryRule, ...]  # the matching rules, in order; empty: the default hostgroup
    error: str | None = None
    unsure: tuple[str, ...] = ()  # rules that depend on what the client is (its address...)

    def describe(self) -> str:
        if not self.by:
            return "by its default_hostgroup"
        rules = ", ".join(f"rule {r.rule_id}{_rule_match(r)}" for r in self.by)
        return f"by query {rules}"


def route(user: FrontendUser, statement: Statement, rules: Sequence[QueryRule]) -> Routed:
    """What ProxySQL's query processor does with the statement: active rules in rule_id order,
    those of the current flagIN only (0 first, then each flagOUT), each matching one setting
    the destination, an `apply` ending the walk, an error_msg answering the client instead."""
    flag = 0
    destination: int | None = None
    matched: list[QueryRule] = []
    unsure: list[str] = []
    for rule in sorted(rules, key=lambda r: r.rule_id):
        if rule.flag_in != flag or not _matches(rule, user, statement):
            continue
        matched.append(rule)
        if rule.only_for:
            unsure.append(f"rule {rule.rule_id} ({rule.only_for})")
        if rule.error_msg:
            return Routed(-1, tuple(matched), rule.error_msg, tuple(unsure))
        if rule.flag_out is not None:
            flag = rule.flag_out
        if rule.destination_hostgroup is not None:
            destination = rule.destination_hostgroup
        if rule.apply:
            break
    hostgroup = destination if destination is not None else user.default_hostgroup
    return Routed(hostgroup, tuple(matched) if destination is not None else (), None, tuple(unsure))


def _matches(rule: QueryRule, user: FrontendUser, statement: Statement) -> bool:
    if rule.username is not None and rule.username != user.name:
        return False
    if rule.schemaname is not None and rule.schemaname != user.default_schema:
        return False
    if rule.digest is not None:
        return False  # a digest hash names one statement of the application, not ours
    flags = re.IGNORECASE if rule.caseless else 0
    if rule.match_digest is not None and not _search(rule.match_digest, statement.digest, flags):
        return False
    if rule.match_pattern is not None:
        found = _search(rule.match_pattern, statement.query, flags)
        if found == rule.negate_match_pattern:
            return False
    return True


def _search(pattern: str, text: str, flags: int) -> bool:
    try:
        return re.search(pattern, text, flags) is not None
    except re.error:
        return False  # a pattern Python cannot read (RE2 and PCRE differ): said unmatched


def _rule_match(rule: QueryRule) -> str:
    if rule.match_digest is not None:
        return f" (match_digest {rule.match_digest!r})"
    if rule.match_pattern is not None:
        return f" (match_pattern {rule.match_pattern!r})"
    return ""


def write_findings(
    users: Iterable[FrontendUser],
    rules: Sequence[QueryRule],
    clusters: Sequence[ClusterSettings],
) -> list[Finding]:
    """Each user's writes that would not land in a managed writer hostgroup: one line per
    write sent to a managed hostgroup that is no writer's (or refused), and one per user whose
    writes go by default where no cluster of this configuration is managed."""
    writers = {c.hostgroups.writer: c.name for c in clusters}
    roles = _roles(clusters)
    found: list[Finding] = []
    for user in users:
        lands = {s.kind: route(user, s, rules) for s in WRITES}
        for kind, routed in lands.items():
            finding = _landing(user, kind, routed, writers=writers, roles=roles)
            if finding is not None:
                found.append(finding)
        unmanaged = [k for k, r in lands.items() if not r.by and r.hostgroup not in roles]
        if unmanaged and user.default_hostgroup not in roles:
            found.append(_unmanaged(user, writers))
    return found


def _roles(clusters: Sequence[ClusterSettings]) -> dict[int, str]:
    roles: dict[int, str] = {}
    for cluster in clusters:
        hg = cluster.hostgroups
        for hostgroup, role in (
            (hg.writer, "writer"),
            (hg.reader, "reader"),
            (hg.backup_writer, "backup writer"),
            (hg.offline, "offline"),
            (hg.config_writer, "writer template"),
            (hg.config_reader, "reader template"),
        ):
            roles[hostgroup] = f"the {role} hostgroup of cluster {cluster.name}"
    return roles


def _landing(
    user: FrontendUser,
    kind: str,
    routed: Routed,
    *,
    writers: Mapping[int, str],
    roles: Mapping[int, str],
) -> Finding | None:
    subject = f"user {user.name}"
    if routed.error is not None:
        return Finding(
            Severity.PROBLEM,
            subject,
            f"{kind} is refused {routed.describe()}: {routed.error}",
            f"deactivate rule {routed.by[-1].rule_id} or narrow its match",
        )
    hostgroup = routed.hostgroup
    if hostgroup in writers or hostgroup not in roles:
        return None
    target = ", ".join(str(w) for w in writers)
    fix = (
        f"set its default_hostgroup to {target}"
        if not routed.by
        else f"make rule {routed.by[-1].rule_id} send writes to {target}, or put a rule "
        "before it that does"
    )
    unsure = f" (for clients matching {', '.join(routed.unsure)})" if routed.unsure else ""
    return Finding(
        Severity.PROBLEM,
        subject,
        f"{kind} goes to hostgroup {hostgroup}, {roles[hostgroup]}, {routed.describe()}{unsure}",
        fix,
    )


def _unmanaged(user: FrontendUser, writers: Mapping[int, str]) -> Finding:
    return Finding(
        Severity.WARNING,
        f"user {user.name}",
        f"its default_hostgroup {user.default_hostgroup} is no hostgroup a cluster of this "
        "configuration manages: its writes go where no checker moves the writer",
        "if the user writes to a managed cluster, set its default_hostgroup to that cluster's "
        "writer_hostgroup (" + ", ".join(f"{n}: {h}" for h, n in writers.items()) + ")",
    )


# a peer that has loaded no such module yet shows this (or nothing)
_NO_CHECKSUM = ("", "0x0000000000000000")


def peer_findings(own: Mapping[str, str], peers: Iterable[tuple[str, str, str]]) -> list[Finding]:
    """Each ProxySQL Cluster peer whose mysql_servers differ from this proxy's (`own`: module
    -> checksum; `peers`: (peer, module, checksum) as this proxy last saw them)."""
    found = []
    for peer, module, checksum in peers:
        mine = own.get(module)
        if mine is None or checksum in (mine, *_NO_CHECKSUM):
            continue
        found.append(
            Finding(
                Severity.WARNING,
                f"ProxySQL Cluster peer {peer}",
                f"its {module} (checksum {checksum}) differ from this proxy's ({mine}): its "
                "clients are routed by other rows",
                "see why it does not sync (admin-cluster_mysql_servers_diffs_before_sync, "
                "its admin credentials in admin-cluster_username); docs/several-proxies.md",
            )
        )
    return found
