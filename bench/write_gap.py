"""How long writes stop when the writer fails, through a real ProxySQL (not a test: it prints
figures, asserts nothing; it needs PROXYSQL_BIN and the lab's clusters).

    python -m bench.write_gap CLUSTER [--runs 5] [--interval-ms 200,2000] [--faults a,b]
                              [--variants watch,floor,evict] [--record FILE] [--markdown]
    (CLUSTER: galera, gr, or galera-containers)
    python -m bench.write_gap CLUSTER --from FILE [--markdown]    (the table of recorded runs)

Per run: the cluster healthy, ProxySQL's rows reset to the templates, a fresh checker daemon
(`python -m PACKAGE --config F daemon`) at run.interval_ms; once it has made node 1 the writer, a
client inserts back to back through ProxySQL's MySQL port (the lab's app user, autocommit, a new
connection after each error) while a sampler polls runtime_mysql_servers for the writer
hostgroup every 5 ms. The daemon's CPU is taken over a steady window, then the fault hits the
writer. The run ends once the client has had acknowledgements from the new writer for a while
(or at a deadline); the fault is undone, the cluster healed, and every acknowledged row looked
up on the surviving nodes.

Variants: watch (the daemon as configured by default), floor (run.watch_interval_ms = 0: the
cadence alone), evict (Galera kill -9 only: cluster.evict_dead_nodes with [node_admin]),
unresponsive (Galera freezes and partitions: cluster.evict_unresponsive_nodes,
unresponsive_after_ms 1000, with [node_admin]).

The cluster `galera-containers` is the container tier's (bench/gap_containers.py; the Docker
engine of tests/setup.sh), for the fault the host lab cannot make: `partition`, the writer cut
off from the other members while ProxySQL and the checker still reach it.

A reader fault (reader_sigstop) leaves the writer where it is: its figure is the longest gap
between acknowledged writes, which the whole cluster's stall makes.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import pymysql

from bench.common import HG
from bench.gap_faults import (
    REPO,
    Cluster,
    Fault,
    FaultRun,
    containers_cluster,
    expected_target,
    faults_of,
    galera_cluster,
    gr_cluster,
    reader_of,
)
from bench.gap_timeline import ViewSeen, ViewWatch
from bench.gap_timeline import write as write_timeline
from bench.gap_traffic import TABLES, Sample, Sampler, Statement, Table, Writer
from checker_core.core.model import ServerRow
from checker_core.core.settings import Endpoint, ProxySQLSettings, Secret, Tls
from checker_core.edges.proxysql import AdminClient
from tests.lab.accounts import APP_PASSWORD, APP_USER
from tests.lab.checker_config import write_checker_config
from tests.lab.paths import LOOPBACK, lab_dir
from tests.lab.process import LabError, wait_until
from tests.lab.proxysql import ProxySQLLab, admin_cursor

VARIANTS = ("watch", "floor", "evict", "unresponsive")
# galera-containers: the container tier's cluster, for faults the host lab cannot make (a
# partition between the members while the checker and ProxySQL still reach every one)
CLUSTERS = ("galera", "gr", "galera-containers")
UNRESPONSIVE_AFTER_MS = 1000
WEIGHTS = (1000, 500, 100)
CONVERGE_TIMEOUT_S = 60.0
FIRST_ACK_TIMEOUT_S = 20.0
AFTER_FAULT_TIMEOUT_S = 45.0
ACKS_ON_NEW_WRITER = 20  # acknowledgements after the switch before a run may end
TAIL_S = 1.0
LOST_CHECK_TIMEOUT_S = 30.0
DAEMON_STOP_TIMEOUT_S = 15.0
CPU_WINDOW_MIN_S = 4.0
TICKS = os.sysconf("SC_CLK_TCK")
WORK = lab_dir() / "bench" / "write-gap"


@dataclass(frozen=True)
class Case:
    """One cell of the table: a fault, a variant, a cadence."""

    fault: Fault
    variant: str
    interval_ms: int
    table: Table
    drain_timeout_ms: int | None = None  # None: the checker's default
    # the daemon logs every node's verdict (a random run judges them: judged_down_elsewhere)
    node_lines: bool = False


@dataclass(frozen=True)
class RunRecord:
    """One fault run's figures (seconds after the fault; None: never seen before the deadline)."""

    cluster: str
    fault: str
    variant: str
    interval_ms: int
    run: int
    switched_s: float | None
    first_ack_new_s: float | None
    longest_gap_s: float | None
    errors: dict[str, int]  # MySQL error code -> failed statements
    acknowledged: int
    lost: int
    two_writers: int  # sampler moments with two or more ONLINE writers
    cpu_pct: float
    client: str = "plain"  # the table the client wrote to (runs recorded before: plain)
    drain_timeout_ms: int | None = None
    # nodes the fault did not touch that a pass judged down for their silence (must be 0), and
    # tracebacks in the daemon's log (must be 0); counted when the daemon logs node lines
    healthy_down: int = 0
    tracebacks: int = 0


