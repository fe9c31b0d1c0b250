"""A node is judged on what it did: a probe that got no answer is the node's silence
only when the node had its whole configured timeout (a connect begun monitor.connect_timeout_ms
before the pass stopped waiting, or a question written monitor.read_timeout_ms before it). A
probe the pass's deadline cut short first is unheard: the node keeps its place and the pass
says so."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from threading import Lock
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from checker_core.core.model import NodeAddress
from checker_core.core.probes import ProbeFailure, ProbeTimeouts, whole_timeout
from checker_core.core.verdict import State
from checker_core.edges.backend import Prober
from checker_core.edges.exchange import Exchange
from checker_core.edges.pending import PendingProbes
from checker_core.edges.question import Again, Answer, Question
from tests.unit.config_cases import galera_settings
from tests.unit.fakes import hung_admin
from tests.unit.galera_cases import HG, N1, hostgroup_members, run, steady

# ------------------------------------------------------------------ the rule, pure

T = ProbeTimeouts(connect_s=0.5, read_s=0.8)


@pytest.mark.parametrize(
    ("connecting_since", "asked_at", "ended", "said"),
    [
        # a question on an open connection: the node had its read timeout, or not
        (None, 10.0, 10.8, None),
        (None, 10.0, 11.5, None),
        (None, 10.0, 10.06, "cut short by the pass's deadline after 60 ms of "
         "monitor.read_timeout_ms 800"),
        (None, 10.75, 10.8, "after 50 ms of monitor.read_timeout_ms 800"),
        # a connect: the node had its connect timeout, or not
        (10.0, None, 10.5, None),
        (10.0, None, 10.06, "cut short by the pass's deadline after 60 ms of "
         "monitor.connect_timeout_ms 500"),
        # connected late, asked late: what counts is when the question went out
        (10.0, 10.4, 10.9, "after 500 ms of monitor.read_timeout_ms 800"),
        (10.0, 10.1, 10.9, None),
        # never begun
        (None, None, 10.9, "its probe had not begun"),
    ],
)  # fmt: skip
def test_whether_a_probe_gave_the_node_its_whole_timeout(
    connecting_since: float | None, asked_at: float | None, ended: float, said: str | None
) -> None:
    found = whole_timeout(T, ended, connecting_since=connecting_since, asked_at=asked_at)
    if said is None:
        assert found is None
    else:
        assert found is not None and found.startswith("not heard: ") and said in found


moments = st.floats(min_value=0.0, max_value=5.0, allow_nan=False)
limits = st.floats(min_value=0.001, max_value=3.0, allow_nan=False)


@settings(max_examples=500, deadline=None)
@given(
    began=moments,
    asked_after=st.none() | moments,
    waited=moments,
    connect_s=limits,
    read_s=limits,
)
def test_a_probe_that_did_not_get_its_whole_timeout_is_never_silence(
    began: float, asked_after: float | None, waited: float, connect_s: float, read_s: float
) -> None:
    timeouts = ProbeTimeouts(connect_s, read_s)
    asked = None if asked_after is None else began + asked_after
    ended = began + waited
    found = whole_timeout(timeouts, ended, connecting_since=began, asked_at=asked)
    if asked is not None:
        assert (found is None) == (ended - asked >= read_s)
    else:
        assert (found is None) == (ended - began >= connect_s)


# ------------------------------------------------------------------ the collector


def pending_out(
    window_s: float, timeouts: ProbeTimeouts, *, begun_s: float, asked_s: float | None
) -> tuple[PendingProbes, float]:
    """N1's probe on a thread, out for `window_s` now: its thread began `begun_s` into the
    window and asked its question `asked_s` into it (None: still connecting). The deadline is
    now, so the collector wakes on time."""
    now = time.monotonic()
    pending = PendingProbes((N1,), now - window_s, timeouts)
    flight = pending.flights[N1]
    flight.begun = pending.started + begun_s
    flight.asked = None if asked_s is None else pending.started + asked_s
    return pending, now


@pytest.mark.parametrize(
    ("timeouts", "begun_s", "asked_s", "failure", "said"),
    [
        # asked at once, and the read timeout fits the window: the node's silence
        (ProbeTimeouts(0.02, 0.04), 0.0, 0.0, ProbeFailure.SILENT, "no answer within"),
        # asked at once, but the window is shorter than the read timeout
        (ProbeTimeouts(0.02, 0.8), 0.0, 0.0, ProbeFailure.UNHEARD, "monitor.read_timeout_ms 800"),
        # asked late (a slow login): less than its read timeout left
        (ProbeTimeouts(0.02, 0.04), 0.0, 0.02, ProbeFailure.UNHEARD, "monitor.read_timeout_ms 40"),
        # still connecting for longer than its connect timeout
        (ProbeTimeouts(0.04, 0.04), 0.0, None, ProbeFailure.SILENT, "no answer within"),
        # still connecting, its connect timeout longer than the window
        (ProbeTimeouts(0.5, 0.04), 0.0, None, ProbeFailure.UNHEARD, "connect_timeout_ms 500"),
    ],
)
def test_a_probe_still_out_at_the_deadline(
    timeouts: ProbeTimeouts,
    begun_s: float,
    asked_s: float | None,
    failure: ProbeFailure,
    said: str,
) -> None:
    pending, deadline = pending_out(0.05, timeouts, begun_s=begun_s, asked_s=asked_s)

    found = pending.collect(deadline)[N1]

    assert found.how_failed is failure, found.error
    assert said in (found.error or "")


@settings(max_examples=200, deadline=None)
@given(
    window_ms=st.integers(min_value=1, max_value=400),
    begun_share=st.floats(min_value=0.0, max_value=1.0),
    asked_share=st.none() | st.floats(min_value=0.0, max_value=1.0),
    connect_ms=st.integers(min_value=1, max_value=600),
    read_ms=st.integers(min_value=1, max_value=600),
)
def test_whatever_the_timings_a_probe_cut_short_is_never_silent(
    window_ms: int,
    begun_share: float,
    asked_share: float | None,
    connect_ms: int,
    read_ms: int,
) -> None:
    window = window_ms / 1000
    begun = window * begun_share
    asked = None if asked_share is None else begun + (window - begun) * asked_share
    timeouts = ProbeTimeouts(connect_ms / 1000, read_ms / 1000)
    pending, deadline = pending_out(window, timeouts, begun_s=begun, asked_s=asked)

    found = pending.collect(deadline)[N1]
    looked = time.monotonic()  # the collector stopped waiting before this

    if found.how_failed is ProbeFailure.SILENT:
        if asked is None:
            assert looked - (pending.started + begun) >= timeouts.connect_s
        else:
            assert looked - (pending.started + asked) >= timeouts.read_s
    else:
        assert found.how_failed is ProbeFailure.UNHEARD


# ------------------------------------------------------------------ a real probe


@pytest.fixture
def frozen_node() -> Iterator[NodeAddress]:
    """A node whose kernel accepts connections and whose server never speaks (SIGSTOP)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.05)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield NodeAddress("127.0.0.1", listener.getsockname()[1])
    finally:
        stop.set()
        thread.join(5)
        for sock in held:
            sock.close()
        listener.close()


