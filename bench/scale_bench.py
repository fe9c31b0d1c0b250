"""How the daemon's cost grows with nodes and with clusters, on simulated Galera nodes (not a
test: it prints numbers and ratios, asserts nothing).

    python -m bench.scale_bench [--passes 200] [--seconds 20] [--nodes 3,15,30,60]
                                [--clusters 1,10,50] [--cluster-nodes 3] [--interval-ms 1000]
                                [--kill-last]

The nodes are the lab's fleet (tests/lab/simnodes.py: one process answering the probe's and the
watch's questions as Synced Galera nodes, a few tens of microseconds each); ProxySQL is the
lab's (a real one when installed, else the emulator). Figures are CPU time, which stays put on a
busy machine where wall time does not. Each is measured quiet (every answer the same) and with
changing queues (every node's wsrep_local_recv_queue moves 0..5 between answers, as under
writes).

- pass CPU against nodes: one cluster of N nodes, the daemon's pass (persistent connections,
  in this process) after the layout converged; CPU per pass and its ratio to the 3-node pass
  (target: 60 nodes <= 3x);
- daemon CPU against clusters: `galera-checker daemon` on C clusters of 3 nodes (or
  --cluster-nodes) at --interval-ms, the watch on (its default 40 ms); its CPU over --seconds
  as % of one core (target at 50 clusters, 1000 ms: <= 10 %), the longest pass and the longest
  gap between the starts of two passes of one cluster (by the daemon's own timestamps), beside
  the interval (target: never longer than the interval), how many passes the watch started
  early, the passes of the cluster that made the fewest and of the one that made the most
  (fairness under overload), and the connections the nodes accepted (a reconnect storm).
  --kill-last then kills the last cluster's writer and prints when the daemon's watch saw it
  and when it loaded another writer.
  --baseline PATH runs another checkout's daemon beside this one's in the same run (e.g. a
  `git worktree` of an older commit).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict, deque
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, cast

from bench.common import Lab, admin_client
from checker_core.core.schema import Checker
from checker_core.passes.result import Mode, Outcome
from checker_core.passes.runner import PassRunner
from checker_core.settings.config import load
from galera_checker.cli import kind as galera_kind
from tests.lab.fleet_config import Fleet, write_config
from tests.lab.fleet_config import seed as seed_fleet
from tests.lab.simnodes import SimNodes

CLK_TCK = os.sysconf("SC_CLK_TCK")
WARM_UP_S = 3.0
CONVERGE_S = 30.0


def seed(lab: Lab, fleet: Fleet) -> None:
    admin = admin_client(lab.proxysql)
    try:
        seed_fleet(admin, fleet)
    finally:
        admin.close()


def set_changing(sim: SimNodes, on: bool) -> None:
    for node in sim.addresses:
        sim.changing(node, on)


# ---------------------------------------------------------------- pass CPU against nodes


def pass_cpu_ms(lab: Lab, nodes: int, passes: int, changing: bool, home: Path) -> float:
    """CPU per daemon pass (this process, every thread) over one cluster of `nodes`."""
    with SimNodes(clusters=1, nodes=nodes) as sim:
        fleet = Fleet.of(sim)
        seed(lab, fleet)
        config = write_config(lab.proxysql, fleet, home / f"nodes-{nodes}-{changing}", 2000)
        kind = galera_kind()
        runner = PassRunner(load(config, Checker.GALERA, env={}), kind, persistent=True)
        try:
            for _ in range(20):  # until the layout is placed and nothing changes
                if runner.run(Mode.APPLY).outcome is Outcome.UNCHANGED:
                    break
            set_changing(sim, changing)
            runner.run(Mode.APPLY)
            started = time.process_time()
            for _ in range(passes):
                runner.run(Mode.APPLY)
            return (time.process_time() - started) * 1000 / passes
        finally:
            runner.close()


# ---------------------------------------------------------------- daemon CPU against clusters


@dataclass(frozen=True)
class DaemonRun:
    cpu_percent: float
    passes: int
    longest_pass_ms: float
    longest_gap_ms: float
    early: int
    # passes of the cluster that made the fewest and of the one that made the most (a cluster
    # that made none counts as 0): how fairly the daemon shared its CPU out
    fewest: int = 0
    most: int = 0
    failed: int = 0  # passes whose outcome is "failed"
    # the commonest reason of the failed ones (their numbers aside): how many, and the last
    failed_why: str = ""
    # how long after its start every cluster had a pass that found nothing to change (None:
    # not within the bound; the measurement then began anyway)
    converge_s: float | None = None
    # connections the nodes accepted over the measured seconds (a reconnect storm shows here)
    connects: int = 0
    # --kill-last: from the last cluster's writer killed (its connections closed, its port
    # refusing) to the daemon's watch line for that cluster, and to its pass that loaded
    # another writer (None: not seen within KILL_WAIT_S)
    detected_s: float | None = None
    failed_over_s: float | None = None


def cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def daemon_run(
    lab: Lab,
    clusters: int,
    *,
    seconds: float,
    interval_ms: int,
    watch_ms: int,
    changing: bool,
    home: Path,
    checkout: str | None = None,
    nodes: int = 3,
    kill_last: bool = False,
) -> DaemonRun:
    """`checkout`: another checkout's daemon (first on PYTHONPATH), for a baseline; `nodes`:
    each cluster's; `kill_last`: after the measured seconds, the last cluster's writer killed
    and the time the daemon took to see it and to move the writer measured."""
    with SimNodes(clusters=clusters, nodes=nodes) as sim:
        fleet = Fleet.of(sim)
        seed(lab, fleet)
        config = write_config(
            lab.proxysql, fleet, home / f"clusters-{clusters}-{changing}", interval_ms, watch_ms
        )
        set_changing(sim, changing)
        executable = Lab.executable("galera-checker")
        daemon = subprocess.Popen(
            [executable, f"--config={config}", "daemon"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env={
                "PATH": os.environ.get("PATH", os.defpath),
                **({"PYTHONPATH": checkout} if checkout else {}),
            },
            start_new_session=True,
        )
        lines: list[dict[str, object]] = []
        measuring = threading.Event()
        # the clusters whose pass found nothing to change: the layout every cluster converges
        # to (the seed holds the rosters alone, so each cluster's first passes load it)
        settled: set[str] = set()
        converged = threading.Event()
        # what the daemon said that is no log line: why it stopped, if it did
        said: deque[str] = deque(maxlen=5)

        def read() -> None:
            assert daemon.stderr is not None
            for raw in daemon.stderr:
                try:
                    line = json.loads(raw)
                except ValueError:
                    said.append(raw.decode(errors="replace").rstrip())
                    continue
                if measuring.is_set():
                    lines.append(line)
                elif line.get("event") == "pass" and line.get("outcome") == "unchanged":
                    settled.add(str(line.get("cluster")))
                    if len(settled) == clusters:
                        converged.set()

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        began = time.monotonic()
        try:
            # connects and the first passes, not measured: until every cluster's pass found
            # its layout in place, within a bound
            time.sleep(WARM_UP_S)
            converged.wait(CONVERGE_S + clusters * 0.3)
            converge_s = time.monotonic() - began if converged.is_set() else None
            measuring.set()
            before, started = cpu_ticks(daemon.pid), time.monotonic()
            accepted = sim.stats().accepted
            time.sleep(seconds)
            spent = (cpu_ticks(daemon.pid) - before) / CLK_TCK
            connects = sim.stats().accepted - accepted
            elapsed = time.monotonic() - started
            measuring.clear()
            if daemon.poll() is not None:
                # an exited daemon's CPU reads as 0: no number for a run that was not made
                raise SystemExit(
                    f"the daemon exited ({daemon.returncode}) before it was measured: "
                    + " | ".join(said)
                )
            kill_figures = killed_last(sim, fleet, lines, measuring) if kill_last else {}
        finally:
            daemon.terminate()
            try:
                daemon.wait(30)
            except subprocess.TimeoutExpired:
                daemon.kill()
                daemon.wait(10)
        lines = lines[: kill_figures.get("measured", len(lines))]
        passes = [line for line in lines if line.get("event") == "pass"]
        at: dict[str, list[float]] = defaultdict(list)
        for line in passes:
            at[str(line.get("cluster"))].append(pass_start(line))
        gaps = [(b - a) * 1000 for times in at.values() for a, b in itertools.pairwise(times)]
        return DaemonRun(
            cpu_percent=100 * spent / elapsed,
            passes=len(passes),
            longest_pass_ms=max((float(str(p.get("duration_ms", 0))) for p in passes), default=0),
            longest_gap_ms=max(gaps, default=0.0),
            early=sum(1 for line in lines if line.get("event") == "watch"),
            fewest=min((len(at.get(name, ())) for name, _ in fleet.clusters), default=0),
            most=max((len(times) for times in at.values()), default=0),
            **failures(passes),
            converge_s=converge_s,
            connects=connects,
            detected_s=kill_figures.get("detected_s"),
            failed_over_s=kill_figures.get("failed_over_s"),
        )


KILL_WAIT_S = 30.0


def killed_last(
    sim: SimNodes, fleet: Fleet, lines: list[dict[str, object]], measuring: threading.Event
) -> dict[str, Any]:
    """Kill the last cluster's writer (node 1: the seed's weights fall in node order) and
    read the daemon's lines for when it saw it (its watch line) and moved the writer (its pass
    that loaded). Times by the wall clock, the daemon's stamps against this process's."""
    name, addresses = fleet.clusters[-1]
    writer = addresses[0]
    measured = len(lines)
    measuring.set()
    killed_at = time.time()
    sim.set_mode((writer.host, writer.port), "down")
    found: dict[str, Any] = {"measured": measured}
    deadline = time.monotonic() + KILL_WAIT_S
    seen = measured
    while time.monotonic() < deadline and "failed_over_s" not in found:
        for line in lines[seen:]:
            if line.get("cluster") != name:
                continue
            at = datetime.fromisoformat(str(line["ts"]).replace("Z", "+00:00")).timestamp()
            if line.get("event") == "watch" and "detected_s" not in found:
                found["detected_s"] = at - killed_at
            routed = cast(list[object], line.get("writers") or [])
            moved = str(writer) not in [str(w) for w in routed]
            if line.get("event") == "pass" and line.get("outcome") == "changed" and moved:
                found["failed_over_s"] = at - killed_at
        seen = len(lines)
        time.sleep(0.05)
    measuring.clear()
    return found


def seconds_or_never(value: float | None) -> str:
    return f"{value * 1000:.0f} ms" if value is not None else f"never within {KILL_WAIT_S:.0f} s"


def failures(passes: list[dict[str, object]]) -> dict[str, Any]:
    """How many passes failed, and the commonest reason among them (its numbers as #)."""
    failed = [p for p in passes if p.get("outcome") == "failed"]
    by_pattern: dict[str, list[str]] = defaultdict(list)
    for line in failed:
        reason = str(line.get("reason") or line.get("summary") or line)
        by_pattern[re.sub(r"\d+(\.\d+)?", "#", reason)].append(reason)
    if not by_pattern:
        return {"failed": 0, "failed_why": ""}
    commonest = max(by_pattern.values(), key=len)
    return {"failed": len(failed), "failed_why": f"{len(commonest)} x, e.g. {commonest[-1][:160]}"}


def pass_start(line: dict[str, object]) -> float:
    """When a pass began, by the daemon's own stamps: its line's time less its duration. (When
    the bench read the line says more of the bench's own wait for the CPU than of the daemon.)
    The line's time is the wall clock: a clock step during a run would show as a gap."""
    ended = datetime.fromisoformat(str(line["ts"]).replace("Z", "+00:00")).timestamp()
    return ended - float(str(line.get("duration_ms", 0))) / 1000


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--passes", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--nodes", default="3,15,30,60")
    parser.add_argument("--clusters", default="1,10,50")
    parser.add_argument("--cluster-nodes", type=int, default=3, help="the clusters table's")
    parser.add_argument(
        "--kill-last", action="store_true", help="then kill the last cluster's writer"
    )
    parser.add_argument("--interval-ms", type=int, default=1000)
    parser.add_argument("--watch-ms", type=int, default=40, help="run.watch_interval_ms")
    parser.add_argument(
        "--baseline", help="another checkout (a path): its daemon measured beside this one's"
    )
    parser.add_argument("--only", choices=("nodes", "clusters"), help="one of the two tables")
    args = parser.parse_args(argv)
    node_counts = [int(n) for n in args.nodes.split(",")]
    cluster_counts = [int(c) for c in args.clusters.split(",")]
    with Lab() as lab, tempfile.TemporaryDirectory(prefix="scale-bench-") as tmp:
        home = Path(tmp)
        print(f"proxysql: {'real ' if lab.proxysql.is_real else 'emulated '}admin endpoint")
        if args.only != "clusters":
            nodes_table(lab, node_counts, args.passes, home)
        if args.only != "nodes":
            clusters_table(lab, cluster_counts, args, home)
    return 0