# --- ProxySQL -------------------------------------------------------------------------------------


def admin_client(proxysql: ProxySQLLab) -> AdminClient:
    endpoint = Endpoint(proxysql.admin_user, Secret(proxysql.admin_password), Tls(), 2000, 5000)
    return AdminClient.connect(ProxySQLSettings(proxysql.admin_host, proxysql.admin_port, endpoint))


def reset_rows(proxysql: ProxySQLLab, cluster: Cluster) -> None:
    """The managed hostgroups emptied, the templates seeded (node 1 the heaviest), loaded."""
    admin = admin_client(proxysql)
    try:
        rows = [
            ServerRow(HG.config_writer, LOOPBACK, port, weight=w)
            for port, w in zip(cluster.ports.values(), WEIGHTS, strict=True)
        ]
        rows += [
            ServerRow(HG.config_reader, LOOPBACK, p, weight=100) for p in cluster.ports.values()
        ]
        admin.stage(HG.all, rows)
        admin.execute("LOAD MYSQL SERVERS TO RUNTIME")
    finally:
        admin.close()


def add_app_user(proxysql: ProxySQLLab) -> None:
    with admin_cursor(proxysql) as cur:
        cur.execute("DELETE FROM mysql_users WHERE username = %s", (APP_USER,))
        cur.execute(
            "INSERT INTO mysql_users (username, password, default_hostgroup, "
            "transaction_persistent) VALUES (%s, %s, %s, 1)",
            (APP_USER, APP_PASSWORD, HG.writer),
        )
        cur.execute("LOAD MYSQL USERS TO RUNTIME")


def online_writers(proxysql: ProxySQLLab) -> tuple[int, ...]:
    with admin_cursor(proxysql) as cur:
        cur.execute(
            "SELECT port FROM runtime_mysql_servers WHERE hostgroup_id = %s AND status = 'ONLINE'",
            (HG.writer,),
        )
        return tuple(sorted(int(row[0]) for row in cur.fetchall()))


# --- the daemon -----------------------------------------------------------------------------------


def checker_env() -> dict[str, str]:
    return {"PYTHONPATH": str(REPO), "PATH": os.environ.get("PATH", "/usr/bin:/bin")}


