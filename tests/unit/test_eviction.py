"""Which dead Galera members are evicted, through whom, and when the entries are cleared; the
actions against a recording connection (the SQL and its parameters)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from checker_core.core.hysteresis import NodeMemory
from checker_core.core.model import NodeAddress
from checker_core.core.probes import ProbeFailure, ProbeResult
from checker_core.core.schema import Checker
from checker_core.edges.memory import StateStore
from checker_core.edges.node_admin import NoNodeAdmin
from checker_core.passes.plugin import AfterPass
from galera_checker.actions import GaleraActions
from galera_checker.eviction import (
    Eviction,
    clearings,
    evict_list,
    evictions,
    member_to_evict,
    needs_view,
    still_evicted,
    stranded,
)
from galera_checker.node_calls import EVICT_SQL
from tests.unit.daemon_cases import galera_pass
from tests.unit.galera_cases import N1, N2, N3, cluster_settings, probe_ok, steady

ROSTER = (N1, N2, N3)
UUID = {N1: "u-1", N2: "u-2", N3: "u-3"}


def alive(node: NodeAddress, **facts: str) -> ProbeResult:
    return probe_ok(node, wsrep_gcomm_uuid=UUID[node], **facts)


def refused(node: NodeAddress) -> ProbeResult:
    return ProbeResult(node, None, "Connection refused (error 2003)", 1.0, ProbeFailure.REFUSED)


def silent(node: NodeAddress) -> ProbeResult:
    return ProbeResult(node, None, "timed out", 800.0, ProbeFailure.SILENT)


def reset(node: NodeAddress) -> ProbeResult:
    return ProbeResult(node, None, "Connection reset by peer", 1.0, ProbeFailure.ERROR)


@pytest.mark.parametrize(
    ("dead", "evicted"),
    [
        (refused(N1), (N1,)),
        (silent(N1), ()),  # SIGSTOP, a loaded host: a timeout proves nothing
        (reset(N1), ()),  # the moment a process dies: proof comes with the next, refused probe
        (alive(N1), ()),
        (alive(N1, wsrep_cluster_status="non-Primary"), ()),
    ],
    ids=["refused", "silent", "reset", "alive", "non-primary"],
)
def test_only_a_refused_node_is_evicted(dead: ProbeResult, evicted: tuple[NodeAddress]) -> None:
    probes = {N1: dead, N2: alive(N2), N3: alive(N3)}
    found = evictions(probes, ROSTER, UUID, writers=(N2,))
    assert tuple(e.node for e in found) == evicted
    assert all(e.survivor == N2 and e.uuid == "u-1" for e in found), "through the writer"


def test_no_survivor_in_the_primary_component_evicts_nothing() -> None:
    probes = {
        N1: refused(N1),
        N2: alive(N2, wsrep_cluster_status="non-Primary"),
        N3: silent(N3),
    }
    assert evictions(probes, ROSTER, UUID, writers=()) == ()


def test_an_unknown_uuid_is_left_to_the_survivors_view() -> None:
    probes = {N1: refused(N1), N2: alive(N2), N3: alive(N3)}
    [found] = evictions(probes, ROSTER, {}, writers=())
    assert found.uuid is None and found.survivor == N2


LISTS = "wsrep_evs_evict_list"


@pytest.mark.parametrize(
    ("probes", "members", "cleared"),
    [
        # ours or an operator's: every entry stale (in no view, no answering node's uuid)
        ({N1: refused(N1), N2: alive(N2, **{LISTS: "old-1"})}, {"u-2", "u-3"}, (N2,)),
        ({N2: alive(N2, **{LISTS: "x-9,old-1"}), N3: alive(N3, **{LISTS: "x-9"})}, set(), (N2, N3)),
        # a member of the view: its eviction is under way, the entry stands
        ({N2: alive(N2, **{LISTS: "old-1"})}, {"old-1", "u-2"}, ()),
        # a live node's own uuid (an evicted process that woke and answers): never touched,
        # and evs.evict= would empty the whole list, stale entries beside it included
        ({N1: alive(N1), N2: alive(N2, **{LISTS: "u-1,old-1"})}, {"u-2"}, ()),
        # only members of the Primary component are cleared
        ({N2: alive(N2, wsrep_cluster_status="non-Primary", **{LISTS: "old-1"})}, set(), ()),
        # the view could not be asked: nothing is known stale
        ({N2: alive(N2, **{LISTS: "old-1"})}, None, ()),
        ({N2: alive(N2)}, set(), ()),
    ],
    ids=["stale", "operator-and-ours", "in-view", "live-node", "non-primary", "no-view", "empty"],
)
def test_a_list_is_cleared_when_every_entry_in_it_is_stale_whoever_made_it(
    probes: dict[NodeAddress, ProbeResult],
    members: set[str] | None,
    cleared: tuple[NodeAddress, ...],
) -> None:
    assert tuple(c.node for c in clearings(probes, ROSTER, members)) == cleared


@pytest.mark.parametrize(
    ("probes", "asked"),
    [
        ({N2: alive(N2, **{LISTS: "old-1"})}, True),
        ({N1: alive(N1), N2: alive(N2, **{LISTS: "u-1"})}, False),  # a live node's own
        ({N2: alive(N2, wsrep_cluster_status="non-Primary", **{LISTS: "old-1"})}, False),
        ({N2: alive(N2), N3: alive(N3)}, False),
    ],
    ids=["stale-maybe", "live-only", "non-primary", "empty"],
)
def test_the_view_is_asked_only_while_a_list_may_hold_a_stale_entry(
    probes: dict[NodeAddress, ProbeResult], asked: bool
) -> None:
    assert needs_view(probes, ROSTER) is asked


def test_the_evict_list_is_read_as_uuids() -> None:
    assert evict_list("") == ()
    assert evict_list("b, a") == ("a", "b")


# ---------------------------------------------------------------- the actions


class Recorded:
    """A connection that answers the member query and records what was executed."""

    def __init__(self, members: dict[str, str], log: list[tuple[str, object]]) -> None:
        self.members, self.log = members, log

    def cursor(self) -> Recorded:
        return self

    def __enter__(self) -> Recorded:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def execute(self, sql: str, args: object = None) -> None:
        self.log.append((sql, args))

    def fetchall(self) -> list[tuple[str, str]]:
        return list(self.members.items())


def recording(members: dict[str, str], log: list[tuple[str, object]]) -> Any:
    @contextlib.contextmanager
    def connect(account: object, node: NodeAddress, *, timeout_s: float) -> Iterator[Recorded]:
        if account is None:
            raise NoNodeAdmin("no [node_admin] account is configured")
        log.append(("connect", node))
        yield Recorded(members, log)

    return connect


def after(tmp_path: Path, probes: dict[NodeAddress, ProbeResult], acting: bool = True) -> AfterPass:
    result = galera_pass(steady(N1), probes, apply=False)
    assert result.decision is not None
    return AfterPass(
        cluster_settings(evict_dead_nodes=True),
        result.decision,
        result.probes,
        object(),  # type: ignore[arg-type]  # an account: the recording connect only checks it
        StateStore(tmp_path, Checker.GALERA),
        1.0,
        acting,
    )


def test_a_refused_member_still_in_the_view_is_evicted_once(tmp_path: Path) -> None:
    log: list[tuple[str, object]] = []
    clock = [100.0]
    actions = GaleraActions(
        recording({"u-1": "127.0.0.1:3311", "u-2": "x", "u-3": "y"}, log), lambda: clock[0]
    )
    actions.after_pass(after(tmp_path, {n: alive(n) for n in ROSTER}))  # learns the uuids
    done = actions.after_pass(after(tmp_path, {N1: refused(N1), N2: alive(N2), N3: alive(N3)}))
    assert done.evictions == 1
    assert log.count((EVICT_SQL, ("evs.evict=u-1",))) == 2, "the uuid goes as a parameter"
    assert [node for what, node in log if what == "connect"] == [N2, N3], "every survivor told"
    assert (
        "evicted 127.0.0.1:3311 (gcomm uuid u-1) through 127.0.0.1:3312, 127.0.0.1:3313"
        in done.said[0]
    )
    log.clear()
    again = actions.after_pass(after(tmp_path, {N1: refused(N1), N2: alive(N2), N3: alive(N3)}))
    assert again.evictions == 0 and log == [], "asked a moment ago: not asked again"
    clock[0] += 6.0
    retried = actions.after_pass(after(tmp_path, {N1: refused(N1), N2: alive(N2), N3: alive(N3)}))
    assert retried.evictions == 1, "still in the view a while later: evicted again"


def test_a_scheduler_process_asks_no_sooner_than_the_last_one_allows(tmp_path: Path) -> None:
    """Each scheduler pass is a new process: the state dir keeps when the last one asked the
    survivors, and said a withheld eviction, so the next neither asks nor says it again
    sooner than a daemon would (RETRY_S)."""
    log: list[tuple[str, object]] = []
    clock = [100.0]
    members = {"u-1": "127.0.0.1:3311", "u-2": "x", "u-3": "y"}
    dead = {N1: refused(N1), N2: alive(N2), N3: alive(N3)}

    def process() -> GaleraActions:
        made = GaleraActions(recording(members, log), lambda: clock[0])
        made.memory.known[N1] = "u-1"  # the uuid its state file kept
        return made

    assert process().after_pass(after(tmp_path, dead)).evictions == 1
    log.clear()
    clock[0] += 1.0
    again = process().after_pass(after(tmp_path, dead))
    assert again.evictions == 0 and log == [], "asked a moment ago, by the last process"
    clock[0] += 5.0
    assert process().after_pass(after(tmp_path, dead)).evictions == 1, "RETRY_S later: again"
    settling = {
        N1: refused(N1),
        N2: alive(N2, wsrep_cluster_conf_id="7"),
        N3: alive(N3, wsrep_cluster_conf_id="8"),
    }
    clock[0] += 6.0
    said = process().after_pass(after(tmp_path, settling)).said
    assert any("do not agree on the view" in line for line in said)
    clock[0] += 1.0
    quiet = process().after_pass(after(tmp_path, settling)).said
    assert not any("do not agree on the view" in line for line in quiet), "said once per RETRY_S"


def test_a_member_gone_from_the_view_is_not_evicted(tmp_path: Path) -> None:
    log: list[tuple[str, object]] = []
    actions = GaleraActions(recording({"u-2": "x", "u-3": "y"}, log))
    actions.after_pass(after(tmp_path, {n: alive(n) for n in ROSTER}))  # learns the uuids
    done = actions.after_pass(after(tmp_path, {N1: refused(N1), N2: alive(N2), N3: alive(N3)}))
    assert done.evictions == 0 and done.said == () and done.failed == ()
    assert not any(sql == EVICT_SQL for sql, _ in log)


def test_the_restarted_process_at_the_address_is_never_evicted(tmp_path: Path) -> None:
    """Killed, restarted at once by its service under a new uuid, its client port closed while
    it joins: the old process (u-1) is gone from the view, the new one (u-1b) is in it at the
    same address. Nothing is evicted."""
    log: list[tuple[str, object]] = []
    actions = GaleraActions(recording({"u-1b": "127.0.0.1:3311", "u-2": "x", "u-3": "y"}, log))
    actions.after_pass(after(tmp_path, {n: alive(n) for n in ROSTER}))
    done = actions.after_pass(after(tmp_path, {N1: refused(N1), N2: alive(N2), N3: alive(N3)}))
    assert done.evictions == 0
    assert not any(sql == EVICT_SQL for sql, _ in log)


def test_a_node_never_seen_alive_is_not_evicted_and_the_line_says_why(tmp_path: Path) -> None:
    log: list[tuple[str, object]] = []
    actions = GaleraActions(recording({"u-9": "127.0.0.1:3311", "u-2": "x", "u-3": "y"}, log))
    done = actions.after_pass(after(tmp_path, {N1: refused(N1), N2: alive(N2), N3: alive(N3)}))
    assert done.evictions == 0 and log == []
    assert "gcomm uuid was never seen while it lived" in done.said[0]


@pytest.mark.parametrize(
    ("probes", "why"),
    [
        # two of three ports refused: a firewall as likely as two deaths
        ({N1: refused(N1), N2: refused(N2), N3: alive(N3)}, "hold no majority of their view of 3"),
        # a second Primary component (pc.bootstrap on a minority) beside the real one
        (
            {
                N1: refused(N1),
                N2: alive(N2, wsrep_cluster_conf_id="7"),
                N3: alive(N3, wsrep_cluster_conf_id="9", wsrep_cluster_size="1"),
            },
            "do not agree on the view",
        ),
    ],
    ids=["no-majority", "two-components"],
)
def test_survivors_evict_only_as_a_majority_of_one_view(
    probes: dict[NodeAddress, ProbeResult], why: str
) -> None:
    known = dict(UUID)
    [first, *_] = [e for e in evictions(probes, ROSTER, known, (N1,))]
    assert not first.allowed
    assert first.withheld is not None and why in first.withheld


def test_the_last_survivor_of_two_deaths_in_a_row_evicts_nobody() -> None:
    """After one eviction the view is 2; the second member dies: one survivor of two is no
    majority, so it is not told to evict and write alone."""
    probes = {N1: refused(N1), N2: alive(N2, wsrep_cluster_size="2")}
    [found] = evictions(probes, (N1, N2), dict(UUID), (N2,))
    assert not found.allowed


def test_a_dry_run_only_says_what_it_would_do(tmp_path: Path) -> None:
    log: list[tuple[str, object]] = []
    actions = GaleraActions(recording({"u-1": "127.0.0.1:3311"}, log))
    actions.after_pass(after(tmp_path, {n: alive(n) for n in ROSTER}, acting=False))
    probes = {N1: refused(N1), N2: alive(N2), N3: alive(N3)}
    done = actions.after_pass(after(tmp_path, probes, acting=False))
    assert log == []
    assert done.said == (
        f"would evict {N1} through {N2} (connection refused: Connection refused (error 2003))",
    )


def test_the_member_is_found_by_its_uuid_never_by_its_address() -> None:
    known = Eviction(N1, "u-1", N2, "refused")
    unknown = Eviction(N1, None, N2, "refused")
    view = {"u-1": "10.0.0.1:3306", "u-9": "127.0.0.1:3311"}
    assert member_to_evict(known, view) == "u-1"
    assert member_to_evict(unknown, view) is None
    assert member_to_evict(known, {"u-2": "x", "u-1b": "127.0.0.1:3311"}) is None


@pytest.mark.parametrize(("answer_s", "asked"), [(0.7, 2), (1.1, 1)])
def test_the_actions_keep_to_the_pass_deadline(tmp_path: Path, answer_s: float, asked: int) -> None:
    """Slow survivors: each connect is given what is left of the pass's 1 s budget, never the
    whole of it, and a survivor the deadline leaves no time for is not told, which the line
    says."""
    log: list[tuple[str, object]] = []
    clock = [100.0]
    given: list[float] = []
    members = {"u-1": "127.0.0.1:3311", "u-2": "x", "u-3": "y"}

    @contextlib.contextmanager
    def slow(account: object, node: NodeAddress, *, timeout_s: float) -> Iterator[Recorded]:
        given.append(round(timeout_s, 3))
        clock[0] += answer_s
        log.append(("connect", node))
        yield Recorded(members, log)

    actions = GaleraActions(slow, lambda: clock[0])  # type: ignore[arg-type]
    actions.memory.known[N1] = "u-1"
    done = actions.after_pass(after(tmp_path, {N1: refused(N1), N2: alive(N2), N3: alive(N3)}))
    assert done.evictions == 1
    assert given == [1.0, round(1.0 - answer_s, 3)][:asked]
    late = f"{N3} not told: the pass's deadline (run.max_runtime_ms) came first"
    assert (late in done.said[0]) == (asked == 1), done.said


def test_a_scheduler_pass_evicts_by_the_uuid_its_state_file_kept(tmp_path: Path) -> None:
    """A new process every pass: the uuid comes from the state file's memory of the node."""
    log: list[tuple[str, object]] = []
    given = after(tmp_path, {N1: refused(N1), N2: alive(N2), N3: alive(N3)})
    memory = {**given.decision.memory, N1: NodeMemory(routable=True, identity="u-1")}
    remembered = replace(given, decision=replace(given.decision, memory=memory))
    actions = GaleraActions(recording({"u-1": "127.0.0.1:3311", "u-2": "x", "u-3": "y"}, log))
    done = actions.after_pass(remembered)
    assert done.evictions == 1
    assert (EVICT_SQL, ("evs.evict=u-1",)) in log


