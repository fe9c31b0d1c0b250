"""The shipped alert rules and Grafana dashboard (config/prometheus/), tested for real: the
daemon runs on the lab's Galera cluster behind ProxySQL, with its metrics listener and a hook;
its writer is killed. Then:

- `promtool check rules` takes the rules;
- `promtool test rules` fires each alert on the series the daemon itself served (its names and
  labels, as a scrape labels them), with the values of the fault each alert is for, and fires
  none on the values it served after the failover;
- a real Prometheus (Debian's) scrapes the daemon through the failover with the rules loaded:
  every rule is healthy, and every dashboard panel's query returns data.
"""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from checker_core.core.model import NodeAddress
from tests.integration.rig import Daemon, Rig
from tests.lab.process import free_port, wait_until
from tests.lab.require import unavailable

pytestmark = [pytest.mark.galera, pytest.mark.proxysql]

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "config" / "prometheus" / "alerts.yml"
DASHBOARD = ROOT / "config" / "prometheus" / "grafana-dashboard.json"
JOB = "proxysql-checker"

Series = dict[str, tuple[dict[str, str], float]]  # text -> (labels, value)


def tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        unavailable(f"{name} (Debian's prometheus package) is not installed")
    return found


@pytest.fixture
def failed_over(
    rig: Rig, galera: Any, nodes: list[NodeAddress], tmp_path: Path
) -> Iterator[tuple[Daemon, str, Any]]:
    """The daemon (metrics on, a hook), a Prometheus scraping it, and the writer killed once
    both saw the cluster healthy."""
    port = free_port()
    hook = tmp_path / "hook.sh"
    hook.write_text("#!/bin/sh\ncat > /dev/null\n")
    hook.chmod(0o755)
    rig.run_settings.update(
        interval_ms=1000, max_runtime_ms=900, metrics_listen=f"127.0.0.1:{port}"
    )
    rig.write_config(hook_command=str(hook))
    daemon = Daemon(rig)
    prometheus = Prometheus(tmp_path / "prometheus", port)
    try:
        daemon.next_pass()
        prometheus.start()
        wait_until(lambda: prometheus.query("proxysql_checker_writer == 1"), 60, "a first scrape")
        galera.kill(1)
        wait_until(lambda: rig.writers == {nodes[1]}, 30, "the failover")
        # scraped after it, twice at least (a rate needs two samples)
        wait_until(
            lambda: prometheus.query("increase(proxysql_checker_failovers_total[1m]) > 0"),
            60,
            "the failover seen by Prometheus",
        )
        yield daemon, f"127.0.0.1:{port}", prometheus
    finally:
        prometheus.stop()
        daemon.stop()


class Prometheus:
    """Debian's prometheus, scraping the daemon every second, the rules loaded."""

    def __init__(self, where: Path, target_port: int) -> None:
        self.where = where
        self.port = free_port()
        self.target = f"127.0.0.1:{target_port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.where.mkdir(parents=True, exist_ok=True)
        config = self.where / "prometheus.yml"
        config.write_text(
            yaml.safe_dump(
                {
                    "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                    "rule_files": [str(RULES)],
                    "scrape_configs": [
                        {"job_name": JOB, "static_configs": [{"targets": [self.target]}]}
                    ],
                }
            )
        )
        self.proc = subprocess.Popen(
            [
                tool("prometheus"),
                f"--config.file={config}",
                f"--storage.tsdb.path={self.where / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
            ],
            stdout=subprocess.DEVNULL,
            stderr=(self.where / "prometheus.log").open("wb"),
            start_new_session=True,
        )

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=30)

    def api(self, path: str, **params: str) -> Any:
        url = f"http://127.0.0.1:{self.port}/api/v1/{path}"
        if params:
            url += "?" + urllib.parse.urlencode(params)
        try:
            with urllib.request.urlopen(url, timeout=10) as answer:  # noqa: S310 (loopback)
                return json.load(answer)["data"]
        except OSError:
            return None

    def query(self, expr: str) -> list[Any]:
        data = self.api("query", query=expr)
        return list(data["result"]) if data else []


