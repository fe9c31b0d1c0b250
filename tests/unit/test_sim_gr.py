"""The simulated Group Replication group (tests/lab/sim_gr.py): its transitions, its own
invariants under any sequence of commands, and the checker's own probe and rules read over its
answers agreeing with the world's truth."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from checker_core.core.model import NodeAddress
from checker_core.core.probes import ProbeFailure, ProbeResult
from checker_core.core.verdict import State, Verdict
from checker_core.edges.question import Answer
from gr_checker.policy import GrFacts, judge_group
from gr_checker.probe import PROBE_SQL, probe
from gr_checker.switchover import ELECTION_FACTS, SET_PRIMARY
from tests.lab.sim_gr import GrCluster
from tests.lab.sim_model import Done, Failure, Reach, Rows, Stall

A, B, C = NODES = ("127.0.0.1:4001", "127.0.0.1:4002", "127.0.0.1:4003")
WRITE = "INSERT INTO t VALUES (1)"
# longer than every timer of the default parameters put together: the group has settled
SETTLE_S = 30.0


def group(**parameters: Any) -> GrCluster:
    cluster = GrCluster("g1", NODES, 7, **parameters)
    cluster.advance(0.0)
    return cluster


def node_truth(cluster: GrCluster, node: str) -> Mapping[str, Any]:
    nodes = cluster.truth()["nodes"]
    assert isinstance(nodes, dict)
    found = nodes[node]
    assert isinstance(found, dict)
    return found


def uuid_of(cluster: GrCluster, node: str) -> str:
    return cluster.globals(node)[1]["server_uuid"]


def view(cluster: GrCluster, asker: str) -> dict[str, tuple[str, str]]:
    """The asker's replication_group_members: server_uuid -> (state, role)."""
    rows = cluster.statement(
        asker,
        {},
        "SELECT MEMBER_ID, MEMBER_STATE, MEMBER_ROLE FROM "
        "performance_schema.replication_group_members",
    )
    assert isinstance(rows, Rows)
    return {str(r[0]): (str(r[1]), str(r[2])) for r in rows.rows}


def facts_of(cluster: GrCluster, node: str) -> GrFacts:
    """gr_checker's own probe text, statement by statement, read by its own reader."""
    results = []
    for sql in PROBE_SQL.split(";"):
        answer = cluster.statement(node, {}, sql)
        assert isinstance(answer, Rows), (sql, answer)
        results.append(answer.rows)
    facts = probe.read(None, Answer(tuple(results)))
    assert isinstance(facts, GrFacts)
    return facts


def address(node: str) -> NodeAddress:
    host, port = node.rsplit(":", 1)
    return NodeAddress(host, int(port))


def judged(cluster: GrCluster) -> dict[str, Verdict]:
    """R2-R6 over what each reachable member answers, as a pass would judge them."""
    probes: dict[NodeAddress, ProbeResult] = {}
    known: dict[NodeAddress, str] = {}
    for node in cluster.nodes():
        reach = cluster.reach(node)
        if reach is Reach.LISTEN:
            facts = facts_of(cluster, node)
            probes[address(node)] = ProbeResult(address(node), facts, None, 1.0)
            known[address(node)] = facts.server_uuid
        else:
            failure = ProbeFailure.REFUSED if reach is Reach.REFUSED else ProbeFailure.SILENT
            probes[address(node)] = ProbeResult(address(node), None, reach.name, 1.0, failure)
    verdicts = judge_group(probes, 100, {}, known)
    return {str(n): v for n, v in verdicts.items()}


def check_invariants(cluster: GrCluster) -> None:
    """The model's own rules, at any moment."""
    nodes = cluster.truth()["nodes"]
    assert isinstance(nodes, dict)
    writable = [n for n, t in nodes.items() if t["writable"]]
    assert len(writable) <= 1, writable
    for node, t in nodes.items():
        if t["writable"]:
            assert t["in_primary"] and t["role"] == "PRIMARY" and t["state"] == "ONLINE", node
            # isolated: alone in a group of one it bootstrapped
            assert t["process"] in ("running", "joining", "isolated"), node
        if t["in_primary"]:
            assert t["state"] == "ONLINE" and t["readable"], node
        assert t["evict_list"] == [] and t["evicted"] is False
        assert (t["identity"] is None) == (t["process"] == "killed"), node
        assert (t["reach"] == "REFUSED") == (cluster.reach(node) is Reach.REFUSED)
        if cluster.reach(node) is Reach.LISTEN:
            facts = facts_of(cluster, node)
            assert facts.server_uuid == t["identity"]
            me = facts.me
            assert me is not None and me.state == t["state"], node
            if t["writable"]:
                assert not facts.super_read_only and me.role == "PRIMARY"
            if me.role != "PRIMARY":  # GR keeps every member but the primary read-only
                assert facts.super_read_only and facts.read_only, node


