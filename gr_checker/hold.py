"""Will a hold outlast ProxySQL's patience? (brownout = hold). Pure.

With brownout = hold the writer hostgroup is empty from the moment the dead primary is taken out
until the new primary may write. ProxySQL keeps a query that finds no server in its hostgroup
waiting for at most `mysql-connect_timeout_server_max`, then fails it with error 9001. The wait
is the group's election (XCom suspects a silent member after 5 s, expels it
`group_replication_member_expel_timeout` later, then elects) plus the new primary's backlog
(the brownout). When that can outlast the setting, the checker says so before any failover.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from checker_core.core.model import NodeAddress
from checker_core.core.probes import ProbeResult
from checker_core.core.settings import ClusterSettings
from checker_core.passes.plugin import AdviceInput
from checker_core.passes.result import Advice
from gr_checker.policy import GrFacts

SUSPICION_S = 5.0  # XCom's fixed suspicion of a member it no longer hears
ELECTION_S = 1.0  # the view change and the election once the member is expelled (measured ~0.6-1)
# GR's default expel timeout (8.0.21+), when no member said its own
DEFAULT_EXPEL_S = 5


@dataclass(frozen=True, slots=True)
class Backlog:
    """The largest applier backlog among the members that could be elected."""

    node: NodeAddress
    transactions: int
    seconds: float | None  # at its recent apply rate; None when no rate is known yet


@dataclass(frozen=True, slots=True)
class HoldForecast:
    """How long a GR member may hold writes: the election, the expel timeout, its backlog."""

    election_s: float
    expel_s: int
    backlog: Backlog | None
    limit_ms: int  # mysql-connect_timeout_server_max

    @property
    def worst_s(self) -> float:
        extra = self.backlog.seconds if self.backlog and self.backlog.seconds else 0.0
        return self.election_s + extra

    @property
    def outlasts(self) -> bool:
        return self.worst_s * 1000 >= self.limit_ms

    def describe(self) -> str:
        """The warning when the hold can outlast the setting (the pass line, status,
        check-config); otherwise what the budget is."""
        parts = (
            f"election ~{self.election_s:.0f} s ({SUSPICION_S:.0f} s suspicion + "
            f"group_replication_member_expel_timeout {self.expel_s} s + ~{ELECTION_S:.0f} s)"
        )
        backlog = self.backlog
        if backlog is not None and backlog.transactions:
            if backlog.seconds is None:
                parts += (
                    f" plus the new primary's backlog ({backlog.transactions} transaction(s) "
                    f"on {backlog.node}, rate not known yet)"
                )
            else:
                parts += (
                    f" plus the new primary's backlog (~{backlog.seconds:.1f} s: "
                    f"{backlog.transactions} transaction(s) on {backlog.node})"
                )
        limit = f"mysql-connect_timeout_server_max ({self.limit_ms} ms)"
        if not self.outlasts:
            return f"a failover's hold fits in {limit}: {parts}"
        needed = int(self.worst_s * 1000) + 2000
        return (
            f"a failover's hold can outlast {limit}: {parts}; writes waiting for the new "
            f"primary fail with error 9001 meanwhile. Raise it in ProxySQL (SET "
            f"mysql-connect_timeout_server_max = {needed}; LOAD MYSQL VARIABLES TO RUNTIME; "
            "SAVE MYSQL VARIABLES TO DISK) or lower group_replication_member_expel_timeout"
        )


def backlog_of(
    probes: Mapping[NodeAddress, ProbeResult], rates: Mapping[NodeAddress, float]
) -> Backlog | None:
    """The ONLINE secondary with the largest applier queue (the one an election would leave
    in the longest brownout); its drain time at `rates` (transactions per second)."""
    worst: Backlog | None = None
    for node, probe in sorted(probes.items()):
        facts = probe.facts if isinstance(probe.facts, GrFacts) else None
        me = facts.me if facts is not None else None
        if facts is None or me is None or me.state != "ONLINE" or me.role == "PRIMARY":
            continue
        queue = facts.applier_queue or 0
        if worst is not None and queue <= worst.transactions:
            continue
        rate = rates.get(node)
        seconds = queue / rate if rate else (0.0 if queue == 0 else None)
        worst = Backlog(node, queue, seconds)
    return worst


def forecast(
    probes: Mapping[NodeAddress, ProbeResult],
    rates: Mapping[NodeAddress, float],
    limit_ms: int | None,
) -> HoldForecast | None:
    """None when ProxySQL's setting is unknown or no member answered."""
    if limit_ms is None:
        return None
    expels = [
        p.facts.expel_timeout_s
        for p in probes.values()
        if isinstance(p.facts, GrFacts) and p.facts.expel_timeout_s is not None
    ]
    if not any(isinstance(p.facts, GrFacts) for p in probes.values()):
        return None
    expel = max(expels) if expels else DEFAULT_EXPEL_S
    return HoldForecast(
        election_s=SUSPICION_S + expel + ELECTION_S,
        expel_s=expel,
        backlog=backlog_of(probes, rates),
        limit_ms=limit_ms,
    )


def apply_rates(
    before: Mapping[NodeAddress, tuple[float, int]],
    probes: Mapping[NodeAddress, ProbeResult],
    now: float,
) -> tuple[dict[NodeAddress, float], dict[NodeAddress, tuple[float, int]]]:
    """Each member's apply rate since its last sample (COUNT_TRANSACTIONS_REMOTE_APPLIED), and
    the samples to keep. A rate needs two samples at least a second apart."""
    rates: dict[NodeAddress, float] = {}
    kept: dict[NodeAddress, tuple[float, int]] = dict(before)
    for node, probe in probes.items():
        facts = probe.facts if isinstance(probe.facts, GrFacts) else None
        if facts is None or facts.remote_applied is None:
            continue
        last = before.get(node)
        if last is not None and now - last[0] >= 1.0:
            applied = facts.remote_applied - last[1]
            if applied >= 0:
                rates[node] = applied / (now - last[0])
            kept[node] = (now, facts.remote_applied)
        elif last is None:
            kept[node] = (now, facts.remote_applied)
    return rates, kept


CONNECT_TIMEOUT_SERVER_MAX = "mysql-connect_timeout_server_max"


class HoldAdvisor:
    """The runner's advisor for gr-checker: the hold forecast of every pass with brownout =
    hold. Keeps each member's apply samples and its last known rate."""

    def __init__(self) -> None:
        self.samples: dict[str, dict[NodeAddress, tuple[float, int]]] = {}
        self.rates: dict[str, dict[NodeAddress, float]] = {}

    def proxy_variables(self, cluster: ClusterSettings) -> tuple[str, ...]:
        """Asked of ProxySQL only when a hold is configured: brownout = route holds nothing."""
        return (CONNECT_TIMEOUT_SERVER_MAX,) if cluster.brownout == "hold" else ()

    def advise(self, given: AdviceInput) -> tuple[Advice, ...]:
        cluster = given.cluster
        if cluster.brownout != "hold":
            return ()
        fresh, kept = apply_rates(self.samples.get(cluster.name, {}), given.probes, given.now)
        self.samples[cluster.name] = kept
        rates = {**self.rates.get(cluster.name, {}), **fresh}
        self.rates[cluster.name] = rates
        text = given.proxy_variables.get(CONNECT_TIMEOUT_SERVER_MAX, "")
        limit = int(text) if text.strip().isdigit() else None
        found = forecast(given.probes, rates, limit)
        if found is None:
            return ()
        return (Advice(found.describe(), found.outlasts),)
