"""The simulated world's judge: each invariant is broken only by what it names, and only once the
condition has outlasted its bound."""

from __future__ import annotations

from typing import Any

import pytest

from tests.world.invariants import (
    ClusterSpec,
    Judge,
    LoadedPass,
    Row,
    Sample,
    quiescent,
    variables_kept,
)

SPEC = ClusterSpec("g1", "galera", 10, 11, 12, 13, 1, detect_s=2.0, recover_s=3.0, status_s=1.5)
A, B, C = "127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"


def node(**changes: Any) -> dict[str, Any]:
    healthy = {
        "process": "running",
        "identity": "u",
        "reach": "LISTEN",
        "in_primary": True,
        "writable": True,
        "readable": True,
        "evicted": False,
        "needs_restart": False,
        "state": "Synced",
        "role": None,
        "evict_list": [],
    }
    return {**healthy, **changes}


def world(**nodes: dict[str, Any]) -> dict[str, Any]:
    names = {"a": A, "b": B, "c": C}
    found = {A: node(), B: node(), C: node()}
    for key, value in nodes.items():
        found[names[key]] = value
    return {"g1": {"kind": "galera", "name": "g1", "nodes": found}}


def routed(writer: str | None = A, readers: tuple[str, ...] = (B, C)) -> tuple[Row, ...]:
    rows = [Row(11, r, "ONLINE") for r in readers]
    if writer:
        rows.append(Row(10, writer, "ONLINE"))
    return tuple(rows)


def sample(at: float, runtime: tuple[Row, ...], truth: Any = None, **kw: Any) -> Sample:
    return Sample(at, runtime, kw.pop("staged", runtime), truth or world(), **kw)


def invariants(judge: Judge) -> list[int]:
    return [v.invariant for v in judge.violations]


def test_two_online_writers_break_invariant_1_at_once() -> None:
    judge = Judge([SPEC])
    judge.sample(sample(0.0, (*routed(), Row(10, B, "ONLINE"))))
    assert invariants(judge) == [1]
    # a writer ProxySQL holds OFFLINE_HARD for its clients is no second writer
    judge = Judge([SPEC])
    judge.sample(sample(0.0, (*routed(), Row(10, B, "OFFLINE_HARD"))))
    assert invariants(judge) == []


@pytest.mark.parametrize(
    ("fault", "where"),
    [
        (node(process="killed", reach="REFUSED", in_primary=False), "writer"),
        (node(process="frozen", reach="HANG"), "writer"),
        (node(in_primary=False, writable=False, readable=False, state="Initialized"), "writer"),
        (node(writable=False), "writer"),
        (node(process="killed", reach="REFUSED", in_primary=False), "reader"),
    ],
)
def test_a_route_to_a_node_out_of_the_world_breaks_invariant_2_after_the_bound(
    fault: dict[str, Any], where: str
) -> None:
    judge = Judge([SPEC])
    target = A if where == "writer" else B
    truth = world(a=fault) if target == A else world(b=fault)
    for at in (0.0, 1.0, 2.0):
        judge.sample(sample(at, routed(), truth))
    assert 2 not in invariants(judge), "within the bound"
    judge.sample(sample(2.1, routed(), truth))
    judge.sample(sample(2.2, routed(), truth))
    assert invariants(judge).count(2) == 1
    assert where + " " + target in judge.violations[0].what


def test_a_reader_that_cannot_write_is_no_violation() -> None:
    judge = Judge([SPEC])
    truth = world(b=node(writable=False))
    for at in (0.0, 5.0):
        judge.sample(sample(at, routed(), truth))
    assert invariants(judge) == []


def test_a_condition_that_ends_starts_its_bound_again() -> None:
    judge = Judge([SPEC])
    dead = world(a=node(process="killed", reach="REFUSED", in_primary=False))
    for at, truth in ((0.0, dead), (1.5, dead), (1.6, world()), (2.0, dead), (3.9, dead)):
        judge.sample(sample(at, routed(), truth))
    assert invariants(judge) == []


