"""What a running daemon shows the outside: metrics, /health and /status, built from each pass.

The pass loop records results; listener threads read. Records are replaced whole under a lock,
so a page never sees half of a pass.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING

from checker_core.core.model import Hostgroups
from checker_core.core.settings import Settings
from checker_core.passes.result import PassResult
from checker_core.report import status_record
from checker_core.service.health import ClusterRecord, Health, judge_health
from checker_core.service.listener import Page, Route

if TYPE_CHECKING:  # imported when enabled: prometheus_client only loads with a listener
    from checker_core.service.metrics import DaemonMetrics

JSON = "application/json"


class Board:
    def __init__(
        self,
        settings: Settings,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        # ages are measured on the monotonic clock (a wall-clock step neither makes a stuck
        # daemon look fresh nor a healthy one stale); the wall clock only stamps the metrics
        self.clock = clock
        self.wall = wall
        self.checker = settings.checker.value
        self.started_at = clock()
        self._lock = threading.Lock()
        self._records: dict[str, ClusterRecord | None] = {}
        self._hostgroups: dict[str, Hostgroups] = {}
        self._interval_s = 0.0
        self.metrics: DaemonMetrics | None = None
        self.reconfigure(settings)

    def reconfigure(self, settings: Settings) -> None:
        """Clusters added by a reload start with no record; removed ones are forgotten."""
        with self._lock:
            self._interval_s = settings.run.interval_ms / 1000
            self._hostgroups = {c.name: c.hostgroups for c in settings.clusters}
            self._records = {name: self._records.get(name) for name in self._hostgroups}
            if self.metrics is not None:  # under the lock: a scrape may be reading them
                self.metrics.forget_clusters(self._hostgroups)

    def enable_metrics(self) -> None:
        if self.metrics is None:
            from checker_core.service.metrics import DaemonMetrics

            self.metrics = DaemonMetrics(self.checker)

    def started_early(self, cause: str) -> None:
        """A pass the watch between passes started before its time."""
        metrics = self.metrics
        if metrics is None:
            return
        with self._lock:
            metrics.started_early(cause)

    def record(self, results: Iterable[PassResult]) -> None:
        finished_at = self.clock()
        stamped_at = self.wall()
        metrics = self.metrics
        with self._lock:
            for result in results:
                if result.cluster not in self._records:
                    continue  # a cluster a reload removed while its pass ran
                before = self._records[result.cluster]
                self._records[result.cluster] = (
                    ClusterRecord.first(result, finished_at)
                    if before is None
                    else before.after(result, finished_at)
                )
                if metrics is not None:
                    metrics.observe(result, stamped_at)

    def health(self) -> Health:
        with self._lock:
            records = dict(self._records)
            interval = self._interval_s
        return judge_health(records, interval, self.started_at, self.clock())

    def status_document(self) -> dict[str, object]:
        with self._lock:
            records = dict(self._records)
            hostgroups = dict(self._hostgroups)
        return {
            "checker": self.checker,
            "clusters": [
                {
                    **status_record(record.last, hostgroups[name]),
                    "last_evictions": list(record.evictions),
                }
                for name, record in sorted(records.items())
                if record is not None
            ],
        }

    def routes(self) -> Mapping[str, Route]:
        return {
            "/metrics": self._metrics_page,
            "/health": self._health_page,
            "/status": self._status_page,
        }

    def _metrics_page(self) -> Page:
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        metrics = self.metrics
        if metrics is None:
            return Page(404, "text/plain; charset=utf-8", b"metrics are off\n")
        with self._lock:  # a scrape never sees half of a pass's updates
            body = generate_latest(metrics.registry)
        return Page(200, CONTENT_TYPE_LATEST, body)

    def _health_page(self) -> Page:
        health = self.health()
        return Page(200 if health.healthy else 503, JSON, _json(health.document()))

    def _status_page(self) -> Page:
        return Page(200, JSON, _json(self.status_document()))


def _json(document: Mapping[str, object]) -> bytes:
    return (json.dumps(document, indent=2) + "\n").encode()
