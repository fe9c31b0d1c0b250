"""A checker short of CPU never judges a node down for a timeout it caused itself: a probe
its thread began late, an answer that waited unread, a collector that woke late, a result that
came in while the collector waited for the CPU. A node that had its chance and stayed silent
is still silent."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest

from checker_core.core.probes import ProbeFailure, ProbeResult, ProbeTimeouts
from checker_core.core.verdict import State
from checker_core.edges.pending import PendingProbes
from tests.unit.galera_cases import HG, N1, N2, hostgroup_members, probe_ok, run, steady

WINDOW_S = 0.05
# the monitor's timeouts by default: far longer than the window these tests give the probes
DEFAULTS = ProbeTimeouts(connect_s=0.5, read_s=0.8)
# timeouts that fit inside the window: a node still silent at its end had them in full
FITTING = ProbeTimeouts(connect_s=0.01, read_s=0.01)


def pending_for(*nodes: Any, timeouts: ProbeTimeouts = DEFAULTS) -> PendingProbes:
    return PendingProbes(tuple(nodes), time.monotonic(), timeouts)


class SocketConn:
    """What the collector sees of a probe's connection: its socket."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock


@pytest.fixture
def socket_pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    ours, theirs = socket.socketpair()
    try:
        yield ours, theirs
    finally:
        ours.close()
        theirs.close()


@pytest.mark.parametrize(
    ("timeouts", "failure", "said"),
    [
        (FITTING, ProbeFailure.SILENT, "no answer within the pass deadline"),
        (
            DEFAULTS,
            ProbeFailure.UNHEARD,
            "ms of monitor.read_timeout_ms 800",
        ),
    ],
    ids=["timeout-fits", "timeout-longer-than-the-window"],
)
def test_a_probe_that_went_out_at_once_and_got_nothing_is_silent_only_after_its_timeout(
    socket_pair: tuple[socket.socket, socket.socket],
    timeouts: ProbeTimeouts,
    failure: ProbeFailure,
    said: str,
) -> None:
    """Its question went out with the window; it is the node's silence only when the node had
    all of monitor.read_timeout_ms to answer it (before the rule of whole timeouts, a window
    shorter than the timeout made it silent too)."""
    pending = pending_for(N1, timeouts=timeouts)
    pending.flights[N1].begun = pending.started
    pending.flights[N1].conn = SocketConn(socket_pair[0])  # type: ignore[assignment]
    pending.flights[N1].asked = pending.started
    assert pending.results.empty()  # the threads' queue: made, nothing in it

    found = pending.collect(pending.started + WINDOW_S)

    assert found[N1].how_failed is failure
    assert said in (found[N1].error or "")


def test_a_probe_whose_thread_never_ran_is_unheard_not_silent() -> None:
    pending = pending_for(N1)

    found = pending.collect(pending.started + WINDOW_S)

    assert found[N1].how_failed is ProbeFailure.UNHEARD
    assert "had not started its probe" in (found[N1].error or "")


def test_a_probe_begun_in_the_second_half_of_its_window_is_unheard() -> None:
    pending = pending_for(N1)
    pending.flights[N1].begun = pending.started + WINDOW_S * 0.8

    found = pending.collect(pending.started + WINDOW_S)

    assert found[N1].how_failed is ProbeFailure.UNHEARD
    assert "started its probe only" in (found[N1].error or "")


def test_an_answer_waiting_unread_at_the_deadline_is_unheard(
    socket_pair: tuple[socket.socket, socket.socket],
) -> None:
    ours, theirs = socket_pair
    pending = pending_for(N1)
    pending.flights[N1].begun = pending.started
    pending.flights[N1].conn = SocketConn(ours)  # type: ignore[assignment]
    theirs.sendall(b"\x07\x00\x00\x01\x00\x00\x00\x02\x00\x00\x00")  # the node answered

    found = pending.collect(pending.started + WINDOW_S)

    assert found[N1].how_failed is ProbeFailure.UNHEARD
    assert "waiting unread" in (found[N1].error or "")


def test_a_collector_that_woke_long_after_its_deadline_counts_no_silence() -> None:
    started = time.monotonic() - 1.0
    pending = PendingProbes((N1,), started)
    pending.flights[N1].begun = started

    found = pending.collect(started + 0.2)  # its deadline passed 0.8 s before it got here

    assert found[N1].how_failed is ProbeFailure.UNHEARD
    assert "woke" in (found[N1].error or "")


def test_a_result_that_came_while_the_collector_waited_for_the_cpu_counts() -> None:
    started = time.monotonic() - 1.0
    pending = PendingProbes((N1, N2), started)
    pending.results.put(probe_ok(N1))
    pending.results.put(probe_ok(N2))

    found = pending.collect(started + 0.2)

    assert found[N1].answered and found[N2].answered


def test_an_unheard_writer_keeps_its_place_where_a_silent_one_is_taken_out() -> None:
    unheard = ProbeResult(N1, None, "not heard: ...", 50.0, ProbeFailure.UNHEARD)
    silent = ProbeResult(N1, None, "no answer within the pass deadline", 50.0, ProbeFailure.SILENT)

    kept = run(steady(N1), {N1: unheard})
    taken = run(steady(N1), {N1: silent})

    assert kept.verdicts[N1].state is State.UNSEEN
    assert hostgroup_members(kept, HG.writer) == {N1}
    assert not kept.plan.changes
    assert "checker's own lateness" in kept.sight.reason
    assert N1 not in hostgroup_members(taken, HG.writer)


# ---------------------------------------------------------------- a silence that is enough

LONG_S = 60.0  # a deadline no test waits for: a collector that waited it out fails the test


def thread_pending(*nodes: Any) -> PendingProbes:
    """Probes begun on threads at once that get nothing (frozen nodes), with monitor timeouts
    shorter than any wait here: each had its whole timeout."""
    pending = pending_for(*nodes, timeouts=FITTING)
    for node in nodes:
        pending.flights[node].begun = pending.started
    assert pending.results.empty()  # the threads' queue: made, nothing in it
    return pending


def test_a_node_silent_for_its_time_is_not_waited_for_past_it() -> None:
    pending = thread_pending(N1)

    found = pending.collect(pending.started + LONG_S, enough={N1: pending.started + WINDOW_S})

    assert found[N1].how_failed is ProbeFailure.SILENT
    assert "silent for unresponsive_after_ms by then" in (found[N1].error or "")
    assert found[N1].elapsed_ms < LONG_S * 1000


def test_another_node_still_out_keeps_the_deadline_for_all() -> None:
    pending = thread_pending(N1, N2)
    deadline = pending.started + WINDOW_S * 4

    found = pending.collect(deadline, enough={N1: pending.started})

    for node in (N1, N2):
        assert found[node].how_failed is ProbeFailure.SILENT
        assert "no answer within the pass deadline" in (found[node].error or "")
