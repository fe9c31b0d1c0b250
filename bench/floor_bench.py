"""The floor under the daemon's cost: the same talk with ProxySQL and the nodes and nothing
else, beside the daemon measured in the same run (not a test: it prints numbers and ratios,
asserts nothing).

    python -m bench.floor_bench [--nodes 3,60] [--passes 300] [--clusters 50]
                                [--interval-ms 1000] [--watch-ms 40] [--seconds 15]

The nodes are the lab's simulated Galera fleet (tests/lab/simnodes.py, in its own process);
ProxySQL is the lab's. The floor's connections are opened and logged in by the checker's own
prober (so each node is asked what the daemon asks it: the one-row probe, the watch's
question), then used bare: a question's packet is written, the answers are polled for and read,
and an answer is compared with the last one (a changed one is framed and its row decoded, as
the least a checker must do to learn it). No decision, no judging, no log line, no state.

- pass floor against nodes: one ProxySQL read (the checker's rows question) and one question to
  each of N nodes, back to back, quiet and with changing queues, CPU per pass; beside the
  daemon's pass (bench.scale_bench's measure) in the same run. It prints what a node adds to
  each (the slope from the first node count to the last) and what the target of "60 nodes
  <= 3x 3 nodes" allows a node: 2 x the 3-node pass / 57.
- daemon floor against clusters: C clusters of 3 nodes, a thread each asking ProxySQL and its
  3 nodes every --interval-ms (their starts spread over the interval, as the daemon's), and one
  thread asking every cluster's writer the watch's question every --watch-ms; this process's
  CPU over --seconds as % of one core, beside `galera-checker daemon` on the same fleet.
"""

from __future__ import annotations

import argparse
import os
import select
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.common import SIM_MONITOR, Lab, admin_client
from bench.scale_bench import daemon_run, pass_cpu_ms, seed, set_changing
from checker_core.core.model import NodeAddress
from checker_core.core.schema import Checker
from checker_core.edges import driver, wire
from checker_core.edges.backend import Prober
from checker_core.edges.proxysql_rows import answer_bytes, rows_as_one_value
from checker_core.edges.question import Question
from checker_core.settings.config import load
from galera_checker.cli import kind as galera_kind
from galera_checker.probe import probe as galera_probe
from galera_checker.probe import watch as galera_watch
from tests.lab.fleet_config import Fleet, write_config
from tests.lab.simnodes import SimNodes

NODES_PER_CLUSTER = 3
# the target for the pass: at TARGET_NODES, at most TARGET_RATIO x its cost at BASE_NODES
BASE_NODES, TARGET_NODES, TARGET_RATIO = 3, 60, 3


class NodeLine:
    """One logged-in connection to a node and the packet of the question it is asked."""

    def __init__(self, conn: Any, question: Question[Any]) -> None:
        self.conn = conn
        sql, params = question.ask(conn)
        self.packet = wire.statement(conn, sql, params)[1]
        sock = driver.socket_of(conn)
        assert sock is not None
        self.fd: int = sock.fileno()
        sock.settimeout(0.0)
        self.last = b""


def node_lines(nodes: Sequence[NodeAddress], question: Question[Any]) -> list[NodeLine]:
    """Connections to `nodes`, opened and probed once by the checker's prober (which learns
    what each server offers), each taken to ask `question` bare."""
    kind = galera_kind()
    prober = Prober(SIM_MONITOR, kind.probe, persistent=True)
    first = prober.probe_all(nodes, time.monotonic() + 5)
    if not all(r.answered for r in first.values()):
        raise SystemExit(f"the fleet did not answer: {first}")
    conns = prober._conns  # the bench takes them over; the prober is dropped unclosed
    return [NodeLine(conns[node], question) for node in nodes]


