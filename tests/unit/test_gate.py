"""The pass's gate: where a pass stops short and whether its plan may go live, as tables of
facts and the outcome and line each gives."""

from __future__ import annotations

from pathlib import Path

import pytest

from checker_core.core.leadership import ALONE, Leadership, ProxyAddress, Role
from checker_core.core.settings import RunSettings
from checker_core.passes import gate
from checker_core.passes.result import Outcome
from tests.unit.galera_cases import HG, N1, N2, N3, probe_down, probe_ok, run, steady

DENIED = "Access denied for user 'monitor'@'127.0.0.1' (using password: YES) (error 1045)"
PEER = ProxyAddress("127.0.0.1", 6033)


def run_settings(max_runtime_ms: int = 1000) -> RunSettings:
    return RunSettings(1000, max_runtime_ms, Path("/state"), False, "json", "info")


def leader(role: Role, load_wait: str | None = None, clock_skew_s: int = 0) -> Leadership:
    return Leadership(
        role, PEER, (PEER,), f"{role.label} reason", None, None, load_wait, clock_skew_s
    )


def test_no_roster_names_every_hostgroup_looked_in() -> None:
    stop = gate.no_roster(0, HG.all)
    assert stop == gate.Stop(
        Outcome.BAD_INPUT,
        f"no roster: hostgroups {', '.join(map(str, HG.all))} hold no server; "
        "add the nodes to the writer/reader hostgroups or the templates",
    )
    assert gate.no_roster(1, HG.all) is None


# max_runtime_ms 1000 gives the probes 600 ms from the pass's start; a pass that has less than
# half of them (300 ms) left when its reads are done probes nobody
@pytest.mark.parametrize(
    ("spent_ms", "stops", "line"),
    [
        (0, False, None),
        (299, False, None),
        (301, True, "reading ProxySQL took 301 ms of run.max_runtime_ms (1000), leaving 299 ms"),
        (700, True, "reading ProxySQL took 700 ms of run.max_runtime_ms (1000), leaving 0 ms"),
    ],
)
def test_probe_time_left(spent_ms: int, stops: bool, line: str | None) -> None:
    stop = gate.probe_time_left(100.0, 100.0 + spent_ms / 1000, run_settings())
    if not stops:
        assert stop is None
        return
    assert stop is not None
    assert stop.outcome is Outcome.FAILED
    assert stop.reason == f"{line} to probe; nothing changed"


@pytest.mark.parametrize("spent_ms", [301, 700, 5000])
def test_reads_of_any_length_leave_probes_begun_with_the_pass_their_time(spent_ms: int) -> None:
    """Every roster node's probe began with the pass: each had its whole share already."""
    later = 100.0 + spent_ms / 1000
    assert gate.probe_time_left(100.0, later, run_settings(), probed_late=0) is None
    assert gate.probe_time_left(100.0, later, run_settings(), probed_late=1) is not None


@pytest.mark.parametrize(
    ("probes", "refused"),
    [
        ({}, False),
        ({N1: probe_down(N1, DENIED)}, True),
        ({N1: probe_down(N1, DENIED), N2: probe_down(N2, DENIED)}, True),
        # one node that answers, or fails otherwise, makes it a cluster problem, not a password
        ({N1: probe_down(N1, DENIED), N2: probe_ok(N2)}, False),
        ({N1: probe_down(N1, DENIED), N2: probe_down(N2)}, False),
        ({N1: probe_down(N1), N2: probe_down(N2), N3: probe_down(N3)}, False),
    ],
    ids=["no probes", "one denied", "all denied", "one answers", "one refuses", "all down"],
)
def test_monitor_refused_only_when_every_node_denies_the_account(
    probes: dict[object, object], refused: bool
) -> None:
    stop = gate.monitor_refused(probes, "monitor")  # type: ignore[arg-type]
    if not refused:
        assert stop is None
        return
    assert stop == gate.Stop(
        Outcome.BAD_INPUT,
        f"bad input, nothing changed: every node refused the monitor account 'monitor' ({DENIED})",
    )


def test_blind_stops_only_a_pass_that_heard_no_node() -> None:
    heard = run(steady(N1))
    assert gate.blind(heard) is None
    silent = {n: probe_down(n, "timed out (error 2013)") for n in (N1, N2, N3)}
    deaf = run(steady(N1), silent)
    stop = gate.blind(deaf)
    assert stop is not None
    assert stop.outcome is Outcome.BLIND
    assert stop.reason == deaf.sight.reason


# the apply ladder, first match wins: a standby never writes; an acting checker holds a LOAD
# the peers could not pull; a paused one writes nothing
@pytest.mark.parametrize(
    ("leadership", "needs_load", "paused", "expected"),
    [
        (ALONE, True, None, None),
        (ALONE, False, None, None),
        (leader(Role.ACTING), True, None, None),
        (leader(Role.STANDBY), True, None, (Outcome.STANDBY, "standby reason")),
        (leader(Role.STANDBY), False, "/s/pause", (Outcome.STANDBY, "standby reason")),
        (leader(Role.ACTING, "same second"), True, None, (Outcome.DEFERRED, "same second")),
        (leader(Role.ACTING, "same second"), False, None, None),
        (leader(Role.ACTING, "ahead 30 s", 30), True, None, (Outcome.CLOCK_SKEW, "ahead 30 s")),
        (leader(Role.ACTING, "ahead 30 s", 30), False, None, None),
        (leader(Role.ACTING, "ahead", 30), True, "/s/pause", (Outcome.CLOCK_SKEW, "ahead")),
        (ALONE, False, "/s/pause", (Outcome.PAUSED, "paused by /s/pause")),
        (ALONE, True, Path("/s/pause"), (Outcome.PAUSED, "paused by /s/pause")),
    ],
)
def test_may_apply(
    leadership: Leadership,
    needs_load: bool,
    paused: object | None,
    expected: tuple[Outcome, str] | None,
) -> None:
    stop = gate.may_apply(leadership, needs_load, paused)
    assert (None if stop is None else (stop.outcome, stop.reason)) == expected
