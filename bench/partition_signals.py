"""What each Galera member says while the writer is cut off from the others (not a test: it
prints a timeline, asserts nothing; it needs the Docker engine of tests/setup.sh).

    python -m bench.partition_signals [--seconds 8] [--every-ms 200] [--suspect-timeout-s 5]

The container tier's cluster (bench/gap_containers.py), a client inserting on node 1 back to
back, then node 1's Galera traffic to and from the other members dropped (the checker's link
untouched). Every node's `SHOW GLOBAL STATUS LIKE 'wsrep%'` is read through its relay every
--every-ms; the table gives, for each status variable and node, when its value first differed
from the one read just before the cut, and what it became. A causal read (wsrep_sync_wait = 1)
is timed on every node at the same moments.

It answers one question: how soon after a partition can a checker that reaches every member
tell WHICH member is cut off (docs/eviction.md).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import threading
import time
from collections.abc import Sequence

import pymysql

from bench.gap_containers import ContainerGalera

NODES = (1, 2, 3)
CAUSAL_WAIT_S = 0.15  # a causal read not done in this counts as stalled


def status(lab: ContainerGalera, n: int) -> dict[str, str]:
    rows = lab.sql(n, "SHOW GLOBAL STATUS LIKE %s", ("wsrep%",))
    return {str(name).lower(): str(value) for name, value in rows}


def causal_read_ms(lab: ContainerGalera, n: int) -> float | None:
    """How long a causal read took on node n; None when it did not end in CAUSAL_WAIT_S."""
    with lab.connect(n, read_timeout_s=CAUSAL_WAIT_S) as conn, conn.cursor() as cur:
        cur.execute("SET SESSION wsrep_sync_wait = 1")
        started = time.monotonic()
        try:
            cur.execute("SELECT 1")
            cur.fetchall()
        except pymysql.err.OperationalError:
            return None
        return (time.monotonic() - started) * 1000


def writer(lab: ContainerGalera, stop: threading.Event) -> None:
    """Inserts on node 1 until `stop` (each on a connection of its own once one fails)."""
    while not stop.is_set():
        with contextlib.suppress(Exception):
            lab.sql(1, "INSERT INTO labdb.partition_signals () VALUES ()")


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--every-ms", type=int, default=200)
    parser.add_argument("--suspect-timeout-s", type=int, default=5)
    args = parser.parse_args(argv)
    lab = ContainerGalera(args.suspect_timeout_s)
    stop = threading.Event()
    try:
        lab.up()
        lab.apply_suspect_timeout()
        lab.sql(
            1,
            "CREATE TABLE IF NOT EXISTS labdb.partition_signals "
            "(id BIGINT AUTO_INCREMENT PRIMARY KEY) ENGINE=InnoDB",
        )
        client = threading.Thread(target=writer, args=(lab, stop), daemon=True)
        client.start()
        time.sleep(1.0)  # writes flowing before the cut
        before = {n: status(lab, n) for n in NODES}
        cut_at = time.monotonic()
        lab.cut_from_peers(1)
        first: dict[tuple[str, int], tuple[float, str]] = {}
        stalls: dict[int, list[tuple[float, float | None]]] = {n: [] for n in NODES}
        while (now := time.monotonic()) - cut_at < args.seconds:
            for n in NODES:
                with contextlib.suppress(Exception):
                    for name, value in status(lab, n).items():
                        if value != before[n].get(name) and (name, n) not in first:
                            first[(name, n)] = (time.monotonic() - cut_at, value)
                with contextlib.suppress(Exception):
                    stalls[n].append((time.monotonic() - cut_at, causal_read_ms(lab, n)))
            time.sleep(max(0.0, args.every_ms / 1000 - (time.monotonic() - now)))
        print(f"evs.suspect_timeout {args.suspect_timeout_s} s; node 1 cut off at 0.0 s")
        print("first change of each wsrep status variable, by node (s after the cut: value):")
        for name in sorted({name for name, _ in first}):
            cells = []
            for n in NODES:
                seen = first.get((name, n))
                cells.append(f"node{n} " + (f"{seen[0]:.1f}: {seen[1][:40]}" if seen else "-"))
            print(f"  {name:34s} " + " | ".join(cells))
        print(f"causal reads (stalled: not done in {CAUSAL_WAIT_S * 1000:.0f} ms):")
        for n in NODES:
            marks = " ".join(
                f"{at:.1f}:{'stall' if ms is None else f'{ms:.0f}ms'}" for at, ms in stalls[n]
            )
            print(f"  node{n} {marks}")
    finally:
        stop.set()
        lab.down()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