def ask_all(lines: Sequence[NodeLine], poller: select.poll) -> None:
    """Every line's question written, then every answer read as it comes: compared with the
    last one, and framed and decoded when it changed."""
    waiting: dict[int, NodeLine] = {}
    for line in lines:
        os.write(line.fd, line.packet)
        poller.register(line.fd, select.POLLIN)
        waiting[line.fd] = line
    bufs: dict[int, bytes] = {}
    while waiting:
        for fd, _ in poller.poll(2000):
            line = waiting[fd]
            buf = bufs.get(fd, b"") + os.read(fd, 65536)
            if buf == line.last:
                done = True
            elif (raw := wire.read_answer(buf)) is not None:
                for result in raw:
                    wire.decoded(line.conn, result)
                line.last, done = buf, True
            else:
                bufs[fd], done = buf, False
            if done:
                del waiting[fd]
                poller.unregister(fd)


class RowsLine:
    """A logged-in admin connection and the checker's rows question for one cluster."""

    def __init__(self, lab: Lab, hostgroups: tuple[int, ...]) -> None:
        self.admin = admin_client(lab.proxysql)
        conn = self.admin._conn
        wanted = tuple(sorted(hostgroups))
        self.sock = driver.socket_of(conn)
        assert self.sock is not None
        self.packet = wire.statement(conn, rows_as_one_value(len(wanted)), wanted + wanted)[1]
        self.last: bytes | None = None

    def read(self) -> None:
        self.last, _ = answer_bytes(self.sock, self.packet, self.last)

    def close(self) -> None:
        self.admin.close()


def hostgroups_of(lab: Lab, fleet: Fleet, home: Path) -> list[tuple[int, ...]]:
    """Each cluster's hostgroups as the checker reads them: from the configuration the daemon
    would be given, through the checker's own loader."""
    config = write_config(lab.proxysql, fleet, home / "floor-config", 1000)
    settings = load(config, Checker.GALERA, env={})
    return [cluster.hostgroups.all for cluster in settings.clusters]


# ---------------------------------------------------------------- pass floor against nodes


def pass_floor_ms(lab: Lab, nodes: int, passes: int, changing: bool, home: Path) -> float:
    with SimNodes(clusters=1, nodes=nodes) as sim:
        fleet = Fleet.of(sim)
        seed(lab, fleet)
        _, addresses = fleet.clusters[0]
        lines = node_lines(addresses, galera_probe)
        rows = RowsLine(lab, hostgroups_of(lab, fleet, home)[0])
        set_changing(sim, changing)
        poller = select.poll()
        try:
            for _ in range(3):
                rows.read()
                ask_all(lines, poller)
            started = time.process_time()
            for _ in range(passes):
                rows.read()
                ask_all(lines, poller)
            return (time.process_time() - started) * 1000 / passes
        finally:
            rows.close()
            for line in lines:
                line.conn.close()


def nodes_table(lab: Lab, counts: list[int], passes: int, home: Path) -> None:
    print("\npass CPU against nodes: the floor beside the daemon's pass (ms per pass)")
    print(
        f"{'nodes':>6} {'queues':>8} {'floor':>7} {'ratio':>6} {'daemon':>7} {'ratio':>6} "
        f"{'daemon/floor':>12}"
    )
    for changing in (False, True):
        floors: list[float] = []
        daemons: list[float] = []
        for nodes in counts:
            floor = pass_floor_ms(lab, nodes, passes, changing, home)
            daemon = pass_cpu_ms(lab, nodes, passes, changing, home)
            floors.append(floor)
            daemons.append(daemon)
            print(
                f"{nodes:>6} {'changing' if changing else 'quiet':>8} {floor:>7.3f} "
                f"{floor / floors[0]:>6.2f} {daemon:>7.3f} {daemon / daemons[0]:>6.2f} "
                f"{daemon / floor:>12.2f}"
            )
        if len(counts) > 1:
            span = counts[-1] - counts[0]
            floor_slope = (floors[-1] - floors[0]) * 1000 / span
            daemon_slope = (daemons[-1] - daemons[0]) * 1000 / span
            # what "60 nodes <= 3x 3 nodes" lets each of the 57 nodes beyond the 3 add
            allowed = (TARGET_RATIO - 1) * daemons[0] * 1000 / (TARGET_NODES - BASE_NODES)
            print(
                f"{'':>6} {'':>8} a node adds {floor_slope:.1f} µs to the floor, "
                f"{daemon_slope:.1f} µs to the daemon's pass; 60 nodes <= 3x 3 nodes allows "
                f"{allowed:.1f} µs a node"
            )


