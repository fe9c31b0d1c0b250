"""The demo: galera-checker's daemon keeps ProxySQL right while the Galera writer is killed.

    python -m tests.lab.demo        (bash tests/demo.sh also installs what it needs first)

Starts the lab's Galera cluster and ProxySQL admin endpoint (unless they already run), puts the
roster in the template hostgroups, runs `galera-checker daemon`, kills the writer with -9, shows
the daemon's log lines and the hostgroups before and after, then stops everything it started.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from checker_core.core.model import Hostgroups, NodeAddress, ServerRow, ServerStatus
from checker_core.core.settings import Endpoint, ProxySQLSettings, Secret, Tls
from checker_core.edges.proxysql import AdminClient
from tests.lab.checker_config import write_checker_config
from tests.lab.galera import GaleraLab
from tests.lab.paths import lab_dir
from tests.lab.process import wait_until
from tests.lab.proxysql import ProxySQLLab

HG = Hostgroups(
    writer=100, reader=101, backup_writer=102, offline=9100, config_writer=8100, config_reader=8101
)
NAMES = {
    HG.writer: "writer",
    HG.reader: "reader",
    HG.backup_writer: "backup writer",
    HG.offline: "offline",
}


def say(text: str) -> None:
    print(f"\n=== {text}", flush=True)


def table(admin: AdminClient) -> str:
    rows = admin.read_rows(HG.managed).runtime
    lines = [f"  {'hostgroup':<18}{'server':<18}{'status':<14}weight"]
    for row in rows:
        label = f"{row.hostgroup_id} {NAMES[row.hostgroup_id]}"
        server = f"{row.hostname}:{row.port}"
        lines.append(f"  {label:<18}{server:<18}{row.status.value:<14}{row.weight}")
    return "\n".join(lines)


def writers(admin: AdminClient) -> set[NodeAddress]:
    rows = admin.read_rows(HG.managed).runtime
    return {r.node for r in rows if r.hostgroup_id == HG.writer and r.status is ServerStatus.ONLINE}


def relay(stream: object) -> None:
    for line in stream:  # type: ignore[attr-defined]
        print(f"  daemon | {line.rstrip()}", flush=True)


def write_hook(where: Path, told: Path) -> Path:
    """A hook program that keeps each event it is told, one JSON line each."""
    where.mkdir(parents=True, exist_ok=True)
    hook = where / "hook.sh"
    hook.write_text(f"#!/bin/sh\ncat >> {told}\n")
    hook.chmod(0o755)
    return hook


def moved_event(told: Path, old: NodeAddress) -> dict[str, object] | None:
    """The writer_changed event that took the writer from `old`, once the hook has it."""
    if not told.exists():
        return None
    for line in told.read_text().splitlines():
        event = json.loads(line)
        if event.get("writers_before") == [str(old)]:
            return dict(event)
    return None


def main() -> int:
    galera, proxysql = GaleraLab(), ProxySQLLab()
    started_galera = not galera.running()
    say("starting the lab: 3-node MariaDB Galera on 127.0.0.1 and a ProxySQL admin endpoint")
    galera.up()
    started_proxysql = proxysql.up()
    daemon: subprocess.Popen[str] | None = None
    try:
        nodes = [NodeAddress(n.host, n.port) for n in galera.nodes]
        endpoint = Endpoint(proxysql.admin_user, Secret(proxysql.admin_password), Tls(), 2000, 5000)
        admin = AdminClient.connect(
            ProxySQLSettings(proxysql.admin_host, proxysql.admin_port, endpoint)
        )
        say(
            f"roster in template hostgroups {HG.config_writer}/{HG.config_reader}: "
            "writer weights 1000, 500, 100"
        )
        roster = [
            ServerRow(HG.config_writer, n.host, n.port, weight=w)
            for n, w in zip(nodes, (1000, 500, 100), strict=True)
        ]
        roster += [ServerRow(HG.config_reader, n.host, n.port, weight=100) for n in nodes]
        admin.stage(HG.all, roster)
        admin.execute("LOAD MYSQL SERVERS TO RUNTIME")
        run = {"interval_ms": 500, "max_runtime_ms": 450, "log_format": "console"}
        where = lab_dir() / "demo"
        told = where / "writer_changed.json"
        told.unlink(missing_ok=True)
        hook = write_hook(where, told)
        say(f"hook: {hook} gets every writer change as JSON on its stdin (docs/hooks.md)")
        config = write_checker_config(
            where,
            proxysql,
            HG,
            "demo",
            run,
            cluster_extra={"hook_command": str(hook), "hook_events": "writer_changed"},
        )
        command = shutil.which("galera-checker")
        assert command is not None, "galera-checker is not installed: pip install -e ."
        say(f"galera-checker --config {config} daemon   (every 500 ms)")
        daemon = subprocess.Popen(
            [command, f"--config={config}", "daemon"],
            env={},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        threading.Thread(target=relay, args=(daemon.stderr,), daemon=True).start()
        wait_until(lambda: writers(admin) == {nodes[0]}, 30, "the daemon to place the writer")
        say("hostgroups before (runtime_mysql_servers)")
        print(table(admin), flush=True)
        say(f"kill -9 the writer {nodes[0]}")
        killed_at = time.monotonic()
        galera.kill(1)
        wait_until(lambda: writers(admin) == {nodes[1]}, 30, "the failover")
        took = time.monotonic() - killed_at
        say(
            f"hostgroups after: {nodes[1]} writes, {nodes[0]} parked offline "
            f"({took:.2f} s after the kill)"
        )
        print(table(admin), flush=True)
        event = wait_until(lambda: moved_event(told, nodes[0]), 30, "the hook's event")
        say("the hook's event for the failover")
        print(json.dumps(event, indent=2), flush=True)
        admin.close()
    finally:
        if daemon is not None:
            daemon.send_signal(signal.SIGTERM)
            daemon.wait(timeout=30)
        say("stopping what the demo started")
        if started_proxysql:
            proxysql.down()
        if started_galera:
            galera.down()
    return 0


if __name__ == "__main__":
    sys.exit(main())