def prober_with(tmp_path: Path, connect_ms: int, read_ms: int) -> Prober:
    monitor = galera_settings(tmp_path).monitor
    monitor = replace(monitor, connect_timeout_ms=connect_ms, read_timeout_ms=read_ms)
    return Prober(monitor, lambda conn: None, persistent=False)


def test_a_frozen_node_whose_timeouts_fit_the_probes_time_is_silent(
    tmp_path: Path, frozen_node: NodeAddress
) -> None:
    prober = prober_with(tmp_path, connect_ms=30, read_ms=30)

    found = prober.probe_all([frozen_node], time.monotonic() + 2.0)[frozen_node]

    assert found.how_failed is ProbeFailure.SILENT, found.error


def test_a_node_the_probes_deadline_cut_short_is_unheard_and_keeps_its_place(
    tmp_path: Path, frozen_node: NodeAddress
) -> None:
    """monitor timeouts of 500 / 800 ms, a probe deadline of 60 ms (run.max_runtime_ms 100): the
    pass cannot tell a frozen node from a slow one, and says so."""
    prober = prober_with(tmp_path, connect_ms=500, read_ms=800)

    found = prober.probe_all([frozen_node], time.monotonic() + 0.06)[frozen_node]

    assert found.how_failed is ProbeFailure.UNHEARD, found.error
    assert "not heard: cut short by the pass's deadline after" in (found.error or "")
    assert "of monitor.connect_timeout_ms 500" in (found.error or "")
    kept = run(steady(N1), {N1: replace(found, node=N1)})
    assert kept.verdicts[N1].state is State.UNSEEN
    assert hostgroup_members(kept, HG.writer) == {N1}
    assert not kept.plan.changes


# ------------------------------------------------------------------ an open connection (daemon)


class Ping(Question[object]):
    def ask(self, conn: Any) -> tuple[str, Sequence[object]]:
        return "SELECT 1", ()

    def read(self, conn: Any, answer: Answer) -> object | Again:
        return "pong"


@pytest.mark.parametrize(
    ("read_ms", "failure", "said"),
    [
        (20, ProbeFailure.SILENT, "no answer within the pass deadline"),
        (800, ProbeFailure.UNHEARD, "ms of monitor.read_timeout_ms 800"),
    ],
)
def test_a_question_on_an_open_connection_counts_from_when_it_was_written(
    read_ms: int, failure: ProbeFailure, said: str
) -> None:
    """The daemon's probe of a node it holds a connection to: the question goes out on it at
    once, and the node is silent only if it had all of monitor.read_timeout_ms to answer."""
    with hung_admin() as admin:  # a PyMySQL connection whose far end never answers
        conn = admin._conn
        timeouts = ProbeTimeouts(connect_s=0.02, read_s=read_ms / 1000)
        pending = PendingProbes((N1,), time.monotonic(), timeouts)
        pending.exchanged.add(N1)
        exchange = pending.exchange = Exchange({}, lambda n, c: None, lambda c: None, Lock())
        assert exchange.ask(N1, conn, Ping()) is None  # written, awaited

        found = pending.collect(pending.started + 0.05)[N1]

    assert found.how_failed is failure, found.error
    assert said in (found.error or "")
