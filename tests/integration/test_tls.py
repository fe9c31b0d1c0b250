"""TLS for real: the lab's Galera nodes serve a certificate from the lab's CA (127.0.0.1 and
localhost), and a private admin emulator serves one too.

What a node saw is read on the node itself: Ssl_accepts counts the TLS handshakes it accepted,
so a pass that must not negotiate TLS leaves it where it was.
"""

from __future__ import annotations

import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from checker_core.core.model import NodeAddress
from checker_core.core.schema import SslMode
from checker_core.core.settings import Endpoint, ProxySQLSettings, Secret, Tls
from checker_core.edges import driver, tls
from checker_core.edges.admin_errors import AdminUnreachable
from checker_core.edges.backend import Prober
from checker_core.edges.proxysql import AdminClient
from galera_checker.policy import GaleraFacts
from galera_checker.probe import probe
from tests.integration.rig import HG, Rig, as_configured, seeded_rig
from tests.lab.accounts import ADMIN_PASSWORD, ADMIN_USER, MONITOR_PASSWORD, MONITOR_USER
from tests.lab.certs import CertSet, make_other_ca
from tests.lab.galera import GaleraLab
from tests.lab.process import LabError, free_port, pid_alive, stop, wait_until

pytestmark = [pytest.mark.galera, pytest.mark.proxysql]


@pytest.fixture(scope="module")
def certs(galera_lab: GaleraLab) -> CertSet:
    """The lab's CA, with every node serving its certificate (restarted once if need be)."""
    galera_lab.ensure_tls()
    return galera_lab.certs


@pytest.fixture
def other_ca(tmp_path: Path) -> Path:
    return make_other_ca(tmp_path / "other")


def ssl_accepts(galera: GaleraLab) -> list[int]:
    return [int(galera.sql(n, "SHOW GLOBAL STATUS LIKE 'Ssl_accepts'")[0][1]) for n in (1, 2, 3)]


def snapshot(rig: Rig) -> tuple[object, ...]:
    rows = rig.admin.read_rows(HG.all)
    return (as_configured(rows.runtime), rows.staging, rig.load_version())


def session_cipher(settings: Tls, node: NodeAddress) -> str:
    """Ssl_cipher of a monitor session as the node reports it ('' for plain text)."""
    conn = tls.connect(
        settings, f"node {node}", node.host, node.port, user=MONITOR_USER,
        password=MONITOR_PASSWORD, connect_timeout=5, read_timeout=5,
    )  # fmt: skip
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW SESSION STATUS LIKE 'Ssl_cipher'")
            row = cur.fetchone()
            assert row is not None
            return str(row[1])
    finally:
        conn.close()


# ---------------------------------------------------------------- nodes


def test_pass_with_verify_identity_to_the_nodes(
    rig: Rig, galera: GaleraLab, certs: CertSet, nodes: list[NodeAddress]
) -> None:
    rig.monitor_settings.update(ssl_mode="verify_identity", ssl_ca=str(certs.ca))
    rig.write_config()
    before = ssl_accepts(galera)
    result = rig.run()
    assert result.code == 0, result.stderr
    n1, n2, n3 = nodes
    assert (rig.writers, rig.backups, rig.readers) == ({n1}, {n2, n3}, {n1, n2, n3})
    # one verified handshake per node, from one context built once in the process
    assert [b - a for a, b in zip(before, ssl_accepts(galera), strict=True)] == [1, 1, 1]
    assert session_cipher(Tls(SslMode.VERIFY_IDENTITY, str(certs.ca)), n1) != ""


def test_wrong_ca_fails_clearly_and_changes_nothing(
    rig: Rig, certs: CertSet, other_ca: Path, nodes: list[NodeAddress]
) -> None:
    rig.passes(1)
    before = snapshot(rig)
    rig.monitor_settings.update(ssl_mode="verify_identity", ssl_ca=str(other_ca))
    rig.write_config()
    result = rig.run()
    assert snapshot(rig) == before
    for node in nodes:
        expected = f"node {node}: TLS (verify_identity) failed: certificate verify failed"
        assert expected in result.stderr, result.stderr
    assert "no node answered" in result.stderr


def test_disabled_never_negotiates_tls(
    rig: Rig, galera: GaleraLab, certs: CertSet, nodes: list[NodeAddress]
) -> None:
    rig.monitor_settings.update(ssl_mode="disabled")
    rig.write_config()
    before = ssl_accepts(galera)
    result = rig.run()
    assert result.code == 0, result.stderr
    assert rig.writers == {nodes[0]}
    assert ssl_accepts(galera) == before, "a node accepted a TLS handshake under disabled"
    assert session_cipher(Tls(SslMode.DISABLED), nodes[0]) == ""
    # the same node does TLS when asked: the zero above is the mode's doing
    assert session_cipher(Tls(SslMode.PREFERRED), nodes[0]) != ""


@pytest.mark.parametrize(
    "mode", [SslMode.PREFERRED, SslMode.REQUIRED, SslMode.VERIFY_CA, SslMode.VERIFY_IDENTITY]
)
def test_every_encrypting_mode_gets_tls_from_the_node(
    galera: GaleraLab, certs: CertSet, nodes: list[NodeAddress], mode: SslMode
) -> None:
    ca = str(certs.ca) if mode.verifies else None
    assert session_cipher(Tls(mode, ca), nodes[1]) != ""


