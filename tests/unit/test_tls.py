"""ssl_mode: what each mode asks of the context, one context per settings per process, what
PyMySQL is handed, and what a server without TLS or a failed verification becomes."""

from __future__ import annotations

import ssl
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pymysql
import pytest

from checker_core.core.probes import ProbeFailure
from checker_core.core.schema import Checker, SslMode
from checker_core.core.settings import Tls
from checker_core.edges import tls
from checker_core.edges.failures import describe_error, failure_of
from checker_core.settings.config import ConfigError, load
from tests.lab.certs import CertSet, make_cert_set
from tests.unit.config_cases import MAIN_CLUSTER, config_file

CONFIG = (
    """
[proxysql]
password = "admin-pw"
{proxysql}
[monitor]
password = "monitor-pw"
{monitor}
[run]
state_dir = "{state}"
"""
    + MAIN_CLUSTER
)


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> CertSet:
    return make_cert_set(tmp_path_factory.mktemp("certs"))


@pytest.fixture(autouse=True)
def fresh_process_state() -> Iterator[None]:
    """Each test sees the module as a new process would."""
    tls.forget()
    yield
    tls.forget()


class FakeSocket:
    """What open_socket hands PyMySQL, in tests that never reach a server."""

    def __init__(self, host: str, port: int, timeout: float | None) -> None:
        self.where = (host, port, timeout)


@pytest.fixture(autouse=True)
def sockets(monkeypatch: pytest.MonkeyPatch) -> list[FakeSocket]:
    """Every socket a connect opens (none of them real)."""
    opened: list[FakeSocket] = []

    def open_socket(host: str, port: int, timeout: float | None) -> FakeSocket:
        opened.append(FakeSocket(host, port, timeout))
        return opened[-1]

    monkeypatch.setattr(tls, "open_socket", open_socket)
    return opened


def write(tmp_path: Path, proxysql: str = "", monitor: str = "") -> Path:
    return config_file(tmp_path, CONFIG.format(proxysql=proxysql, monitor=monitor, state="{state}"))


# ---------------------------------------------------------------- settings


def test_default_is_preferred_without_files(tmp_path: Path) -> None:
    settings = load(write(tmp_path), Checker.GALERA, env={})
    assert settings.proxysql.endpoint.tls == Tls(SslMode.PREFERRED)
    assert settings.monitor.tls == Tls(SslMode.PREFERRED)
    assert settings.warnings == ()


@pytest.mark.parametrize("section", ["proxysql", "monitor"])
@pytest.mark.parametrize("mode", ["verify_ca", "verify_identity"])
def test_verify_without_ca_is_bad_input_naming_the_key(
    tmp_path: Path, section: str, mode: str
) -> None:
    path = write(tmp_path, **{section: f'ssl_mode = "{mode}"'})
    with pytest.raises(ConfigError) as info:
        load(path, Checker.GALERA, env={})
    assert [str(p) for p in info.value.problems] == [
        f'{section}.ssl_mode: "{mode}" needs {section}.ssl_ca (the CA that signed the '
        "server's certificate)"
    ]