def check_agrees(cluster: GrCluster) -> None:
    """Once the group has settled, the checker's rules read from the answers say what the
    world is: the writable primary, who serves, who does not."""
    verdicts = judged(cluster)
    for node in cluster.nodes():
        if cluster.reach(node) is not Reach.LISTEN:
            continue
        t = node_truth(cluster, node)
        verdict = verdicts[node]
        writer = verdict.state is State.HEALTHY and verdict.writable
        writer = writer and verdict.role in ("primary", "member")
        assert writer == t["writable"], (node, verdict, t)
        assert (verdict.state is State.HEALTHY) == t["readable"], (node, verdict, t)
        if t["role"] == "PRIMARY" and t["in_primary"] and not t["writable"]:
            assert verdict.state is State.BROWNOUT, (node, verdict)


Step = tuple[float, dict[str, Any] | None, dict[str, tuple[str, str | None, bool]]]

# (id, parameters, steps): at time t, the command (if any), then each named node's
# (state, role, writable) in the truth
TRANSITIONS: list[tuple[str, dict[str, Any], list[Step]]] = [
    (
        "kill of the primary: removed after killed_leave_s, election, brownout",
        {},
        [
            (0.0, {"cmd": "weight", "node": C, "weight": 80}, {A: ("ONLINE", "PRIMARY", True)}),
            (0.1, {"cmd": "kill", "node": A}, {A: ("", None, False)}),
            (0.5, None, {B: ("ONLINE", "SECONDARY", False), C: ("ONLINE", "SECONDARY", False)}),
            (0.65, None, {C: ("ONLINE", "SECONDARY", False)}),  # removed, electing
            (0.95, None, {C: ("ONLINE", "PRIMARY", False), B: ("ONLINE", "SECONDARY", False)}),
            (1.35, None, {C: ("ONLINE", "PRIMARY", False)}),  # in its brownout
            (1.45, None, {C: ("ONLINE", "PRIMARY", True)}),
        ],
    ),
    (
        "freeze of a secondary: UNREACHABLE, expelled, thawed into ERROR, rejoins",
        {},
        [
            (0.0, {"cmd": "freeze", "node": B}, {A: ("ONLINE", "PRIMARY", True)}),
            (7.0, {"cmd": "thaw", "node": B}, {B: ("ERROR", None, False)}),
            (8.05, None, {B: ("RECOVERING", "SECONDARY", False)}),
            (10.1, None, {B: ("ONLINE", "SECONDARY", False), A: ("ONLINE", "PRIMARY", True)}),
        ],
    ),
    (
        "freeze of a secondary thawed before its expulsion: back as it was",
        {},
        [
            (0.0, {"cmd": "freeze", "node": B}, {}),
            (3.0, {"cmd": "thaw", "node": B}, {B: ("ONLINE", "SECONDARY", False)}),
        ],
    ),
    (
        "two secondaries frozen: the primary is a minority, never writable, nobody expelled",
        {},
        [
            (0.0, {"cmd": "freeze", "node": [B, C]}, {A: ("ONLINE", "PRIMARY", False)}),
            (30.0, None, {A: ("ONLINE", "PRIMARY", False)}),
            (31.0, {"cmd": "thaw", "node": [B, C]}, {A: ("ONLINE", "PRIMARY", True)}),
        ],
    ),
    (
        "set_primary: the old primary read-only at once, the new one after the brownout",
        {},
        [
            (
                1.0,
                {"cmd": "set_primary", "node": B},
                {A: ("ONLINE", "SECONDARY", False), B: ("ONLINE", "PRIMARY", False)},
            ),
            (1.55, None, {B: ("ONLINE", "PRIMARY", True)}),
        ],
    ),
    (
        "restart of a secondary: REFUSED, OFFLINE, RECOVERING, ONLINE",
        {},
        [
            (0.0, {"cmd": "restart", "node": C}, {C: ("OFFLINE", None, False)}),
            (1.05, None, {C: ("OFFLINE", None, False)}),
            (1.55, None, {C: ("RECOVERING", "SECONDARY", False)}),
            (3.6, None, {C: ("ONLINE", "SECONDARY", False), A: ("ONLINE", "PRIMARY", True)}),
        ],
    ),
    (
        "stop_gr on the primary: dropped at once, election",
        {},
        [
            (0.0, {"cmd": "stop_gr", "node": A}, {A: ("OFFLINE", None, False)}),
            (1.0, None, {A: ("OFFLINE", None, False)}),
            (2.0, {"cmd": "start_gr", "node": A}, {A: ("RECOVERING", "SECONDARY", False)}),
            (4.1, None, {A: ("ONLINE", "SECONDARY", False)}),
        ],
    ),
]


