"""A daemon and a scheduler pass over several clusters of simulated Galera nodes: each cluster on
its own, so a cluster whose every node hangs neither stops another cluster's failover nor the
daemon's systemd reports, and a reload or a stop ends every cluster's loop."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from checker_core.core.model import NodeAddress, ServerStatus
from tests.integration.rig import (
    admin_for,
    as_configured,
    child_env,
    messages_until,
    parse_logs,
)
from tests.lab.fleet_config import Fleet, seed, write_config
from tests.lab.process import wait_until
from tests.lab.proxysql import ProxySQLLab
from tests.lab.simnodes import SimNodes

pytestmark = [pytest.mark.proxysql]

INTERVAL_MS = 1000
STOP_TIMEOUT_S = 30


@pytest.fixture
def fleet(private_proxysql: ProxySQLLab) -> Iterator[tuple[SimNodes, Fleet]]:
    private_proxysql.reset()
    with SimNodes(clusters=2, nodes=3) as sim:
        made = Fleet.of(sim)
        admin = admin_for(private_proxysql)
        try:
            seed(admin, made)
        finally:
            admin.close()
        yield sim, made


def writers(proxysql: ProxySQLLab, index: int) -> set[NodeAddress]:
    admin = admin_for(proxysql)
    try:
        hostgroup = Fleet.writer_hostgroup(index)
        rows = as_configured(admin.read_rows([hostgroup]).runtime)
    finally:
        admin.close()
    return {r.node for r in rows if r.status is ServerStatus.ONLINE}


def executable() -> str:
    found = shutil.which("galera-checker")
    assert found is not None, "galera-checker is not installed"
    return str(Path(found).resolve())


def test_one_pass_over_two_clusters_places_both(
    private_proxysql: ProxySQLLab, fleet: tuple[SimNodes, Fleet], tmp_path: Path
) -> None:
    _, made = fleet
    config = write_config(private_proxysql, made, tmp_path / "checker", INTERVAL_MS)
    done = subprocess.run(
        [executable(), f"--config={config}", "run"],
        env=child_env({}),
        capture_output=True,
        text=True,
        timeout=STOP_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    passes = [line for line in parse_logs(done.stderr) if line.get("event") == "pass"]
    assert [p["cluster"] for p in passes] == ["c1", "c2"], "one line each, in the file's order"
    for index, (_, nodes) in enumerate(made.clusters):
        assert writers(private_proxysql, index) == {nodes[0]}


def test_a_daemon_fails_one_cluster_over_while_every_node_of_the_other_hangs(
    private_proxysql: ProxySQLLab, fleet: tuple[SimNodes, Fleet], tmp_path: Path
) -> None:
    sim, made = fleet
    config = write_config(private_proxysql, made, tmp_path / "checker", INTERVAL_MS)
    (hung_name, hung), (failing_name, failing) = made.clusters
    path = tmp_path / "notify.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(str(path))
        sock.settimeout(STOP_TIMEOUT_S)
        env = child_env({"NOTIFY_SOCKET": str(path), "WATCHDOG_USEC": "30000000"})
        daemon = subprocess.Popen(
            [executable(), f"--config={config}", "daemon"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        output: list[str] = []
        reader = threading.Thread(
            target=lambda: output.extend(daemon.stderr or ()), daemon=True
        )  # drained as it comes: a full pipe would stall the daemon
        reader.start()
        try:
            ready = messages_until(sock, "READY")[-1]
            # READY once every cluster's loop made its first pass: the status names both
            assert f"cluster {hung_name}: " in ready["STATUS"]
            assert f"cluster {failing_name}: " in ready["STATUS"]
            wait_until(
                lambda: (
                    writers(private_proxysql, 0) == {hung[0]}
                    and writers(private_proxysql, 1) == {failing[0]}
                ),
                20,
                "both clusters placed",
            )
            for node in hung:
                sim.set_mode(f"{node.host}:{node.port}", "hang")
            sim.set_mode(f"{failing[0].host}:{failing[0].port}", "down")

            wait_until(
                lambda: writers(private_proxysql, 1) == {failing[1]},
                20,
                "the failover of the cluster whose writer died",
            )
            # every loop still turns (the hung cluster's passes are blind, not stuck); a reload
            # starts no pass of a cluster it leaves as it was, so this is waited for before it
            wait_until(
                lambda: any(
                    line.get("event") == "pass"
                    and line.get("cluster") == hung_name
                    and line.get("outcome") == "blind"
                    for line in parse_logs("".join(output))
                ),
                20,
                "a blind pass of the hung cluster",
            )
            assert writers(private_proxysql, 0) == {hung[0]}, "a blind cluster keeps its layout"
            assert "WATCHDOG" in messages_until(sock, "WATCHDOG")[-1]
            os.kill(daemon.pid, signal.SIGHUP)
            assert "READY" in messages_until(sock, "READY")[-1], "READY again after a reload"
        finally:
            daemon.send_signal(signal.SIGTERM)
            code = daemon.wait(timeout=STOP_TIMEOUT_S)
            reader.join(STOP_TIMEOUT_S)
        assert code == 0, "".join(output)
        assert messages_until(sock, "STOPPING")[-1]["STOPPING"] == "1"
    lines = parse_logs("".join(output))
    blind = [
        line
        for line in lines
        if line.get("event") == "pass"
        and line.get("cluster") == hung_name
        and line.get("outcome") == "blind"
    ]
    assert blind, "the hung cluster's passes went on, blind"


# the monitor's timeouts in the reload test: the changed cluster's nodes hang, so its new loop's
# warm-up lasts this long (a connect that never gets the greeting)
HUNG_WARM_UP_MS = 800


def test_a_reload_that_changes_one_cluster_never_pauses_the_other(
    private_proxysql: ProxySQLLab, fleet: tuple[SimNodes, Fleet], tmp_path: Path
) -> None:
    """The second cluster's settings change while its nodes hang; the first cluster's writer
    dies as the reload is sent. The first cluster's loop is never stopped: its watch sees the
    death and its pass fails the writer over before the second cluster's new loop has even
    finished its warm-up (the lines' order says so, not a clock)."""
    sim, made = fleet
    (kept_name, kept), (changed_name, changed) = made.clusters
    config = write_config(private_proxysql, made, tmp_path / "checker", INTERVAL_MS)
    text = (
        config.read_text()
        .replace("connect_timeout_ms = 300", f"connect_timeout_ms = {HUNG_WARM_UP_MS}")
        .replace("read_timeout_ms = 400", f"read_timeout_ms = {HUNG_WARM_UP_MS}")
        .replace('log_format = "json"', 'log_format = "json"\nlog_level = "debug"')
    )
    config.write_text(text)
    daemon = subprocess.Popen(
        [executable(), f"--config={config}", "daemon"],
        env=child_env({}),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    output: list[str] = []
    reader = threading.Thread(target=lambda: output.extend(daemon.stderr or ()), daemon=True)
    reader.start()

    def after_hup() -> list[dict[str, Any]]:
        return parse_logs("".join(output[hup_at:]))

    def warm_up_of(line: dict[str, Any]) -> bool:
        return "connected ahead of the first pass" in str(line.get("summary", ""))

    hup_at = 0
    try:
        wait_until(
            lambda: (
                writers(private_proxysql, 0) == {kept[0]}
                and writers(private_proxysql, 1) == {changed[0]}
            ),
            20,
            "both clusters placed",
        )
        for node in changed:
            sim.set_mode(f"{node.host}:{node.port}", "hang")
        config.write_text(text + "retry_down = 2\n")  # the last [[cluster]]: the second's
        hup_at = len(output)
        os.kill(daemon.pid, signal.SIGHUP)
        sim.set_mode(f"{kept[0].host}:{kept[0].port}", "down")
        wait_until(lambda: writers(private_proxysql, 0) == {kept[1]}, 20, "the failover")
        wait_until(lambda: any(map(warm_up_of, after_hup())), 20, "the second's warm-up")
    finally:
        daemon.send_signal(signal.SIGTERM)
        code = daemon.wait(timeout=STOP_TIMEOUT_S)
        reader.join(STOP_TIMEOUT_S)
    assert code == 0, "".join(output)
    lines = after_hup()
    warmed = [line for line in lines if warm_up_of(line)]
    before_warm_up = lines[: lines.index(warmed[0])]
    kept_passes = [
        line
        for line in before_warm_up
        if line.get("event") == "pass" and line.get("cluster") == kept_name
    ]
    assert any(line.get("loaded") for line in kept_passes), [line.get("summary") for line in lines]
    assert [line.get("cluster") for line in warmed] == [changed_name], "only it started again"
    (reload,) = [line for line in lines if line.get("event") == "reload"]
    assert f"unchanged: {kept_name}" in reload["summary"]
    assert f"restarted: {changed_name}" in reload["summary"]
