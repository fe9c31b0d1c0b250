"""The world's hooks: one program every cluster's checker tells its events to (each event kept
as a file of its own, so processes telling at once never mix), a switch that makes a
cluster's hook hang (the fault `hook_hang`), and invariant 9, judged on what was told:

 9 a hook is told only what a pass of the checker did: a move names the writers its pass
   routed, a condition event the condition its pass saw; nothing comes from a pass that
   loaded nothing (a dry run, a paused or standby pass), and a switchover's end is told with
   the outcome its command exited with
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.world.invariants import Violation

HOOK_TIMEOUT_MS = 3000
MOVES = ("writer_changed", "node_out", "node_back")


def install(directory: Path) -> Path:
    """The hook program: the event read from stdin, held while the cluster's hang switch is on
    (killed by the checker after hook_timeout_ms, as the event is then lost), then kept."""
    told = directory / "told"
    told.mkdir(parents=True, exist_ok=True)
    program = directory / "hook.sh"
    program.write_text(
        "#!/bin/sh\n"
        f'tmp=$(mktemp "{told}/.$1.XXXXXX")\n'
        'cat > "$tmp"\n'
        f'while [ -e "{told}/$1.hang" ]; do sleep 0.05; done\n'
        'mv "$tmp" "${tmp%/*}/$1.$(date +%s%N).$$.json"\n'
    )
    program.chmod(0o755)
    return program


def hang(directory: Path, cluster: str, on: bool) -> None:
    switch = directory / "told" / f"{cluster}.hang"
    if on:
        switch.touch()
    else:
        switch.unlink(missing_ok=True)


def told(directory: Path) -> list[dict[str, Any]]:
    found = []
    for path in sorted((directory / "told").glob("*.json")):
        try:
            found.append(json.loads(path.read_text()))
        except ValueError:
            continue
    return found


@dataclass(frozen=True, slots=True)
class SeenPass:
    """A pass line of a checker's log (a daemon's or a command's)."""

    cluster: str
    pass_id: str
    outcome: str
    loaded: bool
    writers: tuple[str, ...]

    @classmethod
    def of(cls, record: Mapping[str, Any]) -> SeenPass:
        return cls(
            str(record.get("cluster")),
            str(record.get("pass_id")),
            str(record.get("outcome")),
            record.get("loaded") is True,
            tuple(str(w) for w in record.get("writers") or ()),
        )


@dataclass(frozen=True, slots=True)
class SwitchoverRun:
    cluster: str
    target: str | None
    code: int | None
    started: float  # wall clock
    ended: float


def judge(
    events: Iterable[Mapping[str, Any]],
    passes: Mapping[str, SeenPass],
    switchovers: Iterable[SwitchoverRun],
    wall_to_world: float,
) -> list[Violation]:
    """Invariant 9 over every event told. `passes`: every pass line seen, by pass_id; a
    switchover's own passes say no pass line, so an event of one is judged by its command."""
    runs = list(switchovers)
    found: list[Violation] = []
    for event in events:
        cluster, kind = str(event.get("cluster")), str(event.get("event"))
        at = _wall(str(event.get("at")))
        world_at = at - wall_to_world
        what = _wrong(event, passes.get(str(event.get("pass_id"))), runs, at)
        if what:
            found.append(Violation(9, world_at, cluster, f"hook told {kind}: {what}"))
    return found


def _wrong(
    event: Mapping[str, Any], seen: SeenPass | None, runs: list[SwitchoverRun], at: float
) -> str | None:
    kind, cluster = str(event.get("event")), str(event.get("cluster"))
    during = [r for r in runs if r.cluster == cluster and r.started - 1 <= at <= r.ended + 1]
    if kind == "switchover":
        done = event.get("outcome") == "done"
        if not any(r.target == event.get("to") and (r.code == 0) == done for r in during):
            return f"{event.get('outcome')} for {event.get('to')}, which no switchover exited as"
        return None
    if seen is None:
        if during or kind == "eviction":
            return None  # a switchover's own pass (no pass line), or evicted after the pass
        return f"pass {event.get('pass_id')} is in no checker's log"
    if kind in MOVES and not seen.loaded:
        return f"pass {seen.pass_id} ({seen.outcome}) loaded nothing"
    after = event.get("writers_after")
    if kind == "writer_changed" and sorted(seen.writers) != sorted(after or ()):
        return f"writers {event.get('writers_after')}, but its pass routed {list(seen.writers)}"
    if kind == "blind" and seen.outcome != "blind":
        return f"its pass was {seen.outcome}"
    if kind == "no_writer" and seen.writers:
        return f"its pass routed {list(seen.writers)}"
    if kind == "recovered" and not seen.writers:
        return "its pass routed no writer"
    return None


def _wall(stamp: str) -> float:
    from datetime import datetime

    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0
