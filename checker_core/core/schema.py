"""The types of the configuration: which checker, a key's record, TLS modes, derived defaults.
The table of every key is settings/keys.py."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Checker(enum.Enum):
    GALERA = "galera"
    GR = "gr"

    @property
    def command(self) -> str:
        return "galera-checker" if self is Checker.GALERA else "gr-checker"


BOTH = (Checker.GALERA, Checker.GR)


class Derived(enum.Enum):
    """Defaults computed from other keys of the same cluster."""

    CONFIG_WRITER = "8000 + writer_hostgroup"
    CONFIG_READER = "8000 + reader_hostgroup"


# ProxySQL stores hostgroup ids (and most numbers) in a signed 32-bit int
INT_MAX = 2**31 - 1

REQUIRED = object()
"""Marks a key without a default."""


@dataclass(frozen=True, slots=True)
class Key:
    """One configuration key: its section, name, type, bounds, default and origins."""

    section: str
    name: str
    kind: type  # int, str, bool
    default: object
    doc: str
    choices: tuple[str, ...] = ()
    minimum: int | None = None
    maximum: int | None = None
    checkers: tuple[Checker, ...] = BOTH
    secret: bool = False
    optional: bool = False  # may be absent without a default (None)

    @property
    def required(self) -> bool:
        return self.default is REQUIRED


class SslMode(enum.Enum):
    """TLS to one endpoint, in the words of MySQL's clients (--ssl-mode)."""

    DISABLED = "disabled"
    PREFERRED = "preferred"
    REQUIRED = "required"
    VERIFY_CA = "verify_ca"
    VERIFY_IDENTITY = "verify_identity"

    @property
    def encrypts(self) -> bool:
        """TLS is offered to the server."""
        return self is not SslMode.DISABLED

    @property
    def insists(self) -> bool:
        """A server without TLS, or a failed handshake, is an error (not plain text)."""
        return self in (SslMode.REQUIRED, SslMode.VERIFY_CA, SslMode.VERIFY_IDENTITY)

    @property
    def verifies(self) -> bool:
        """The server's certificate must chain to ssl_ca."""
        return self in (SslMode.VERIFY_CA, SslMode.VERIFY_IDENTITY)

    @property
    def meaning(self) -> str:
        return _SSL_MODE_MEANING[self]


_SSL_MODE_MEANING = {
    SslMode.DISABLED: "plain text, TLS is never offered",
    SslMode.PREFERRED: "TLS when the server offers it, else plain text; verifies nothing",
    SslMode.REQUIRED: "TLS or no connection; encrypts but verifies nothing",
    SslMode.VERIFY_CA: "TLS with a certificate signed by ssl_ca",
    SslMode.VERIFY_IDENTITY: "as verify_ca, and the certificate names the host",
}
SSL_MODES = tuple(mode.value for mode in SslMode)
