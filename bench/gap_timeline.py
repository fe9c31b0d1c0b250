"""The write-gap bench's timing side-probe (`--timeline`, off by default): what each survivor's
own view says, polled every few ms on a connection of its own, beside what the client and the
sampler saw, kept per run as timeline.json in the run's log directory; and the run's timeline
printed from it, merged with the daemon's log lines (the daemon stamps its lines with the wall
clock: they are put on the bench's monotonic clock with the offset taken at the fault).

    python -m bench.gap_timeline LOGDIR [LOGDIR ...]
"""

from __future__ import annotations

import contextlib
import json
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from bench.gap_traffic import Sample, Statement

POLL_S = 0.005
VIEW_SQL = (
    "SHOW GLOBAL STATUS WHERE Variable_name IN "
    "('wsrep_cluster_size', 'wsrep_cluster_conf_id', 'wsrep_cluster_status')"
)


@dataclass(frozen=True)
class ViewSeen:
    """A survivor's view as it said it, when it changed (monotonic)."""

    at: float
    node: int
    size: str
    conf_id: str
    status: str


class ViewWatch(threading.Thread):
    """Each survivor's wsrep_cluster_size, conf_id and status every POLL_S, each change kept."""

    def __init__(self, connect: Callable[[int], Any], nodes: Sequence[int]) -> None:
        super().__init__(name="write-gap-views", daemon=True)
        self._connect, self.nodes = connect, tuple(nodes)
        self.seen: list[ViewSeen] = []
        self._halt = threading.Event()

    def stop(self) -> None:
        self._halt.set()

    def run(self) -> None:
        conns = {n: self._connect(n) for n in self.nodes}
        last: dict[int, tuple[str, str, str]] = {}
        try:
            while not self._halt.is_set():
                started = time.monotonic()
                for n, conn in conns.items():
                    with conn.cursor() as cur:
                        cur.execute(VIEW_SQL)
                        facts = {str(k): str(v) for k, v in cur.fetchall()}
                    at = time.monotonic()
                    now = (
                        facts.get("wsrep_cluster_size", ""),
                        facts.get("wsrep_cluster_conf_id", ""),
                        facts.get("wsrep_cluster_status", ""),
                    )
                    if last.get(n) != now:
                        last[n] = now
                        self.seen.append(ViewSeen(at, n, *now))
                self._halt.wait(max(0.0, POLL_S - (time.monotonic() - started)))
        finally:
            for conn in conns.values():
                with contextlib.suppress(Exception):
                    conn.close()


def write(
    where: Path,
    *,
    fault_at: float,
    wall_minus_mono: float,
    views: Sequence[ViewSeen],
    statements: Sequence[Statement],
    samples: Sequence[Sample],
    nodes: dict[int, int],
) -> None:
    """timeline.json: the fault's moment, the clocks' offset, the views, the statements from
    2 s before the fault to 3 s after it (with the port that took each acknowledged one), and
    the sampler's changes."""
    near = [s for s in statements if fault_at - 2 <= s.started <= fault_at + 3]
    changes = [s for i, s in enumerate(samples) if i == 0 or s.online != samples[i - 1].online]
    data = {
        "fault_at": fault_at,
        "wall_minus_mono": wall_minus_mono,
        "views": [asdict(v) for v in views],
        "statements": [{**asdict(s), "node": nodes.get(s.seq)} for s in near],
        "samples": [asdict(s) for s in changes],
    }
    (where / "timeline.json").write_text(json.dumps(data))


def _wall(ts: str) -> float:
    return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()


def events(run: Path) -> list[tuple[float, str]]:
    """(seconds after the fault, what) for one run's log directory."""
    data = json.loads((run / "timeline.json").read_text())
    t0, offset = data["fault_at"], data["wall_minus_mono"]
    found: list[tuple[float, str]] = [(0.0, "freeze (SIGSTOP sent)")]
    for line in (run / "daemon.log").read_text().splitlines():
        with contextlib.suppress(ValueError):
            entry = json.loads(line)
            if entry.get("event") in ("pass", "watch", "evict") and "ts" in entry:
                at = _wall(entry["ts"]) - offset - t0
                if at > -1.5:
                    found.append((at, f"daemon log {entry['event']}: {entry['summary'][:300]}"))
    for v in data["views"]:
        seen = f"size {v['size']} conf {v['conf_id']} {v['status']}"
        found.append((v["at"] - t0, f"view node{v['node']}: {seen}"))
    for s in data["samples"]:
        found.append((s["at"] - t0, f"sampler: writer hostgroup ONLINE {s['online']}"))
    last_end, last_node = t0 - 0.1, None
    for s in sorted(data["statements"], key=lambda s: s["ended"]):
        if s["ended"] < t0 - 0.1:
            continue
        if s["code"] == 0:
            # an ack after a gap of 50 ms or more, or on another node: the rest say nothing
            quiet = s["ended"] - last_end < 0.05 and s["node"] == last_node
            last_end, last_node = s["ended"], s["node"]
            if quiet:
                continue
        what = "ack" if s["code"] == 0 else f"error {s['code']}"
        found.append(
            (
                s["ended"] - t0,
                f"client seq {s['seq']} {what} on {s['node']} (started {s['started'] - t0:+.3f})",
            )
        )
    return sorted(found)


def main(argv: Sequence[str]) -> int:
    for arg in argv:
        print(f"== {arg}")
        for at, what in events(Path(arg)):
            if -0.5 <= at <= 3.0:
                print(f"{at:+8.3f}  {what}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
