"""Rule S12 over time: a probe the pass's deadline cut short says nothing of the node on its
own, but a node's unheard probes in a row add up. Once the time its questions were out, over
its probes in a row, reaches its whole timeout (the longer of monitor.connect_timeout_ms and
monitor.read_timeout_ms), its probe counts as silent, and retry_down, the pass's sight and
evict_unresponsive_nodes take it from there. Passes whose deadline always comes first (a
probe budget shorter than the timeouts) no longer keep a frozen node in place for ever."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from checker_core.core.decide import Decision, decide, view_of
from checker_core.core.hysteresis import NodeMemory, with_silence
from checker_core.core.model import NodeAddress
from checker_core.core.probes import (
    ProbeFailure,
    ProbeResult,
    ProbeTimeouts,
    Sight,
    promote_unheard,
    unanswered_after,
)
from checker_core.core.schema import Checker
from checker_core.core.verdict import State
from checker_core.edges.memory import StateStore
from galera_checker.policy import GaleraPolicy
from tests.unit.galera_cases import (
    HG,
    N1,
    N2,
    WEIGHTS,
    cluster_settings,
    hostgroup_members,
    probe_ok,
    rows_of,
    steady,
)
from tests.unit.test_whole_timeout import pending_out

# the world's configuration of issue 39: connect 300, read 600; passes of 270 ms each
T = ProbeTimeouts(connect_s=0.3, read_s=0.6)


def unheard(node: NodeAddress, ms: float = 270.0) -> ProbeResult:
    why = f"not heard: cut short by the pass's deadline after {ms:.0f} ms"
    return ProbeResult(node, None, why, ms, ProbeFailure.UNHEARD, unanswered_ms=ms)


def silent(node: NodeAddress, ms: float = 600.0) -> ProbeResult:
    return ProbeResult(node, None, f"no answer in {ms:.0f} ms", ms, ProbeFailure.SILENT)


def refused(node: NodeAddress) -> ProbeResult:
    return ProbeResult(node, None, "connection refused", 1.0, ProbeFailure.REFUSED)


def one_pass(
    probes: Mapping[NodeAddress, ProbeResult],
    memory: Mapping[NodeAddress, NodeMemory],
    now: float,
    **changes: object,
) -> tuple[Decision, Mapping[NodeAddress, ProbeResult]]:
    """What the runner does with a pass's probes: the unheard ones promoted on the memory,
    then the decision, counting with the monitor's timeouts."""
    cluster = cluster_settings(**changes)
    heard = {n: probe_ok(n) for n in WEIGHTS}
    heard.update(probes)
    promoted = promote_unheard(heard, memory, T)
    decision = decide(
        GaleraPolicy(),
        view_of(rows_of(steady(N1)), cluster),
        promoted,
        memory=memory,
        cluster=cluster,
        in_use={},
        now=now,
        timeouts=T,
    )
    return decision, promoted


def passes(
    rounds: Sequence[Mapping[NodeAddress, ProbeResult]], **changes: object
) -> list[tuple[Decision, Mapping[NodeAddress, ProbeResult]]]:
    """Passes in a row, each with the memory the one before kept, half a second apart."""
    memory: Mapping[NodeAddress, NodeMemory] = {}
    found = []
    for i, probes in enumerate(rounds):
        decision, promoted = one_pass(probes, memory, 1000.0 + i * 0.5, **changes)
        memory = decision.memory
        found.append((decision, promoted))
    return found


# ------------------------------------------------------------------ the count, pure

A, U, S, R = (probe_ok(N1), unheard(N1), silent(N1), refused(N1))
LATE = ProbeResult(
    N1, None, "not heard: the checker woke late", 300.0, ProbeFailure.UNHEARD, unanswered_ms=0.0
)


@pytest.mark.parametrize(
    ("before", "probe", "after"),
    [
        ((0, 0.0), U, (1, 270.0)),
        ((1, 270.0), U, (2, 540.0)),
        ((2, 540.0), U, (3, 810.0)),
        ((1, 270.0), S, (2, 870.0)),  # a silent probe adds all its wait
        ((2, 540.0), A, (0, 0.0)),  # an answer ends the count
        ((2, 540.0), R, (0, 0.0)),  # so does a refusal: an answer of the node's host
        ((2, 540.0), LATE, (2, 540.0)),  # the checker's own lateness: no time of the node's
        ((2, 540.0), None, (2, 540.0)),  # not probed: nothing said
        ((3, 810.0), U, (3, 810.0)),  # past the whole timeout: the count stops
    ],
)  # fmt: skip
def test_a_nodes_unanswered_probes_in_a_row(
    before: tuple[int, float], probe: ProbeResult | None, after: tuple[int, float]
) -> None:
    count, total = before
    kept = NodeMemory(routable=True, unanswered_probes=count, unanswered_ms=total)

    assert unanswered_after(kept, probe, T.whole_ms) == after


