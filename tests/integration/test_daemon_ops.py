"""The daemon as operations see it: /metrics during a failover, /health through a ProxySQL admin
outage, /status, and systemd's notify protocol, on the real Galera lab."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from checker_core.core.model import NodeAddress
from tests.integration.rig import PASS_TIMEOUT, Daemon, Rig, messages_until, rows_as_written
from tests.lab.process import free_port, wait_until

pytestmark = [pytest.mark.galera, pytest.mark.proxysql]

JUDGED = ("changed", "unchanged")
FIRST_PASSES = 5  # passes a daemon may take to judge the cluster once
INTERVAL_MS = 1000  # the rig probes with a 400 ms connect timeout, which must fit in a pass


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:  # noqa: S310 (http to loopback)
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


class Listening:
    """A daemon with run.metrics_listen on a free loopback port."""

    def __init__(self, rig: Rig, env: dict[str, str] | None = None) -> None:
        self.port = free_port("127.0.0.1")
        rig.run_settings.update(
            interval_ms=INTERVAL_MS,
            max_runtime_ms=INTERVAL_MS - 100,
            metrics_listen=f"127.0.0.1:{self.port}",
        )
        rig.write_config()
        self.daemon = Daemon(rig, env)
        # the first pass that judged the cluster: on a busy machine the first one may run out of
        # its 900 ms (a new process's connects), and the daemon simply runs the next
        passes = [self.daemon.next_pass()]
        while passes[-1].get("outcome") not in JUDGED and len(passes) < FIRST_PASSES:
            passes.append(self.daemon.next_pass())
        assert passes[-1].get("outcome") in JUDGED, [p.get("summary") for p in passes]

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def metrics(self) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        status, text = get(self.url("/metrics"))
        assert status == 200, text
        return samples(text)

    def health(self) -> tuple[int, dict[str, Any]]:
        status, text = get(self.url("/health"))
        return status, json.loads(text)


@pytest.fixture
def listening(rig: Rig) -> Iterator[Listening]:
    running = Listening(rig)
    try:
        yield running
    finally:
        assert running.daemon.stop() == 0


def writer_gauge(metrics: dict[Any, float], node: NodeAddress) -> float | None:
    return metrics.get(("proxysql_checker_writer", (("cluster", "lab"), ("node", str(node)))))


def failovers(metrics: dict[Any, float]) -> float:
    return metrics.get(("proxysql_checker_failovers_total", (("cluster", "lab"),)), 0.0)


def test_metrics_show_the_writer_move_and_count_one_failover(
    listening: Listening, galera: Any, nodes: list[NodeAddress]
) -> None:
    n1, n2, _ = nodes
    before = listening.metrics()
    assert writer_gauge(before, n1) == 1
    assert writer_gauge(before, n2) == 0
    assert failovers(before) == 0, "placing the first writer is not a failover"
    galera.kill(1)

    def moved() -> dict[Any, float] | None:
        now = listening.metrics()
        return now if writer_gauge(now, n2) == 1 else None

    after = wait_until(moved, 30, "the writer gauge to move to node 2")
    assert writer_gauge(after, n1) == 0
    assert failovers(after) == failovers(before) + 1
    down = (
        "proxysql_checker_node_verdict",
        (("cluster", "lab"), ("node", str(n1)), ("verdict", "down")),
    )
    assert after[down] == 1
    loads = ("proxysql_checker_loads_total", (("cluster", "lab"),))
    assert after[loads] > before[loads]
    # later passes change nothing: the count stays at one
    listening.daemon.next_pass()
    assert failovers(listening.metrics()) == failovers(before) + 1


def test_health_is_503_while_proxysql_admin_is_down_and_200_after(
    listening: Listening, proxysql_lab: Any
) -> None:
    status, body = listening.health()
    assert status == 200, body
    assert body["status"] == "ok"
    with proxysql_lab.outage():

        def unhealthy() -> dict[str, Any] | None:
            code, answer = listening.health()
            return answer if code == 503 else None

        body = wait_until(unhealthy, 30, "/health to turn 503 while the admin is down")
        assert body["status"] == "unhealthy"
        assert "cluster lab" in body["reason"]
        lab = body["clusters"]["lab"]
        assert lab["healthy"] is False
        assert lab["last_outcome"] == "failed"
        # the rule: unhealthy only once 3 intervals have gone by without a successful pass
        assert lab["seconds_since_success"] > 3 * INTERVAL_MS / 1000
    wait_until(lambda: listening.health()[0] == 200, 60, "/health back to 200 after the restart")


def test_status_page_is_the_status_command_as_json(listening: Listening, rig: Rig) -> None:
    listening.daemon.next_pass()  # the first pass placed the nodes; this one found them placed
    status, text = get(listening.url("/status"))
    assert status == 200
    served = json.loads(text)
    printed = rig.run("status", "--format", "json")
    assert printed.code == 0, printed.stderr
    command = json.loads(printed.stdout)

    def stable(document: dict[str, Any]) -> Any:
        # what differs between two passes over the same healthy cluster: ids, timings, the words
        # "no change" against "planned"
        return [
            (c["cluster"], c["writers"], [{**n, "probe_ms": None} for n in c["nodes"]])
            for c in document["clusters"]
        ]

    assert served["checker"] == command["checker"] == "galera"
    assert stable(served) == stable(command)
    assert {n["verdict"] for n in served["clusters"][0]["nodes"]} == {"healthy"}


def test_unknown_path_is_404(listening: Listening) -> None:
    status, text = get(listening.url("/nope"))
    assert status == 404
    assert "/health" in text


def test_listen_address_in_use_exits_2_naming_the_key(rig: Rig) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        rig.run_settings.update(metrics_listen=f"127.0.0.1:{port}")
        rig.write_config()
        before = rows_as_written(rig.admin.read_rows(rig.hostgroups.all))
        done = subprocess.run(
            rig.argv("daemon"),
            env={},
            capture_output=True,
            text=True,
            timeout=PASS_TIMEOUT,
            check=False,
        )
    assert done.returncode == 2
    assert "run.metrics_listen" in done.stderr
    assert f"127.0.0.1:{port}" in done.stderr
    assert rows_as_written(rig.admin.read_rows(rig.hostgroups.all)) == before, "no pass may run"


@contextmanager
def notify_socket(tmp_path: Path) -> Iterator[socket.socket]:
    path = tmp_path / "notify.sock"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(path))
    sock.settimeout(30)
    try:
        yield sock
    finally:
        sock.close()


def test_systemd_notify_ready_watchdog_reload_stopping(rig: Rig, tmp_path: Path) -> None:
    rig.run_settings.update(interval_ms=INTERVAL_MS, max_runtime_ms=INTERVAL_MS - 100)
    rig.write_config()
    with notify_socket(tmp_path) as sock:
        env = {"NOTIFY_SOCKET": str(tmp_path / "notify.sock"), "WATCHDOG_USEC": "30000000"}
        daemon = Daemon(rig, env)
        try:
            first = messages_until(sock, "READY")
            assert first[-1]["STATUS"].startswith("cluster lab: ")
            assert "WATCHDOG" in messages_until(sock, "WATCHDOG")[-1]
            os.kill(daemon.proc.pid, signal.SIGHUP)
            reload = messages_until(sock, "RELOADING")[-1]
            assert int(reload["MONOTONIC_USEC"]) > 0
            assert "READY" in messages_until(sock, "READY")[-1], "READY again after a reload"
        finally:
            code = daemon.stop()
        assert code == 0
        assert messages_until(sock, "STOPPING")[-1]["STOPPING"] == "1"
