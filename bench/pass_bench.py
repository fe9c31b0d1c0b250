"""What one scheduler pass costs, beside the floor of its own I/O (not a test: it prints numbers
and ratios, asserts nothing).

    python -m bench.pass_bench galera|gr [--runs 20]

In one run, on one lab, a converged layout (nothing to change):
- floor: a small program run by the same interpreter with -S: import PyMySQL, connect to the
  admin and read runtime_mysql_servers, then connect to each node in turn and read its cluster
  status (the issue's floor: connect, read ProxySQL, probe each node once), no TLS
- scheduler pass: `CHECKER --config=F run` from process start to exit, as ProxySQL runs it;
  the ratio to the floor; its peak RSS; its in-process duration_ms (from its log line)
- the same pass with ssl_mode = "disabled" on both endpoints (what TLS adds), started as
  `python -S -m PACKAGE` (what this interpreter's site-packages startup adds), and run from
  this checkout installed in a venv of its own as docs/install.md does (what users run; the
  interpreter's own site-packages may carry other projects' .pth files, which a venv does not)
- one connect (and one query) to a node per ssl_mode, in process, with the process's context;
  and PyMySQL left to itself (no ssl argument: a new default context per connect)
- daemon: one pass on persistent connections beside its floor (the same I/O alone), and the
  first pass after start (connects); back to back, then again with the pass and the floor
  each after an idle pause, as a daemon's passes come (on a VM, waking sleeping threads and
  servers costs each round trip more than back to back)
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pymysql

from bench.common import HG, Lab, write_config
from checker_core.core.model import NodeAddress
from checker_core.core.schema import Checker, SslMode
from checker_core.core.settings import Tls
from checker_core.edges import tls
from checker_core.passes.plugin import CheckerKind
from checker_core.passes.result import Mode
from checker_core.passes.runner import PassRunner
from checker_core.settings.config import load
from tests.lab.accounts import ADMIN_PASSWORD, ADMIN_USER, MONITOR_PASSWORD, MONITOR_USER

REPO = Path(__file__).resolve().parents[1]

FLOOR = """
import pymysql
admin = pymysql.connect(host={admin_host!r}, port={admin_port}, user={admin_user!r},
                        password={admin_password!r}, ssl_disabled=True)
with admin.cursor() as cur:
    cur.execute("SELECT hostgroup_id, hostname, port, status, weight FROM runtime_mysql_servers "
                "WHERE hostgroup_id IN ({hostgroups})")
    cur.fetchall()
admin.close()
for host, port in {nodes!r}:
    node = pymysql.connect(host=host, port=port, user={user!r}, password={password!r},
                           ssl_disabled=True)
    with node.cursor() as cur:
        cur.execute({status_query!r})
        cur.fetchall()
    node.close()