def test_the_daemons_probes_on_open_tls_connections_read_what_a_new_one_reads(
    galera: GaleraLab, certs: CertSet, nodes: list[NodeAddress]
) -> None:
    """A kept connection is asked through the exchange, over its TLS socket: the facts are the
    ones a probe on a connection of its own reads, and an unchanged answer is those facts."""
    monitor = Endpoint(
        MONITOR_USER, Secret(MONITOR_PASSWORD), Tls(SslMode.VERIFY_CA, str(certs.ca)), 5000, 5000
    )
    prober = Prober(monitor, probe, persistent=True)
    try:
        first = prober.probe_all(nodes, time.monotonic() + 10)  # threads: connect over TLS
        kept = {n: tls_of(c) for n, c in prober.idle().values()}
        later = prober.probe_all(nodes, time.monotonic() + 10)  # the exchange
        again = prober.probe_all(nodes, time.monotonic() + 10)
    finally:
        prober.close()
    assert set(kept) == set(nodes) and all(kept.values()), "each kept connection is TLS"
    for node in nodes:
        assert first[node].answered and later[node].answered, later[node].error
        before, after = first[node].facts, later[node].facts
        assert isinstance(before, GaleraFacts) and isinstance(after, GaleraFacts)
        assert after.get("wsrep_cluster_state_uuid") == before.get("wsrep_cluster_state_uuid")
        assert after.get("wsrep_gcomm_uuid") == before.get("wsrep_gcomm_uuid")
        assert after.read_only == before.read_only
        assert after.get("wsrep_provider_options") == before.get("wsrep_provider_options")
        assert again[node].facts is later[node].facts, "the same answer is not read again"


def tls_of(conn: object) -> bool:
    return isinstance(driver.socket_of(conn), ssl.SSLSocket)


# ---------------------------------------------------------------- the admin endpoint


@dataclass(frozen=True)
class PrivateAdmin:
    """A lab admin emulator of this test's own, offering TLS (the shared one stays as it is)."""

    admin_host: str
    admin_port: int
    pid: int
    admin_user: str = ADMIN_USER
    admin_password: str = ADMIN_PASSWORD


@pytest.fixture
def tls_admin(tmp_path: Path, certs: CertSet) -> Iterator[PrivateAdmin]:
    password = tmp_path / "admin-password"
    password.write_text(ADMIN_PASSWORD + "\n")
    port = free_port()
    log = (tmp_path / "emulator.log").open("wb")
    proc = subprocess.Popen(
        [
            sys.executable, "-m", "tests.lab.admin_emulator", "--port", str(port),
            "--datadir", str(tmp_path / "emulator"), "--user", ADMIN_USER,
            "--password-file", str(password),
            "--ssl-cert", str(certs.cert), "--ssl-key", str(certs.key),
        ],
        stdout=log, stderr=subprocess.STDOUT, cwd=Path(__file__).resolve().parents[2],
    )  # fmt: skip
    admin = PrivateAdmin("127.0.0.1", port, proc.pid)

    def answers() -> bool:
        if proc.poll() is not None:
            raise LabError(f"the emulator exited: {(tmp_path / 'emulator.log').read_text()}")
        try:
            settings(admin, Tls(SslMode.DISABLED)).close()
        except AdminUnreachable:
            return False
        return True

    try:
        wait_until(answers, 30, "the TLS admin emulator")
        yield admin
    finally:
        if pid_alive(proc.pid):
            stop(proc.pid, timeout=10)
        proc.wait(timeout=10)
        log.close()


def settings(admin: PrivateAdmin, mode: Tls) -> AdminClient:
    endpoint = Endpoint(admin.admin_user, Secret(admin.admin_password), mode, 2000, 5000)
    return AdminClient.connect(ProxySQLSettings(admin.admin_host, admin.admin_port, endpoint))


@pytest.fixture
def tls_rig(
    tls_admin: PrivateAdmin, galera: Any, tmp_path: Path, nodes: list[NodeAddress]
) -> Iterator[Rig]:
    """The shared rig's roster, seeded on this module's TLS emulator instead."""
    (tmp_path / "rig").mkdir()
    with seeded_rig(tmp_path / "rig", tls_admin, nodes) as rig:
        yield rig


def test_admin_over_verified_tls(tls_rig: Rig, certs: CertSet, nodes: list[NodeAddress]) -> None:
    ca = str(certs.ca)
    tls_rig.proxysql_settings.update(ssl_mode="verify_identity", ssl_ca=ca)
    tls_rig.monitor_settings.update(ssl_mode="verify_identity", ssl_ca=ca)
    tls_rig.write_config()
    result = tls_rig.run()
    assert result.code == 0, result.stderr
    assert tls_rig.writers == {nodes[0]}


def test_admin_with_the_wrong_ca_is_exit_1_and_nothing_changed(
    tls_rig: Rig, tls_admin: PrivateAdmin, other_ca: Path
) -> None:
    before = snapshot(tls_rig)
    tls_rig.proxysql_settings.update(ssl_mode="verify_ca", ssl_ca=str(other_ca))
    tls_rig.write_config()
    result = tls_rig.run()
    assert result.code == 1, result.stderr
    assert snapshot(tls_rig) == before
    expected = (
        f"ProxySQL admin 127.0.0.1:{tls_admin.admin_port}: TLS (verify_ca) failed: "
        "certificate verify failed"
    )
    assert expected in result.stderr, result.stderr


def test_admin_requiring_tls_of_a_plain_endpoint_is_exit_1(rig: Rig, proxysql_admin: Any) -> None:
    """The shared lab endpoint offers no TLS: required refuses it, preferred uses it plain."""
    if proxysql_admin.is_real:
        pytest.skip("a real ProxySQL offers TLS on its admin port")
    before = snapshot(rig)
    rig.proxysql_settings.update(ssl_mode="required")
    rig.write_config()
    result = rig.run()
    assert result.code == 1, result.stderr
    assert "ssl_mode required, but the server offers no TLS" in result.stderr
    assert snapshot(rig) == before
    rig.proxysql_settings.update(ssl_mode="preferred")
    rig.write_config()
    assert rig.run().code == 0
