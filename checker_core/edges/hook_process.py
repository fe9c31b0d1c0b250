"""The process a scheduler pass hands its events to (edges.hooks.send_detached): it reads its
order on stdin (the hooks, secrets included, never in argv), tells each event in turn, says
each outcome in a `hook` line where the pass's lines went, and ends. It holds its cluster's
hook slot (an inherited, locked file) until then."""

from __future__ import annotations

import json
import sys
from typing import Any

from checker_core.core.settings import HookSettings, Secret
from checker_core.edges.hooks import tell
from checker_core.edges.logs import get_logger


def main() -> int:
    order: dict[str, Any] = json.loads(sys.stdin.read())
    given = order["hooks"]
    hooks = HookSettings(
        command=tuple(given["command"]),
        url=Secret(given["url"]) if given["url"] else None,
        timeout_ms=int(given["timeout_ms"]),
    )
    settings = order["log"]
    stream = sys.stdout if settings.get("log_stream") == "stdout" else sys.stderr
    log = get_logger(
        settings.get("log_format", "json"),
        settings.get("log_level", "info"),
        lean=True,
        stream=stream,
        checker=settings.get("checker", ""),
    )
    failed = 0
    for document in order["documents"]:
        cluster = str(document.get("cluster", ""))
        told = tell(hooks, document, cluster)
        failed += not told.ok
        method = log.info if told.ok else log.warning
        method("hook", cluster=cluster, hook_event=told.event, summary=told.describe())
    stream.flush()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
