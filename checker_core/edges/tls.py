"""TLS to MySQL-protocol peers: one SSLContext per endpoint's settings per process, and the
ssl_mode rules at connect time.

Left to itself, PyMySQL (>= 1.2) builds a fresh default context for every connection, which
reads the system CA bundle each time (tens of milliseconds of CPU per connect) and verifies
nothing anyway. Here a context is built once per distinct `Tls` value and handed to every
connect, and modes that verify nothing load no CA bundle at all.

PyMySQL treats a given SSLContext as "TLS required": a server without TLS raises
CR_SSL_CONNECTION_ERROR. For `preferred` the requirement is lifted before the handshake, so such
a server is used in plain text on the same connection, as MySQL's clients do.
"""

from __future__ import annotations

import socket
import ssl
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from checker_core.core.schema import SslMode
from checker_core.edges import driver

if TYPE_CHECKING:
    import pymysql

    from checker_core.core.model import NodeAddress
    from checker_core.core.settings import Endpoint, Tls

# PyMySQL's CR.CR_SSL_CONNECTION_ERROR: TLS was required and the server offers none
_NO_TLS_ON_SERVER = 2026
# CR.CR_CONN_HOST_ERROR, and PyMySQL's own connect_timeout when none is given
_CANNOT_CONNECT = 2003
_PYMYSQL_CONNECT_TIMEOUT_S = 10


class TlsError(Exception):
    """TLS to a peer failed where ssl_mode insists on it; the message names peer and mode."""


class TlsFileError(Exception):
    """A certificate or key file that cannot be used; `key` is the ssl_* setting naming it."""

    def __init__(self, key: str, path: str, reason: str) -> None:
        self.key = key
        self.path = path
        self.reason = reason
        super().__init__(f"{key} {path}: {reason}")


def _no_passphrase() -> str:
    # OpenSSL would otherwise prompt on the terminal, which a scheduler pass does not have
    raise TlsFileError(
        "ssl_key", "", "encrypted with a passphrase; the checker needs it unencrypted"
    )


def _ssl_reason(exc: ssl.SSLError | OSError) -> str:
    if isinstance(exc, ssl.SSLError):
        return exc.reason or exc.strerror or str(exc)
    return exc.strerror or str(exc)


def _pem_blocks(path: str, marker: str) -> bool:
    """Whether the file holds a PEM block whose label ends with `marker`."""
    with open(path, "rb") as handle:
        data = handle.read(1 << 20)
    return f"{marker}-----".encode() in data and b"-----BEGIN " in data


def file_problems(ca: str | None, cert: str | None, key: str | None) -> list[TlsFileError]:
    """Every given certificate and key file loaded as a connect would load it, so a garbage
    file is a configuration error before any server is asked, not a failed handshake on every
    pass. A file that is only named (a CA in a mode that verifies nothing) is loaded too: it
    is a mistake either way."""
    found: list[TlsFileError] = []
    if ca is not None:
        try:
            ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).load_verify_locations(cafile=ca)
        except ssl.SSLError as exc:
            found.append(
                TlsFileError("ssl_ca", ca, f"not a PEM CA certificate ({_ssl_reason(exc)})")
            )
        except OSError as exc:
            found.append(TlsFileError("ssl_ca", ca, f"cannot read it ({_ssl_reason(exc)})"))
    if cert is not None and key is not None:
        try:
            _load_chain(ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT), cert, key)
        except TlsFileError as exc:
            found.append(exc)
    return found


def _load_chain(ctx: ssl.SSLContext, cert: str, key: str | None) -> None:
    """load_cert_chain, its failure named after the file at fault."""
    try:
        ctx.load_cert_chain(cert, keyfile=key, password=_no_passphrase)
    except TlsFileError as exc:
        raise TlsFileError("ssl_key", key or cert, exc.reason) from None
    except (ssl.SSLError, OSError) as exc:
        raise _chain_failure(cert, key, exc) from None


