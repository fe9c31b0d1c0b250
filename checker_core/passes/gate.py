"""Where a pass stops short, and whether its plan may go live: the rules beside `decide` that
the runner asks between its steps. Pure: facts in, a Stop (outcome and the line it prints) or
None out."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from checker_core.passes.result import Outcome

if TYPE_CHECKING:
    from checker_core.core.decide import Decision
    from checker_core.core.leadership import Leadership
    from checker_core.core.model import NodeAddress
    from checker_core.core.probes import ProbeResult
    from checker_core.core.settings import RunSettings

# a pass that reaches its probes with less than this share of their time left probes nobody
MIN_PROBE_SHARE_LEFT = 0.5
ACCESS_DENIED = "(error 1045)"
# an apply reads staging before it writes and reads it back after (and once more for templates)
APPLY_READS = 3
APPLY_MARGIN = 2.0


@dataclass(frozen=True, slots=True)
class Stop:
    """The pass ends here with this outcome; `reason` is its pass line's message."""

    outcome: Outcome
    reason: str


def no_roster(roster_size: int, hostgroups: Sequence[int]) -> Stop | None:
    """No server in any of the cluster's hostgroups: nothing to check, and the operator's to fix."""
    if roster_size:
        return None
    return Stop(
        Outcome.BAD_INPUT,
        f"no roster: hostgroups {', '.join(map(str, hostgroups))} hold no server; "
        "add the nodes to the writer/reader hostgroups or the templates",
    )


def probe_time_left(
    started: float, now: float, run: RunSettings, *, probed_late: int = 1
) -> Stop | None:
    """A node must not be judged down on a probe the pass left it no time for: a pass whose
    reads of ProxySQL took more than half the probes' share (monotonic times) ends before any
    probe is judged. `probed_late`: how many of the roster's nodes are probed only now, after
    the reads; with none, every probe began with the pass and had its whole share, however
    long the reads took (a daemon's steady pass, or a scheduler pass whose state file named
    the roster), and the pass goes on."""
    if probed_late == 0:
        return None
    budget = run.probe_budget_ms / 1000
    left = started + budget - now
    if left >= budget * MIN_PROBE_SHARE_LEFT:
        return None
    return Stop(
        Outcome.FAILED,
        f"reading ProxySQL took {(now - started) * 1000:.0f} ms of run.max_runtime_ms "
        f"({run.max_runtime_ms}), leaving {max(0.0, left) * 1000:.0f} ms to probe; "
        "nothing changed",
    )


def apply_time_s(statements: int, round_trip_s: float) -> float:
    """The time an apply of `statements` statements needs before it begins (seconds): besides
    them, the staging read before they are written and the read-back after, each at the
    admin's last measured round trip, twice over (a LOAD costs ProxySQL more than a read)."""
    return (statements + APPLY_READS) * round_trip_s * APPLY_MARGIN


def monitor_refused(probes: Mapping[NodeAddress, ProbeResult], user: str) -> Stop | None:
    """Every node refusing the monitor account is a wrong password, not a dead cluster: taking
    every node out would be an outage caused by a typo."""
    if not probes or not all(p.error and ACCESS_DENIED in p.error for p in probes.values()):
        return None
    return Stop(
        Outcome.BAD_INPUT,
        f"bad input, nothing changed: every node refused the monitor account {user!r} "
        f"({next(iter(probes.values())).error})",
    )


def blind(decision: Decision) -> Stop | None:
    """No node heard: no LOAD, no staging repair, no counter saved."""
    if not decision.blind:
        return None
    return Stop(Outcome.BLIND, decision.sight.reason)


def may_apply(leadership: Leadership, needs_load: bool, paused: object | None) -> Stop | None:
    """Whether an applying pass may write: None, or why it holds (it writes nothing to
    ProxySQL, staging included). `paused`: what paused the checker (its pause
    file), or None."""
    if not leadership.acts:
        # never a LOAD from a standby, even when its proxy's rows differ: two LOADs on two
        # peers in the same second split a ProxySQL Cluster for good
        return Stop(Outcome.STANDBY, leadership.reason)
    if leadership.load_wait and needs_load:
        skewed = leadership.clock_skew_s > 0
        return Stop(Outcome.CLOCK_SKEW if skewed else Outcome.DEFERRED, leadership.load_wait)
    if paused is not None:
        return Stop(Outcome.PAUSED, f"paused by {paused}")
    return None
