"""Whether a text can name a MySQL server: a DNS host name, an IP address, or (only in a
mysql_servers row, with port 0) a unix socket path. Pure."""

from __future__ import annotations

import functools
import ipaddress
import re

# RFC 1123 labels; "_" too, which container and service names use and resolvers accept
_LABEL = re.compile(r"(?!-)[A-Za-z0-9_-]{1,63}(?<!-)")
_MAX_NAME = 253
_MAX_PATH = 107  # sun_path holds 108 bytes with its terminating NUL


def _is_host_name(text: str) -> bool:
    name = text[:-1] if text.endswith(".") else text
    if not name or len(name) > _MAX_NAME:
        return False
    return all(_LABEL.fullmatch(label) for label in name.split("."))


def _is_address(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def _is_socket_path(text: str) -> bool:
    return (
        text.startswith("/")
        and len(text.encode()) <= _MAX_PATH
        and text.isprintable()
        and not any(c.isspace() for c in text)
    )


@functools.lru_cache(maxsize=1024)  # every pass checks the same few rows' hosts again
def host_problem(host: str, *, socket_port: int | None = None) -> str | None:
    """None when `host` names a server; otherwise what is wrong with it, in words.

    `socket_port`: the port beside it in a mysql_servers row, where port 0 and an absolute path
    mean a unix socket (ProxySQL's own convention); None where only a network address will do.
    """
    if _is_address(host) or _is_host_name(host):
        return None
    if socket_port == 0 and _is_socket_path(host):
        return None
    if socket_port is not None and _is_socket_path(host):
        return f"{host!r} is a unix socket path, which needs port 0, not {socket_port}"
    return f"{host!r} is not a host name or an IP address"


MAX_PORT = 65535


def port_problem(host: str, port: int) -> str | None:
    """None when `port` can reach `host` in a mysql_servers row; otherwise what is wrong, in
    words. Port 0 is ProxySQL's mark of a unix socket path, never a TCP port."""
    if port == 0 and not _is_socket_path(host):
        return (
            f"port 0 beside the network host {host!r}: a TCP port is 1-{MAX_PORT} (port 0 is "
            "only for a unix socket path)"
        )
    if not 0 <= port <= MAX_PORT:
        return f"port {port} is not a TCP port (1-{MAX_PORT})"
    return None