def _chain_failure(cert: str, key: str | None, exc: ssl.SSLError | OSError) -> TlsFileError:
    for name, path, marker, what in (
        ("ssl_cert", cert, "CERTIFICATE", "a PEM certificate"),
        ("ssl_key", key or cert, "PRIVATE KEY", "a PEM private key"),
    ):
        try:
            if not _pem_blocks(path, marker):
                return TlsFileError(name, path, f"not {what}")
        except OSError as err:
            return TlsFileError(name, path, f"cannot read it ({_ssl_reason(err)})")
    if isinstance(exc, ssl.SSLError) and exc.reason == "KEY_VALUES_MISMATCH":
        return TlsFileError("ssl_key", key or cert, f"does not belong to the certificate {cert}")
    return TlsFileError("ssl_cert", cert, f"cannot be loaded with its key ({_ssl_reason(exc)})")


@dataclass(frozen=True, slots=True)
class ContextSpec:
    """What an SSLContext must do for one Tls value (pure: decided without touching files)."""

    verify: bool  # the certificate must chain to `ca`
    check_hostname: bool
    ca: str | None
    cert: str | None
    key: str | None


def context_spec(tls: Tls) -> ContextSpec | None:
    """None: no TLS at all (disabled)."""
    if not tls.mode.encrypts:
        return None
    return ContextSpec(
        verify=tls.mode.verifies,
        check_hostname=tls.mode is SslMode.VERIFY_IDENTITY,
        ca=tls.ca if tls.mode.verifies else None,
        cert=tls.cert,
        key=tls.key,
    )


def build_context(spec: ContextSpec) -> ssl.SSLContext:
    """A client context as `spec` says; never the system's CA bundle."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    if spec.verify:
        try:
            ctx.load_verify_locations(cafile=spec.ca)
        except (ssl.SSLError, OSError) as exc:
            # a file changed after the configuration was checked: still named, never a traceback
            raise TlsFileError("ssl_ca", str(spec.ca), _ssl_reason(exc)) from None
        ctx.verify_mode = ssl.CERT_REQUIRED
        ctx.check_hostname = spec.check_hostname
    else:
        ctx.check_hostname = False  # must come first: CERT_NONE is refused while it is on
        ctx.verify_mode = ssl.CERT_NONE
    if spec.cert is not None:
        _load_chain(ctx, spec.cert, spec.key)
    return ctx


_contexts: dict[Tls, ssl.SSLContext] = {}
_plain_servers: set[tuple[str, int]] = set()
_lock = threading.Lock()


def context_for(tls: Tls) -> ssl.SSLContext | None:
    """The process's one context for these settings (built on first use, by one thread)."""
    spec = context_spec(tls)
    if spec is None:
        return None
    with _lock:
        ctx = _contexts.get(tls)
        if ctx is None:
            ctx = _contexts[tls] = build_context(spec)
        return ctx


def forget() -> None:
    """Drop every context and what was learnt of servers: the next connects read the
    certificate files again (the daemon's reload, so a rotated CA or key takes effect)."""
    with _lock:
        _contexts.clear()
        _plain_servers.clear()


def contexts_built() -> int:
    """How many contexts this process has built (what the tests and the bench look at)."""
    with _lock:
        return len(_contexts)


def tls_arguments(tls: Tls, host: str, port: int) -> dict[str, Any]:
    """PyMySQL connect() arguments for `tls` to host:port."""
    with _lock:
        plain = (host, port) in _plain_servers
    ctx = context_for(tls)
    if ctx is None or (plain and not tls.mode.insists):
        # without ssl_disabled PyMySQL would still negotiate TLS on its own, with a new context
        return {"ssl_disabled": True}
    return {"ssl": ctx}


def connect_node(
    account: Endpoint,
    where: str,
    node: NodeAddress,
    connect_s: float,
    read_s: float,
    **kwargs: Any,
) -> pymysql.connections.Connection[Any]:
    """A backend account's connection to a node (autocommit): the monitor's probes and
    node_admin's actions open theirs the same way."""
    return connect(
        account.tls,
        where,
        node.host,
        node.port,
        user=account.user,
        password=account.password.reveal(),
        connect_timeout=connect_s,
        read_timeout=read_s,
        write_timeout=read_s,
        autocommit=True,
        **kwargs,
    )


