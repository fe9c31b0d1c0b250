"""galera-checker benchmarks on the lab (not tests): they print numbers and ratios, assert nothing.

    python -m bench.galera_bench [--runs 20]

- baseline: one bare PyMySQL connect + query to each node, one after another (same run)
- scheduler pass: `galera-checker run` from process start to exit, 3 nodes, no change
- daemon pass: one pass with persistent connections, no change
- soft fault: the daemon at interval_ms=200; the writer gets wsrep_reject_queries=ALL; time from
  the fault to the LOAD that moves the writer (the lab's admin endpoint carries no traffic, so
  a client's write gap can only be measured against a real ProxySQL)
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench.common import (
    HG,
    Lab,
    admin_client,
    baseline_ms,
    daemon_pass_ms,
    scheduler_pass_ms,
    write_config,
)
from checker_core.core.model import NodeAddress
from checker_core.core.schema import Checker
from checker_core.edges.proxysql_peers import read_checksum
from galera_checker.cli import kind
from tests.lab.galera import GaleraLab
from tests.lab.process import wait_until


def soft_fault_ms(
    lab: Lab, galera: GaleraLab, executable: str, config: Path, nodes: list[NodeAddress]
) -> float:
    admin = admin_client(lab.proxysql)
    # each run starts from empty hostgroups, so the heaviest node (node 1) is the writer again
    admin.stage(HG.managed, [])
    admin.execute("LOAD MYSQL SERVERS TO RUNTIME")
    daemon = subprocess.Popen(
        [executable, f"--config={config}", "daemon"],
        env={},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_until(lambda: lab.writers(admin) == {nodes[0]}, 30, "the daemon to settle")
        version = read_checksum(admin)
        assert version is not None
        fault = time.monotonic()
        galera.reject(1, "ALL")
        while True:
            current = read_checksum(admin)
            if (
                current is not None
                and current.version > version.version
                and lab.writers(admin) == {nodes[1]}
            ):
                return (time.monotonic() - fault) * 1000
            if time.monotonic() - fault > 30:
                raise RuntimeError("no failover within 30 s")
            time.sleep(0.002)  # a measuring poll, not a wait for state
    finally:
        daemon.terminate()
        daemon.wait(timeout=30)
        galera.reject(1, "NONE")
        admin.close()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args(argv)
    galera = GaleraLab()
    with Lab(galera_lab=galera) as lab:
        nodes = lab.galera_nodes()
        config = write_config(lab, "galera", interval_ms=2000, max_runtime_ms=1800)
        fast = write_config(lab, "galera-fast", interval_ms=200, max_runtime_ms=180)
        executable = lab.executable("galera-checker")
        base = baseline_ms(nodes, "SHOW GLOBAL STATUS LIKE 'wsrep_local_state'", args.runs)
        scheduler = scheduler_pass_ms(executable, config, args.runs)
        daemon = daemon_pass_ms(config, Checker.GALERA, kind(), args.runs * 5)
        faults = [soft_fault_ms(lab, galera, executable, fast, nodes) for _ in range(3)]
        fault = statistics.median(faults)
        endpoint = "real proxysql" if lab.proxysql.is_real else "lab emulator"
        runs = ", ".join(f"{f:.0f}" for f in faults)
        print(f"proxysql endpoint: {endpoint}")
        print(f"baseline (bare connect+query to 3 nodes, sequential): {base:7.1f} ms")
        print(f"scheduler pass (process start to exit, no change): {scheduler:7.1f} ms", end="")
        print(f"  ratio {scheduler / base:5.2f}  target <= 100 ms")
        print(f"daemon pass (persistent connections, no change):   {daemon:7.2f} ms", end="")
        print(f"  ratio {daemon / base:5.2f}  target <= 5 ms")
        print(f"soft fault (reject ALL) to LOAD, daemon 200 ms:    {fault:7.1f} ms", end="")
        print(f"  ratio {fault / base:5.2f}  (runs: {runs})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