def test_a_withheld_eviction_is_not_put_off_once_the_survivors_agree(tmp_path: Path) -> None:
    """The moment after a kill, the survivors may name different views; the next pass, a
    moment later, finds them agreeing and evicts then, not RETRY_S later."""
    log: list[tuple[str, object]] = []
    clock = [100.0]
    actions = GaleraActions(
        recording({"u-1": "127.0.0.1:3311", "u-2": "x", "u-3": "y"}, log), lambda: clock[0]
    )
    actions.after_pass(after(tmp_path, {n: alive(n) for n in ROSTER}))
    settling = {
        N1: refused(N1),
        N2: alive(N2, wsrep_cluster_conf_id="7"),
        N3: alive(N3, wsrep_cluster_conf_id="8"),
    }
    withheld = actions.after_pass(after(tmp_path, settling))
    assert withheld.evictions == 0 and "do not agree on the view" in withheld.said[0]
    clock[0] += 0.2
    agreed = actions.after_pass(after(tmp_path, {N1: refused(N1), N2: alive(N2), N3: alive(N3)}))
    assert agreed.evictions == 1


# ---------------------------------------------------------------- per cluster, from the lists


def test_another_clusters_pass_never_cuts_this_ones_eviction_short(tmp_path: Path) -> None:
    """Cluster b's pass runs (on another thread in the daemon) while cluster a's eviction is
    under way, with a shorter deadline of its own: a's eviction keeps a's deadline and every
    survivor is told."""
    log: list[tuple[str, object]] = []
    clock = [100.0]
    members = {"u-1": "127.0.0.1:3311", "u-2": "x", "u-3": "y"}
    b_pass = replace(
        after(tmp_path, {n: alive(n) for n in ROSTER}),
        cluster=cluster_settings(name="b", evict_dead_nodes=True),
        budget_s=0.05,
    )

    @contextlib.contextmanager
    def connect(account: object, node: NodeAddress, *, timeout_s: float) -> Iterator[Recorded]:
        log.append(("connect", node))
        if len(log) == 1:  # a's first statement: b's pass runs meanwhile
            actions.after_pass(b_pass)
            clock[0] += 0.1
        yield Recorded(members, log)

    actions = GaleraActions(connect, lambda: clock[0])  # type: ignore[arg-type]
    actions.memory.known[N1] = "u-1"
    done = actions.after_pass(after(tmp_path, {N1: refused(N1), N2: alive(N2), N3: alive(N3)}))
    assert done.evictions == 1
    assert "not told" not in done.said[0], done.said
    assert log.count((EVICT_SQL, ("evs.evict=u-1",))) == 2, "both survivors told"


