"""What the daemon's watch costs per question, beside the floor of the same questions (not a
test: it prints numbers and ratios, asserts nothing).

    python -m bench.watch_bench [--clusters 50] [--watch-ms 40] [--seconds 5] [--rounds 3]

The nodes are the lab's simulated Galera fleet (tests/lab/simnodes.py, in its own process, so
its CPU is not counted). Each cluster of 3 nodes gets a prober with a connection open to every
node, as a daemon's loop has between passes, and the watch hub (service/watch_hub.py) asks each
cluster's writer the watch's question every --watch-ms while it polls the idle connections of
the others, as in the daemon. Nothing changes, so no question ends a watch.

The floor is the same question on connections of its own to the same writers, opened and
probed once by the checker's prober as the hub's are, then asked in a bare loop
(bench.floor_bench.ask_all): every --watch-ms the packet is written onto each, one poll waits
for the answers, and each answer is read and compared with the last one (a changed one framed
and decoded); nothing else. Both are timed as this process's
CPU over --seconds (the main thread sleeps meanwhile), alternating --rounds times, and printed
as microseconds of CPU per question with the watch's ratio to the floor.
"""

from __future__ import annotations

import argparse
import select
import statistics
import time
from collections.abc import Mapping

from bench.common import SIM_MONITOR
from bench.floor_bench import ask_all, node_lines
from checker_core.core.model import NodeAddress
from checker_core.core.probes import ProbeResult
from checker_core.edges.backend import Prober
from checker_core.passes.plugin import CheckerKind
from checker_core.service.watch import Watched, changed
from checker_core.service.watch_hub import WatchHub
from checker_core.service.watcher import Watcher
from galera_checker.probe import watch as galera_watch
from tests.lab.simnodes import SimNodes

NODES_PER_CLUSTER = 3


def _node(name: str) -> NodeAddress:
    host, port = SimNodes.address(name)
    return NodeAddress(host, port)


def _watchers(
    fleet: SimNodes, kind: CheckerKind, every_s: float
) -> tuple[list[Prober], list[Watcher]]:
    probers, watchers = [], []
    for cluster in fleet.clusters:
        nodes = [_node(n) for n in cluster.nodes]
        prober = Prober(SIM_MONITOR, kind.probe, persistent=True)
        first = prober.probe_all(nodes, time.monotonic() + 5)
        writer = nodes[0]
        # the watch's own question once, as the daemon's first watch round asks it
        asked = prober.probe_all([writer], time.monotonic() + 5, kind.watch)[writer]
        if not all(r.answered for r in first.values()) or not asked.answered:
            raise SystemExit(f"cluster {cluster.name} did not answer: {first} {asked}")
        watched = (Watched(writer, kind.policy.watch_key(asked.facts)),)

        def judge(
            answers: Mapping[NodeAddress, ProbeResult], watched: tuple[Watched, ...] = watched
        ) -> object | None:
            return changed(watched, answers, kind.policy, time.monotonic())

        probers.append(prober)
        watchers.append(
            Watcher(
                prober,
                writers=(writer,),
                question=kind.watch,
                every_s=every_s,
                answer_budget_s=1.0,
                judge=judge,
            )
        )
    return probers, watchers


def hub_us_per_question(watchers: list[Watcher], seconds: float) -> float:
    hub = WatchHub()
    for watcher in watchers:
        watcher.asked = 0
        watcher.heard.clear()
        watcher.released.clear()
        watcher.leaving_by = None
    started = time.process_time()
    for watcher in watchers:
        hub.watch(watcher)
    time.sleep(seconds)
    for watcher in watchers:
        hub.release(watcher)
    cpu = time.process_time() - started
    hub.close()
    if any(w.found is not None or w.closed or w.failed for w in watchers):
        raise SystemExit("a watch ended early: the fleet's answers changed")
    return cpu * 1e6 / max(1, sum(w.asked for w in watchers))


def floor_us_per_question(
    fleet: SimNodes, kind: CheckerKind, every_s: float, seconds: float
) -> float:
    writers = [_node(cluster.nodes[0]) for cluster in fleet.clusters]
    # logged in and probed once by the checker's prober, as the hub's are, so each writer is
    # asked the watch's own one-row question
    lines = node_lines(writers, galera_watch)
    try:
        poller = select.poll()
        asked = 0
        started = time.process_time()
        deadline = time.monotonic() + seconds
        next_round = time.monotonic()
        while time.monotonic() < deadline:
            time.sleep(max(0.0, next_round - time.monotonic()))
            next_round += every_s
            ask_all(lines, poller)
            asked += len(lines)
        cpu = time.process_time() - started
        return cpu * 1e6 / max(1, asked)
    finally:
        for line in lines:
            line.conn.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--clusters", type=int, default=50)
    parser.add_argument("--watch-ms", type=int, default=40)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    from galera_checker.cli import kind as galera_kind

    kind = galera_kind()
    if kind.watch is not galera_watch:
        # the hub asks kind.watch; the floor writes that question's packet
        raise SystemExit("the floor asks the Galera watch question, and the hub another")
    every_s = args.watch_ms / 1000
    with SimNodes(clusters=args.clusters, nodes=NODES_PER_CLUSTER) as fleet:
        probers, watchers = _watchers(fleet, kind, every_s)
        hub, floor = [], []
        for _ in range(args.rounds):
            hub.append(hub_us_per_question(watchers, args.seconds))
            floor.append(floor_us_per_question(fleet, kind, every_s, args.seconds))
        for prober in probers:
            prober.close()
    questions_s = args.clusters / every_s
    print(
        f"watch of {args.clusters} writers every {args.watch_ms} ms "
        f"({questions_s:.0f} questions a second), {args.rounds} rounds of {args.seconds:.0f} s"
    )
    print("            µs CPU a question (rounds)          median  % of a core")
    for name, samples in (("watch hub", hub), ("floor", floor)):
        median = statistics.median(samples)
        cells = " ".join(f"{s:6.1f}" for s in samples)
        print(f"{name:<10}  {cells:<34} {median:6.1f}  {median * questions_s / 1e4:6.2f}")
    print(f"ratio to the floor: {statistics.median(hub) / statistics.median(floor):.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