def scraped(address: str) -> Series:
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    found: Series = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if not sample.name.startswith("proxysql_checker_"):
                continue
            labels = {**sample.labels, "job": JOB, "instance": address}
            found[series_text(sample.name, labels)] = (
                labels | {"__name__": sample.name},
                sample.value,
            )
    return found


def series_text(name: str, labels: dict[str, str]) -> str:
    inside = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()) if k != "__name__")
    return f"{name}{{{inside}}}"


def rendered(text: str, labels: dict[str, str]) -> str:
    return re.sub(r"\{\{\s*\$labels\.(\w+)\s*\}\}", lambda m: labels.get(m.group(1), ""), text)


def rules() -> dict[str, dict[str, Any]]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return {r["alert"]: r for g in groups for r in g["rules"]}


def expected(alert: str, labels: dict[str, str]) -> dict[str, Any]:
    rule = rules()[alert]
    every = {**labels, **rule["labels"]}
    return {
        "exp_labels": every,
        "exp_annotations": {k: rendered(v, every) for k, v in rule["annotations"].items()},
    }


def pick(series: Series, name: str, **labels: str) -> tuple[str, dict[str, str]]:
    for text, (found, _) in series.items():
        if found["__name__"] == name and all(found.get(k) == v for k, v in labels.items()):
            return text, {k: v for k, v in found.items() if k != "__name__"}
    raise AssertionError(f"the daemon served no {name} {labels}")


