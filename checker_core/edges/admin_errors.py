"""What can go wrong talking to ProxySQL's admin interface, and what each means for the exit
code."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from checker_core.core.settings import Endpoint
    from checker_core.edges.deadline import Deadline

_ACCESS_DENIED = 1045
_LOST = 2013  # CR_SERVER_LOST: during connect, no greeting came


class AdminError(Exception):
    """Talking to ProxySQL's admin interface failed; the message says what and where."""


class AdminUnreachable(AdminError):
    """No ProxySQL admin answered (exit code 1)."""


class AdminAccessDenied(AdminError):
    """ProxySQL refused the credentials (bad input: exit code 2)."""


class AdminBadEndpoint(AdminAccessDenied):
    """The settings cannot reach an admin interface at all, whatever ProxySQL does: the port
    names a service that is not MySQL, or a certificate or key file cannot be used. Bad input
    (exit code 2) as refused credentials are; nothing was changed."""


class AdminQueryFailed(AdminError):
    """ProxySQL rejected a statement."""


class ApplyFailed(AdminError):
    """A plan could not be made live; ProxySQL's live rows are as they were."""


def connect_failure(
    exc: BaseException, where: str, endpoint: Endpoint, deadline: Deadline | None
) -> AdminError:
    """What a failed connect to the admin at `where` means, in the operator's words."""
    from checker_core.edges import driver, tls

    pymysql = driver.load()
    if isinstance(exc, tls.TlsFileError):
        return AdminBadEndpoint(f"proxysql.{exc.key} {exc.path}: {exc.reason}")
    if isinstance(exc, tls.TlsError):
        # nobody trustworthy answered: as unreachable (exit 1), and nothing was changed
        return AdminUnreachable(f"{exc} (proxysql.ssl_mode, proxysql.ssl_ca)")
    late = deadline is not None and deadline.expired() and timed_out(exc)
    if late:
        return AdminUnreachable(
            f"{where}: no answer before the pass's deadline (run.max_runtime_ms); "
            "ProxySQL is hung or proxysql.connect_timeout_ms is too long"
        )
    if isinstance(exc, pymysql.err.OperationalError):
        code = exc.args[0] if exc.args else 0
        if code == _ACCESS_DENIED:
            return AdminAccessDenied(f"{where}: access denied for user {endpoint.user!r}")
        if code == _LOST and "timed out" in str(exc):
            return AdminUnreachable(
                f"{where}: connected, but no MySQL greeting within "
                f"proxysql.connect_timeout_ms ({endpoint.connect_timeout_ms} ms): a hung "
                "ProxySQL, or proxysql.port names a service that waits for the client "
                "to speak first (not ProxySQL's admin port)"
            )
        return AdminUnreachable(f"{where}: unreachable ({reason(exc)})")
    if isinstance(exc, pymysql.err.MySQLError):
        return AdminBadEndpoint(not_mysql(where, exc))
    return AdminUnreachable(f"{where}: unreachable ({exc})")


def timed_out(exc: BaseException) -> bool:
    """Whether a failure was a timeout: the socket's own, or PyMySQL's word for it (it wraps
    the socket's error in OperationalError, keeping it as the context)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, TimeoutError):
            return True
        current = current.__cause__ or current.__context__
    return "timed out" in str(exc)


def not_mysql(where: str, exc: BaseException) -> str:
    return (
        f"{where}: the service on proxysql.port does not speak the MySQL protocol "
        f"({type(exc).__name__}: {exc}); is it ProxySQL's admin port (6032 by default)?"
    )


def reason(exc: BaseException) -> str:
    """PyMySQL errors carry (code, message); say both."""
    args: tuple[object, ...] = exc.args
    if len(args) >= 2:
        return f"{args[1]} (error {args[0]})"
    return str(exc)