def test_an_empty_writer_hostgroup_breaks_invariant_3_only_while_a_node_could_write() -> None:
    judge = Judge([SPEC])
    for at in (0.0, 2.5):
        judge.sample(sample(at, routed(writer=None)))
    assert invariants(judge) == [3]
    judge = Judge([SPEC])
    nobody = world(
        a=node(writable=False), b=node(writable=False), c=node(writable=False)
    )  # a GR brownout: the new primary is not writable yet
    for at in (0.0, 2.5):
        judge.sample(sample(at, routed(writer=None), nobody))
    assert invariants(judge) == []


def test_a_healthy_node_left_out_breaks_invariant_4_after_the_recovery_bound() -> None:
    judge = Judge([SPEC])
    for at in (0.0, 3.5):
        judge.sample(sample(at, routed(readers=(B,))))
    assert invariants(judge) == [4]
    # a donor is a last resort only, not owed a place
    judge = Judge([SPEC])
    for at in (0.0, 3.5):
        judge.sample(sample(at, routed(readers=(B,)), world(c=node(state="Donor/Desynced"))))
    assert invariants(judge) == []
    # one the checker cannot reach (cut off from it alone) is no violation
    judge = Judge([SPEC])
    for at in (0.0, 3.5):
        judge.sample(sample(at, routed(readers=(B,)), world(c=node(reach="HANG"))))
    assert invariants(judge) == []


def test_a_pause_holds_the_routing_bounds_and_watches_staging() -> None:
    judge = Judge([SPEC])
    dead = world(a=node(process="killed", reach="REFUSED", in_primary=False))
    judge.paused_after("g1", 0.5)
    for at in (0.0, 0.6, 5.0):
        judge.sample(sample(at, routed(), dead))
    assert invariants(judge) == [], "a paused checker leaves the dead writer: the operator's call"
    judge.sample(sample(5.1, routed(), dead, staged=routed(writer=B)))
    assert invariants(judge) == [6]
    judge.resumed("g1", 6.0)
    judge.sample(sample(6.05, routed(), dead))
    judge.sample(sample(7.9, routed(), dead))
    assert invariants(judge) == [6], "the bound starts again at the resume"
    judge.sample(sample(8.1, routed(), dead))
    assert invariants(judge) == [6, 2]


def test_an_operators_staged_edit_set_aside_for_a_moment_is_kept() -> None:
    edit = Row(90, A, "ONLINE", 77)
    before = Row(90, A, "ONLINE", 10)
    judge = Judge([SPEC])
    judge.staged_edit("g1", edit, before)
    base = routed()
    judge.sample(sample(0.0, (*base, before), staged=(*base, edit)))
    judge.sample(sample(0.3, (*base, before), staged=(*base, before)))  # set aside for a LOAD
    judge.sample(sample(0.6, (*base, before), staged=(*base, edit)))
    assert invariants(judge) == []
    judge.sample(sample(0.7, (*base, edit), staged=(*base, edit)))
    assert invariants(judge) == [6], "the checker loaded it"


@pytest.mark.parametrize(
    ("edit_at", "load", "loaded_by_the_checker"),
    [
        ((0.50, 0.51), (0.505, 0.507), False),  # answered after the last read: unseen
        ((0.50, 0.51), (0.49, 0.52), False),  # in flight across both
        ((0.50, 0.51), (0.52, 0.53), True),  # read after the edit's answer: seen, and loaded
        ((0.50, 0.51), (0.40, 0.45), True),  # the LOAD went out before the edit did
        (None, (0.49, 0.52), True),  # an edit of unknown time: the checker's
    ],
)
def test_an_edit_staged_between_a_checkers_last_read_and_its_load_is_a_note(
    edit_at: tuple[float, float] | None,
    load: tuple[float, float],
    loaded_by_the_checker: bool,
) -> None:
    edit = Row(90, A, "ONLINE", 77)
    before = Row(90, A, "ONLINE", 10)
    base = routed()
    judge = Judge([SPEC])
    judge.staged_edit("g1", edit, before, edit_at)
    judge.checker_loads([load])
    judge.sample(sample(0.6, (*base, edit), staged=(*base, edit)))
    assert invariants(judge) == ([6] if loaded_by_the_checker else [])
    assert bool(judge.notes) is not loaded_by_the_checker


def loaded_edit(edit: Row, before: Row) -> Judge:
    """A judge told the operator staged `edit` over `before`, then LOADed it at 1.0 s."""
    judge = Judge([SPEC])
    judge.staged_edit("g1", edit, before)
    judge.edits_loaded(1.0)
    return judge