def test_the_rules_fire_on_the_daemon_own_series_and_the_dashboard_has_data(
    failed_over: tuple[Daemon, str, Prometheus],
    nodes: list[NodeAddress],
    tmp_path: Path,
) -> None:
    daemon, address, prometheus = failed_over
    n1, n2, _ = (str(n) for n in nodes)
    checked = subprocess.run(
        [tool("promtool"), "check", "rules", str(RULES)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr

    # ---- promtool test rules, on what the daemon served after the failover
    served = scraped(address)
    cluster = {"job": JOB, "instance": address, "cluster": "lab"}
    writer_n2, labels_n2 = pick(served, "proxysql_checker_writer", node=n2)
    writable_n2, _ = pick(served, "proxysql_checker_node_writable", node=n2)
    ready, _ = pick(served, "proxysql_checker_failover_ready")
    success, _ = pick(served, "proxysql_checker_last_success_timestamp_seconds")
    restart_n1, labels_n1 = pick(served, "proxysql_checker_evicted_needs_restart", node=n1)
    evicted, labels_refused = pick(served, "proxysql_checker_evictions_total", reason="refused")
    hook_failed, labels_hook = pick(
        served, "proxysql_checker_hook_deliveries_total", event="writer_changed", outcome="failed"
    )

    def outcome(name: str) -> tuple[str, dict[str, str]]:
        labels = {**cluster, "outcome": name}
        return series_text("proxysql_checker_passes_total", labels), labels

    blind, _ = outcome("blind")
    failed, _ = outcome("failed")
    deferred, _ = outcome("deferred")
    writers = [t for t, (lab, _) in served.items() if lab["__name__"] == "proxysql_checker_writer"]
    as_served = {text: f"{value:g}x40" for text, (_, value) in served.items()}
    # the daemon's timestamps are now's, and promtool's clock starts at 0: a pass that
    # succeeds every 15 s of promtool's time
    as_served[success] = f"{8 * 60}+15x40"
    cases: list[tuple[str, dict[str, str], str, list[dict[str, Any]]]] = [
        (
            "ProxySQLCheckerNoWriter",
            dict.fromkeys(writers, "0x40"),
            "2m",
            [expected("ProxySQLCheckerNoWriter", cluster)],
        ),
        (
            "ProxySQLCheckerWriterNotWritable",
            {writer_n2: "1x40", writable_n2: "0x40"},
            "3m",
            [expected("ProxySQLCheckerWriterNotWritable", labels_n2)],
        ),
        (
            "ProxySQLCheckerBlind",
            {blind: "0+1x40"},
            "3m",
            [expected("ProxySQLCheckerBlind", cluster)],
        ),
        (
            "ProxySQLCheckerPassesFailing",
            {failed: "0+1x40"},
            "5m",
            [expected("ProxySQLCheckerPassesFailing", cluster)],
        ),
        (
            "ProxySQLCheckerLoadsDeferred",
            {deferred: "0+1x40"},
            "4m",
            [expected("ProxySQLCheckerLoadsDeferred", cluster)],
        ),
        (
            "ProxySQLCheckerFailoverNotReady",
            {ready: "0x40"},
            "7m",
            [expected("ProxySQLCheckerFailoverNotReady", {**cluster})],
        ),
        (
            "ProxySQLCheckerDown",
            {series_text("up", {"job": JOB, "instance": address}): "0x40"},
            "3m",
            [expected("ProxySQLCheckerDown", {"job": JOB, "instance": address})],
        ),
        (
            "ProxySQLCheckerNoSuccessfulPass",
            {success: "0x40"},
            "3m",
            [expected("ProxySQLCheckerNoSuccessfulPass", cluster)],
        ),
        (
            "ProxySQLCheckerEvicted",
            {evicted: "0+1x40"},
            "2m",
            [expected("ProxySQLCheckerEvicted", labels_refused)],
        ),
        (
            "ProxySQLCheckerEvictedNeedsRestart",
            {restart_n1: "1x40"},
            "4m",
            [expected("ProxySQLCheckerEvictedNeedsRestart", labels_n1)],
        ),
        (
            "ProxySQLCheckerHookFailing",
            {hook_failed: "0+1x40"},
            "2m",
            [expected("ProxySQLCheckerHookFailing", labels_hook)],
        ),
    ]
    tests = []
    for alert, faulted, at, alerts in cases:
        values = {**as_served, **faulted}
        tests.append(
            {
                "interval": "15s",
                "input_series": [{"series": s, "values": v} for s, v in values.items()],
                "alert_rule_test": [{"eval_time": at, "alertname": alert, "exp_alerts": alerts}],
            }
        )
    # the failover's own series: no alert, but failover readiness as the daemon judged it
    quiet = []
    ready_now = served[ready][1]
    for alert in rules():
        fires = alert == "ProxySQLCheckerFailoverNotReady" and ready_now == 0
        quiet.append(
            {
                "eval_time": "7m",
                "alertname": alert,
                "exp_alerts": [expected(alert, cluster)] if fires else [],
            }
        )
    tests.append(
        {
            "interval": "15s",
            "input_series": [{"series": s, "values": v} for s, v in as_served.items()],
            "alert_rule_test": quiet,
        }
    )
    unit = tmp_path / "alerts.test.yml"
    unit.write_text(
        yaml.safe_dump({"rule_files": [str(RULES)], "evaluation_interval": "15s", "tests": tests})
    )
    tested = subprocess.run(
        [tool("promtool"), "test", "rules", str(unit)], capture_output=True, text=True, check=False
    )
    assert tested.returncode == 0, tested.stdout + tested.stderr

    # ---- the real Prometheus: the rules loaded and healthy, every panel has data
    loaded = prometheus.api("rules")
    healthy = {r["name"]: r["health"] for g in loaded["groups"] for r in g["rules"]}
    assert healthy == dict.fromkeys(rules(), "ok"), healthy
    dashboard = json.loads(DASHBOARD.read_text())
    empty = []
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            expr = (
                target["expr"]
                .replace("$__rate_interval", "30s")
                .replace("$cluster", ".*")
                .replace("$instance", ".*")
            )
            if not prometheus.query(expr):
                empty.append(f"{panel['title']}: {expr}")
    assert empty == [], "panels without data:\n" + "\n".join(empty)
    assert daemon.proc.poll() is None