def test_an_eviction_the_deadline_skipped_is_tried_by_the_next_pass(tmp_path: Path) -> None:
    """A daemon's pass: not asked is not tried: the next pass, a moment later, evicts, not
    RETRY_S later."""
    log: list[tuple[str, object]] = []
    clock = [100.0]
    actions = GaleraActions(
        recording({"u-1": "127.0.0.1:3311", "u-2": "x", "u-3": "y"}, log), lambda: clock[0]
    )
    actions.memory.known[N1] = "u-1"
    dead = {N1: refused(N1), N2: alive(N2), N3: alive(N3)}
    daemon = replace(after(tmp_path, dead), persistent=True)
    skipped = actions.after_pass(replace(daemon, budget_s=0.0))
    assert skipped.evictions == 0 and "deadline" in skipped.failed[0], skipped
    clock[0] += 0.2
    assert actions.after_pass(daemon).evictions == 1


def test_a_scheduler_pass_evicts_a_dead_node_its_deadline_left_undone_after_it(
    tmp_path: Path,
) -> None:
    """A scheduler process: what its pass's deadline left undone is done once the pass is
    over, with a deadline of its own, and noted in the state dir."""
    log: list[tuple[str, object]] = []
    actions = GaleraActions(recording({"u-1": "127.0.0.1:3311", "u-2": "x", "u-3": "y"}, log))
    actions.memory.known[N1] = "u-1"
    dead = {N1: refused(N1), N2: alive(N2), N3: alive(N3)}
    passed = actions.after_pass(replace(after(tmp_path, dead), budget_s=0.0))
    assert passed.evictions == 0 and passed.failed == () and log == [], passed
    assert "eviction of 127.0.0.1:3311 after this pass" in passed.said[0], passed
    (later,) = actions.finish()
    assert later.cluster == "main" and later.done.evictions == 1, later
    assert later.done.said[0].startswith("evicted 127.0.0.1:3311 (gcomm uuid u-1) through")
    assert log.count((EVICT_SQL, ("evs.evict=u-1",))) == 2, "every survivor told"
    assert StateStore(tmp_path, Checker.GALERA).evicted("main") == {"u-1": str(N1)}
    assert actions.finish() == (), "done once"


