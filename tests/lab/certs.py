"""A certificate authority made with openssl for the lab: the servers' certificates are signed
by it, for 127.0.0.1 and localhost, so a client can verify identity as in production."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

SERVER_NAMES = "subjectAltName=IP:127.0.0.1,DNS:localhost"


@dataclass(frozen=True, slots=True)
class CertSet:
    """A CA and one server certificate it signed (PEM files)."""

    ca: Path
    cert: Path
    key: Path


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60)


def _make_ca(where: Path, name: str) -> tuple[Path, Path]:
    ca, ca_key = where / f"{name}.pem", where / f"{name}-key.pem"
    _openssl(
        "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-days", "30", "-subj", f"/CN={name}", "-keyout", str(ca_key), "-out", str(ca),
        "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign",
    )  # fmt: skip
    return ca, ca_key


def make_cert_set(where: Path, names: str = SERVER_NAMES) -> CertSet:
    """`where/ca.pem` and a server certificate for `names`, made anew unless already there."""
    where.mkdir(parents=True, exist_ok=True)
    found = CertSet(where / "ca.pem", where / "server-cert.pem", where / "server-key.pem")
    if all(p.is_file() for p in (found.ca, found.cert, found.key)):
        return found
    if shutil.which("openssl") is None:
        raise RuntimeError("openssl is not installed")
    ca, ca_key = _make_ca(where, "ca")
    request = where / "server.csr"
    _openssl(
        "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-subj", "/CN=127.0.0.1", "-keyout", str(found.key), "-out", str(request),
    )  # fmt: skip
    extensions = where / "server.ext"
    extensions.write_text(f"{names}\nextendedKeyUsage=serverAuth\n")
    _openssl(
        "x509", "-req", "-in", str(request), "-CA", str(ca), "-CAkey", str(ca_key),
        "-CAcreateserial", "-days", "30", "-extfile", str(extensions), "-out", str(found.cert),
    )  # fmt: skip
    found.key.chmod(0o644)  # the servers run as the lab's user, which may not be ours
    return found


def make_other_ca(where: Path) -> Path:
    """A CA that signed nothing the lab serves: verifying against it must fail."""
    where.mkdir(parents=True, exist_ok=True)
    other = where / "other-ca.pem"
    if not other.is_file():
        _make_ca(where, "other-ca")
    return other
