"""What an `evs.evict` costs on the Galera lab, without the checker (not a test: it prints
figures). Per trial: the lab healthy, a client committing back to back on a survivor, one member
frozen (SIGSTOP), and after `--after-s` of silence `evs.evict=<its gcomm uuid>` sent to one
survivor or to every survivor at once; each survivor's view polled every 2 ms on a connection of
its own. Then the frozen member is killed and the lab healed (a restarted process rejoins under a
new uuid) and the eviction lists cleared.

    python -m bench.gap_evict_cost [--trials 5] [--after-s 1.3] [--victim 1]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any

from tests.lab.accounts import APP_SCHEMA
from tests.lab.galera import GaleraLab

POLL_S = 0.002
SIZE_SQL = "SHOW GLOBAL STATUS LIKE 'wsrep_cluster_size'"
EVICT_SQL = "SET GLOBAL wsrep_provider_options = %s"
TABLE = f"`{APP_SCHEMA}`.evict_cost"


def _size(conn: Any) -> int:
    with conn.cursor() as cur:
        cur.execute(SIZE_SQL)
        return int(cur.fetchall()[0][1])


class Committer(threading.Thread):
    """Autocommit INSERTs back to back on one node; the end of each, monotonic."""

    def __init__(self, lab: GaleraLab, node: int) -> None:
        super().__init__(daemon=True)
        self.lab, self.node = lab, node
        self.ends: list[float] = []
        self.halt = threading.Event()

    def run(self) -> None:
        conn = self.lab._connect(self.node, 30.0)
        try:
            while not self.halt.is_set():
                with conn.cursor() as cur:
                    cur.execute(f"INSERT INTO {TABLE} (at) VALUES (%s)", (time.time(),))  # noqa: S608
                self.ends.append(time.monotonic())
        finally:
            conn.close()


MODES = {
    "one": "one survivor only",
    "all": "every survivor at once (in parallel)",
    "seq": "one survivor, then the other on a new connection as soon as the first returned",
    "view": "one survivor, then the other once the first survivor's view dropped the member",
    "low": "as seq, the survivor of the lowest gcomm uuid first",
}


def causal_read(lab: GaleraLab, node: int) -> None:
    """A causal read left waiting (as the checker's early reads are) until the group delivers."""
    conn = lab._connect(node, 10.0)
    with contextlib.suppress(Exception), conn.cursor() as cur:
        cur.execute("SET SESSION wsrep_sync_wait = 1")
        cur.execute("SELECT 1")
    conn.close()


def trial(
    lab: GaleraLab, victim: int, mode: str, after_s: float, reads_at: float | None = None
) -> dict[str, float]:
    """Seconds from the evict sent to each survivor's size 2, and to the first commit after."""
    lab.ensure_healthy()
    survivors = [n for n in (1, 2, 3) if n != victim]
    for n in (1, 2, 3):
        lab.sql(n, EVICT_SQL, ("evs.evict=",))
    [(_, uuid)] = lab.sql(victim, "SHOW GLOBAL STATUS LIKE 'wsrep_gcomm_uuid'")
    if mode == "low":
        ids = {n: lab.sql(n, "SHOW GLOBAL STATUS LIKE 'wsrep_gcomm_uuid'")[0][1] for n in survivors}
        survivors.sort(key=lambda n: str(ids[n]))
    conns = {n: lab._connect(n, 10.0) for n in survivors}
    told = [lab._connect(n, 10.0) for n in (survivors if mode == "all" else survivors[:1])]
    committer = Committer(lab, survivors[0])
    committer.start()
    time.sleep(0.3)  # the client commits steadily before the freeze
    lab.freeze(victim)
    frozen_at = time.monotonic()
    if reads_at is not None:
        time.sleep(reads_at)
        for n in survivors:
            threading.Thread(target=causal_read, args=(lab, n), daemon=True).start()
    time.sleep(max(0.0, frozen_at + after_s - time.monotonic()))
    sent: dict[int, tuple[float, float]] = {}

    def evict(i: int, conn: Any) -> None:
        started = time.monotonic()
        with conn.cursor() as cur:
            cur.execute(EVICT_SQL, (f"evs.evict={uuid}",))
        sent[i] = (started, time.monotonic())

    def then_other() -> None:
        evict(0, told[0])
        if mode == "view":
            own = lab._connect(survivors[0], 10.0)
            while _size(own) != 2:
                time.sleep(POLL_S)
            own.close()
        evict(1, lab._connect(survivors[1], 10.0))

    if mode in ("seq", "view", "low"):
        threads = [threading.Thread(target=then_other)]
    else:
        threads = [threading.Thread(target=evict, args=(i, c)) for i, c in enumerate(told)]
    at = time.monotonic()
    for t in threads:
        t.start()
    seen: dict[int, float] = {}
    deadline = at + 10.0
    while len(seen) < len(survivors) and time.monotonic() < deadline:
        for n, conn in conns.items():
            if n not in seen and _size(conn) == 2:
                seen[n] = time.monotonic()
        time.sleep(POLL_S)
    for t in threads:
        t.join()
    time.sleep(0.2)
    committer.halt.set()
    committer.join(timeout=10)
    first = next((e for e in committer.ends if e > at), None)
    stalled = [e for e in committer.ends if frozen_at < e <= at]
    found = {f"view node{n}": seen.get(n, float("nan")) - at for n in survivors}
    found["first commit"] = (first - at) if first is not None else float("nan")
    found["statement took"] = max(b - a for a, b in sent.values())
    if 1 in sent:
        found["2nd evict sent"] = sent[1][0] - at
    found["commits while frozen"] = float(len(stalled))
    for conn in [*conns.values(), *told]:
        with contextlib.suppress(Exception):
            conn.close()
    lab.kill(victim)
    lab.ensure_healthy()
    for n in (1, 2, 3):
        lab.sql(n, EVICT_SQL, ("evs.evict=",))
    return found


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--after-s", type=float, default=1.3)
    parser.add_argument("--victim", type=int, default=1)
    parser.add_argument("--suspect-timeout-s", type=int, default=5)
    parser.add_argument("--modes", default="one,all", help=", ".join(MODES))
    parser.add_argument(
        "--reads-at-s", type=float, help="causal reads left waiting on the survivors from then"
    )
    args = parser.parse_args(argv)
    lab = GaleraLab(suspect_timeout_s=args.suspect_timeout_s)
    lab.ensure_healthy()
    lab.apply_suspect_timeout()
    lab.sql(
        1, f"CREATE TABLE IF NOT EXISTS {TABLE} (id BIGINT AUTO_INCREMENT PRIMARY KEY, at DOUBLE)"
    )
    try:
        for mode in args.modes.split(","):
            rows = [
                trial(lab, args.victim, mode, args.after_s, args.reads_at_s)
                for _ in range(args.trials)
            ]
            print(f"evict sent to {MODES[mode]}:")
            for row in rows:
                print("  " + ", ".join(f"{k} {v:.3f}" for k, v in row.items()), flush=True)
            for key in rows[0]:
                values = [r[key] for r in rows]
                print(f"  {key}: median {statistics.median(values):.3f} "
                      f"({min(values):.3f}-{max(values):.3f})")  # fmt: skip
    finally:
        lab.ensure_healthy()
        GaleraLab().apply_suspect_timeout()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