def listing(uuids: str) -> dict[NodeAddress, ProbeResult]:
    return {n: alive(n, wsrep_evs_evict_list=uuids) for n in ROSTER}


@pytest.mark.parametrize("recorded", [(), ("old-1",)], ids=["state-dir-lost", "state-file-hint"])
def test_stale_entries_are_cleared_from_the_lists_alone(
    tmp_path: Path, recorded: tuple[str, ...]
) -> None:
    """After a restart without the state directory (or with it), the entries every member
    lists, in no view and no live node's uuid, are cleared from every member: the lists
    themselves show them stale."""
    store = StateStore(tmp_path, Checker.GALERA)
    if recorded:  # as an older version wrote it: the uuids alone
        store.evicted_path("main").write_text(json.dumps(list(recorded)))
    log: list[tuple[str, object]] = []
    actions = GaleraActions(recording({"u-1": "a", "u-2": "b", "u-3": "c"}, log))
    done = actions.after_pass(after(tmp_path, listing("dead-beef,old-1")))
    assert [n for sql, n in log if sql == "connect"] == [N1, N1, N2, N3], "view, then each"
    assert log.count((EVICT_SQL, ("evs.evict=",))) == 3, log
    assert all("cleared the eviction list" in line for line in done.said), done
    actions.after_pass(after(tmp_path, {n: alive(n) for n in ROSTER}))
    assert store.evicted("main") == {}, "an entry of no known node goes once no list holds it"


