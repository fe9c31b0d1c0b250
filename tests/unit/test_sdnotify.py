"""systemd's notify protocol against a real datagram socket, as systemd listens."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from checker_core.service.sdnotify import Notifier


@pytest.fixture
def systemd(tmp_path: Path) -> Iterator[tuple[str, socket.socket]]:
    path = str(tmp_path / "notify")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    sock.settimeout(5)
    try:
        yield path, sock
    finally:
        sock.close()


def received(sock: socket.socket) -> dict[str, str]:
    return dict(line.split("=", 1) for line in sock.recv(4096).decode().splitlines())


def test_ready_status_watchdog_stopping(systemd: tuple[str, socket.socket]) -> None:
    path, sock = systemd
    notify = Notifier.from_env({"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "30000000"})
    assert notify.watchdog_usec == 30_000_000
    assert notify.ready("cluster a: no change\nsecond line")
    assert received(sock) == {"READY": "1", "STATUS": "cluster a: no change second line"}
    assert notify.watchdog()
    assert received(sock) == {"WATCHDOG": "1"}
    assert notify.reloading()
    reload = received(sock)
    assert reload["RELOADING"] == "1"
    assert int(reload["MONOTONIC_USEC"]) > 0
    assert notify.stopping()
    assert received(sock)["STOPPING"] == "1"


def test_abstract_socket_address() -> None:
    name = f"proxysql-checkers-test-{os.getpid()}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind("\0" + name)
        sock.settimeout(5)
        assert Notifier.from_env({"NOTIFY_SOCKET": "@" + name}).status("x")
        assert received(sock) == {"STATUS": "x"}


def test_without_systemd_nothing_is_sent() -> None:
    notify = Notifier.from_env({})
    assert not notify.enabled
    assert not notify.ready("x")
    assert not notify.watchdog()


def test_watchdog_off_without_usec_or_for_another_pid(systemd: tuple[str, socket.socket]) -> None:
    path, _ = systemd
    assert Notifier.from_env({"NOTIFY_SOCKET": path}).watchdog() is False
    other = {"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "1000000", "WATCHDOG_PID": "1"}
    assert Notifier.from_env(other).watchdog_usec is None


def test_a_vanished_socket_does_not_stop_the_daemon(tmp_path: Path) -> None:
    assert Notifier(str(tmp_path / "gone")).ready("x") is False