"""

STATUS_QUERY = {
    "galera": "SHOW GLOBAL STATUS LIKE 'wsrep_%'",
    "gr": "SELECT MEMBER_STATE, MEMBER_ROLE FROM performance_schema.replication_group_members",
}


@dataclass(frozen=True)
class Child:
    wall_ms: float
    code: int
    max_rss_kib: int
    stderr: str


# Starts one program and reports its wall time, exit code and peak RSS. A child's ru_maxrss
# counts the memory of the process it was forked from (until exec the child is a copy of it):
# forked from this bench, every pass would be reported about as large as the bench itself. So a
# small launcher (this interpreter with -S -I, far smaller than any pass) forks the program.
LAUNCHER = """
import json, os, subprocess, sys, time
started = time.perf_counter()
proc = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL)
_, status, usage = os.wait4(proc.pid, 0)
wall = (time.perf_counter() - started) * 1000
print(json.dumps([wall, os.waitstatus_to_exitcode(status), usage.ru_maxrss]))
"""


def run_child(argv: list[str], env: dict[str, str]) -> Child:
    """argv to its end: wall time, exit code, peak RSS (from its own rusage), stderr."""
    with tempfile.TemporaryFile() as err:
        done = subprocess.run(
            [sys.executable, "-S", "-I", "-c", LAUNCHER, *argv],
            env=env,
            stdout=subprocess.PIPE,
            stderr=err,
            check=True,
        )
        wall, code, max_rss_kib = json.loads(done.stdout)
        err.seek(0)
        return Child(wall, code, max_rss_kib, err.read().decode())


def child_env(code: Path = REPO) -> dict[str, str]:
    """ProxySQL's empty environment, but a checkout's code first (as the tests run it)."""
    return {"PYTHONPATH": str(code)}


def floor_program(lab: Lab, name: str, nodes: list[NodeAddress]) -> str:
    proxysql = lab.proxysql
    return FLOOR.format(
        admin_host=proxysql.admin_host,
        admin_port=proxysql.admin_port,
        admin_user=ADMIN_USER,
        admin_password=ADMIN_PASSWORD,
        hostgroups=", ".join(str(h) for h in HG.all),
        nodes=[(node.host, node.port) for node in nodes],
        user=MONITOR_USER,
        password=MONITOR_PASSWORD,
        status_query=STATUS_QUERY[name],
    )


def floor_run(program: str) -> Child:
    # -S: no site, so PyMySQL's directory is named; the interpreter is the checker's own
    site_dir = str(Path(pymysql.__file__).resolve().parents[1])
    return run_child([sys.executable, "-S", "-c", program], {"PYTHONPATH": site_dir})


def pass_run(executable: str, config: Path, code: Path = REPO) -> Child:
    result = run_child([executable, f"--config={config}", "run"], child_env(code))
    if result.code != 0:
        raise RuntimeError(f"the pass failed ({result.code}): {result.stderr}")
    return result


IDLE_S = 0.1  # before each daemon pass and floor in the "idle" figure

VENV = Path.home() / ".cache" / "proxysql-checkers-bench" / "venv"


def installed_in_venv(command: str) -> str:
    """The console script as docs/install.md installs it: this checkout pip-installed (not
    editable) into a venv of its own, whose site has no .pth files of other projects."""
    python = VENV / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    pip = [str(python), "-m", "pip", "install", "--quiet"]
    subprocess.run([*pip, str(REPO)], check=True)  # the dependencies, once
    subprocess.run([*pip, "--force-reinstall", "--no-deps", str(REPO)], check=True)  # this code
    return str(VENV / "bin" / command)


def venv_pass_run(executable: str, config: Path) -> Child:
    result = run_child([executable, f"--config={config}", "run"], {})
    if result.code != 0:
        raise RuntimeError(f"the pass failed ({result.code}): {result.stderr}")
    return result


def pass_run_without_site(package: str, config: Path) -> Child:
    """The same pass started as `python -S -m PACKAGE`: the difference to the console script is
    what this interpreter's site-packages (.pth files, the editable install's finder) cost."""
    site_dir = str(Path(pymysql.__file__).resolve().parents[1])
    argv = [sys.executable, "-S", "-m", package, f"--config={config}", "run"]
    result = run_child(argv, {"PYTHONPATH": f"{REPO}:{site_dir}"})
    if result.code != 0:
        raise RuntimeError(f"the pass failed ({result.code}): {result.stderr}")
    return result


def interleaved(
    runs: int, floor: Callable[[], Child], passes: list[Callable[[], Child]]
) -> tuple[list[Child], list[list[Child]]]:
    """The floor and each kind of pass in turn, `runs` times: a machine that gets busier during
    the bench weighs on all of them alike."""
    floors: list[Child] = []
    results: list[list[Child]] = [[] for _ in passes]
    for _ in range(runs):
        floors.append(floor())
        for one, into in zip(passes, results, strict=True):
            into.append(one())
    return floors, results


def paired(runs: list[Child], floors: list[Child]) -> float:
    """The median of each round's own ratio to the floor run beside it: a machine whose speed
    drifts during the bench (a VM's neighbours) weighs on both halves of a round alike."""
    return median([r.wall_ms / f.wall_ms for r, f in zip(runs, floors, strict=True)])


def in_process_ms(result: Child) -> float | None:
    for line in result.stderr.splitlines():
        if line.startswith("{"):
            record: dict[str, Any] = json.loads(line)
            if record.get("event") == "pass":
                return float(record["duration_ms"])
    return None


def disabled_config(config: Path) -> Path:
    text = config.read_text().replace("[monitor]\n", '[monitor]\nssl_mode = "disabled"\n')
    text = text.replace("[proxysql]\n", '[proxysql]\nssl_mode = "disabled"\n')
    path = config.with_name("checker-plain.toml")
    path.write_text(text)
    path.chmod(0o600)
    return path


def median(values: list[float]) -> float:
    return statistics.median(values)


def connect_ms(node: NodeAddress, connect: Callable[[], Any], runs: int) -> float:
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        conn = connect()
        with conn.cursor() as cur:
            cur.execute("SELECT 1")
            cur.fetchall()
        conn.close()
        samples.append((time.perf_counter() - started) * 1000)
    return median(samples)


def per_mode(node: NodeAddress, ca: str | None, runs: int) -> list[tuple[str, str]]:
    rows: list[tuple[str, str]] = []
    account: dict[str, Any] = {"user": MONITOR_USER, "password": MONITOR_PASSWORD}
    for mode in SslMode:
        if mode.verifies and ca is None:
            rows.append((mode.value, "n/a (no CA for this lab's certificates)"))
            continue
        settings = Tls(mode, ca if mode.verifies else None)

        def once(settings: Tls = settings) -> Any:
            return tls.connect(settings, f"node {node}", node.host, node.port, **account)

        try:
            rows.append((mode.value, f"{connect_ms(node, once, runs):6.2f} ms"))
        except (tls.TlsError, pymysql.err.MySQLError) as exc:
            rows.append((mode.value, f"fails: {exc}"))

    def default() -> Any:
        return pymysql.connect(host=node.host, port=node.port, **account)

    rows.append(("PyMySQL alone (no ssl argument)", f"{connect_ms(node, default, runs):6.2f} ms"))
    return rows


def daemon_ms(
    config: Path, checker: Checker, kind: CheckerKind, runs: int, idle_s: float = 0.0
) -> tuple[float, float, float]:
    """(first pass after start, median steady pass, median floor) with persistent connections.
    The floor is the steady pass's own I/O on the same open connections: one read of the admin
    rows, then every node probed in parallel; no deciding, no lock, no state file. Floor and
    pass alternate, so a machine that slows down weighs on both alike. `idle_s`: a pause before
    each pass and each floor, as a daemon idles between passes (threads and servers asleep)."""
    runner = PassRunner(load(config, checker, env={}), kind, persistent=True)
    try:
        started = time.perf_counter()
        runner.run(Mode.APPLY)
        first = (time.perf_counter() - started) * 1000
        hostgroups = runner.settings.clusters[0].hostgroups.all
        nodes = sorted({r.node for r in runner.admin().read_rows(hostgroups).runtime})
        samples, floors = [], []
        for _ in range(runs):
            time.sleep(idle_s)
            started = time.perf_counter()
            runner.run(Mode.APPLY)
            samples.append((time.perf_counter() - started) * 1000)
            time.sleep(idle_s)
            started = time.perf_counter()
            runner.admin().read_rows(hostgroups)
            runner.prober.probe_all(nodes, time.monotonic() + 1)
            floors.append((time.perf_counter() - started) * 1000)
        return first, median(samples), median(floors)
    finally:
        runner.close()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("lab", choices=("galera", "gr"))
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument(
        "--before",
        type=Path,
        help="also run the pass with this (older) checkout's code, in the same rounds",
    )
    args = parser.parse_args(argv)
    if args.lab == "galera":
        from galera_checker.cli import kind
        from tests.lab.galera import GaleraLab

        galera = GaleraLab()
        context = Lab(galera_lab=galera)
        command, checker = "galera-checker", Checker.GALERA
    else:
        from gr_checker.cli import kind
        from tests.lab.gr import GrLab

        context = Lab(gr_lab=GrLab())
        command, checker = "gr-checker", Checker.GR
    with context as lab:
        if args.lab == "galera":
            galera.ensure_tls()
        nodes = lab.galera_nodes() if args.lab == "galera" else lab.gr_nodes()
        ca = str(galera.certs.ca) if args.lab == "galera" else None
        config = write_config(lab, args.lab, interval_ms=2000, max_runtime_ms=1800)
        plain = disabled_config(config)
        executable = lab.executable(command)
        installed = installed_in_venv(command)
        for warm_up in (config, config, plain):  # layout converged, bytecode written
            pass_run(executable, warm_up)
        venv_pass_run(installed, config)
        before = args.before.resolve() if args.before else None
        if before is not None:
            pass_run(executable, config, before)
        program = floor_program(lab, args.lab, nodes)
        package = command.replace("-", "_")
        variants = [
            lambda: pass_run(executable, config),
            lambda: pass_run(executable, plain),
            lambda: pass_run_without_site(package, config),
            lambda: venv_pass_run(installed, config),
        ]
        if before is not None:
            variants.append(lambda: pass_run(executable, config, before))
        floor, (passes, plain_passes, no_site, in_venv, *older) = interleaved(
            args.runs, lambda: floor_run(program), variants
        )
        floor_ms = median([c.wall_ms for c in floor])
        pass_ms = median([c.wall_ms for c in passes])
        plain_ms = median([c.wall_ms for c in plain_passes])
        no_site_ms = median([c.wall_ms for c in no_site])
        venv_ms = median([c.wall_ms for c in in_venv])
        inside = [d for d in map(in_process_ms, passes) if d is not None]
        inside_plain = [d for d in map(in_process_ms, plain_passes) if d is not None]
        modes = per_mode(nodes[0], ca, args.runs)
        first, steady, daemon_floor = daemon_ms(config, checker, kind(), args.runs * 5)
        _, idle_steady, idle_floor = daemon_ms(config, checker, kind(), args.runs, IDLE_S)

        endpoint = "real proxysql" if lab.proxysql.is_real else "lab emulator (no TLS)"
        print(f"lab: {args.lab}, 3 nodes, converged; proxysql endpoint: {endpoint}; "
              f"{args.runs} runs each, medians, in interleaved rounds")  # fmt: skip
        print(f"floor (python -S, PyMySQL, admin rows + each node's status once, no TLS): "
              f"{floor_ms:7.1f} ms")  # fmt: skip
        print(f"{command} run, default ssl_mode preferred: {pass_ms:7.1f} ms  "
              f"ratio {pass_ms / floor_ms:4.2f}, paired {paired(passes, floor):4.2f}  "
              f"(target <= 1.5)")  # fmt: skip
        print(f"{command} run, ssl_mode disabled:          {plain_ms:7.1f} ms  "
              f"ratio {plain_ms / floor_ms:4.2f}, paired "
              f"{paired(plain_passes, floor):4.2f}")  # fmt: skip
        print(f"python -S -m {package} run, ssl_mode preferred: {no_site_ms:7.1f} ms  "
              f"ratio {no_site_ms / floor_ms:4.2f}  (site-packages startup here: "
              f"{pass_ms - no_site_ms:+.1f} ms)")  # fmt: skip
        print(f"{command} run installed in its own venv (install.md), preferred: "
              f"{venv_ms:7.1f} ms  ratio {venv_ms / floor_ms:4.2f}, paired "
              f"{paired(in_venv, floor):4.2f}  (target <= 1.5)")  # fmt: skip
        print(f"in-process duration_ms of a no-change pass: preferred {median(inside):5.1f}, "
              f"disabled {median(inside_plain):5.1f}  (target <= 25)")  # fmt: skip
        for runs in older:
            old_ms = median([c.wall_ms for c in runs])
            old_inside = median([d for d in map(in_process_ms, runs) if d is not None])
            old_rss = max(c.max_rss_kib for c in runs) / 1024
            print(f"before ({before}), same rounds: run {old_ms:7.1f} ms  ratio "
                  f"{old_ms / floor_ms:4.2f}, paired {paired(runs, floor):4.2f}; "
                  f"duration_ms {old_inside:5.1f}; "
                  f"peak RSS {old_rss:5.1f} MiB")  # fmt: skip

        def peak(children: list[Child]) -> float:
            return max(c.max_rss_kib for c in children) / 1024

        print(f"peak RSS of a scheduler pass: venv {peak(in_venv):5.1f} MiB, shared "
              f"interpreter {peak(passes):5.1f} MiB  (target <= 40); the floor's "
              f"{peak(floor):5.1f} MiB")  # fmt: skip
        print(f"daemon: first pass after start {first:6.1f} ms (target <= 50), "
              f"steady pass {steady:5.2f} ms (target <= 5); its floor (admin read, then "
              f"the probes, same connections) {daemon_floor:5.2f} ms, "
              f"ratio {steady / daemon_floor:4.2f}")  # fmt: skip
        print(f"daemon idle {IDLE_S * 1000:.0f} ms before each pass (as between passes in "
              f"service): steady pass {idle_steady:5.2f} ms; its floor, idle as long, "
              f"{idle_floor:5.2f} ms, ratio {idle_steady / idle_floor:4.2f}")  # fmt: skip
        print(f"one connect + SELECT 1 to {nodes[0]}, per ssl_mode:")
        for mode, figure in modes:
            print(f"  {mode:32} {figure}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
