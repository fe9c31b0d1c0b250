"""A planned move of the Group Replication primary: what may be moved, to whom, and how. Pure.

In single-primary mode the group's PRIMARY *is* the writer (R4): the checker moves nothing in
ProxySQL by itself, it asks the group to elect the target (`group_replication_set_as_primary`,
run as the [node_admin] account) and then follows it like any election, holding the writer
hostgroup empty while the new primary is still super_read_only (R5, `brownout = hold`). So no pin
is kept: weights and fail_back play no part in single-primary mode, and every later pass (a
daemon's, the scheduler's) sees the same primary the switchover made.

The side effects (the lock, the passes, the call itself) are in gr_checker/set_primary.py.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass

from checker_core.core.model import NodeAddress
from checker_core.core.verdict import State, Verdict
from checker_core.core.writers import barred
from checker_core.passes.result import PassResult
from checker_core.report import summary
from gr_checker.policy import GrFacts

# 8.0.29+ accepts the second argument: after that many seconds the old primary's transactions
# that have not reached their commit phase are rolled back and their sessions disconnected
SET_PRIMARY = "SELECT group_replication_set_as_primary(%s)"
SET_PRIMARY_TIMEOUT = "SELECT group_replication_set_as_primary(%s, %s)"
MAX_RUNNING_TRANSACTIONS_TIMEOUT_S = 3600
# the election's tie-breakers, read from each candidate as node_admin (for --from)
ELECTION_FACTS = (
    "SELECT @@group_replication_member_weight, MEMBER_VERSION"
    " FROM performance_schema.replication_group_members WHERE MEMBER_ID = @@server_uuid"
)


class Why(enum.Enum):
    """Why a switchover is refused; each with the words an operator reads."""

    NO_NODE_ADMIN = "no [node_admin] account is configured"
    NOT_JUDGED = "the group could not be judged"
    NOT_IN_ROSTER = "not in the roster"
    BARRED = "barred from the writer hostgroup by an operator"
    MULTI_PRIMARY = "the group is multi-primary"
    NO_PRIMARY = "no writable primary"
    NOT_PRIMARY = "not the primary"
    UNHEALTHY = "not an ONLINE SECONDARY of the majority"
    LAGGING = "lagging"
    NO_CANDIDATE = "no member may take over"
    LOCK_HELD = "the pass lock is held"

    def __init__(self, words: str) -> None:
        self.words = words


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a switchover was refused, as the operator reads it."""

    why: Why
    reason: str  # the whole line after "refused: "


@dataclass(frozen=True, slots=True)
class Move:
    """The switch the group is to make: from the primary to the target (its server_uuid)."""

    source: NodeAddress
    target: NodeAddress
    target_uuid: str


@dataclass(frozen=True, slots=True)
class Candidate:
    """A member that may take over, with the group's election tie-breakers (for --from)."""

    node: NodeAddress
    uuid: str
    weight: int
    version: str

    def election_key(self) -> tuple[tuple[int, ...], int, str]:
        """The group's own order: the lowest MySQL version, then the highest member weight,
        then the lowest server_uuid."""
        parts = tuple(int(p) for p in self.version.split("-")[0].split(".") if p.isdigit())
        return parts, -self.weight, self.uuid


def _facts(result: PassResult, node: NodeAddress) -> GrFacts | None:
    probe = result.probes.get(node)
    facts = probe.facts if probe is not None else None
    return facts if isinstance(facts, GrFacts) else None


def _judged(result: PassResult) -> Refusal | None:
    decision = result.decision
    if decision is None or decision.blind:
        return Refusal(Why.NOT_JUDGED, f"the group could not be judged: {summary(result)}")
    verdicts = decision.verdicts.values()
    single = [f.single_primary for f in (_facts(result, v.node) for v in verdicts) if f]
    if any(v.role == "member" for v in verdicts) or (single and not all(single)):
        return Refusal(
            Why.MULTI_PRIMARY,
            "the group is multi-primary (group_replication_single_primary_mode=OFF): every "
            "member writes, there is no primary to move",
        )
    return None


def primary(result: PassResult) -> NodeAddress | Refusal:
    """The group's primary, healthy and writable: the member a switchover moves away from."""
    refused = _judged(result)
    if refused is not None:
        return refused
    assert result.decision is not None
    for verdict in result.decision.verdicts.values():
        if verdict.role != "primary":
            continue
        if verdict.state is State.HEALTHY and verdict.writable:
            return verdict.node
        return Refusal(
            Why.NO_PRIMARY,
            f"the primary {verdict.node} is {verdict.state.value}: {verdict.reason} (an "
            "election is under way; try again once it writes)",
        )
    return Refusal(Why.NO_PRIMARY, "the group has no primary that the checker can see")


def check(
    result: PassResult, target: NodeAddress, *, node_admin: bool
) -> Move | Refusal | NodeAddress:
    """The move to `target`, the refusal, or the target itself when it is the primary already.

    The target must be in the roster, not barred from the writer hostgroup by an operator, and
    an ONLINE SECONDARY that the majority sees ONLINE, not lagging (a writer row is not needed:
    the checker routes writes to the member the group elects); the group single-primary with a
    writable primary; and the [node_admin] account configured (it runs the call)."""
    if not node_admin:
        return Refusal(
            Why.NO_NODE_ADMIN,
            "node_admin: no [node_admin] account is configured; group_replication_set_as_primary "
            "runs as it (it needs GROUP_REPLICATION_ADMIN)",
        )
    source = primary(result)
    if isinstance(source, Refusal):
        return source
    decision = result.decision
    assert decision is not None
    node = decision.roster.get(target)
    if node is None:
        return Refusal(
            Why.NOT_IN_ROSTER, f"{target} is not in the roster of cluster {result.cluster}"
        )
    if target == source:
        return target
    # the policy routes writes to whichever member the group elects (R4), writer row or not,
    # except one an operator barred from the writer hostgroup (S5): exactly what it refuses
    layout = result.layout
    refused_by_operator = barred(target, layout) if layout is not None else None
    if refused_by_operator is not None:
        return Refusal(
            Why.BARRED,
            f"{refused_by_operator}: as primary it would get no writes, and the writer "
            "hostgroup would be left empty",
        )
    verdict = decision.verdicts.get(target)
    facts = _facts(result, target)
    refused = _unfit(target, verdict, facts)
    if refused is not None:
        return refused
    assert facts is not None
    return Move(source, target, facts.server_uuid)


