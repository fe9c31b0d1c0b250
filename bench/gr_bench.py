"""gr-checker benchmarks on the lab (not tests): they print numbers and ratios, assert nothing.

    python -m bench.gr_bench [--runs 20]

- baseline: one bare PyMySQL connect + query to each member, one after another (same run)
- scheduler pass: `gr-checker run` from process start to exit, 3 members, no change
- daemon pass: one pass with persistent connections, no change
- brownout through ProxySQL (client write errors and the longest write stall, hold against
  route): needs a real ProxySQL carrying the writes; this says why it was not measured instead
  of printing a number
"""

from __future__ import annotations

import argparse
import sys

from bench.common import Lab, baseline_ms, daemon_pass_ms, scheduler_pass_ms, write_config
from checker_core.core.schema import Checker
from gr_checker.cli import kind
from tests.lab.gr import GrLab


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args(argv)
    with Lab(gr_lab=GrLab()) as lab:
        nodes = lab.gr_nodes()
        config = write_config(lab, "gr", interval_ms=2000, max_runtime_ms=1800)
        executable = lab.executable("gr-checker")
        base = baseline_ms(
            nodes,
            "SELECT MEMBER_STATE FROM performance_schema.replication_group_members",
            args.runs,
        )
        scheduler = scheduler_pass_ms(executable, config, args.runs)
        daemon = daemon_pass_ms(config, Checker.GR, kind(), args.runs * 5)
        real = lab.proxysql.is_real
        print(f"proxysql endpoint: {'real proxysql' if real else 'lab emulator'}")
        print(f"baseline (bare connect+query to 3 members, sequential): {base:7.1f} ms")
        print(f"scheduler pass (process start to exit, no change): {scheduler:7.1f} ms", end="")
        print(f"  ratio {scheduler / base:5.2f}")
        print(f"daemon pass (persistent connections, no change):   {daemon:7.2f} ms", end="")
        print(f"  ratio {daemon / base:5.2f}")
        reason = (
            "the lab's admin endpoint is not a real ProxySQL and carries no client traffic"
            if not real
            else "writing through ProxySQL's traffic port is not part of this bench yet"
        )
        print(f"brownout write errors / longest stall (hold vs route): not measured: {reason}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