@pytest.mark.parametrize(
    ("parameters", "steps"), [c[1:] for c in TRANSITIONS], ids=[c[0] for c in TRANSITIONS]
)
def test_transitions(parameters: dict[str, Any], steps: list[Step]) -> None:
    cluster = group(**parameters)
    for at, command, expected in steps:
        cluster.advance(at)
        if command is not None:
            cluster.command(command)
        for node, (state, role, writable) in expected.items():
            t = node_truth(cluster, node)
            assert (t["state"], t["role"], t["writable"]) == (state, role, writable), (at, node)
        check_invariants(cluster)


def test_a_killed_primary_is_seen_online_then_gone_and_the_lowest_uuid_wins() -> None:
    cluster = group()
    primary_uuid = uuid_of(cluster, A)
    cluster.command({"cmd": "kill", "node": A})
    cluster.advance(0.4)
    assert view(cluster, B)[primary_uuid] == ("ONLINE", "PRIMARY")
    cluster.advance(0.6)
    assert primary_uuid not in view(cluster, B)
    cluster.advance(2.0)
    elected = min(uuid_of(cluster, B), uuid_of(cluster, C))
    assert [u for u, (_, role) in view(cluster, B).items() if role == "PRIMARY"] == [elected]


def test_a_lower_version_wins_the_election_over_a_higher_weight() -> None:
    cluster = group()
    cluster.command({"cmd": "weight", "node": B, "weight": 100})
    cluster.command({"cmd": "set", "node": C, "version": "8.0.35"})
    cluster.command({"cmd": "kill", "node": A})
    cluster.advance(2.0)
    assert node_truth(cluster, C)["role"] == "PRIMARY"
    assert node_truth(cluster, B)["role"] == "SECONDARY"


def test_a_frozen_member_is_unreachable_after_unreachable_s_and_expelled_after_expel_s() -> None:
    cluster = group(unreachable_s=1.0, expel_s=5.0)
    frozen = uuid_of(cluster, B)
    cluster.command({"cmd": "freeze", "node": B})
    cluster.advance(0.9)
    assert view(cluster, A)[frozen][0] == "ONLINE"
    cluster.advance(1.1)
    assert view(cluster, A)[frozen][0] == "UNREACHABLE"
    assert cluster.statement(A, {}, WRITE) == Done()  # the rest still hold a majority
    cluster.advance(5.9)
    assert frozen in view(cluster, A)
    cluster.advance(6.1)
    assert frozen not in view(cluster, A)
    assert cluster.reach(B) is Reach.HANG


def test_a_frozen_primary_is_replaced_only_after_its_expulsion() -> None:
    cluster = group()
    cluster.command({"cmd": "freeze", "node": A})
    cluster.advance(5.9)
    assert all(node_truth(cluster, n)["role"] == "SECONDARY" for n in (B, C))
    assert not any(node_truth(cluster, n)["writable"] for n in NODES)
    cluster.advance(6.5)
    assert {node_truth(cluster, n)["role"] for n in (B, C)} == {"PRIMARY", "SECONDARY"}
    cluster.advance(7.0)
    cluster.command({"cmd": "thaw", "node": A})
    thawed = node_truth(cluster, A)
    assert (thawed["state"], thawed["writable"]) == ("ERROR", False)
    assert facts_of(cluster, A).super_read_only
    assert cluster.statement(A, {}, WRITE) == Failure(
        1290,
        "HY000",
        "The MySQL server is running with the --super-read-only option so it cannot execute "
        "this statement",
    )


