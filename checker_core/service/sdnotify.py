"""systemd's notify protocol (Type=notify): one datagram per message to $NOTIFY_SOCKET.

The protocol is a few lines of text on a Unix socket, so it is spoken here directly rather than
through a dependency. Without NOTIFY_SOCKET (not under systemd) every call does nothing.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Mapping


class Notifier:
    def __init__(self, address: str | None, watchdog_usec: int | None = None) -> None:
        self.address = address
        # WatchdogSec= of the unit, in microseconds; None when the watchdog is off
        self.watchdog_usec = watchdog_usec

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Notifier:
        env = os.environ if environ is None else environ
        address = env.get("NOTIFY_SOCKET") or None
        usec_text = env.get("WATCHDOG_USEC", "")
        pid_text = env.get("WATCHDOG_PID", "")
        usec = int(usec_text) if usec_text.isdigit() and int(usec_text) > 0 else None
        if pid_text and pid_text != str(os.getpid()):
            usec = None  # the watchdog is meant for another process of the unit
        return cls(address, usec)

    @property
    def enabled(self) -> bool:
        return self.address is not None

    def send(self, *fields: str) -> bool:
        """Send KEY=VALUE lines; False when there is no socket or systemd did not take them."""
        if self.address is None:
            return False
        target = self.address
        if target.startswith("@"):  # abstract namespace
            target = "\0" + target[1:]
        payload = "\n".join(f.replace("\n", " ") for f in fields).encode()
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
                sock.connect(target)
                sock.sendall(payload)
        except OSError:
            return False  # systemd gone or socket not ours: the daemon goes on without it
        return True

    def ready(self, status: str) -> bool:
        return self.send("READY=1", f"STATUS={status}")

    def status(self, text: str) -> bool:
        return self.send(f"STATUS={text}")

    def watchdog(self) -> bool:
        return self.watchdog_usec is not None and self.send("WATCHDOG=1")

    def reloading(self) -> bool:
        usec = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000
        return self.send("RELOADING=1", f"MONOTONIC_USEC={usec}", "STATUS=reloading")

    def stopping(self) -> bool:
        return self.send("STOPPING=1", "STATUS=stopping after the current pass")
