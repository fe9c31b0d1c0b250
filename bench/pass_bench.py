"""What one scheduler pass costs, beside the floor of its own I/O (not a test: it prints numbers
and ratios, asserts nothing).

    python -m bench.pass_bench galera|gr [--runs 20]

In one run, on one lab, a converged layout (nothing to change):
- floor: a small program run by the same interpreter with -S: import PyMySQL, connect to the
  admin and read runtime_mysql_servers, then connect to each node in turn and read its cluster
  status (the issue's floor: connect, read ProxySQL, probe each node once); once in plain text,
  once with TLS as ssl_mode "preferred" makes it (one context, verifying nothing), the floor of
  the default configuration's pass
- scheduler pass: `CHECKER --config=F run` from process start to exit, as ProxySQL runs it,
  with ssl_mode "preferred" (the default) and "disabled" on both endpoints, each against the
  floor of the same encryption; its peak RSS; its in-process duration_ms (from its log line)
- both from this checkout installed in a venv of its own as docs/install.md does, made from
  --python (the distribution's interpreter by default: what users run), and from this
  interpreter's shared site-packages (which may carry other projects' .pth files, and may be an
  interpreter built without profile-guided optimisation); each beside its own floors
- the pass started as `python -S -m PACKAGE` (what this interpreter's site-packages startup adds)
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
{tls_setup}
admin = pymysql.connect(host={admin_host!r}, port={admin_port}, user={admin_user!r},
                        password={admin_password!r}, {tls})
with admin.cursor() as cur:
    cur.execute("SELECT hostgroup_id, hostname, port, status, weight FROM runtime_mysql_servers "
                "WHERE hostgroup_id IN ({hostgroups})")
    cur.fetchall()
admin.close()
for host, port in {nodes!r}:
    node = pymysql.connect(host=host, port=port, user={user!r}, password={password!r}, {tls})
    with node.cursor() as cur:
        cur.execute({status_query!r})
        cur.fetchall()
    node.close()
"""

# The floor of a pass with ssl_mode "preferred": the same connections with TLS, one context
# made once and verifying nothing, as that mode does (PyMySQL takes a context as "TLS required";
# every endpoint of the lab offers TLS)
FLOOR_TLS_SETUP = """
import ssl
context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
context.check_hostname = False
context.verify_mode = ssl.CERT_NONE
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


def floor_program(lab: Lab, name: str, nodes: list[NodeAddress], *, with_tls: bool) -> str:
    proxysql = lab.proxysql
    return FLOOR.format(
        tls_setup=FLOOR_TLS_SETUP if with_tls else "",
        tls="ssl=context" if with_tls else "ssl_disabled=True",
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


def floor_run(program: str, python: str = sys.executable, site_dir: str | None = None) -> Child:
    """The floor run by `python` with -S (no site): PyMySQL's directory is named, this
    interpreter's own by default."""
    site = site_dir or str(Path(pymysql.__file__).resolve().parents[1])
    return run_child([python, "-S", "-c", program], {"PYTHONPATH": site})


def pass_run(executable: str, config: Path, code: Path = REPO) -> Child:
    result = run_child([executable, f"--config={config}", "run"], child_env(code))
    if result.code != 0:
        raise RuntimeError(f"the pass failed ({result.code}): {result.stderr}")
    return result


IDLE_S = 0.1  # before each daemon pass and floor in the "idle" figure

VENVS = Path.home() / ".cache" / "proxysql-checkers-bench"

# the interpreter docs/install.md makes the venv from on Debian: the distribution's own. One
# built from source (as version managers do, without profile-guided optimisation by default) may
# run the checker's start, mostly Python, far more slowly: the bench prints how fast each is
SYSTEM_PYTHON = "/usr/bin/python3"


