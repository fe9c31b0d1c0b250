"""What a cluster's hooks cost its passes (not a test: it prints numbers and ratios, asserts
nothing).

    python -m bench.hook_bench [--moves 12] [--rounds 2]

The lab's Galera cluster behind ProxySQL, galera-checker's daemon on it. The writer is moved
--moves times (the writer's wsrep_desync set, seen by the watch, then cleared): each move is a
pass that loads and tells writer_changed and node_out, and a pass that routes the node again
(node_back). The
same moves run with each hook set-up in turn, alternating --rounds times:

- none: no hook (the floor);
- hangs: a program that never ends, killed at hook_timeout_ms (2 s);
- fails: a program that exits 1 at once;
- floods: a program that sleeps 5 s behind a queue of 1 (most events dropped).

Printed per set-up: the loaded passes' duration_ms (median, 90th percentile, longest), their
ratio to the floor's median from the same run, and what the hooks did (told, failed, dropped,
from the daemon's `hook` lines).
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from bench.common import HG, Lab, admin_client
from checker_core.core.model import NodeAddress
from checker_core.edges.proxysql import AdminClient
from tests.lab.checker_config import write_checker_config
from tests.lab.galera import GaleraLab
from tests.lab.paths import lab_dir

HOOKS = {
    "none": None,
    "hangs": "exec sleep 3600\n",
    "fails": "echo refused >&2\nexit 1\n",
    "floods": "sleep 5\n",
}


def _program(where: Path, name: str, body: str) -> Path:
    path = where / f"hook-{name}.sh"
    path.write_text(f"#!/bin/sh\ncat > /dev/null\n{body}")
    path.chmod(0o755)
    return path


def _config(lab: Lab, name: str) -> Path:
    where = lab_dir() / "bench" / "hooks"
    where.mkdir(parents=True, exist_ok=True)
    body = HOOKS[name]
    extra: dict[str, object] = {}
    if body is not None:
        extra = {"hook_command": str(_program(where, name, body)), "hook_timeout_ms": 2000}
        if name == "floods":
            extra.update(hook_queue=1, hook_timeout_ms=10000)
    run = {"interval_ms": 1000, "max_runtime_ms": 900, "log_format": "json"}
    return write_checker_config(where / name, lab.proxysql, HG, "bench", run, cluster_extra=extra)


def _moves(lab: Lab, config: Path, moves: int) -> tuple[list[float], dict[str, int]]:
    """The daemon on `config`; the writer moved `moves` times; loaded passes' duration_ms."""
    daemon = subprocess.Popen(
        [Lab.executable("galera-checker"), f"--config={config}", "daemon"],
        env={},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: list[dict[str, Any]] = []

    def read() -> None:
        assert daemon.stderr is not None
        for line in daemon.stderr:
            if line.startswith("{"):
                lines.append(json.loads(line))

    threading.Thread(target=read, daemon=True).start()
    admin = admin_client(lab.proxysql)
    nodes = lab.galera_nodes()
    try:
        _until(lambda: lab.writers(admin) == {nodes[0]}, "the first writer")
        for move in range(moves):
            (writer,) = lab.writers(admin)
            index = nodes.index(writer) + 1
            lab.galera.sql(index, "SET GLOBAL wsrep_desync = ON")
            _until(lambda w=writer: writer_moved(lab, admin, w), f"move {move + 1}")
            lab.galera.sql(index, "SET GLOBAL wsrep_desync = OFF")
            time.sleep(1.5)  # the next regular pass routes it again (node_back)
    finally:
        for index in range(1, len(nodes) + 1):
            lab.galera.sql(index, "SET GLOBAL wsrep_desync = OFF")
        admin.close()
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(timeout=60)
    loaded = [
        float(line["duration_ms"])
        for line in lines
        if line.get("event") == "pass" and line.get("loaded") is True
    ][1:]  # the first placement is no move
    hooks: dict[str, int] = {"told": 0, "failed": 0, "dropped": 0}
    for line in lines:
        if line.get("event") == "hook":
            summary = str(line.get("summary"))
            key = (
                "dropped"
                if "dropped" in summary
                else "told"
                if " told in " in summary
                else "failed"
            )
            hooks[key] += 1
    return loaded, hooks


def writer_moved(lab: Lab, admin: AdminClient, old: NodeAddress) -> bool:
    writers = lab.writers(admin)
    return len(writers) == 1 and old not in writers


def _until(condition: Any, what: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.05)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.hook_bench", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--moves", type=int, default=12)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    durations: dict[str, list[float]] = {name: [] for name in HOOKS}
    told: dict[str, dict[str, int]] = {name: {} for name in HOOKS}
    with Lab(galera_lab=GaleraLab()) as lab:
        lab.seed(lab.galera_nodes())
        for _ in range(args.rounds):
            for name in HOOKS:
                loaded, hooks = _moves(lab, _config(lab, name), args.moves)
                durations[name] += loaded
                for key, count in hooks.items():
                    told[name][key] = told[name].get(key, 0) + count
    floor = statistics.median(durations["none"])
    print(f"loaded passes' duration_ms, {args.rounds} rounds of {args.moves} moves each")
    print(f"{'hooks':<8}{'passes':>7}{'median':>9}{'p90':>9}{'longest':>9}{'ratio':>7}  hooks did")
    for name, found in durations.items():
        found.sort()
        p90 = found[int(0.9 * (len(found) - 1))]
        did = ", ".join(f"{k} {v}" for k, v in told[name].items())
        print(
            f"{name:<8}{len(found):>7}{statistics.median(found):>9.1f}{p90:>9.1f}"
            f"{found[-1]:>9.1f}{statistics.median(found) / floor:>7.2f}  {did}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