def test_unknown_mode_lists_the_modes(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load(write(tmp_path, monitor='ssl_mode = "on"'), Checker.GR, env={})
    assert [str(p) for p in info.value.problems] == [
        "monitor.ssl_mode: must be one of disabled, preferred, required, verify_ca, "
        "verify_identity, got 'on'"
    ]


def test_mode_from_environment(tmp_path: Path) -> None:
    settings = load(write(tmp_path), Checker.GALERA, env={"CHECKER_MONITOR_SSL_MODE": "disabled"})
    assert settings.monitor.tls.mode is SslMode.DISABLED


@pytest.mark.parametrize(
    ("mode", "warned"),
    [
        ("disabled", 'monitor.ssl_mode is "disabled": monitor.ssl_ca not used'),
        ("preferred", 'monitor.ssl_mode is "preferred": the server is not verified against'),
        ("required", 'monitor.ssl_mode is "required": the server is not verified against'),
        ("verify_ca", None),
        ("verify_identity", None),
    ],
)
def test_a_ca_that_verifies_nothing_is_said(
    tmp_path: Path, certs: CertSet, mode: str, warned: str | None
) -> None:
    path = write(tmp_path, monitor=f'ssl_mode = "{mode}"\nssl_ca = "{certs.ca}"')
    settings = load(path, Checker.GALERA, env={})
    assert settings.monitor.tls == Tls(SslMode(mode), str(certs.ca))
    if warned is None:
        assert settings.warnings == ()
    else:
        assert len(settings.warnings) == 1
        assert settings.warnings[0].startswith(warned)


# ---------------------------------------------------------------- the context


@pytest.mark.parametrize(
    ("mode", "verify", "check_hostname", "ca_used"),
    [
        (SslMode.DISABLED, None, None, False),
        (SslMode.PREFERRED, False, False, False),
        (SslMode.REQUIRED, False, False, False),
        (SslMode.VERIFY_CA, True, False, True),
        (SslMode.VERIFY_IDENTITY, True, True, True),
    ],
)
def test_context_spec_per_mode(
    mode: SslMode, verify: bool | None, check_hostname: bool | None, ca_used: bool
) -> None:
    spec = tls.context_spec(Tls(mode, "/ca.pem"))
    if verify is None:
        assert spec is None
        return
    assert spec is not None
    assert (spec.verify, spec.check_hostname, spec.ca is not None) == (
        verify,
        check_hostname,
        ca_used,
    )


@pytest.mark.parametrize(
    ("mode", "verify_mode", "check_hostname", "cas"),
    [
        (SslMode.PREFERRED, ssl.CERT_NONE, False, 0),
        (SslMode.REQUIRED, ssl.CERT_NONE, False, 0),
        (SslMode.VERIFY_CA, ssl.CERT_REQUIRED, False, 1),
        (SslMode.VERIFY_IDENTITY, ssl.CERT_REQUIRED, True, 1),
    ],
)
def test_built_context_loads_only_the_given_ca(
    certs: CertSet, mode: SslMode, verify_mode: ssl.VerifyMode, check_hostname: bool, cas: int
) -> None:
    ca = str(certs.ca) if mode.verifies else None
    ctx = tls.context_for(Tls(mode, ca))
    assert ctx is not None
    assert (ctx.verify_mode, ctx.check_hostname) == (verify_mode, check_hostname)
    # no system bundle: the only CA a context knows is the one configured
    assert ctx.cert_store_stats()["x509_ca"] == cas


def test_client_certificate_is_loaded(certs: CertSet) -> None:
    # the server pair stands in for a client pair: loading is what is checked
    ctx = tls.context_for(Tls(SslMode.REQUIRED, None, str(certs.cert), str(certs.key)))
    assert ctx is not None


def test_one_context_per_settings_per_process(certs: CertSet) -> None:
    preferred = Tls(SslMode.PREFERRED)
    verified = Tls(SslMode.VERIFY_IDENTITY, str(certs.ca))
    first = tls.context_for(preferred)
    assert tls.context_for(Tls(SslMode.PREFERRED)) is first
    assert tls.context_for(verified) is not first
    assert tls.context_for(verified) is tls.context_for(verified)
    assert tls.context_for(Tls(SslMode.DISABLED)) is None
    assert tls.contexts_built() == 2
    tls.forget()  # a daemon's reload: the files are read again
    assert tls.context_for(Tls(SslMode.PREFERRED)) is not first


def test_context_is_never_the_default_one(monkeypatch: pytest.MonkeyPatch) -> None:
    def forbidden(*args: object, **kwargs: object) -> ssl.SSLContext:
        raise AssertionError("the system CA bundle was read")

    monkeypatch.setattr(ssl, "create_default_context", forbidden)
    monkeypatch.setattr(ssl.SSLContext, "load_default_certs", forbidden)
    for mode in (SslMode.PREFERRED, SslMode.REQUIRED):
        assert tls.context_for(Tls(mode)) is not None


# ---------------------------------------------------------------- what PyMySQL is handed


@pytest.mark.parametrize(
    ("mode", "plain_before", "handed"),
    [
        (SslMode.DISABLED, False, "ssl_disabled"),
        (SslMode.PREFERRED, False, "context"),
        (SslMode.PREFERRED, True, "ssl_disabled"),
        (SslMode.REQUIRED, False, "context"),
        (SslMode.REQUIRED, True, "context"),
    ],
)
def test_arguments_per_mode(mode: SslMode, plain_before: bool, handed: str) -> None:
    if plain_before:
        tls._plain_servers.add(("127.0.0.1", 3311))
    arguments = tls.tls_arguments(Tls(mode), "127.0.0.1", 3311)
    if handed == "ssl_disabled":
        assert arguments == {"ssl_disabled": True}
    else:
        assert set(arguments) == {"ssl"}
        assert isinstance(arguments["ssl"], ssl.SSLContext)


class FakeConnection:
    """What pymysql.connect returns, down to the TLS decision PyMySQL 1.2 makes at connect."""

    def __init__(self, server: FakeServer, kwargs: dict[str, Any]) -> None:
        self.server = server
        self.kwargs = kwargs
        self._ssl_required = "ssl" in kwargs  # as PyMySQL: a given context means required
        self.outcome = ""

    def connect(self, sock: FakeSocket | None = None) -> None:
        self.sock = sock
        server = self.server
        if self.kwargs.get("ssl_disabled") or "ssl" not in self.kwargs:
            self.outcome = "plain"
        elif not server.offers_tls and self._ssl_required:
            raise pymysql.err.OperationalError(
                2026, "SSL is required but the server doesn't support it"
            )
        elif not server.offers_tls:
            self.outcome = "plain"
        elif server.handshake is not None:
            exc = pymysql.err.OperationalError(2003, f"Can't connect ({server.handshake})")
            exc.original_exception = server.handshake  # type: ignore[attr-defined]
            raise exc
        else:
            self.outcome = "tls"

    def __str__(self) -> str:
        return self.outcome


class FakeServer:
    """pymysql.connect stand-in: a server with or without TLS, or a failing handshake."""

    def __init__(self, offers_tls: bool, handshake: BaseException | None = None) -> None:
        self.offers_tls = offers_tls
        self.handshake = handshake
        self.calls: list[dict[str, Any]] = []

    def __call__(self, **kwargs: Any) -> FakeConnection:
        self.calls.append(kwargs)
        conn = FakeConnection(self, kwargs)
        if not kwargs.get("defer_connect"):
            conn.connect()
        return conn


def _verify_failure() -> ssl.SSLCertVerificationError:
    exc = ssl.SSLCertVerificationError(1, "certificate verify failed")
    exc.verify_message = "unable to get local issuer certificate"
    return exc


@pytest.mark.parametrize(
    ("mode", "offers_tls", "outcome", "connects"),
    [
        (SslMode.DISABLED, True, "plain", 1),
        (SslMode.DISABLED, False, "plain", 1),
        (SslMode.PREFERRED, True, "tls", 1),
        (SslMode.PREFERRED, False, "plain", 1),
        (SslMode.REQUIRED, True, "tls", 1),
        (SslMode.REQUIRED, False, "node 127.0.0.1:3311: ssl_mode required, but the server", 1),
        (SslMode.VERIFY_CA, False, "node 127.0.0.1:3311: ssl_mode verify_ca, but the server", 1),
    ],
)
def test_mode_against_a_server(
    monkeypatch: pytest.MonkeyPatch,
    certs: CertSet,
    *,
    mode: SslMode,
    offers_tls: bool,
    outcome: str,
    connects: int,
) -> None:
    server = FakeServer(offers_tls)
    monkeypatch.setattr(pymysql, "connect", server)
    settings = Tls(mode, str(certs.ca) if mode.verifies else None)
    try:
        got = str(tls.connect(settings, "node 127.0.0.1:3311", "127.0.0.1", 3311, user="m"))
    except tls.TlsError as exc:
        got = str(exc)
    assert got.startswith(outcome)
    assert len(server.calls) == connects
    assert all(call["user"] == "m" for call in server.calls)


def test_preferred_falls_back_on_the_same_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    server = FakeServer(offers_tls=False)
    monkeypatch.setattr(pymysql, "connect", server)
    assert str(tls.connect(Tls(SslMode.PREFERRED), "admin", "127.0.0.1", 6032)) == "plain"
    [call] = server.calls
    assert isinstance(call["ssl"], ssl.SSLContext)


def test_preferred_without_pymysqls_flag_retries_plain_and_remembers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Should PyMySQL stop honouring the lifted requirement, a refused offer costs one extra
    connect, once per server and process."""
    server = FakeServer(offers_tls=False)
    original = FakeConnection.connect

    def ignoring_the_flag(self: FakeConnection, sock: FakeSocket | None = None) -> None:
        self._ssl_required = "ssl" in self.kwargs
        original(self, sock)

    monkeypatch.setattr(FakeConnection, "connect", ignoring_the_flag)
    monkeypatch.setattr(pymysql, "connect", server)
    for _ in range(3):
        assert str(tls.connect(Tls(SslMode.PREFERRED), "admin", "127.0.0.1", 6032)) == "plain"
    assert len(server.calls) == 4  # one refused offer, then plain straight away


def test_failed_verification_is_a_clear_probe_failure(
    monkeypatch: pytest.MonkeyPatch, certs: CertSet
) -> None:
    monkeypatch.setattr(pymysql, "connect", FakeServer(True, _verify_failure()))
    with pytest.raises(tls.TlsError) as info:
        tls.connect(Tls(SslMode.VERIFY_CA, str(certs.ca)), "node 127.0.0.1:3311", "h", 1)
    assert describe_error(info.value) == (
        "node 127.0.0.1:3311: TLS (verify_ca) failed: certificate verify failed: "
        "unable to get local issuer certificate"
    )
    assert failure_of(info.value) is ProbeFailure.ERROR


def test_errors_other_than_tls_pass_through(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pymysql, "connect", FakeServer(True, ConnectionRefusedError(111, "no")))
    with pytest.raises(pymysql.err.OperationalError):
        tls.connect(Tls(SslMode.REQUIRED), "node", "h", 1)


def test_the_connect_runs_on_the_socket_opened_for_it(
    monkeypatch: pytest.MonkeyPatch, sockets: list[FakeSocket]
) -> None:
    server = FakeServer(offers_tls=True)
    monkeypatch.setattr(pymysql, "connect", server)
    for mode in (SslMode.DISABLED, SslMode.PREFERRED, SslMode.REQUIRED):
        conn = tls.connect(Tls(mode), "node", "db1.example", 3307, connect_timeout=0.3)
        assert conn.sock is sockets[-1]  # type: ignore[attr-defined]
    assert [s.where for s in sockets] == [("db1.example", 3307, 0.3)] * 3
    assert all(call["defer_connect"] for call in server.calls)


def test_a_socket_that_cannot_be_opened_fails_as_pymysql_words_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def refused(host: str, port: int, timeout: float | None) -> FakeSocket:
        raise ConnectionRefusedError(111, "Connection refused")

    monkeypatch.setattr(pymysql, "connect", FakeServer(offers_tls=True))
    monkeypatch.setattr(tls, "open_socket", refused)
    with pytest.raises(pymysql.err.OperationalError) as info:
        tls.connect(Tls(SslMode.PREFERRED), "node", "127.0.0.1", 1)
    assert describe_error(info.value) == (
        "Can't connect to MySQL server on '127.0.0.1' ([Errno 111] Connection refused) (error 2003)"
    )
    assert failure_of(info.value) is ProbeFailure.REFUSED


def test_a_name_is_resolved_without_loading_the_idna_codec(tmp_path: Path) -> None:
    """CPython runs a str host through the idna codec in getaddrinfo, whose first use imports
    stringprep and unicodedata: a cost every scheduler pass would pay."""
    program = (
        "import socket, sys\n"
        "from checker_core.edges.tls import open_socket\n"
        "listener = socket.socket()\n"
        "listener.bind(('127.0.0.1', 0))\n"
        "listener.listen()\n"
        "for host in ('localhost', '127.0.0.1'):\n"
        "    sock = open_socket(host, listener.getsockname()[1], 2.0)\n"
        "    nodelay = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)\n"
        "    print(sock.getpeername()[0], nodelay)\n"
        "print('encodings.idna' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert done.stdout.split("\n")[:3] == ["127.0.0.1 1", "127.0.0.1 1", "False"]


def test_check_config_says_what_verify_needs(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from galera_checker.cli import build

    path = write(tmp_path, proxysql='ssl_mode = "verify_identity"')
    result = CliRunner().invoke(build(), ["--config", str(path), "check-config"])
    assert result.exit_code == 2
    assert '  proxysql.ssl_mode: "verify_identity" needs proxysql.ssl_ca' in result.output


def test_every_connect_of_a_process_gets_the_same_context(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The probes of every pass and the daemon's reconnects, to any node: one context."""
    from checker_core.core.model import NodeAddress
    from checker_core.core.settings import Endpoint, Secret
    from checker_core.edges.backend import Prober

    server = FakeServer(offers_tls=True)
    monkeypatch.setattr(pymysql, "connect", server)
    monitor = Endpoint("monitor", Secret("pw"), Tls(SslMode.REQUIRED), 500, 800)
    for persistent in (False, True):
        prober = Prober(monitor, lambda conn: None, persistent)
        for port in (3311, 3312, 3313, 3311):
            prober._connect(NodeAddress("127.0.0.1", port), 0.5)
        prober.close()
    contexts = {id(call["ssl"]) for call in server.calls}
    assert len(server.calls) == 8
    assert len(contexts) == 1
    assert tls.contexts_built() == 1


@pytest.mark.parametrize(("rsa_available", "connects"), [(True, 2), (False, 1)])
def test_a_login_that_needs_rsa_is_made_again_once_rsa_is_there(
    monkeypatch: pytest.MonkeyPatch, rsa_available: bool, connects: int
) -> None:
    """Probes refused in parallel before any of them loaded RSA each log in again."""
    from checker_core.edges import driver

    server = FakeServer(offers_tls=True)
    refusals = [RuntimeError("'cryptography' package is required for sha256_password")]

    def login(**kwargs: Any) -> FakeConnection:
        if refusals:
            server.calls.append(kwargs)
            raise refusals.pop()
        return server(**kwargs)

    monkeypatch.setattr(pymysql, "connect", login)
    monkeypatch.setattr(driver, "enable_rsa", lambda: rsa_available)
    if rsa_available:
        assert str(tls.connect(Tls(SslMode.REQUIRED), "node", "h", 1)) == "tls"
    else:
        with pytest.raises(RuntimeError, match="cryptography"):
            tls.connect(Tls(SslMode.REQUIRED), "node", "h", 1)
    assert len(server.calls) == connects