def test_a_clearing_that_failed_is_done_by_the_next_pass_at_once(tmp_path: Path) -> None:
    """Nothing throttles a clearing: while a list shows stale entries, every pass clears it;
    piled-up entries go together."""
    log: list[tuple[str, object]] = []
    members = {"u-1": "a", "u-2": "b", "u-3": "c"}
    failing = [True]

    @contextlib.contextmanager
    def connect(account: object, node: NodeAddress, *, timeout_s: float) -> Iterator[Recorded]:
        if failing[0]:
            raise OSError("Connection reset by peer")
        log.append(("connect", node))
        yield Recorded(members, log)

    actions = GaleraActions(connect, lambda: 100.0)  # type: ignore[arg-type]
    piled = listing("s-1,s-2,s-3")
    first = actions.after_pass(after(tmp_path, piled))
    assert first.said == () and log == []
    assert "eviction lists not checked" in first.failed[0], first
    failing[0] = False
    again = actions.after_pass(after(tmp_path, piled))
    assert log.count((EVICT_SQL, ("evs.evict=",))) == 3, again
    assert "s-1, s-2, s-3" in again.said[0]


# ---------------------------------------------------------------- evicted, needs a restart


def woken(node: NodeAddress, uuid: str, **facts: str) -> ProbeResult:
    """An evicted process that runs again: it answers, out of the Primary component."""
    out = {"wsrep_cluster_status": "non-Primary", "wsrep_connected": "OFF"}
    return probe_ok(node, wsrep_gcomm_uuid=uuid, **{**out, **facts})


