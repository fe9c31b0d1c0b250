"""The process a scheduler pass hands its events to (edges.hooks.send_detached): it reads its
order on stdin (the hooks, secrets included, never in argv), tells each event in turn, and
appends each outcome as a JSON line to the cluster's outcomes file, which the next pass says
in its `hook` lines. It writes to no stream of its caller's (whoever reads the pass's output
would wait for it) and holds its cluster's hook slot (an inherited, locked file) until it
ends."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from checker_core.core.settings import HookSettings, Secret
from checker_core.edges.hooks import tell


def main() -> int:
    order: dict[str, Any] = json.loads(sys.stdin.read())
    given = order["hooks"]
    hooks = HookSettings(
        command=tuple(given["command"]),
        url=Secret(given["url"]) if given["url"] else None,
        timeout_ms=int(given["timeout_ms"]),
    )
    failed = 0
    for document in order["documents"]:
        told = tell(hooks, document, str(document.get("cluster", "")))
        failed += not told.ok
        line = {"ok": told.ok, "hook_event": told.event, "summary": told.describe()}
        # one short line per write, appended: lines of processes running at once never mix
        fd = os.open(order["outcomes"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o640)
        try:
            os.write(fd, (json.dumps(line) + "\n").encode())
        finally:
            os.close(fd)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
