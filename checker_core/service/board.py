"""What a running daemon shows the outside: metrics, /health and /status, built from each pass.

The pass loop records results; listener threads read. Records are replaced whole under a lock,
so a page never sees half of a pass.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from checker_core.core.model import Hostgroups
from checker_core.core.settings import Settings
from checker_core.edges.hooks import Told
from checker_core.passes.events import Event
from checker_core.passes.result import PassResult
from checker_core.report import status_record
from checker_core.service.health import ClusterRecord, Health, judge_health
from checker_core.service.listener import Page, Route

if TYPE_CHECKING:  # imported when enabled: prometheus_client only loads with a listener
    from checker_core.service.metrics import DaemonMetrics

JSON = "application/json"
EVENTS_KEPT = 50  # per cluster


@dataclass(frozen=True, slots=True)
class TimelineEntry:
    """One line of a cluster's recent history: an event, or a hook that failed."""

    at: float  # wall clock: shown to people, never used for a duration
    cluster: str
    kind: str
    summary: str


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
        # each cluster's recent events and hook outcomes, newest last (the status page's timeline)
        self._events: dict[str, deque[TimelineEntry]] = {}
        self._hooked: list[tuple[str, bool]] = []
        self.metrics: DaemonMetrics | None = None
        self.reconfigure(settings)

    def reconfigure(self, settings: Settings) -> None:
        """Clusters added by a reload start with no record; removed ones are forgotten."""
        with self._lock:
            self._interval_s = settings.run.interval_ms / 1000
            self._hostgroups = {c.name: c.hostgroups for c in settings.clusters}
            self._records = {name: self._records.get(name) for name in self._hostgroups}
            self._events = {
                name: self._events.get(name, deque(maxlen=EVENTS_KEPT)) for name in self._hostgroups
            }
            self._hooked = [(c.name, c.hooks is not None) for c in settings.clusters]
            if self.metrics is not None:  # under the lock: a scrape may be reading them
                self.metrics.forget_clusters(self._hostgroups)
                self.metrics.configured(self._hooked)

    def enable_metrics(self) -> None:
        if self.metrics is None:
            from checker_core.service.metrics import DaemonMetrics

            self.metrics = DaemonMetrics(self.checker)
            with self._lock:
                self.metrics.configured(self._hooked)

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

    def record_events(self, events: Iterable[Event]) -> None:
        """A pass's events, on the timeline and counted (from the cluster's own loop)."""
        entries = [TimelineEntry(self.wall(), e.cluster, e.kind.label, e.summary) for e in events]
        if not entries:
            return
        with self._lock:
            for entry in entries:
                kept = self._events.get(entry.cluster)
                if kept is None:
                    continue  # a cluster a reload removed while its pass ran
                kept.append(entry)
                if self.metrics is not None:
                    self.metrics.events(entry.cluster, (entry.kind,))

    def hook_told(self, told: Told) -> None:
        """A hook's outcome (from the cluster's hook thread): counted; a failure on the
        timeline."""
        outcome = "dropped" if told.dropped is not None else "failed" if told.failures else "told"
        with self._lock:
            if told.cluster not in self._records:
                return  # a cluster a reload removed while its queue drained: no series again
            if self.metrics is not None:
                self.metrics.hook_told(told.cluster, told.event, outcome)
            kept = self._events.get(told.cluster)
            if kept is not None and outcome != "told":
                kept.append(
                    TimelineEntry(self.wall(), told.cluster, f"hook {outcome}", told.describe())
                )

    def timeline(self, cluster: str) -> list[TimelineEntry]:
        with self._lock:
            return list(self._events.get(cluster, ()))

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
            "/": self._status_html,
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

    def _status_html(self) -> Page:
        """The status page: /status and /health as people read them, with the timeline."""
        from checker_core.service.status_page import render

        document = self.status_document()
        health = self.health().document()
        with self._lock:
            timelines = {name: list(kept) for name, kept in self._events.items()}
            refresh_s = max(2, round(self._interval_s * 2))
        body = render(document, timelines, health, refresh_s, self.wall())
        return Page(200, "text/html; charset=utf-8", body)


def _json(document: Mapping[str, object]) -> bytes:
    return (json.dumps(document, indent=2) + "\n").encode()
