"""How a probe failed, and its error in words, from what PyMySQL (or the exchange, speaking as
PyMySQL does) raised."""

from __future__ import annotations

from checker_core.core.probes import ProbeFailure
from checker_core.edges import tls


def failure_of(exc: BaseException) -> ProbeFailure:
    """How a probe failed, from PyMySQL's exception and the OS error beneath it (PyMySQL wraps
    socket errors in OperationalError and keeps the original as its context)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, TimeoutError):
            return ProbeFailure.SILENT
        if isinstance(current, ConnectionRefusedError):
            return ProbeFailure.REFUSED
        original = getattr(current, "original_exception", None)
        current = (
            original
            if isinstance(original, BaseException)
            else current.__cause__ or current.__context__
        )
    text = str(exc)
    if "timed out" in text:
        return ProbeFailure.SILENT
    if "Connection refused" in text:
        return ProbeFailure.REFUSED
    return ProbeFailure.ERROR


def describe_error(exc: BaseException) -> str:
    """PyMySQL errors carry (code, message); keep both, drop the noise."""
    if isinstance(exc, tls.TlsError):
        return str(exc)
    args: tuple[object, ...] = exc.args
    if len(args) >= 2 and isinstance(args[0], int):
        return f"{args[1]} (error {args[0]})"
    return f"{type(exc).__name__}: {exc}"