def test_a_minority_cannot_commit_and_an_expelled_primary_s_waiting_write_fails() -> None:
    cluster = group()
    primary = uuid_of(cluster, A)
    cluster.command({"cmd": "isolate", "node": A})
    session: dict[str, str] = {}
    assert isinstance(cluster.statement(A, session, WRITE), Stall)
    cluster.advance(1.1)
    seen = view(cluster, A)
    assert seen[primary] == ("ONLINE", "PRIMARY")
    assert sorted(state for u, (state, _) in seen.items() if u != primary) == ["UNREACHABLE"] * 2
    assert isinstance(cluster.statement(A, session, WRITE), Stall)
    assert node_truth(cluster, A)["in_primary"] is False
    cluster.advance(SETTLE_S)
    assert primary not in view(cluster, B)
    assert sum(node_truth(cluster, n)["writable"] for n in (B, C)) == 1
    cluster.command({"cmd": "rejoin", "node": A})
    assert cluster.statement(A, session, WRITE) == Failure(
        3100, "HY000", "Error on observer while running replication hook 'before_commit'."
    )
    assert node_truth(cluster, A)["writes"] == 0


def test_a_minority_s_waiting_write_commits_when_the_majority_comes_back() -> None:
    cluster = group()
    cluster.command({"cmd": "isolate", "node": A})
    session: dict[str, str] = {}
    assert isinstance(cluster.statement(A, session, WRITE), Stall)
    cluster.advance(2.0)
    cluster.command({"cmd": "rejoin", "node": A})
    assert cluster.statement(A, session, WRITE) == Done()
    assert node_truth(cluster, A)["writes"] == 1


@pytest.mark.parametrize("new_identity", [False, True])
def test_restart_keeps_or_renews_the_server_uuid(new_identity: bool) -> None:
    cluster = group()
    before = uuid_of(cluster, C)
    reply = cluster.command({"cmd": "restart", "node": C, "new_identity": new_identity})
    after = reply["replies"]
    assert isinstance(after, list)
    assert (after[0]["identity"] == before) is not new_identity
    assert cluster.reach(C) is Reach.REFUSED
    cluster.advance(1.05)
    assert cluster.reach(C) is Reach.LISTEN
    own = facts_of(cluster, C)
    assert [(m.member_id, m.state, m.role) for m in own.members] == [
        (own.server_uuid, "OFFLINE", "")
    ]
    cluster.advance(SETTLE_S)
    members = view(cluster, A)
    assert members[own.server_uuid] == ("ONLINE", "SECONDARY")
    assert (before in members) is not new_identity
    assert len(members) == 3


@pytest.mark.parametrize("member_host", ["address", "hostname"])
def test_member_host_as_an_address_or_a_hostname(member_host: str) -> None:
    cluster = group(member_host=member_host)
    facts = facts_of(cluster, B)
    hosts = sorted((m.host, m.port) for m in facts.members)
    if member_host == "hostname":
        assert hosts == [("node1.sim", 4001), ("node2.sim", 4002), ("node3.sim", 4003)]
    else:
        assert hosts == [("127.0.0.1", 4001), ("127.0.0.1", 4002), ("127.0.0.1", 4003)]
    check_agrees(cluster)


def test_set_as_primary_statement_returns_once_the_new_primary_is_writable() -> None:
    cluster = group()
    target = uuid_of(cluster, C)
    session: dict[str, str] = {}
    sql = SET_PRIMARY.replace("%s", f"'{target}'")
    assert isinstance(cluster.statement(C, session, sql), Stall)
    assert node_truth(cluster, A)["role"] == "SECONDARY"
    assert facts_of(cluster, A).super_read_only
    assert isinstance(cluster.statement(A, {}, WRITE), Failure)
    cluster.advance(0.6)
    answer = cluster.statement(C, session, sql)
    assert answer == Rows(
        (f"group_replication_set_as_primary('{target}')",),
        ((f"Primary server switched to: {target}",),),
    )
    assert node_truth(cluster, C)["writable"]
    again = cluster.statement(C, {}, sql)
    assert isinstance(again, Rows) and "already" in str(again.rows[0][0])
    unknown = cluster.statement(C, {}, SET_PRIMARY.replace("%s", "'no-such-uuid'"))
    assert isinstance(unknown, Failure) and unknown.code == 1123


def test_election_facts_and_variables_as_the_checker_asks_them() -> None:
    cluster = group()
    cluster.command({"cmd": "weight", "node": B, "weight": 70})
    answer = cluster.statement(B, {}, ELECTION_FACTS)
    assert answer == Rows(
        ("@@group_replication_member_weight", "MEMBER_VERSION"), (("70", "8.0.36"),)
    )
    flags = cluster.statement(B, {}, "SELECT @@super_read_only, @@global.read_only")
    assert flags == Rows(("@@super_read_only", "@@global.read_only"), (("1", "1"),))
    missing = cluster.statement(B, {}, "SELECT @@no_such_variable")
    assert isinstance(missing, Failure) and missing.code == 1193
    assert cluster.statement(B, {}, "SHOW GLOBAL VARIABLES") is None