def test_an_operators_staged_edit_reverted_or_not_made_live_breaks_invariant_6() -> None:
    edit = Row(90, A, "ONLINE", 77)
    before = Row(90, A, "ONLINE", 10)
    base = routed()
    judge = Judge([SPEC])
    judge.staged_edit("g1", edit, before)
    for at in (0.0, 0.5, 1.2):
        judge.sample(sample(at, (*base, before), staged=(*base, before)))
    assert invariants(judge) == [6]
    judge = loaded_edit(edit, before)
    judge.sample(sample(1.1, (*base, before), staged=(*base, before)))
    judge.sample(sample(2.6, (*base, before), staged=(*base, before)))
    judge.sample(sample(4.0, (*base, before), staged=(*base, before)))
    assert invariants(judge) == [6]
    assert "not live" in judge.violations[0].what
    # at its bound, set aside by a checker's LOAD for a moment (staged as live), then his again:
    # the documented limit, not a violation (seed 63953)
    judge = loaded_edit(edit, before)
    judge.sample(sample(1.1, (*base, before), staged=(*base, edit)))
    judge.sample(sample(2.6, (*base, before), staged=(*base, before)))
    judge.sample(sample(2.7, (*base, before), staged=(*base, edit)))
    assert invariants(judge) == []
    assert "set aside" in judge.notes[0]
    # still staged, not live: his LOAD met a checker's set-aside (a documented limit)
    judge = loaded_edit(edit, before)
    judge.sample(sample(1.1, (*base, before), staged=(*base, edit)))
    judge.sample(sample(2.6, (*base, before), staged=(*base, edit)))
    assert invariants(judge) == []
    assert "set aside" in judge.notes[0]


def test_status_that_disagrees_with_runtime_breaks_invariant_7_after_its_bound() -> None:
    judge = Judge([SPEC])
    said = {"g1": {"writers": [B]}}
    judge.sample(sample(0.0, routed(), status=said))
    judge.sample(sample(1.4, routed(), status=said))
    assert invariants(judge) == []
    judge.sample(sample(1.6, routed(), status=said))
    assert invariants(judge) == [7]


def test_at_rest_staging_must_be_what_runs_and_eviction_lists_empty() -> None:
    rows = routed()
    assert quiescent(SPEC, 9.0, rows, rows, world()["g1"]) == []
    held = (*rows, Row(10, C, "OFFLINE_HARD"))
    assert quiescent(SPEC, 9.0, held, rows, world()["g1"]) == [], "ProxySQL's leaving row"
    shunned = (Row(10, A, "SHUNNED"), *rows[:-1])
    assert quiescent(SPEC, 9.0, shunned, rows, world()["g1"]) == []
    left = quiescent(SPEC, 9.0, rows, routed(writer=B), world()["g1"])
    assert [v.invariant for v in left] == [5]
    stale = world(b=node(evict_list=["u9"]))["g1"]
    assert [v.invariant for v in quiescent(SPEC, 9.0, rows, rows, stale)] == [5]
    kept_out = world(b=node(evict_list=["u3"]), c=node(identity="u3"))["g1"]
    assert [v.invariant for v in quiescent(SPEC, 9.0, rows, rows, kept_out)] == [4]
    # rows of hostgroups the cluster does not manage are not its business
    other = (*rows, Row(90, A, "ONLINE", 5))
    assert quiescent(SPEC, 9.0, other, rows, world()["g1"]) == []


def test_a_changed_proxysql_variable_breaks_invariant_5() -> None:
    before = {"mysql-auto_increment_delay_multiplex": "5", "mysql-poll_timeout": "2000"}
    assert variables_kept(before, dict(before), 1.0) == []
    after = {**before, "mysql-auto_increment_delay_multiplex": "0"}
    found = variables_kept(before, after, 1.0)
    assert [v.invariant for v in found] == [5]
    assert "auto_increment_delay_multiplex" in found[0].what


