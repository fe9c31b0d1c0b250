"""PyMySQL, imported lean, and the one module that reaches into its connection.

Imported lean: without `cryptography` until an account needs it.

PyMySQL imports cryptography's RSA machinery when it is imported (about half of its import
time), yet uses it only for sha256_password and for caching_sha2_password's full login over a
plain connection. A pass usually needs neither (mysql_native_password, TLS, or a server that
already cached the account), so the import is held back and made, once, the first time PyMySQL
says it needs it.
"""

from __future__ import annotations

import importlib
import socket
import sys
import threading
from types import ModuleType
from typing import Any

_lock = threading.Lock()
_NEEDS_RSA = "'cryptography' package is required"
# holds PyMySQL once it is wholly imported: while one thread imports it, sys.modules already
# holds the half-made module, which another thread (a probe, the admin connect) must not be given
_loaded: dict[str, ModuleType] = {}


def load() -> ModuleType:
    """The pymysql module; when this imports it, cryptography stays unimported."""
    module = _loaded.get("pymysql")
    if module is not None:
        return module
    with _lock:
        if "pymysql" not in _loaded:
            _loaded["pymysql"] = _import()
        return _loaded["pymysql"]


def _import() -> ModuleType:
    if "cryptography" in sys.modules:
        return importlib.import_module("pymysql")
    # a None entry makes `import cryptography...` fail at once, as if it were absent
    sys.modules["cryptography"] = None  # type: ignore[assignment]
    try:
        return importlib.import_module("pymysql")
    finally:
        if sys.modules.get("cryptography", ...) is None:
            del sys.modules["cryptography"]


def needs_rsa(exc: BaseException) -> bool:
    """PyMySQL's complaint that an authentication needs cryptography."""
    return isinstance(exc, RuntimeError) and _NEEDS_RSA in str(exc)


def enable_rsa() -> bool:
    """Give PyMySQL its RSA support (once per process); whether it has it now. Parallel probes
    can all be refused before the first of them loads it: each of them may then log in again."""
    with _lock:
        auth = importlib.import_module("pymysql._auth")
        if not getattr(auth, "_have_cryptography", False):
            try:
                importlib.import_module("cryptography.hazmat.primitives.asymmetric.padding")
            except ImportError:
                return False  # not installed: PyMySQL's error stands
            # PyMySQL looks its auth functions up on the module at each login: re-running the
            # module with cryptography importable is all it takes
            importlib.reload(auth)
        return bool(getattr(auth, "_have_cryptography", False))


# -- a connection's insides: PyMySQL has no accessor for these, so they are read and set here
# alone (a PyMySQL that renames one breaks this module, and its tests, not the callers)


def socket_of(conn: object) -> socket.socket | None:
    """The socket of an open PyMySQL connection (an SSLSocket over TLS), None when closed.

    Who reads answers on it directly (edges/exchange.py, the admin's one-value reads) relies on
    PyMySQL's own read buffer being empty between statements: PyMySQL reads a whole answer and
    a server says nothing unasked, so after a statement nothing is left buffered there."""
    sock = getattr(conn, "_sock", None)
    return sock if isinstance(sock, socket.socket) else None


def set_timeouts(conn: Any, seconds: float) -> None:
    """The read and write timeout of `conn`'s next statement. PyMySQL takes them only at
    connect and has no setter: it keeps them in `_read_timeout` / `_write_timeout` and sets its
    socket's timeout from them before each read or write (tracking what it set last in
    `_current_timeout`). The socket is set here too, for answers read on it directly."""
    conn._read_timeout = seconds
    conn._write_timeout = seconds
    sock = socket_of(conn)
    if sock is not None and getattr(conn, "_current_timeout", None) != seconds:
        sock.settimeout(seconds)
        conn._current_timeout = seconds


def tls_preferred(conn: Any) -> None:
    """A connection given a TLS context, not yet connected, made to accept a server without
    TLS: PyMySQL takes any given context as "TLS required" (`_ssl_required`)."""
    if getattr(conn, "_ssl_required", None) is True:
        conn._ssl_required = False
