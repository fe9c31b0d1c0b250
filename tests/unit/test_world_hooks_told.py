"""Invariant 9 of the simulated world (what hooks are told), judged on made-up events: each
wrong telling is found, each right one passes."""

from __future__ import annotations

from typing import Any

import pytest

from tests.world.hooks_told import SeenPass, SwitchoverRun, judge

AT = "2026-11-28T09:30:00.000Z"
AT_WALL = 1795858200.0  # AT on the wall clock
LOADED = SeenPass("g1", "p1", "changed", True, ("127.0.0.1:3312",))
HELD = SeenPass("g1", "p2", "paused", False, ("127.0.0.1:3311",))
BLIND = SeenPass("g1", "p3", "blind", False, ("127.0.0.1:3311",))
PASSES = {p.pass_id: p for p in (LOADED, HELD, BLIND)}
SWITCH = SwitchoverRun("g1", "127.0.0.1:3313", 0, AT_WALL - 5, AT_WALL + 5)


def event(kind: str, pass_id: str, **fields: Any) -> dict[str, Any]:
    return {"event": kind, "cluster": "g1", "at": AT, "pass_id": pass_id, **fields}


@pytest.mark.parametrize(
    ("told", "switches", "wrong"),
    [
        (event("writer_changed", "p1", writers_after=["127.0.0.1:3312"]), [], None),
        (event("writer_changed", "p1", writers_after=["127.0.0.1:3311"]), [], "its pass routed"),
        (event("node_out", "p2"), [], "(paused) loaded nothing"),
        (event("node_out", "p9"), [], "in no checker's log"),
        (event("node_out", "p9"), [SWITCH], None),  # a switchover's own pass
        (event("blind", "p3"), [], None),
        (event("blind", "p1"), [], "its pass was changed"),
        (event("no_writer", "p1"), [], "its pass routed"),
        (event("recovered", "p1"), [], None),
        (event("switchover", "", to="127.0.0.1:3313", outcome="done"), [SWITCH], None),
        (
            event("switchover", "", to="127.0.0.1:3313", outcome="failed"),
            [SWITCH],
            "which no switchover exited as",
        ),
        (event("switchover", "", to="127.0.0.1:3313", outcome="done"), [], "no switchover"),
    ],
)
def test_each_wrong_telling_is_found(
    told: dict[str, Any], switches: list[SwitchoverRun], wrong: str | None
) -> None:
    found = judge([told], PASSES, switches, wall_to_world=AT_WALL - 100)
    if wrong is None:
        assert found == []
    else:
        (violation,) = found
        assert violation.invariant == 9 and wrong in violation.what, violation.what
        assert violation.at == pytest.approx(100.0)
