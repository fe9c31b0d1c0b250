"""PyMySQL, imported lean: without `cryptography` until an account needs it.

PyMySQL imports cryptography's RSA machinery when it is imported (about half of its import
time), yet uses it only for sha256_password and for caching_sha2_password's full login over a
plain connection. A pass usually needs neither (mysql_native_password, TLS, or a server that
already cached the account), so the import is held back and made, once, the first time PyMySQL
says it needs it.
"""

from __future__ import annotations

import importlib
import sys
import threading
from types import ModuleType

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