# ---------------------------------------------------------------- daemon floor against clusters


def floor_daemon_percent(
    lab: Lab,
    clusters: int,
    *,
    interval_s: float,
    watch_s: float,
    seconds: float,
    changing: bool,
    home: Path,
) -> float:
    with SimNodes(clusters=clusters, nodes=NODES_PER_CLUSTER) as sim:
        fleet = Fleet.of(sim)
        seed(lab, fleet)
        passes = []
        hostgroups = hostgroups_of(lab, fleet, home)
        for index, (_, nodes) in enumerate(fleet.clusters):
            passes.append((RowsLine(lab, hostgroups[index]), node_lines(nodes, galera_probe)))
        watched = [node_lines(nodes[:1], galera_watch)[0] for _, nodes in fleet.clusters]
        set_changing(sim, changing)
        stop = threading.Event()
        start = time.monotonic() + 0.5

        def cluster_loop(rows: RowsLine, lines: list[NodeLine], phase: float) -> None:
            poller = select.poll()
            due = start + phase
            while not stop.is_set():
                time.sleep(max(0.0, due - time.monotonic()))
                due += interval_s
                rows.read()
                ask_all(lines, poller)

        def watch_loop() -> None:
            poller = select.poll()
            due = start
            while not stop.is_set():
                time.sleep(max(0.0, due - time.monotonic()))
                due += watch_s
                ask_all(watched, poller)

        threads = [
            threading.Thread(
                target=cluster_loop, args=(rows, lines, i * interval_s / clusters), daemon=True
            )
            for i, (rows, lines) in enumerate(passes)
        ]
        threads.append(threading.Thread(target=watch_loop, daemon=True))
        for thread in threads:
            thread.start()
        try:
            time.sleep(1.0 + interval_s)
            cpu, started = time.process_time(), time.monotonic()
            time.sleep(seconds)
            return 100 * (time.process_time() - cpu) / (time.monotonic() - started)
        finally:
            stop.set()
            for thread in threads:
                thread.join(timeout=interval_s + 5)
            for rows, lines in passes:
                rows.close()
                for line in lines:
                    line.conn.close()
            for line in watched:
                line.conn.close()


def clusters_table(lab: Lab, args: argparse.Namespace, home: Path) -> None:
    print(
        f"\ndaemon CPU, {args.clusters} clusters of 3 (interval {args.interval_ms} ms, watch "
        f"every {args.watch_ms} ms), % of a core: the floor beside the daemon"
    )
    print(f"{'queues':>8} {'floor':>6} {'daemon':>7} {'daemon/floor':>12} {'10 %/floor':>10}")
    for changing in (False, True):
        floor = floor_daemon_percent(
            lab,
            args.clusters,
            interval_s=args.interval_ms / 1000,
            watch_s=args.watch_ms / 1000,
            seconds=args.seconds,
            changing=changing,
            home=home,
        )
        daemon = daemon_run(
            lab,
            args.clusters,
            seconds=args.seconds,
            interval_ms=args.interval_ms,
            watch_ms=args.watch_ms,
            changing=changing,
            home=home,
        ).cpu_percent
        print(
            f"{'changing' if changing else 'quiet':>8} {floor:>6.2f} {daemon:>7.2f} "
            f"{daemon / floor:>12.2f} {10 / floor:>10.2f}"
        )


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--nodes", default="3,60")
    parser.add_argument("--passes", type=int, default=300)
    parser.add_argument("--clusters", type=int, default=50)
    parser.add_argument("--interval-ms", type=int, default=1000)
    parser.add_argument("--watch-ms", type=int, default=40)
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--only", choices=("nodes", "clusters"), help="one of the two tables")
    args = parser.parse_args(argv)
    with Lab() as lab, tempfile.TemporaryDirectory(prefix="floor-bench-") as tmp:
        print(f"proxysql: {'real ' if lab.proxysql.is_real else 'emulated '}admin endpoint")
        if args.only != "clusters":
            nodes_table(lab, [int(n) for n in args.nodes.split(",")], args.passes, Path(tmp))
        if args.only != "nodes":
            clusters_table(lab, args, Path(tmp))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