def test_a_brownout_shows_a_draining_applier_queue_the_checker_holds() -> None:
    cluster = group()
    cluster.command({"cmd": "kill", "node": A})
    cluster.advance(0.81)
    primary = next(n for n in (B, C) if node_truth(cluster, n)["role"] == "PRIMARY")
    first = facts_of(cluster, primary)
    assert first.super_read_only and first.applier_queue
    assert judged(cluster)[primary].state is State.BROWNOUT
    cluster.advance(1.1)
    second = facts_of(cluster, primary)
    assert second.applier_queue is not None and second.applier_queue < first.applier_queue
    cluster.advance(1.31)
    assert facts_of(cluster, primary).applier_queue == 0
    check_agrees(cluster)


@pytest.mark.parametrize(
    "commands",
    [
        pytest.param([], id="healthy"),
        pytest.param([{"cmd": "kill", "node": A}], id="election"),
        pytest.param([{"cmd": "freeze", "node": [A, B]}], id="minority"),
        pytest.param([{"cmd": "isolate", "node": A}], id="isolated primary"),
        pytest.param([{"cmd": "stop_gr", "node": B}], id="GR stopped"),
    ],
)
@pytest.mark.parametrize("member_host", ["address", "hostname"])
def test_the_checker_s_rules_see_the_truth(
    commands: list[dict[str, Any]], member_host: str
) -> None:
    cluster = group(member_host=member_host)
    for command in commands:
        cluster.command(command)
    cluster.advance(SETTLE_S)
    check_agrees(cluster)
    check_invariants(cluster)


def test_multi_primary_every_online_member_of_the_majority_writes() -> None:
    cluster = group(single_primary=False)
    assert [node_truth(cluster, n)["writable"] for n in NODES] == [True] * 3
    assert {role for _, role in view(cluster, B).values()} == {"PRIMARY"}
    cluster.command({"cmd": "kill", "node": A})
    cluster.advance(SETTLE_S)
    assert [node_truth(cluster, n)["writable"] for n in NODES] == [False, True, True]
    refused = cluster.statement(B, {}, SET_PRIMARY.replace("%s", f"'{uuid_of(cluster, C)}'"))
    assert isinstance(refused, Failure) and refused.code == 1123
    check_agrees(cluster)


def test_a_cut_or_slow_member_is_unchanged_for_the_group() -> None:
    cluster = group()
    cluster.command({"cmd": "cut", "node": A})
    cluster.command({"cmd": "slow", "node": B, "delay_ms": 250})
    cluster.advance(SETTLE_S)
    assert cluster.reach(A) is Reach.HANG and cluster.delay_s(B) == 0.25
    assert node_truth(cluster, A)["writable"] and node_truth(cluster, A)["reach"] == "HANG"
    assert view(cluster, B)[uuid_of(cluster, A)] == ("ONLINE", "PRIMARY")
    cluster.command({"cmd": "uncut", "node": A})
    cluster.command({"cmd": "slow", "node": B, "delay_ms": 0})
    assert cluster.reach(A) is Reach.LISTEN and cluster.delay_s(B) == 0.0


def test_bad_commands_name_what_is_wrong() -> None:
    cluster = group()
    with pytest.raises(ValueError, match="cmd"):
        cluster.command({"cmd": "explode", "node": A})
    with pytest.raises(ValueError, match="node"):
        cluster.command({"cmd": "kill", "node": "127.0.0.1:1"})
    with pytest.raises(ValueError, match="weight"):
        cluster.command({"cmd": "weight", "node": A, "weight": 101})
    with pytest.raises(ValueError, match="expel_s"):
        cluster.command({"cmd": "configure", "expel_s": -1})
    with pytest.raises(ValueError, match="bootstrap"):
        cluster.command({"cmd": "bootstrap", "node": A})
    cluster.command({"cmd": "kill", "node": C})
    before = cluster.truth()
    with pytest.raises(ValueError, match=C):
        cluster.command({"cmd": "stop_gr", "node": [A, C]})  # C is not running
    assert cluster.truth() == before
    with pytest.raises(ValueError, match="member_host"):
        GrCluster("g1", NODES, 1, member_host="dns")