def _unfit(target: NodeAddress, verdict: Verdict | None, facts: GrFacts | None) -> Refusal | None:
    if verdict is None or facts is None:
        said = verdict.reason if verdict is not None else "not probed"
        return Refusal(Why.UNHEALTHY, f"{target} is not an ONLINE SECONDARY: {said}")
    if verdict.state is State.LAGGING:
        return Refusal(
            Why.LAGGING,
            f"{target} lags: {verdict.reason}; as primary it would hold writes until drained",
        )
    if verdict.state is not State.HEALTHY or verdict.role != "secondary":
        return Refusal(
            Why.UNHEALTHY,
            f"{target} is not an ONLINE SECONDARY of the majority: {verdict.state.value}: "
            f"{verdict.reason}",
        )
    return None


def successor(
    result: PassResult, source: NodeAddress, *, node_admin: bool
) -> list[NodeAddress] | Refusal:
    """For `--from`: the members that could take over from `source`, the group's primary (the
    election order among them needs their member weights: `elect`)."""
    current = primary(result)
    if isinstance(current, Refusal):
        return current
    if current != source:
        return Refusal(Why.NOT_PRIMARY, f"{source} is not the primary; the primary is {current}")
    assert result.decision is not None
    fit = [
        node
        for node in result.decision.roster.addresses
        if node != source and isinstance(check(result, node, node_admin=node_admin), Move)
    ]
    if not fit:
        return Refusal(
            Why.NO_CANDIDATE,
            f"no member may take over from {source}: none is a healthy ONLINE SECONDARY the "
            "operator has not barred from the writer hostgroup",
        )
    return fit


def elect(candidates: list[Candidate]) -> Candidate:
    """The member the group itself would elect if the primary left now."""
    return min(candidates, key=Candidate.election_key)


def followed(result: PassResult, target: NodeAddress) -> bool:
    """The pass was applied (or had nothing to change) and its writer hostgroup holds the
    target ONLINE, alone."""
    return result.moved_to(target)


def statement(
    move: Move, running_transactions_timeout_s: int | None
) -> tuple[str, tuple[object, ...]]:
    """The call and its parameters (the UUID, and the timeout when one is given)."""
    if running_transactions_timeout_s is None:
        return SET_PRIMARY, (move.target_uuid,)
    return SET_PRIMARY_TIMEOUT, (move.target_uuid, running_transactions_timeout_s)


def render(sql: str, params: tuple[object, ...]) -> str:
    """The statement as a DBA would paste it into the mysql client."""
    literals = tuple(
        str(p)
        if isinstance(p, int)
        else "'" + str(p).replace("\\", "\\\\").replace("'", "''") + "'"
        for p in params
    )
    return sql % literals + ";"


def steps(
    cluster: str,
    move: Move,
    *,
    user: str,
    writer_hostgroup: int,
    brownout: str,
    running_transactions_timeout_s: int | None,
    timeout_s: float,
) -> list[str]:
    """What the switchover does, in order, with the exact SQL (the dry-run prints these)."""
    sql, params = statement(move, running_transactions_timeout_s)
    if running_transactions_timeout_s is None:
        waits = "waits for the old primary's running transactions to end, without limit"
    else:
        waits = (
            f"waits up to {running_transactions_timeout_s} s for the old primary's running "
            "transactions, then disconnects the sessions of those not yet committing"
        )
    if brownout == "hold":
        hold = (
            f"hostgroup {writer_hostgroup} is left empty while {move.target} is "
            "super_read_only (applying its backlog), so ProxySQL holds new writes instead of "
            "failing them"
        )
    else:
        hold = f"{move.target} is routed as soon as it is primary (brownout = route)"
    return [
        f"cluster {cluster}: switchover from {move.source} to {move.target} "
        f"(server_uuid {move.target_uuid})",
        f"  1. on {move.target} as node_admin {user}: {render(sql, params)}",
        f"     ({waits}; the old primary turns super_read_only, the target is elected)",
        f"  2. passes under the cluster's lock follow the group: {hold}; the old primary "
        "leaves the writer hostgroup the pass it is read-only",
        f"  3. done when hostgroup {writer_hostgroup} holds {move.target} ONLINE alone, or "
        f"after {timeout_s:g} s (--timeout)",
    ]


def describe_refusal(cluster: str, target: NodeAddress | None, refusal: Refusal) -> str:
    to = f" to {target}" if target is not None else ""
    return f"cluster {cluster}: switchover{to} refused: {refusal.reason}; nothing changed"


def election_facts(
    rows: Mapping[NodeAddress, tuple[int, str]], uuids: Mapping[NodeAddress, str]
) -> list[Candidate]:
    """Candidates from what each member answered to ELECTION_FACTS."""
    return [
        Candidate(node, uuids[node], weight, version) for node, (weight, version) in rows.items()
    ]


def uuid_of(result: PassResult, node: NodeAddress) -> str | None:
    facts = _facts(result, node)
    return facts.server_uuid if facts is not None else None
