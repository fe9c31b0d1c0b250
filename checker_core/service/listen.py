"""HOST:PORT of the daemon's HTTP listener (run.metrics_listen), and where to reach it."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

_WILDCARDS = {"0.0.0.0": "127.0.0.1", "::": "::1"}  # noqa: S104 (where to reach them)


@dataclass(frozen=True, slots=True)
class ListenAddress:
    host: str
    port: int

    @classmethod
    def parse(cls, text: str) -> ListenAddress:
        """'127.0.0.1:9140', '0.0.0.0:9140', '[::1]:9140' or 'localhost:9140'."""
        head, sep, tail = text.strip().rpartition(":")
        if not sep or not tail.isdigit():
            raise ValueError(f"{text!r} is not HOST:PORT (e.g. 127.0.0.1:9140)")
        port = int(tail)
        if not 1 <= port <= 65535:
            raise ValueError(f"{text!r}: port {port} is not between 1 and 65535")
        host = head
        if head.startswith("[") and head.endswith("]"):
            host = head[1:-1]
            try:
                ipaddress.IPv6Address(host)
            except ValueError:
                raise ValueError(f"{text!r}: {host!r} is not an IPv6 address") from None
        elif ":" in head:
            raise ValueError(f"{text!r}: write an IPv6 address in brackets, e.g. [::1]:{port}")
        if not host:
            raise ValueError(f"{text!r}: no host; use 0.0.0.0:{port} to listen on every address")
        return cls(host, port)

    @property
    def is_ipv6(self) -> bool:
        return ":" in self.host

    def url(self, path: str) -> str:
        """Where a client on this machine reaches `path` (a wildcard address means loopback)."""
        host = _WILDCARDS.get(self.host, self.host)
        shown = f"[{host}]" if ":" in host else host
        return f"http://{shown}:{self.port}{path}"

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if self.is_ipv6 else f"{self.host}:{self.port}"