def test_the_whole_timeout_is_the_longer_of_connect_and_read() -> None:
    assert (T.whole_ms, T.whole_key) == (600.0, "monitor.read_timeout_ms")
    longer_connect = ProbeTimeouts(connect_s=0.9, read_s=0.6)
    assert (longer_connect.whole_ms, longer_connect.whole_key) == (
        900.0,
        "monitor.connect_timeout_ms",
    )


# ------------------------------------------------------------------ the passes


def test_a_frozen_writer_unheard_in_every_pass_is_silent_at_the_third_and_taken_out() -> None:
    """Issue 39: passes of 270 ms, timeouts 300 / 600: 540 ms after two, 810 after three."""
    found = passes([{N1: unheard(N1)}] * 3, retry_down=1)

    for decision, promoted in found[:2]:
        assert promoted[N1].how_failed is ProbeFailure.UNHEARD
        assert decision.verdicts[N1].state is State.UNSEEN
        assert hostgroup_members(decision, HG.writer) == {N1}
    decision, promoted = found[2]
    assert promoted[N1].how_failed is ProbeFailure.SILENT
    assert "no answer over 3 probe(s) in a row, 810 ms in all" in (promoted[N1].error or "")
    assert "monitor.read_timeout_ms 600" in (promoted[N1].error or "")
    assert decision.sight.sight is Sight.CLEAR
    assert decision.verdicts[N1].state is State.DOWN
    assert N1 not in hostgroup_members(decision, HG.writer)
    assert hostgroup_members(decision, HG.writer) == {N2}


def test_a_silent_node_then_waits_for_retry_down_as_any_other() -> None:
    found = passes([{N1: unheard(N1)}] * 4, retry_down=2)

    states = [d.verdicts[N1].state for d, _ in found]
    assert states == [State.UNSEEN, State.UNSEEN, State.SUSPECT, State.DOWN]
    assert hostgroup_members(found[2][0], HG.writer) == {N1}
    assert hostgroup_members(found[3][0], HG.writer) == {N2}


@pytest.mark.parametrize(
    "between",
    [probe_ok(N1), refused(N1)],
    ids=["answered", "refused"],
)
def test_an_answer_in_between_starts_the_count_again(between: ProbeResult) -> None:
    rounds = [{N1: unheard(N1)}, {N1: unheard(N1)}, {N1: between}, {N1: unheard(N1)}]
    rounds.append({N1: unheard(N1)})

    found = passes(rounds, retry_down=3)

    assert all(p[N1].how_failed is not ProbeFailure.SILENT for _, p in found)
    assert found[-1][0].memory[N1].unanswered_probes == 2
    assert hostgroup_members(found[-1][0], HG.writer) == {N1}


@settings(max_examples=200, deadline=None)
@given(budgets=st.lists(st.integers(min_value=50, max_value=900), min_size=1, max_size=12))
def test_a_slow_node_is_silent_only_once_its_questions_had_its_whole_timeout(
    budgets: list[int],
) -> None:
    """A node that answers in 550 ms (inside read_timeout_ms 600), in passes of any budget: a
    pass that waits 550 ms hears it, a shorter one is cut short. It is silent only after cut
    short probes in a row whose time adds up to 600 ms, never before."""
    rounds = [{N1: probe_ok(N1) if b >= 550 else unheard(N1, b)} for b in budgets]

    found = passes(rounds, retry_down=1)

    run_ms = 0.0
    for budget, (_, promoted) in zip(budgets, found, strict=True):
        run_ms = 0.0 if budget >= 550 else (run_ms if run_ms >= 600 else run_ms + budget)
        assert (promoted[N1].how_failed is ProbeFailure.SILENT) == (run_ms >= 600)


def test_a_slow_node_answering_in_every_pass_is_never_silent() -> None:
    slow = ProbeResult(N1, probe_ok(N1).facts, None, 550.0)

    found = passes([{N1: slow}] * 6, retry_down=1)

    assert all(d.verdicts[N1].state is not State.DOWN for d, _ in found)
    assert all(d.memory[N1].unanswered_ms == 0.0 for d, _ in found)


