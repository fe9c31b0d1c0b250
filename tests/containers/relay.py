"""The checker's link to one containerized node: a TCP relay on 127.0.0.1 whose replies can be
held back, which is how the tests make a slow link.

The kernel of the test machines has no netem qdisc (CONFIG_NET_SCH_NETEM is not set), so `tc
qdisc ... netem delay` cannot slow a link there. The relay does the same to what the checker
sees: every chunk the node sends arrives `delay` seconds late, while the node and its peers are
untouched. Packet loss and cut links are made in the container's own network namespace instead
(iptables), where the kernel drops real packets (tests/containers/cluster.py).
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator

from tests.lab.paths import LOOPBACK

CHUNK = 65536
ACCEPT_POLL = 0.2  # how often a relay waiting for connections looks at its stop flag


class Relay:
    """127.0.0.1:port -> target, with an adjustable delay on the target's replies."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.delay = 0.0
        self._stop = threading.Event()
        self._server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._server.bind((LOOPBACK, 0))
        self._server.listen(64)
        self._server.settimeout(ACCEPT_POLL)
        self.port: int = self._server.getsockname()[1]
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._accept, name=f"relay-{self.port}", daemon=True)
        self._thread.start()

    @contextlib.contextmanager
    def slowed(self, seconds: float) -> Iterator[None]:
        """Replies held back by `seconds` for the duration of the block."""
        self.delay = seconds
        try:
            yield
        finally:
            self.delay = 0.0

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._server.close()
        with self._lock:
            for sock in self._open:
                with contextlib.suppress(OSError):
                    sock.close()
            self._open.clear()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _track(self, *socks: socket.socket) -> None:
        with self._lock:
            self._open.update(socks)

    def _upstream(self, client: socket.socket) -> socket.socket | None:
        """The target's end of a client's road, both tracked; None (the client closed) when the
        target refuses."""
        try:
            upstream = socket.create_connection(self.target, timeout=10)
        except OSError:
            client.close()
            return None
        upstream.settimeout(None)
        self._track(client, upstream)
        return upstream

    def _serve(self, client: socket.socket) -> None:
        upstream = self._upstream(client)
        if upstream is None:
            return
        threading.Thread(target=self._pump, args=(client, upstream, False), daemon=True).start()
        self._pump(upstream, client, True)

    def _pump(self, source: socket.socket, sink: socket.socket, replies: bool) -> None:
        try:
            while True:
                data = source.recv(CHUNK)
                if not data:
                    break
                if replies and self.delay > 0:
                    # the link's latency: this chunk is still on the wire
                    time.sleep(self.delay)
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                with contextlib.suppress(OSError):
                    sock.close()
            with self._lock:
                self._open.discard(source)
                self._open.discard(sink)
