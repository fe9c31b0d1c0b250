"""The daemon's HTTP listener: GET /metrics, /health, /status, each answered by a function.

Requests are served on threads of their own, so a slow scraper never delays a pass; the pages
read a snapshot the pass loop replaces whole.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from checker_core.core.settings import ListenAddress

CLIENT_TIMEOUT_S = 5.0  # a client that sends nothing does not keep a thread forever


@dataclass(frozen=True, slots=True)
class Page:
    """One HTTP answer of the metrics listener."""

    status: int
    content_type: str
    body: bytes


Route = Callable[[], Page]


class ListenError(Exception):
    """The address cannot be listened on (in use, not ours, not resolvable)."""


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    routes: Mapping[str, Route]


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    timeout = CLIENT_TIMEOUT_S
    server_version = "proxysql-checkers"
    sys_version = ""

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        route = self.server.routes.get(path)
        if route is None:
            known = ", ".join(sorted(self.server.routes))
            page = Page(404, "text/plain; charset=utf-8", f"not found; try {known}\n".encode())
        else:
            try:
                page = route()
            except Exception as exc:  # a page must never take the listener down
                page = Page(500, "text/plain; charset=utf-8", f"{type(exc).__name__}\n".encode())
        self.send_response(page.status)
        self.send_header("Content-Type", page.content_type)
        self.send_header("Content-Length", str(len(page.body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(page.body)

    def log_message(self, format: str, *args: object) -> None:
        """Scrapes are not events: the pass line is the daemon's log."""


class Listener:
    def __init__(self, address: ListenAddress, routes: Mapping[str, Route]) -> None:
        self.address = address
        server_class = type(
            "Server",
            (_Server,),
            {"address_family": socket.AF_INET6 if address.is_ipv6 else socket.AF_INET},
        )
        try:
            self._server = server_class((address.host, address.port), _Handler)
        except OSError as exc:
            raise ListenError(f"cannot listen on {address}: {exc.strerror or exc}") from exc
        self._server.routes = routes
        self._thread = threading.Thread(
            target=self._server.serve_forever, name=f"listener {address}", daemon=True
        )
        self._thread.start()

    @property
    def port(self) -> int:
        """The bound port (the configured one, or the one the system chose for port 0)."""
        return int(self._server.server_address[1])

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=CLIENT_TIMEOUT_S)