@pytest.mark.parametrize(
    ("n1", "lists", "evicted", "shown"),
    [
        (woken(N1, "u-1"), "", {"u-1"}, True),  # the checker evicted this very process
        (woken(N1, "u-1"), "u-1", set(), True),  # state dir lost: a Primary member lists it
        (woken(N1, "u-1b"), "", {"u-1"}, False),  # restarted: a new process rejoins
        (alive(N1), "", {"u-1"}, False),  # merged back
        (woken(N1, "u-1"), "", set(), False),  # lost state dir, lists cleared: just down
        (refused(N1), "", {"u-1"}, False),  # it does not answer: down, as any dead node
    ],
    ids=["evicted", "listed", "restarted", "back", "unknown", "dead"],
)
def test_an_evicted_process_out_of_the_view_is_shown_until_it_is_back(
    n1: ProbeResult, lists: str, evicted: set[str], shown: bool
) -> None:
    probes = {N1: n1, N2: alive(N2, wsrep_evs_evict_list=lists), N3: alive(N3)}
    assert stranded(probes, ROSTER, evicted) == ((N1,) if shown else ())


@pytest.mark.parametrize(
    ("n1", "kept"),
    [
        (refused(N1), True),  # not heard: it may be the frozen process, still to wake
        (woken(N1, "u-1"), True),
        (woken(N1, "u-1b"), False),
        (alive(N1), False),
    ],
    ids=["dead", "stranded", "restarted", "back"],
)
def test_an_evicted_uuid_is_remembered_until_its_node_is_back_or_restarted(
    n1: ProbeResult, kept: bool
) -> None:
    probes = {N1: n1, N2: alive(N2), N3: alive(N3)}
    remembered = {"u-1": str(N1)}
    assert still_evicted(probes, ROSTER, remembered) == (remembered if kept else {})
    assert still_evicted(probes, (N2, N3), remembered) == {}, "a node out of the roster"