def nodes_table(lab: Lab, node_counts: list[int], passes: int, home: Path) -> None:
    print("\npass CPU against nodes (one cluster, the daemon's pass)")
    print(f"{'nodes':>6} {'quiet ms':>9} {'ratio':>6} {'changing ms':>12} {'ratio':>6}")
    floor: dict[bool, float] = {}
    for nodes in node_counts:
        row = [f"{nodes:>6}"]
        for changing in (False, True):
            cost = pass_cpu_ms(lab, nodes, passes, changing, home)
            floor.setdefault(changing, cost)
            row.append(f"{cost:>9.2f}" if not changing else f"{cost:>12.2f}")
            row.append(f"{cost / floor[changing]:>6.2f}")
        print(" ".join(row))


def clusters_table(
    lab: Lab, cluster_counts: list[int], args: argparse.Namespace, home: Path
) -> None:
    watch = f"watch every {args.watch_ms} ms" if args.watch_ms else "watch questions off"
    print(
        f"\ndaemon CPU against clusters of {args.cluster_nodes} nodes (interval "
        f"{args.interval_ms} ms, {watch})"
    )
    print(
        f"{'clusters':>8} {'queues':>8} {'CPU %':>6} {'passes':>7} "
        f"{'longest pass ms':>16} {'longest gap ms':>15} {'early':>6} {'per cluster':>12} "
        f"{'failed':>7}"
    )
    runs = [("this checkout", None)]
    if args.baseline:
        runs.append((f"baseline {args.baseline}", args.baseline))
    for clusters in cluster_counts:
        for changing in (False, True):
            for label, checkout in runs:
                ran = daemon_run(
                    lab,
                    clusters,
                    seconds=args.seconds,
                    interval_ms=args.interval_ms,
                    watch_ms=args.watch_ms,
                    changing=changing,
                    home=home,
                    checkout=checkout,
                    nodes=args.cluster_nodes,
                    kill_last=args.kill_last,
                )
                print(
                    f"{clusters:>8} {'changing' if changing else 'quiet':>8} "
                    f"{ran.cpu_percent:>6.1f} {ran.passes:>7} {ran.longest_pass_ms:>16.1f} "
                    f"{ran.longest_gap_ms:>15.1f} {ran.early:>6} "
                    f"{f'{ran.fewest}-{ran.most}':>12} {ran.failed:>7}  {label}"
                )
                converged = (
                    f"{ran.converge_s:.0f} s" if ran.converge_s is not None else "not converged"
                )
                if args.kill_last:
                    print(
                        f"{'':>8} the last cluster's writer killed: the watch saw it after "
                        f"{seconds_or_never(ran.detected_s)}, another writer loaded after "
                        f"{seconds_or_never(ran.failed_over_s)}"
                    )
                print(
                    f"{'':>8} every cluster in place after {converged}; the nodes accepted "
                    f"{ran.connects} connections while measured (ProxySQL's monitor's among them)"
                )
                if ran.failed_why:
                    print(f"{'':>8} failed most often: {ran.failed_why}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
