"""The simulated Galera cluster (tests/lab/sim_galera.py) as a pure object: its transitions, step
by step, and the rules of the model itself under any sequence of commands and time."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.lab.sim_galera import GaleraCluster
from tests.lab.sim_model import Done, Failure, Reach, Rows, Stall

A, B, C = "127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"
EVICT = "SET GLOBAL wsrep_provider_options = 'evs.evict={}'"
MEMBERS = "SELECT node_uuid, node_incoming_address FROM mysql.wsrep_cluster_members"


def cluster(**timings: float) -> GaleraCluster:
    made = GaleraCluster("g1", (A, B, C), 7, **timings)
    made.advance(100.0)
    return made


def node(c: GaleraCluster, address: str) -> dict[str, object]:
    nodes = c.truth()["nodes"]
    assert isinstance(nodes, dict)
    described: dict[str, object] = nodes[address]
    return described


def status(c: GaleraCluster, address: str, name: str) -> str:
    return c.globals(address)[0][name]


def uuid_of(c: GaleraCluster, address: str) -> str:
    return status(c, address, "wsrep_gcomm_uuid")


def view(c: GaleraCluster, address: str) -> set[str]:
    rows = c.statement(address, {}, MEMBERS)
    assert isinstance(rows, Rows)
    return {str(u) for u, _ in rows.rows}


def test_a_new_cluster_is_three_synced_primary_members_with_repeatable_uuids() -> None:
    c = cluster()
    assert all(node(c, a)["writable"] and node(c, a)["readable"] for a in (A, B, C))
    assert {status(c, a, "wsrep_cluster_size") for a in (A, B, C)} == {"3"}
    assert view(c, A) == {uuid_of(c, a) for a in (A, B, C)}
    assert [uuid_of(cluster(), a) for a in (A, B, C)] == [uuid_of(c, a) for a in (A, B, C)]
    assert uuid_of(GaleraCluster("g1", (A, B, C), 8), A) != uuid_of(c, A)


@dataclass(frozen=True)
class Case:
    name: str
    act: Callable[[GaleraCluster], None]
    at: float  # seconds after the act
    node: str
    expected: dict[str, object]


def do(*messages: dict[str, object]) -> Callable[[GaleraCluster], None]:
    def act(c: GaleraCluster) -> None:
        for message in messages:
            c.command(message)

    return act


CASES = [
    Case("a killed node refuses at once", do({"cmd": "kill", "node": C}), 0.0, C,
         {"reach": "REFUSED", "process": "killed", "identity": None}),
    Case("its peers drop it after killed_leave_s", do({"cmd": "kill", "node": C}), 1.01, A,
         {"in_primary": True, "writable": True}),
    Case("a frozen node hangs, still in the view", do({"cmd": "freeze", "node": C}), 2.9, C,
         {"reach": "HANG", "in_primary": True, "process": "frozen"}),
    Case("dropped after suspect_timeout_s", do({"cmd": "freeze", "node": C}), 3.01, C,
         {"reach": "HANG", "in_primary": False}),
    Case("thawed after its drop: non-Primary while it rejoins",
         do({"cmd": "freeze", "node": C}), 3.01, C, {"in_primary": False}),
    Case("cut: only clients lose it", do({"cmd": "cut", "node": C}), 0.0, C,
         {"reach": "HANG", "in_primary": True, "writable": True}),
    Case("isolated: non-Primary at once, its port open", do({"cmd": "isolate", "node": C}), 0.0,
         C, {"reach": "LISTEN", "in_primary": False, "state": "Initialized"}),
    Case("restarted: port closed while it joins", do({"cmd": "restart", "node": C}), 1.0, C,
         {"reach": "REFUSED", "process": "joining"}),
    Case("restarted: Joined once its port opens", do({"cmd": "restart", "node": C}), 2.01, C,
         {"reach": "LISTEN", "state": "Joined", "writable": False}),
    Case("restarted: Synced then", do({"cmd": "restart", "node": C}), 2.25, C,
         {"state": "Synced", "writable": True, "in_primary": True}),
    Case("donor: readable, not writable", do({"cmd": "donor", "node": C}), 0.0, C,
         {"state": "Donor/Desynced", "readable": True, "writable": False}),
    Case("desync", do({"cmd": "desync", "node": C, "on": True}), 0.0, C,
         {"state": "Donor/Desynced", "writable": False}),
    Case("read_only", do({"cmd": "set", "node": C, "variables": {"read_only": True}}), 0.0, C,
         {"writable": False, "readable": True}),
    Case("maintenance",
         do({"cmd": "set", "node": C, "variables": {"pxc_maint_mode": "MAINTENANCE"}}),
         0.0, C, {"writable": False, "readable": False}),
    Case("rejecting", do({"cmd": "set", "node": C, "variables": {"wsrep_reject_queries": "ALL"}}),
         0.0, C, {"writable": False, "readable": False}),
    Case("two of three killed: the last is non-Primary",
         do({"cmd": "kill", "node": B}, {"cmd": "kill", "node": C}), 1.01, A,
         {"in_primary": False, "writable": False, "state": "Initialized"}),
    Case("one of three killed: two are a majority",
         do({"cmd": "kill", "node": B}), 1.01, A, {"in_primary": True}),
]  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_transitions(case: Case) -> None:
    c = cluster()
    case.act(c)
    c.advance(100.0 + case.at)
    seen = node(c, case.node)
    assert {k: seen[k] for k in case.expected} == case.expected


def test_a_frozen_member_stalls_every_commit_and_causal_read_until_it_is_dropped() -> None:
    c = cluster()
    c.command({"cmd": "freeze", "node": C})
    session = {"wsrep_sync_wait": "1"}
    assert isinstance(c.statement(A, {}, "INSERT INTO t VALUES (1)"), Stall)
    assert isinstance(c.statement(B, dict(session), "SELECT 1"), Stall)
    assert c.statement(B, {}, "SELECT 1") is None  # no causal wait asked: answered
    c.advance(103.01)
    assert c.statement(A, {}, "INSERT INTO t VALUES (1)") == Done()
    assert c.statement(B, dict(session), "SELECT 1") is None
    assert c.truth()["commits"] == {A: 1, B: 0, C: 0}


def test_set_session_wsrep_sync_wait_is_kept_in_the_session() -> None:
    c = cluster()
    session: dict[str, str] = {}
    assert c.statement(A, session, "SET SESSION wsrep_sync_wait = 1") == Done()
    assert session == {"wsrep_sync_wait": "1"}


@pytest.mark.parametrize(
    ("setup", "code"),
    [
        ({"cmd": "set", "variables": {"read_only": "ON"}}, 1290),
        ({"cmd": "set", "variables": {"wsrep_reject_queries": "ALL"}}, 1047),
        ({"cmd": "isolate"}, 1047),
        ({"cmd": "donor"}, 1047),
    ],
)
def test_a_write_the_member_cannot_commit_fails_as_the_server_does(
    setup: dict[str, object], code: int
) -> None:
    c = cluster()
    c.command({**setup, "node": A})
    answer = c.statement(A, {}, "INSERT INTO t VALUES (1)")
    assert isinstance(answer, Failure)
    assert answer.code == code


def test_an_eviction_reaches_every_primary_member_and_keeps_the_process_out() -> None:
    c = cluster()
    frozen = uuid_of(c, C)
    c.command({"cmd": "freeze", "node": C})
    assert c.statement(A, {}, EVICT.format(frozen)) == Done()
    assert status(c, A, "wsrep_evs_evict_list") == frozen
    assert status(c, B, "wsrep_evs_evict_list") == ""
    c.advance(100.51)
    assert status(c, B, "wsrep_evs_evict_list") == frozen
    assert frozen not in view(c, A)
    c.command({"cmd": "thaw", "node": C})
    c.advance(110.0)
    seen = node(c, C)
    assert (seen["needs_restart"], seen["in_primary"], seen["evicted"]) == (True, False, True)
    assert status(c, C, "wsrep_cluster_status") == "Disconnected"
    # a new process under a new uuid joins, the old uuid still listed
    c.command({"cmd": "restart", "node": C})
    c.advance(112.3)
    assert node(c, C)["state"] == "Synced"
    assert uuid_of(c, C) != frozen
    assert status(c, A, "wsrep_evs_evict_list") == frozen
    # an empty evs.evict clears only the asking member's list
    c.statement(A, {}, 'SET GLOBAL wsrep_provider_options = "evs.evict="')
    assert status(c, A, "wsrep_evs_evict_list") == ""
    assert status(c, B, "wsrep_evs_evict_list") == frozen


def test_a_majority_lost_and_healed() -> None:
    c = cluster()
    c.command({"cmd": "freeze", "node": B})
    c.command({"cmd": "freeze", "node": C})
    c.advance(103.01)
    assert status(c, A, "wsrep_cluster_status") == "non-Primary"
    c.command({"cmd": "thaw", "node": B})
    c.advance(105.02)
    assert {status(c, a, "wsrep_cluster_status") for a in (A, B)} == {"Primary"}
    assert node(c, C)["in_primary"] is False


def test_commands_it_refuses() -> None:
    c = cluster()
    for message in (
        {"cmd": "thaw", "node": A},
        {"cmd": "explode", "node": A},
        {"cmd": "kill", "node": "127.0.0.1:9"},
        {"cmd": "slow", "node": A, "delay_ms": -1},
        {"cmd": "configure", "cluster": "g1", "nonsense_s": 1},
    ):
        with pytest.raises(ValueError, match=r"\w"):
            c.command(message)


# -- any sequence keeps the model's own rules ----------------------------------------------

NODES = (A, B, C)
COMMANDS = ("kill", "restart", "freeze", "thaw", "isolate", "rejoin", "donor", "undonor", "cut")
steps = st.lists(
    st.one_of(
        st.tuples(st.sampled_from(COMMANDS), st.sampled_from(NODES)),
        st.tuples(st.just("evict"), st.sampled_from(NODES), st.sampled_from(NODES)),
        st.tuples(st.just("clear"), st.sampled_from(NODES)),
        st.tuples(st.just("write"), st.sampled_from(NODES)),
        st.tuples(st.just("advance"), st.floats(0.0, 4.0)),
        st.tuples(st.just("read_only"), st.sampled_from(NODES), st.booleans()),
    ),
    max_size=40,
)


def apply(c: GaleraCluster, step: tuple[object, ...]) -> None:
    what = step[0]
    if what == "advance":
        assert isinstance(step[1], float)
        c.advance(c.now + step[1])
        return
    address = str(step[1])
    if c.reach(address) is not Reach.LISTEN and what in ("evict", "clear", "write"):
        return  # no client reaches it
    if what == "evict":
        c.statement(address, {}, EVICT.format(uuid_of(c, str(step[2]))))
    elif what == "clear":
        c.statement(address, {}, EVICT.format(""))
    elif what == "write":
        c.statement(address, {}, "INSERT INTO t VALUES (1)")
    elif what == "read_only":
        c.command({"cmd": "set", "node": address, "variables": {"read_only": bool(step[2])}})
    else:
        # refused when the node is not in a state the command applies to
        with contextlib.suppress(ValueError):
            c.command({"cmd": what, "node": address})


def check_rules(c: GaleraCluster) -> None:
    truth = c.truth()
    nodes = truth["nodes"]
    assert isinstance(nodes, dict)
    primary = [a for a in NODES if nodes[a]["in_primary"]]
    # one Primary component: every member that says Primary sees the same view
    assert len({frozenset(view(c, a)) for a in primary}) <= 1
    pending = {u for _, u in c.evictions}
    for a in primary:
        for listed in nodes[a]["evict_list"]:
            assert listed not in view(c, a) or listed in pending, (a, listed)
    for a in NODES:
        seen = nodes[a]
        values, variables = c.globals(a)
        if seen["process"] == "killed":
            assert seen["reach"] != "LISTEN"
        assert seen["reach"] == c.reach(a).name
        assert seen["in_primary"] == (values["wsrep_cluster_status"] == "Primary")
        assert seen["state"] == values["wsrep_local_state_comment"]
        assert seen["evict_list"] == [u for u in values["wsrep_evs_evict_list"].split(",") if u]
        if seen["identity"] is not None:
            assert seen["identity"] == values["wsrep_gcomm_uuid"]
        if seen["writable"]:
            assert values["wsrep_local_state_comment"] == "Synced"
            assert values["wsrep_ready"] == "ON"
            assert variables["read_only"] == "OFF"
            assert c.statement(a, {}, "INSERT INTO t VALUES (1)") in (
                Done(),
                Stall("commit waits for silent " + c._silent_in_view(c.members[a])),
            )


@settings(max_examples=150, deadline=None)
@given(steps)
def test_any_sequence_keeps_the_models_rules(sequence: list[tuple[object, ...]]) -> None:
    c = cluster()
    check_rules(c)
    for step in sequence:
        apply(c, step)
        check_rules(c)


def test_members_gone_silent_together_leave_in_one_view_change() -> None:
    # 4 members: 2 lost in one view change is no majority; 1 then 1 would have kept it
    d = "127.0.0.1:4"
    c = GaleraCluster("g1", (A, B, C, d), 7)
    c.advance(100.6)
    c.command({"cmd": "kill", "node": C})
    c.advance(100.9)  # within the same check_s (0.5 s) of the first
    c.command({"cmd": "kill", "node": d})
    c.advance(102.5)
    assert status(c, A, "wsrep_cluster_status") == "non-Primary"
    c = GaleraCluster("g1", (A, B, C, d), 7)
    c.advance(100.0)
    c.command({"cmd": "kill", "node": C})
    c.advance(102.0)
    c.command({"cmd": "kill", "node": d})
    c.advance(104.0)
    assert status(c, A, "wsrep_cluster_status") == "Primary"


@pytest.mark.parametrize(("back_at", "primary_at_once"), [(1.0, True), (3.5, False)])
def test_an_isolated_member_back_before_or_after_its_peers_dropped_it(
    back_at: float, primary_at_once: bool
) -> None:
    c = cluster()
    old = uuid_of(c, C)
    c.command({"cmd": "isolate", "node": C})
    assert isinstance(c.statement(A, {}, "INSERT INTO t VALUES (1)"), Stall)
    c.advance(100.0 + back_at)
    c.command({"cmd": "rejoin", "node": C})
    assert node(c, C)["in_primary"] is primary_at_once
    c.advance(100.0 + back_at + 2.3)  # join_s and joined_s later
    assert node(c, C)["in_primary"] is True
    assert node(c, C)["state"] == "Synced"
    assert uuid_of(c, C) == old
