"""Structured logs (rule S7): one summary line per pass, one line per node at debug level.

Human-readable on a terminal, JSON lines otherwise, through structlog. Field names are stable:
event, level, ts, checker, cluster, pass_id, node, verdict, reason, change, duration_ms.

A one-shot scheduler pass writing JSON does not import structlog: importing it costs more than
the rest of the pass put together. It writes the very lines structlog's JSON setup here would
(tests/unit/test_logs.py holds the two to the same output).
"""

from __future__ import annotations

import datetime
import json
import sys
from typing import Any, TextIO

LEVELS = {"debug": 10, "info": 20, "warning": 30, "error": 40}


def wants_json(log_format: str, stream: TextIO) -> bool:
    return log_format == "json" or (log_format == "auto" and not stream.isatty())


def _timestamp() -> str:
    return datetime.datetime.now(tz=datetime.UTC).isoformat().replace("+00:00", "Z")


class JsonLines:
    """The subset of structlog's BoundLogger the checkers use, writing JSON lines directly."""

    def __init__(self, stream: TextIO, level: int, context: dict[str, Any]) -> None:
        self._stream = stream
        self._level = level
        self._context = context

    def bind(self, **values: Any) -> JsonLines:
        return JsonLines(self._stream, self._level, {**self._context, **values})

    def _log(self, level: str, event: str, values: dict[str, Any]) -> None:
        if LEVELS[level] < self._level:
            return
        record = {**self._context, **values, "event": event, "level": level, "ts": _timestamp()}
        self._stream.write(json.dumps(record, default=repr) + "\n")
        self._stream.flush()

    def debug(self, event: str, **values: Any) -> None:
        self._log("debug", event, values)

    def info(self, event: str, **values: Any) -> None:
        self._log("info", event, values)

    def warning(self, event: str, **values: Any) -> None:
        self._log("warning", event, values)

    def error(self, event: str, **values: Any) -> None:
        self._log("error", event, values)


def structlog_logger(log_format: str, log_level: str, stream: TextIO, **context: Any) -> Any:
    import structlog

    renderer: Any = (
        structlog.processors.JSONRenderer(default=repr)
        if wants_json(log_format, stream)
        else structlog.dev.ConsoleRenderer(colors=stream.isatty())
    )
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True, key="ts"),
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(LEVELS.get(log_level, 20)),
        logger_factory=structlog.PrintLoggerFactory(stream),
        cache_logger_on_first_use=False,
    )
    return structlog.get_logger().bind(**context)


def get_logger(
    log_format: str,
    log_level: str,
    lean: bool = False,
    stream: TextIO | None = None,
    **context: Any,
) -> Any:
    """A bound logger; `lean` (one-shot passes) skips importing structlog for JSON output."""
    out = stream or sys.stderr
    if lean and wants_json(log_format, out):
        return JsonLines(out, LEVELS.get(log_level, 20), context)
    return structlog_logger(log_format, log_level, out, **context)