def test_all_killed_the_group_needs_a_bootstrap() -> None:
    cluster = group()
    for node in NODES:
        cluster.command({"cmd": "kill", "node": node})
        cluster.command({"cmd": "restart", "node": node})
    cluster.advance(SETTLE_S)
    assert all(node_truth(cluster, n)["state"] == "OFFLINE" for n in NODES)
    cluster.command({"cmd": "bootstrap", "node": B})
    cluster.advance(2 * SETTLE_S)
    assert node_truth(cluster, B)["writable"]
    assert all(node_truth(cluster, n)["state"] == "ONLINE" for n in NODES)
    check_agrees(cluster)


def test_same_seed_same_world() -> None:
    def run(seed: int) -> Mapping[str, object]:
        cluster = GrCluster("g1", NODES, seed)
        cluster.command({"cmd": "restart", "node": A, "new_identity": True})
        cluster.advance(SETTLE_S)
        return cluster.truth()

    assert run(3) == run(3)
    assert run(3) != run(4)


NODE_COMMANDS = [
    "kill",
    "restart",
    "freeze",
    "thaw",
    "isolate",
    "rejoin",
    "stop_gr",
    "start_gr",
    "set_primary",
    "weight",
    "cut",
    "uncut",
    "bootstrap",
    "write",
]

actions = st.lists(
    st.tuples(
        st.sampled_from(NODE_COMMANDS),
        st.sampled_from(NODES),
        st.sampled_from([0.0, 0.05, 0.3, 0.6, 1.2, 3.0, 7.0]),
        st.booleans(),
    ),
    max_size=14,
)


def heal(cluster: GrCluster, now: float) -> float:
    """Undo every fault as an operator would, bootstrapping the group again when no majority
    is left to rejoin; returns the time it took to settle."""
    for node in NODES:
        for cmd in ("thaw", "rejoin", "uncut"):
            cluster.command({"cmd": cmd, "node": node})
        t = node_truth(cluster, node)
        if t["process"] == "killed":
            cluster.command({"cmd": "restart", "node": node})
        elif t["needs_restart"]:
            cluster.command({"cmd": "start_gr", "node": node})
    now += SETTLE_S
    cluster.advance(now)
    if not any(node_truth(cluster, n)["writable"] for n in NODES):
        for node in NODES:
            cluster.command({"cmd": "stop_gr", "node": node})
        cluster.command({"cmd": "bootstrap", "node": A})
        cluster.command({"cmd": "start_gr", "node": [B, C]})
        now += SETTLE_S
        cluster.advance(now)
    return now


@settings(max_examples=150, deadline=None)
@given(
    actions=actions,
    seed=st.integers(0, 3),
    unreachable_s=st.sampled_from([0.2, 1.0]),
    expel_s=st.sampled_from([0.0, 1.0, 5.0]),
)
def test_any_schedule_keeps_the_model_s_invariants(
    actions: list[tuple[str, str, float, bool]], seed: int, unreachable_s: float, expel_s: float
) -> None:
    cluster = GrCluster("g1", NODES, seed, unreachable_s=unreachable_s, expel_s=expel_s)
    now = 0.0
    cluster.advance(now)
    sessions = {node: dict[str, str]() for node in NODES}
    for cmd, node, wait, flag in actions:
        if cmd == "write":
            if cluster.reach(node) is Reach.LISTEN:
                cluster.statement(node, sessions[node], WRITE)
        else:
            message: dict[str, Any] = {"cmd": cmd, "node": node}
            if cmd == "restart":
                message["new_identity"] = flag
            if cmd == "weight":
                message["weight"] = 90 if flag else 10
            before = cluster.truth()
            try:
                cluster.command(message)
            except ValueError:  # refused (bootstrap with a group alive, ...)
                assert cluster.truth() == before
        check_invariants(cluster)
        now += wait
        cluster.advance(now)
        check_invariants(cluster)
    now += SETTLE_S
    cluster.advance(now)
    check_invariants(cluster)
    check_agrees(cluster)
    # and once every fault is undone, the group is whole again with one writable primary
    heal(cluster, now)
    check_invariants(cluster)
    check_agrees(cluster)
    assert [node_truth(cluster, n)["state"] for n in NODES] == ["ONLINE"] * 3
    assert sum(bool(node_truth(cluster, n)["writable"]) for n in NODES) == 1