def test_the_pass_says_an_evicted_process_needs_a_restart_until_it_is_restarted(
    tmp_path: Path,
) -> None:
    log: list[tuple[str, object]] = []
    actions = GaleraActions(recording({"u-1": str(N1), "u-2": "x", "u-3": "y"}, log))
    actions.after_pass(after(tmp_path, {n: alive(n) for n in ROSTER}))
    evicting = actions.after_pass(after(tmp_path, {N1: refused(N1), N2: alive(N2), N3: alive(N3)}))
    assert evicting.evictions == 1
    store = StateStore(tmp_path, Checker.GALERA)
    assert store.evicted("main") == {"u-1": str(N1)}
    stuck = actions.after_pass(
        after(tmp_path, {N1: woken(N1, "u-1"), N2: alive(N2), N3: alive(N3)})
    )
    assert stuck.stranded == (N1,)
    assert f"{N1} is an evicted process out of the Primary component" in stuck.said[0]
    dry = actions.after_pass(
        after(tmp_path, {N1: woken(N1, "u-1"), N2: alive(N2), N3: alive(N3)}, acting=False)
    )
    assert dry.stranded == (N1,), "shown by a standby or a dry run too"
    restarted = {N1: woken(N1, "u-1b", wsrep_local_state="1"), N2: alive(N2), N3: alive(N3)}
    back = actions.after_pass(after(tmp_path, restarted))
    assert back.stranded == () and store.evicted("main") == {}


def test_status_and_metrics_show_a_node_that_needs_a_restart() -> None:
    from checker_core.report import status_record
    from checker_core.service.metrics import DaemonMetrics
    from tests.unit.galera_cases import HG

    result = replace(galera_pass(steady(N2)), stranded=(N1,))
    assert status_record(result, HG)["needs_restart"] == [str(N1)]
    metrics = DaemonMetrics("galera")
    metrics.observe(result, 100.0)
    gauge = "proxysql_checker_evicted_needs_restart"
    samples = {
        s.labels["node"]: s.value
        for family in metrics.registry.collect()
        for s in family.samples
        if s.name == gauge
    }
    assert samples == {str(N1): 1.0, str(N2): 0.0, str(N3): 0.0}


@pytest.mark.parametrize(
    ("uuids", "writers", "first", "then"),
    [
        ({N2: "9f-b", N3: "27-a"}, (N2,), N3, (N2,)),  # the lowest uuid, not the writer
        ({N2: "27-a", N3: "9f-b"}, (N3,), N2, (N3,)),
        ({N2: "9f-b", N3: None}, (N3,), N3, (N2,)),  # a uuid unsaid: the writer first
    ],
    ids=["lowest-not-writer", "lowest-is-reader", "unsaid"],
)
def test_the_survivor_that_leads_the_next_view_is_told_first(
    uuids: dict[NodeAddress, str | None],
    writers: tuple[NodeAddress, ...],
    first: NodeAddress,
    then: tuple[NodeAddress, ...],
) -> None:
    """Galera's member of the lowest gcomm uuid leads the next view: told first, the survivors
    drop the member at once; told after another survivor, about 0.5 s later (measured on the
    lab: docs/eviction.md)."""
    probes = {N1: refused(N1)}
    for node, uuid in uuids.items():
        probes[node] = probe_ok(node, **({"wsrep_gcomm_uuid": uuid} if uuid else {}))
    (found,) = evictions(probes, ROSTER, {**UUID}, writers=writers)
    assert (found.survivor, found.others) == (first, then)