def connect(
    tls: Tls, where: str, host: str, port: int, **kwargs: Any
) -> pymysql.connections.Connection[Any]:
    """pymysql.connect with the endpoint's TLS; raises TlsError for a TLS failure that ssl_mode
    does not forgive, PyMySQL's own errors otherwise."""
    try:
        return _connect(tls, where, host, port, kwargs)
    except RuntimeError as exc:
        # the account logs in with RSA (no TLS): load it and log in again
        if not driver.needs_rsa(exc) or not driver.enable_rsa():
            raise
        return _connect(tls, where, host, port, kwargs)


def _connect(
    tls: Tls, where: str, host: str, port: int, kwargs: dict[str, Any]
) -> pymysql.connections.Connection[Any]:
    mysql = driver.load()
    arguments = tls_arguments(tls, host, port)
    try:
        conn = _open(mysql, host, port, {**arguments, **kwargs}, preferred=not tls.mode.insists)
    except mysql.err.OperationalError as exc:
        if exc.args and exc.args[0] == _NO_TLS_ON_SERVER:
            if tls.mode.insists:
                raise TlsError(
                    f"{where}: ssl_mode {tls.mode.value}, but the server offers no TLS"
                ) from exc
            with _lock:
                _plain_servers.add((host, port))
            return _open(mysql, host, port, {**kwargs, "ssl_disabled": True}, preferred=False)
        failure = _ssl_failure(exc)
        if failure is not None:
            raise TlsError(f"{where}: TLS ({tls.mode.value}) failed: {failure}") from exc
        raise
    return conn


def _open(
    mysql: Any, host: str, port: int, arguments: dict[str, Any], *, preferred: bool
) -> pymysql.connections.Connection[Any]:
    """One connect, on a socket of our own (see open_socket). PyMySQL takes a given context as
    "TLS required"; for `preferred` its own flag is turned back before the handshake, so a
    server without TLS costs no second connect (should a later PyMySQL drop the flag, the
    refusal is caught and retried in plain text)."""
    conn: pymysql.connections.Connection[Any] = mysql.connect(
        host=host, port=port, defer_connect=True, **arguments
    )
    if preferred and "ssl" in arguments:
        driver.tls_preferred(conn)
    timeout = arguments.get("connect_timeout", _PYMYSQL_CONNECT_TIMEOUT_S)
    try:
        sock = open_socket(host, port, timeout)
    except OSError as exc:
        # as PyMySQL words it when it opens the socket itself
        error = mysql.err.OperationalError(
            _CANNOT_CONNECT, f"Can't connect to MySQL server on {host!r} ({exc})"
        )
        error.original_exception = exc
        raise error from exc
    conn.connect(sock)
    return conn


def open_socket(host: str, port: int, timeout: float | None) -> socket.socket:
    """A connected TCP socket, set up as PyMySQL sets up its own. The name reaches the resolver
    as ASCII bytes: given a str, CPython's getaddrinfo passes it through the idna codec, whose
    first use imports stringprep and unicodedata (about 1.5 ms of every scheduler pass). Host
    names here are ASCII by the time they are used (hostname.host_problem).

    A mysql_servers row whose hostname is an absolute path and whose port is 0 names a unix
    socket (ProxySQL's own convention): the node is probed through that socket."""
    if port == 0 and host.startswith("/"):
        unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            unix.settimeout(timeout)
            unix.connect(host)
        except OSError:
            unix.close()
            raise
        return unix
    name: str | bytes = host.encode("ascii") if host.isascii() else host
    sock = socket.create_connection((name, port), timeout)  # type: ignore[arg-type]
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    except OSError:
        sock.close()
        raise
    return sock


def _ssl_failure(exc: BaseException) -> str | None:
    """The SSL error beneath a PyMySQL error (it keeps the socket's error aside), if any."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, ssl.SSLCertVerificationError):
            return f"certificate verify failed: {current.verify_message}"
        if isinstance(current, ssl.SSLError):
            return current.reason or str(current)
        original = getattr(current, "original_exception", None)
        current = original if isinstance(original, BaseException) else current.__cause__
    return None