@dataclass(frozen=True)
class Venv:
    """This checkout installed as docs/install.md does, in a venv of its own."""

    python: str  # the venv's interpreter
    site_dir: str  # its site-packages (PyMySQL's directory, for the floor)
    origin: str  # the interpreter it was made from, and how that one was built

    def command(self, name: str) -> str:
        return str(Path(self.python).parent / name)


# what most of a pass's start is (its records' methods generated and compiled), timed in an
# interpreter on its own: interpreters of the same version differ by how they were built
RECORDS_PROBE = """
import dataclasses, sys, time
started = time.perf_counter()
for n in range(50):
    dataclasses.dataclass(frozen=True, slots=True)(
        type(f"R{n}", (), {"__annotations__": {"a": "int", "b": "str"}, "__doc__": "r"}))
print(sys.version.split()[0], round((time.perf_counter() - started) * 1000, 1))
"""


def built_how(python: str) -> str:
    """The interpreter, its version, and how long it takes to make 50 frozen records."""
    done = subprocess.run(
        [python, "-S", "-c", RECORDS_PROBE], capture_output=True, text=True, check=True
    )
    version, records_ms = done.stdout.split()
    return f"{python} {version}, 50 frozen records made in {records_ms} ms"


def installed_in_venv(python: str) -> Venv:
    """The console scripts as docs/install.md installs them: this checkout pip-installed (not
    editable) into a venv of its own made from `python`, whose site has no .pth files of other
    projects."""
    origin = str(Path(python).resolve())
    venv = VENVS / ("venv-" + origin.strip("/").replace("/", "-"))
    inside = venv / "bin" / "python"
    if not inside.exists():
        subprocess.run([python, "-m", "venv", str(venv)], check=True)
    pip = [str(inside), "-m", "pip", "install", "--quiet"]
    subprocess.run([*pip, str(REPO)], check=True)  # the dependencies, once
    subprocess.run([*pip, "--force-reinstall", "--no-deps", str(REPO)], check=True)  # this code
    site = subprocess.run(
        [
            str(inside),
            "-c",
            "import pymysql, pathlib; print(pathlib.Path(pymysql.__file__).parents[1])",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    return Venv(str(inside), site, built_how(python))


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


def interleaved(runs: int, variants: dict[str, Callable[[], Child]]) -> dict[str, list[Child]]:
    """Each variant (floors and passes) in turn, `runs` times: a machine that gets busier during
    the bench weighs on all of them alike."""
    results: dict[str, list[Child]] = {name: [] for name in variants}
    for _ in range(runs):
        for name, one in variants.items():
            results[name].append(one())
    return results


def ratios(runs: list[Child], floors: list[Child]) -> str:
    """The medians' ratio and the paired one."""
    ratio = median([r.wall_ms for r in runs]) / median([f.wall_ms for f in floors])
    return f"ratio {ratio:4.2f}, paired {paired(runs, floors):4.2f}"


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
    parser.add_argument(
        "--python",
        default=SYSTEM_PYTHON if Path(SYSTEM_PYTHON).exists() else sys.executable,
        help="the interpreter the venv of install.md is made from (default: the distribution's, "
        "as install.md does on Debian)",
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
        venv = installed_in_venv(args.python)
        for warm_up in (config, config, plain):  # layout converged, bytecode written
            pass_run(executable, warm_up)
            venv_pass_run(venv.command(command), warm_up)
        before = args.before.resolve() if args.before else None
        if before is not None:
            pass_run(executable, config, before)
        floor_plain = floor_program(lab, args.lab, nodes, with_tls=False)
        floor_tls = floor_program(lab, args.lab, nodes, with_tls=True)
        package = command.replace("-", "_")
        variants: dict[str, Callable[[], Child]] = {
            "floor": lambda: floor_run(floor_plain),
            "floor tls": lambda: floor_run(floor_tls),
            "pass": lambda: pass_run(executable, config),
            "pass plain": lambda: pass_run(executable, plain),
            "no site": lambda: pass_run_without_site(package, config),
            "venv floor": lambda: floor_run(floor_plain, venv.python, venv.site_dir),
            "venv floor tls": lambda: floor_run(floor_tls, venv.python, venv.site_dir),
            "venv pass": lambda: venv_pass_run(venv.command(command), config),
            "venv pass plain": lambda: venv_pass_run(venv.command(command), plain),
        }
        if before is not None:
            variants["older"] = lambda: pass_run(executable, config, before)
        got = interleaved(args.runs, variants)

        def ms(name: str) -> float:
            return median([c.wall_ms for c in got[name]])

        passes, plain_passes = got["pass"], got["pass plain"]
        inside = [d for d in map(in_process_ms, passes) if d is not None]
        inside_plain = [d for d in map(in_process_ms, plain_passes) if d is not None]
        modes = per_mode(nodes[0], ca, args.runs)
        first, steady, daemon_floor = daemon_ms(config, checker, kind(), args.runs * 5)
        _, idle_steady, idle_floor = daemon_ms(config, checker, kind(), args.runs, IDLE_S)

        endpoint = "real proxysql" if lab.proxysql.is_real else "lab emulator (no TLS)"
        print(f"lab: {args.lab}, 3 nodes, converged; proxysql endpoint: {endpoint}; "
              f"{args.runs} runs each, medians, in interleaved rounds")  # fmt: skip
        print(
            "floor: python -S, PyMySQL, admin rows + each node's status once; plain, or with "
            "TLS as ssl_mode preferred does (a context made once, verifying nothing)"
        )
        for label, prefix in (
            (f"installed in its own venv (install.md), made from {venv.origin}", "venv "),
            (f"this interpreter ({built_how(sys.executable)}), shared site-packages", ""),
        ):
            floor, floor_with_tls = got[prefix + "floor"], got[prefix + "floor tls"]
            print(f"{command} run, {label}:")
            print(f"  floor, plain {ms(prefix + 'floor'):7.1f} ms; with TLS "
                  f"{ms(prefix + 'floor tls'):7.1f} ms")  # fmt: skip
            print(f"  run, ssl_mode preferred (default) {ms(prefix + 'pass'):7.1f} ms: against "
                  f"the floor with TLS {ratios(got[prefix + 'pass'], floor_with_tls)} "
                  f"(target <= 1.5); against the plain floor "
                  f"{ratios(got[prefix + 'pass'], floor)}")  # fmt: skip
            print(f"  run, ssl_mode disabled          {ms(prefix + 'pass plain'):7.1f} ms: "
                  f"against the plain floor {ratios(got[prefix + 'pass plain'], floor)} "
                  f"(target <= 1.5)")  # fmt: skip
        site_ms = ms("pass") - ms("no site")
        print(f"python -S -m {package} run, preferred: {ms('no site'):7.1f} ms  (this "
              f"interpreter's site-packages startup: {site_ms:+.1f} ms)")  # fmt: skip
        print(f"in-process duration_ms of a no-change pass: preferred {median(inside):5.1f}, "
              f"disabled {median(inside_plain):5.1f}  (target <= 25)")  # fmt: skip
        if "older" in got:
            runs = got["older"]
            old_inside = median([d for d in map(in_process_ms, runs) if d is not None])
            old_rss = max(c.max_rss_kib for c in runs) / 1024
            print(f"before ({before}), same rounds: run {ms('older'):7.1f} ms, against "
                  f"this interpreter's floor with TLS {ratios(runs, got['floor tls'])}; "
                  f"duration_ms {old_inside:5.1f}; peak RSS {old_rss:5.1f} MiB")  # fmt: skip

        def peak(children: list[Child]) -> float:
            return max(c.max_rss_kib for c in children) / 1024

        print(f"peak RSS of a scheduler pass: venv {peak(got['venv pass']):5.1f} MiB, shared "
              f"interpreter {peak(passes):5.1f} MiB  (target <= 40); the floor's "
              f"{peak(got['floor']):5.1f} MiB")  # fmt: skip
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