def write_config(proxysql: ProxySQLLab, cluster: Cluster, case: Case, where: Path) -> Path:
    interval_ms, variant = case.interval_ms, case.variant
    shutil.rmtree(where, ignore_errors=True)  # a fresh state dir: no counters, no pin
    max_runtime_ms = min(1800, interval_ms * 9 // 10)
    run: dict[str, object] = {
        "interval_ms": interval_ms,
        "max_runtime_ms": max_runtime_ms,
        "log_format": "json",
    }
    if variant == "floor":
        run["watch_interval_ms"] = 0
    if case.node_lines:
        run["log_level"] = "debug"
    timeouts = (min(300, max_runtime_ms // 2), min(500, max_runtime_ms // 2))
    extra: dict[str, object] = {}
    if variant == "evict":
        extra["evict_dead_nodes"] = True
    if variant == "unresponsive":
        extra["evict_unresponsive_nodes"] = True
        extra["unresponsive_after_ms"] = UNRESPONSIVE_AFTER_MS
    if case.drain_timeout_ms is not None:
        extra["drain_timeout_ms"] = case.drain_timeout_ms
    return write_checker_config(
        where,
        proxysql,
        HG,
        "bench",
        run,
        monitor_timeouts_ms=timeouts,
        node_admin=True,  # evictions (evict variant) and a GR switchover act as it
        cluster_extra=extra or None,
    )


@contextlib.contextmanager
def daemon(cluster: Cluster, config: Path, logs: Path) -> Iterator[subprocess.Popen[bytes]]:
    """`python -m PACKAGE --config F daemon` in its own session, stopped after the block."""
    argv = [sys.executable, "-m", cluster.package, "--config", str(config), "daemon"]
    with open(logs / "daemon.log", "wb") as log:
        child = subprocess.Popen(
            argv, env=checker_env(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        yield child
    finally:
        child.send_signal(signal.SIGTERM)
        try:
            child.wait(timeout=DAEMON_STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait(timeout=DAEMON_STOP_TIMEOUT_S)


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process (all its threads), from /proc/PID/stat."""
    text = Path(f"/proc/{pid}/stat").read_text()
    fields = text[text.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # fields 14 and 15 of the whole line


def cpu_percent(pid: int, window_s: float) -> float:
    """The process's CPU over a window, as % of one core."""
    before, started = cpu_seconds(pid), time.monotonic()
    time.sleep(window_s)  # a measuring window, not a wait for anything
    used = cpu_seconds(pid) - before
    return 100.0 * used / (time.monotonic() - started)


# --- one run --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Observed:
    statements: tuple[Statement, ...]
    samples: tuple[Sample, ...]
    fault_at: float
    cpu_pct: float
    views: tuple[ViewSeen, ...] = ()  # --timeline: the survivors' own views
    wall_minus_mono: float = 0.0


def converge(proxysql: ProxySQLLab, cluster: Cluster, child: subprocess.Popen[bytes]) -> None:
    wanted = (cluster.port(cluster.writer),)

    def converged() -> bool:
        if child.poll() is not None:
            raise LabError(f"the daemon exited ({child.returncode}); see its daemon.log")
        return online_writers(proxysql) == wanted

    wait_until(converged, CONVERGE_TIMEOUT_S, f"the writer hostgroup to hold {wanted} alone", 0.05)


def switched(samples: Sequence[Sample], fault_at: float, old: int) -> Sample | None:
    return next((s for s in samples if s.at >= fault_at and s.online and old not in s.online), None)


class RunEnd:
    """Whether a run is over: the writer hostgroup switched, a command the fault started (a
    switchover, whose old writer drains while the client may still write to it) has ended, and
    the client has had acks well after both."""

    def __init__(self, writer: Writer, sampler: Sampler, faulted: FaultRun, fault_at: float):
        self.writer, self.sampler, self.faulted, self.fault_at = writer, sampler, faulted, fault_at
        self.settled_at: float | None = None

    def __call__(self) -> bool:
        old = self.faulted.cluster.port(self.faulted.victim)
        moved = switched(list(self.sampler.samples), self.fault_at, old)
        if moved is None:
            return False
        if self.settled_at is None:
            if any(child.poll() is None for child in self.faulted.background):
                return False
            self.settled_at = max(moved.at, time.monotonic())
        acks = [s for s in list(self.writer.statements) if s.code == 0]
        acks = [s for s in acks if s.started >= self.settled_at]
        return len(acks) >= ACKS_ON_NEW_WRITER and acks[-1].ended - acks[0].started >= TAIL_S


def observe(
    proxysql: ProxySQLLab,
    case: Case,
    faulted: FaultRun,
    pid: int,
    run_id: str,
    *,
    views: ViewWatch | None = None,
) -> Observed:
    mysql_port = proxysql.mysql_port
    assert mysql_port is not None
    writer = Writer(mysql_port, run_id, case.table)
    sampler = Sampler(proxysql.connect, HG.writer)
    sampler.start()
    writer.start()
    if views is not None:
        views.start()
    fault_at = offset = 0.0
    try:
        wait_until(lambda: any(s.code == 0 for s in list(writer.statements)), FIRST_ACK_TIMEOUT_S,
                   "a first acknowledged write through ProxySQL")  # fmt: skip
        cpu = cpu_percent(pid, max(CPU_WINDOW_MIN_S, 2 * case.interval_ms / 1000))
        offset = time.time() - time.monotonic()
        fault_at = time.monotonic()
        case.fault.inject(faulted)
        with contextlib.suppress(LabError):
            wait_until(RunEnd(writer, sampler, faulted, fault_at), AFTER_FAULT_TIMEOUT_S,
                       "the client to write on the new writer", 0.05)  # fmt: skip
    finally:
        writer.stop()
        sampler.stop()
        if views is not None:
            views.stop()
            views.join()
        case.fault.undo(faulted)
        writer.join()
        sampler.join()
    seen = tuple(views.seen) if views is not None else ()
    return Observed(tuple(writer.statements), tuple(sampler.samples), fault_at, cpu, seen, offset)


def stored(cluster: Cluster, n: int, run_id: str, table: Table) -> dict[int, int]:
    rows = cluster.sql(n, f"SELECT seq, node FROM {table.name} WHERE run = %s", (run_id,))  # noqa: S608
    return {int(seq): int(node) for seq, node in rows}


def rows_on_survivors(
    cluster: Cluster, survivors: Sequence[int], run_id: str, acked: set[int], table: Table
) -> tuple[dict[int, int], int]:
    """seq -> node (from the first survivor) and how many acked seqs some survivor lacks, once
    they all hold them or at the deadline (a secondary may still be applying)."""
    found: dict[int, dict[int, int]] = {}

    def complete() -> bool:
        for n in survivors:
            found[n] = stored(cluster, n, run_id, table)
        return all(acked <= set(rows) for rows in found.values())

    with contextlib.suppress(LabError):
        wait_until(complete, LOST_CHECK_TIMEOUT_S, "acknowledged rows on every survivor", 0.5)
    missing = {seq for rows in found.values() for seq in acked - set(rows)}
    return found[survivors[0]], len(missing)


def longest_gap(acks: Sequence[Statement], fault_at: float) -> float | None:
    """The longest time without an acknowledgement, from the last before the fault on."""
    ends = sorted(s.ended for s in acks)
    before = [e for e in ends if e < fault_at]
    after = [e for e in ends if e >= fault_at]
    if not after:
        return None
    marks = ([before[-1]] if before else [fault_at]) + after
    return max(b - a for a, b in itertools.pairwise(marks))


def figures(
    cluster: Cluster, faulted: FaultRun, seen: Observed, run_id: str, table: Table
) -> tuple[float | None, float | None, float | None, int, int]:
    """(switched, first ack on the new writer, longest gap, acknowledged, lost)."""
    old, old_stamp = cluster.port(faulted.victim), cluster.stamped(faulted.victim)
    acks = [s for s in seen.statements if s.code == 0]
    survivors = [n for n in cluster.ports if n != faulted.victim]
    nodes, lost = rows_on_survivors(cluster, survivors, run_id, {s.seq for s in acks}, table)
    moved = switched(seen.samples, seen.fault_at, old)
    new_acks = [
        s.ended - seen.fault_at
        for s in acks
        if s.ended >= seen.fault_at and nodes.get(s.seq, old_stamp) != old_stamp
    ]
    return (
        None if moved is None else moved.at - seen.fault_at,
        min(new_acks, default=None),
        longest_gap(acks, seen.fault_at),
        len(acks),
        lost,
    )


def evictions_cleared(cluster: Cluster) -> bool:
    """No Galera node lists an evicted member (wsrep_evs_evict_list empty everywhere)."""
    for n in (1, 2, 3):
        rows = cluster.lab.sql(n, "SHOW GLOBAL STATUS LIKE 'wsrep_evs_evict_list'")
        if rows and rows[0][1]:
            return False
    return True


def run_once(
    proxysql: ProxySQLLab, cluster: Cluster, case: Case, k: int, timeline: bool = False
) -> RunRecord:
    fault, variant, interval_ms = case.fault, case.variant, case.interval_ms
    cluster.lab.ensure_healthy()
    evicting = variant in ("evict", "unresponsive")
    if evicting:
        for n in (1, 2, 3):  # entries an interrupted earlier run left: not this checker's
            cluster.lab.sql(n, "SET GLOBAL wsrep_provider_options = %s", ("evs.evict=",))
    reset_rows(proxysql, cluster)
    config = write_config(proxysql, cluster, case, WORK / cluster.name)
    run_id = f"{fault.name}-{variant}-{interval_ms}-{k}-{time.time_ns()}"
    victim = reader_of(cluster) if fault.on_reader else cluster.writer
    logs = WORK / "logs" / run_id
    logs.mkdir(parents=True, exist_ok=True)
    target = cluster.writer if fault.on_reader else expected_target(cluster, victim)
    faulted = FaultRun(cluster, config, checker_env(), victim, target, logs)
    with daemon(cluster, config, logs) as child:
        converge(proxysql, cluster, child)
        views = None
        if timeline:
            survivors = [n for n in cluster.ports if n != victim]
            views = ViewWatch(lambda n: cluster.lab._connect(n, 2.0), survivors)
        seen = observe(proxysql, case, faulted, child.pid, run_id, views=views)
        if variant == "unresponsive" and fault.frozen:
            # evicted while frozen, a woken member stays out until it is restarted
            cluster.lab.kill(victim)
        if evicting:
            # the node comes back while the checker runs, which then clears its eviction
            # entries (an entry left behind delays the next eviction: docs/eviction.md)
            cluster.lab.ensure_healthy()
            wait_until(lambda: evictions_cleared(cluster), CONVERGE_TIMEOUT_S, "entries cleared")
    cluster.lab.ensure_healthy()
    moved, first_new, gap, acknowledged, lost = figures(cluster, faulted, seen, run_id, case.table)
    if timeline:
        survivor = next(n for n in cluster.ports if n != victim)
        nodes = stored(cluster, survivor, run_id, case.table)
        write_timeline(
            logs,
            fault_at=seen.fault_at,
            wall_minus_mono=seen.wall_minus_mono,
            views=seen.views,
            statements=seen.statements,
            samples=seen.samples,
            nodes=nodes,
        )
    failed = Counter(str(s.code) for s in seen.statements if s.code != 0)
    log = (logs / "daemon.log").read_text(errors="replace")
    return RunRecord(
        cluster=cluster.name,
        fault=fault.name,
        variant=variant,
        interval_ms=interval_ms,
        run=k,
        switched_s=moved,
        first_ack_new_s=first_new,
        longest_gap_s=gap,
        errors=dict(sorted(failed.items())),
        acknowledged=acknowledged,
        lost=lost,
        two_writers=sum(1 for s in seen.samples if len(s.online) > 1),
        cpu_pct=seen.cpu_pct,
        client=case.table.client,
        drain_timeout_ms=case.drain_timeout_ms,
        healthy_down=len(judged_down_elsewhere(log, cluster.ports[victim])),
        tracebacks=log.count("Traceback"),
    )


def judged_down_elsewhere(log: str, victim_port: int) -> set[str]:
    """Nodes other than the fault's victim that a pass judged down for no answer: the checker's
    own lateness taken for the node's (issue 38). From the daemon's node lines (debug level)."""
    found = set()
    for line in log.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if not isinstance(record, dict) or record.get("event") != "node":
            continue
        node = str(record.get("node"))
        silent = "unreachable" in str(record.get("reason"))
        if record.get("verdict") == "down" and silent and not node.endswith(f":{victim_port}"):
            found.add(node)
    return found


# --- the labs -------------------------------------------------------------------------------------


@contextlib.contextmanager
def labs(cluster: Cluster) -> Iterator[ProxySQLLab]:
    """The cluster (left as found: stopped if this started it, else its default suspect timeout
    back) and a real ProxySQL of the bench's own (its own directory and ports), stopped after."""
    was_up = _gr_up(cluster) if cluster.name == "gr" else bool(cluster.lab.running())
    proxysql = ProxySQLLab(WORK / "proxysql")
    try:
        cluster.lab.up()
        cluster.lab.ensure_healthy()
        if cluster.name != "gr":
            cluster.lab.apply_suspect_timeout()
        proxysql.up()
        if not proxysql.is_real:
            raise LabError("the bench's ProxySQL is not the real one")
        proxysql.reset()
        add_app_user(proxysql)
        _create_table(cluster)
        yield proxysql
    finally:
        with contextlib.suppress(LabError, pymysql.MySQLError, OSError):
            proxysql.down()
        _leave(cluster, was_up)


def _gr_up(cluster: Cluster) -> bool:
    return any(cluster.lab.pid(n) is not None for n in cluster.ports)


def _create_table(cluster: Cluster) -> None:
    for table in TABLES.values():
        cluster.sql(cluster.writer, table.create, ())
        cluster.sql(cluster.writer, table.trigger.format(stamp=cluster.stamp), ())


def _leave(cluster: Cluster, was_up: bool) -> None:
    if not was_up:
        cluster.lab.down()
        return
    cluster.lab.ensure_healthy()
    if cluster.name == "galera":
        from tests.lab.galera import GaleraLab

        GaleraLab().apply_suspect_timeout()  # the lab's own value back


# --- figures and the table ------------------------------------------------------------------------


def spread(values: Sequence[float | None]) -> str:
    seen = [v for v in values if v is not None]
    if not seen:
        return "-"
    missing = len(values) - len(seen)
    text = f"{statistics.median(seen):.2f} ({min(seen):.2f}-{max(seen):.2f})"
    return text + (f" +{missing} never" if missing else "")


def error_summary(records: Sequence[RunRecord]) -> str:
    codes = sorted({code for r in records for code in r.errors}, key=int)
    if not codes:
        return "none"
    parts = []
    for code in codes:
        counts = [r.errors.get(code, 0) for r in records]
        parts.append(f"{code}: {statistics.median(counts):g} ({min(counts)}-{max(counts)})")
    return ", ".join(parts)


HEADER = (
    "fault",
    "variant",
    "interval ms",
    "runs",
    "fault -> switched s",
    "fault -> 1st write on new writer s",
    "longest gap s",
    "failed statements per run, by code",
    "acked lost",
    "two writers",
    "daemon CPU %",
)


def table_rows(records: Sequence[RunRecord]) -> list[tuple[str, ...]]:
    groups: dict[tuple[str, str, int], list[RunRecord]] = {}
    for r in records:
        variant = ", ".join(
            [r.variant, r.client]
            + ([f"drain {r.drain_timeout_ms} ms"] if r.drain_timeout_ms is not None else [])
        )
        groups.setdefault((r.fault, variant, r.interval_ms), []).append(r)
    rows: list[tuple[str, ...]] = []
    for (fault, variant, interval), group in groups.items():
        rows.append(
            (
                fault,
                variant,
                str(interval),
                str(len(group)),
                spread([r.switched_s for r in group]),
                spread([r.first_ack_new_s for r in group]),
                spread([r.longest_gap_s for r in group]),
                error_summary(group),
                str(sum(r.lost for r in group)),
                str(sum(r.two_writers for r in group)),
                f"{statistics.median(r.cpu_pct for r in group):.1f}",
            )
        )
    return rows


def render(rows: Sequence[tuple[str, ...]], markdown: bool) -> str:
    if markdown:
        lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
        return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows])
    all_rows = [HEADER, *rows]
    widths = [max(len(r[i]) for r in all_rows) for i in range(len(HEADER))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in all_rows
    )


# --- command line ---------------------------------------------------------------------------------


def parse(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("cluster", choices=CLUSTERS)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--interval-ms", default="200,2000")
    parser.add_argument("--faults", default="", help="comma-separated; all of the cluster's")
    parser.add_argument("--variants", default="watch,floor,evict")
    parser.add_argument("--suspect-timeout-s", type=int, default=5, help="Galera's evs value")
    parser.add_argument("--clients", default="autoinc", help="autoinc, plain (comma-separated)")
    parser.add_argument("--drain-timeout-ms", default="", help="comma-separated; the default's")
    parser.add_argument("--record", type=Path, help="append each run's figures (JSON lines)")
    parser.add_argument("--from", dest="source", type=Path, help="print recorded runs only")
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument(
        "--random",
        type=int,
        default=0,
        help="N runs of cells drawn from --faults/--variants/--interval-ms by --seed, one each",
    )
    parser.add_argument("--seed", type=int, default=7, help="the draw of --random")
    parser.add_argument(
        "--timeline",
        action="store_true",
        help="keep each run's timeline (the survivors' views polled every 5 ms) in its log dir",
    )
    return parser.parse_args(argv)


def plan(args: argparse.Namespace) -> list[Case]:
    known = faults_of(args.cluster)
    names = [n for n in args.faults.split(",") if n] or list(known)
    variants = [v for v in args.variants.split(",") if v]
    unknown = [n for n in names if n not in known] + [v for v in variants if v not in VARIANTS]
    if unknown:
        raise SystemExit(f"write_gap: unknown faults or variants: {', '.join(unknown)}")
    clients = [c for c in args.clients.split(",") if c]
    if any(c not in TABLES for c in clients):
        raise SystemExit(f"write_gap: --clients: one of {', '.join(TABLES)}")
    intervals = [int(i) for i in args.interval_ms.split(",") if i]
    drains: list[int | None] = [int(d) for d in args.drain_timeout_ms.split(",") if d] or [None]
    return [
        Case(known[name], variant, interval, TABLES[client], drain)
        for name in names
        for interval in intervals
        for variant in variants
        for client in clients
        for drain in drains
        if (variant != "evict" or known[name].evictable)
        and (variant != "unresponsive" or known[name].frozen or known[name].cut)
    ]


def load_records(path: Path, cluster: str) -> list[RunRecord]:
    records = [RunRecord(**json.loads(line)) for line in path.read_text().splitlines() if line]
    return [r for r in records if r.cluster == cluster]


def main(argv: Sequence[str]) -> int:
    args = parse(argv)
    if args.source is not None:
        print(render(table_rows(load_records(args.source, args.cluster)), args.markdown))
        return 0
    if not os.environ.get("PROXYSQL_BIN"):
        print("write_gap: skipped: PROXYSQL_BIN is not set (this bench needs a real ProxySQL)")
        return 0
    todo = plan(args)
    runs = args.runs
    if args.random:
        # a random run: cells drawn by the seed, one run each, every node's verdict logged
        draw = random.Random(args.seed)
        todo = [replace(draw.choice(todo), node_lines=True) for _ in range(args.random)]
        print("random run, seed", args.seed, ":", ", ".join(
            f"{c.fault.name}/{c.variant}/{c.interval_ms}" for c in todo), flush=True)  # fmt: skip
        runs = 1
    # a SIGTERM (timeout(1), a human) unwinds through the blocks that stop what the bench started
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(f"write_gap: signal {signum}"))
    if args.cluster == "gr":
        cluster = gr_cluster()
    elif args.cluster == "galera":
        cluster = galera_cluster(args.suspect_timeout_s)
    else:
        cluster = containers_cluster(args.suspect_timeout_s)
    records: list[RunRecord] = []
    with labs(cluster) as proxysql:
        print(f"{cluster.name}: ProxySQL {proxysql.status().version}, "
              f"{len(todo)} cells x {runs} runs", flush=True)  # fmt: skip
        for case in todo:
            for k in range(runs):
                record = run_once(proxysql, cluster, case, k, args.timeline)
                records.append(record)
                print(json.dumps(asdict(record)), flush=True)
                if args.record is not None:
                    with args.record.open("a") as out:
                        out.write(json.dumps(asdict(record)) + "\n")
    print(render(table_rows(records), args.markdown))
    if args.random:
        down = sum(r.healthy_down for r in records)
        tracebacks = sum(r.tracebacks for r in records)
        print(f"random run, seed {args.seed}: {len(records)} faults; healthy nodes judged down "
              f"{down}; tracebacks {tracebacks}; every evicting run ended with the members' "
              "eviction lists empty (the run waits for it)", flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
