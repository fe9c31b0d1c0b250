"""Structured logs (rule S7): one summary line per pass, one line per node at debug level.

Human-readable on a terminal, JSON lines otherwise. Field names are stable: event, cluster,
pass_id, node, verdict, reason, change, duration_ms.
"""

from __future__ import annotations

import sys
from typing import Any, TextIO

LEVELS = {"debug": 10, "info": 20, "warning": 30, "error": 40}


def configure(log_format: str, log_level: str, stream: TextIO | None = None) -> None:
    import structlog

    out = stream or sys.stderr
    as_json = log_format == "json" or (log_format == "auto" and not out.isatty())
    renderer: Any = (
        structlog.processors.JSONRenderer(sort_keys=False)
        if as_json
        else structlog.dev.ConsoleRenderer(colors=out.isatty())
    )
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True, key="ts"),
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(LEVELS.get(log_level, 20)),
        logger_factory=structlog.PrintLoggerFactory(out),
        cache_logger_on_first_use=False,
    )


def get(**bound: object) -> Any:
    import structlog

    return structlog.get_logger().bind(**bound)