def test_a_healthy_node_judged_down_breaks_invariant_7_after_its_bound() -> None:
    judge = Judge([SPEC])
    said = {"g1": {"writers": [A], "nodes": [{"node": C, "verdict": "down", "reason": "x"}]}}
    judge.sample(sample(0.0, routed(), status=said))
    judge.sample(sample(1.4, routed(), status=said))
    assert invariants(judge) == []
    judge.sample(sample(1.6, routed(), status=said))
    assert invariants(judge) == [7]
    assert C in judge.violations[0].what
    # one the world says is frozen is rightly down
    judge = Judge([SPEC])
    frozen = world(c=node(process="frozen", reach="HANG"))
    for at in (0.0, 1.6, 3.0):
        judge.sample(sample(at, routed(readers=(B,)), frozen, status=said))
    assert invariants(judge) == []


def test_an_operators_edit_of_a_paused_clusters_row_must_stay_staged_until_the_resume() -> None:
    judge = Judge([SPEC])
    judge.paused_after("g1", 0.5)
    judge.sample(sample(0.6, routed()))
    assert judge.held("g1")
    before = Row(11, B, "ONLINE")
    after = Row(11, B, "ONLINE", 1)
    edited = tuple(after if r == before else r for r in routed())
    judge.paused_edit("g1", before, after, 1.0)
    judge.sample(sample(1.1, routed()))  # read before the edit landed
    judge.sample(sample(1.6, routed(), staged=edited))
    judge.sample(sample(2.0, routed()))  # another cluster's LOAD sets it aside
    judge.sample(sample(2.5, routed(), staged=edited))  # and writes it back
    assert invariants(judge) == []
    judge.sample(sample(3.0, routed()))  # the paused checker put back what is live
    judge.sample(sample(4.1, routed()))
    assert invariants(judge) == [6]
    assert "11/127.0.0.1:2/ONLINE/1" in judge.violations[0].what


def test_an_edit_over_an_earlier_edit_still_staged_may_land_late() -> None:
    """Seed 779107: a second pause's edit of a row that still holds the first pause's edit
    (staged, not live): a sample read before the UPDATE lands shows that earlier edit."""
    judge = Judge([SPEC])
    first = tuple(Row(11, B, "ONLINE", 1) if r == Row(11, B, "ONLINE") else r for r in routed())
    second = tuple(Row(11, B, "ONLINE", 2) if r == Row(11, B, "ONLINE") else r for r in routed())
    judge.paused_after("g1", 0.5)
    judge.sample(sample(0.6, routed(), staged=first))
    judge.paused_edit("g1", Row(11, B, "ONLINE", 1), Row(11, B, "ONLINE", 2), 1.0)
    judge.sample(sample(1.1, routed(), staged=first))  # read before the edit landed
    judge.sample(sample(1.2, routed(), staged=second))
    assert invariants(judge) == []
    judge.paused_edit("g1", Row(11, B, "ONLINE", 2), Row(11, B, "ONLINE", 3), 2.0)
    judge.sample(sample(3.1, routed(), staged=second))  # never landed: the edit was undone
    assert invariants(judge) == [6]


def test_an_edit_of_a_paused_clusters_row_is_no_exception_for_other_rows() -> None:
    judge = Judge([SPEC])
    judge.paused_after("g1", 0.5)
    judge.sample(sample(0.6, routed()))
    before, after = Row(11, B, "ONLINE"), Row(11, B, "ONLINE", 1)
    judge.paused_edit("g1", before, after, 1.0)
    judge.sample(sample(1.1, routed(), staged=routed(writer=C)))
    assert invariants(judge) == [6]


def test_a_blind_clusters_staging_put_back_to_live_for_a_moment_is_a_set_aside() -> None:
    judge = Judge([SPEC])
    edited = (Row(11, B, "ONLINE", 1), Row(11, C, "ONLINE"), Row(10, A, "ONLINE"))
    judge.paused_after("g1", 0.5, why="blind")
    judge.sample(sample(0.6, routed(), staged=edited))
    judge.sample(sample(1.0, routed()))  # another cluster's LOAD sets the edit aside
    judge.sample(sample(1.05, routed(), staged=edited))
    assert invariants(judge) == []
    judge.sample(sample(2.0, routed()))
    judge.sample(sample(3.1, routed()))
    assert invariants(judge) == [6], "put back to live for good: the checker's change"