def test_a_majority_unheard_for_long_still_keeps_its_places() -> None:
    found = passes([{N1: unheard(N1), N2: unheard(N2)}] * 5, retry_down=1)

    for decision, promoted in found:
        assert decision.sight.sight is Sight.PARTIAL or all(
            p.how_failed is ProbeFailure.UNHEARD for p in (promoted[N1], promoted[N2])
        )
        assert hostgroup_members(decision, HG.writer) == {N1}
        assert not decision.plan.changes
    assert found[-1][1][N1].how_failed is ProbeFailure.SILENT
    assert "still no answer since 3 probe(s) in a row, 810 ms" in (found[-1][1][N1].error or "")
    assert found[-1][0].sight.sight is Sight.PARTIAL


# ------------------------------------------------------------------ the watch's questions


def test_a_question_the_watch_left_unanswered_counts_for_an_unheard_node() -> None:
    """The watch asked N1 and waited its whole read timeout for nothing; the pass it started
    at once was cut short by its deadline: the node's silence, not the checker's."""
    kept = {N1: NodeMemory(routable=True)}

    merged = with_silence(kept, {N1: 999.0}, {N1}, waited_ms=600.0)
    promoted = promote_unheard({N1: unheard(N1)}, merged, T)

    assert merged[N1].silent_since == 999.0
    assert (merged[N1].unanswered_probes, merged[N1].unanswered_ms) == (1, 600.0)
    assert promoted[N1].how_failed is ProbeFailure.SILENT
    assert "still no answer since 1 probe(s) in a row, 600 ms in all, had its whole timeout" in (
        promoted[N1].error or ""
    )


def test_a_question_the_watch_left_unanswered_leaves_a_node_heard_since_alone() -> None:
    kept = {N1: NodeMemory(routable=True)}

    assert with_silence(kept, {N1: 999.0}, set(), waited_ms=600.0) == kept


# ------------------------------------------------------------------ the state file


def test_the_count_is_kept_in_the_state_file_and_an_old_one_loads() -> None:
    kept = NodeMemory(routable=True, unanswered_probes=2, unanswered_ms=540.0, silent_since=5.0)

    assert NodeMemory.from_json(kept.to_json()) == kept
    old = {k: v for k, v in kept.to_json().items() if not k.startswith("unanswered")}
    assert NodeMemory.from_json(old) == NodeMemory(routable=True, silent_since=5.0)
    # a duration, not a time: it outlives a clock that is not the pass's own
    assert kept.without_times() == NodeMemory(
        routable=True, unanswered_probes=2, unanswered_ms=540.0
    )


def test_one_pass_per_process_counts_across_runs(tmp_path: Path) -> None:
    """The scheduler's mode: each pass a new process, its memory from the state file."""
    states = []
    for i in range(3):
        memory, _ = StateStore(tmp_path, Checker.GALERA).load("main")
        decision, _ = one_pass({N1: unheard(N1)}, memory, 1000.0 + i * 0.5, retry_down=1)
        StateStore(tmp_path, Checker.GALERA).save("main", decision.memory)
        states.append(decision.verdicts[N1].state)

    assert states == [State.UNSEEN, State.UNSEEN, State.DOWN]


# ------------------------------------------------------------------ what a probe cut short had


def test_a_probe_cut_short_counts_the_time_its_question_was_out() -> None:
    pending, deadline = pending_out(0.05, T, begun_s=0.0, asked_s=0.01)

    found = pending.collect(deadline)[N1]
    ended = time.monotonic()

    assert found.how_failed is ProbeFailure.UNHEARD
    assert found.unanswered_ms is not None
    # from its question on, not from the pass's start; never more than it was out
    assert 40.0 <= found.unanswered_ms <= (ended - (pending.started + 0.01)) * 1000


def test_a_probe_the_checker_never_started_counts_nothing_against_its_node() -> None:
    pending, deadline = pending_out(0.05, T, begun_s=0.0, asked_s=None)
    pending.flights[N1].begun = None  # its thread never ran

    found = pending.collect(deadline)[N1]

    assert found.how_failed is ProbeFailure.UNHEARD
    assert found.unanswered_ms == 0.0
    assert unanswered_after(NodeMemory(routable=True), found, T.whole_ms) == (0, 0.0)