def test_a_healthy_node_taken_out_of_every_route_before_a_blind_hold_breaks_invariant_6() -> None:
    judge = Judge([SPEC])
    judge.paused_after("g1", 1.0, why="blind", since=0.1)
    judge.sample(sample(0.0, routed()))
    judge.sample(sample(0.2, routed()))
    judge.sample(sample(0.6, routed(writer=B, readers=(C,))))  # A moved: no violation yet
    judge.sample(sample(1.1, routed(writer=B, readers=(A, C))))
    assert invariants(judge) == [], "a move between the writer and the readers takes no one out"
    judge.resumed("g1", 2.0, why="blind")
    judge.paused_after("g1", 3.0, why="blind", since=2.1)
    judge.sample(sample(2.2, routed()))
    judge.sample(sample(3.1, routed(writer=None, readers=(C,))))
    assert invariants(judge) == [6, 6]
    assert "127.0.0.1:1 taken out of every hostgroup while blind" in judge.violations[0].what


@pytest.mark.parametrize(
    ("began", "violated"),
    [
        (0.05, False),  # under way at the cut (0.1): it may act on the probe the cut failed
        (0.15, True),  # began after the cut: it saw no node and must change nothing
    ],
)
def test_who_took_a_healthy_node_out_before_a_blind_hold_decides(
    began: float, violated: bool
) -> None:
    judge = Judge([SPEC])
    judge.paused_after("g1", 1.0, why="blind", since=0.1)
    judge.sample(sample(0.2, routed()))
    judge.pass_loaded(LoadedPass("g1", began, 0.5, {A: f"remove {A} in hostgroup 10: down"}))
    judge.sample(sample(1.1, routed(writer=B, readers=(C,))))
    assert invariants(judge) == ([6] if violated else [])
    said = judge.violations[0].what if violated else judge.notes[0]
    assert A in said
    assert ("+0.05s from the cut" in said) if violated else ("down" in said)


def test_a_dead_node_taken_out_before_a_blind_hold_is_no_violation() -> None:
    judge = Judge([SPEC])
    dead = world(a=node(process="killed", reach="REFUSED", in_primary=False, readable=False))
    judge.paused_after("g1", 1.0, why="blind", since=0.1)
    judge.sample(sample(0.2, routed(), dead))
    judge.sample(sample(1.1, routed(writer=B, readers=(C,)), dead))
    assert 6 not in invariants(judge)


def test_a_paused_checkers_status_must_still_name_the_routed_writers() -> None:
    judge = Judge([SPEC])
    judge.paused_after("g1", 0.5)
    judge.sample(sample(0.6, routed(), status={"g1": {"writers": [A]}}))
    judge.sample(sample(1.0, routed(), status={"g1": {"writers": [B]}}))
    judge.sample(sample(2.6, routed(), status={"g1": {"writers": [B]}}))
    assert invariants(judge) == [7]
    blind = Judge([SPEC])
    blind.paused_after("g1", 0.5, why="blind")
    blind.sample(sample(1.0, routed(), status={"g1": {"writers": [B]}}))
    blind.sample(sample(2.6, routed(), status={"g1": {"writers": [B]}}))
    assert invariants(blind) == []


def test_a_process_its_peers_always_heard_on_an_eviction_list_breaks_invariant_4_at_once() -> None:
    lists = {"evict_list": ["new-c"]}
    # the frozen process was evicted, fairly; its node restarted under a new identity
    fair = world(a=node(identity="a", **lists), c=node(identity="old-c", silenced=True))
    fair["g1"]["nodes"][A]["evict_list"] = ["old-c"]
    judge = Judge([SPEC])
    judge.sample(sample(0.0, routed(), fair))
    assert invariants(judge) == []
    # the restarted node's new process evicted: it never went silent
    unfair = world(
        a=node(identity="a", **lists),
        c=node(identity="new-c", process="joining", silenced=False),
    )
    judge.sample(sample(0.1, routed(), unfair))
    judge.sample(sample(0.2, routed(), unfair))
    assert invariants(judge) == [4], "said once"
    assert "new-c" in judge.violations[0].what


def test_status_that_says_the_writers_are_unknown_claims_nothing() -> None:
    judge = Judge([SPEC])
    for at in (0.0, 1.0, 2.0, 3.0):
        judge.sample(sample(at, routed(), status={"g1": {"writers": None}}))
    assert invariants(judge) == []
    for at in (4.0, 5.0, 6.0):
        judge.sample(sample(at, routed(), status={"g1": {"writers": []}}))
    assert invariants(judge) == [7], "an empty list says there is no writer"
