"""A SIGHUP that reaches the daemon while it is still starting must not kill it.

SIGHUP's default action ends a process. The daemon takes SIGHUP as "reload" once it runs
(service/daemon.py), but a process spends its first moments importing what it needs and
reading its configuration, and a `kill -HUP` in that time (by hand, or by a supervisor that
does not wait for READY=1) would end it. The console script calls `hold` first thing when its
command is `daemon`: such a SIGHUP is then kept, and the daemon, once it listens, rereads the
configuration for it.

A Python handler, not SIG_IGN: an ignored signal stays ignored in every program the process
starts, a handler does not.
"""

from __future__ import annotations

import signal
import threading
from types import FrameType

_came = threading.Event()


def _took(signum: int, frame: FrameType | None) -> None:
    _came.set()


def hold() -> None:
    """From now on a SIGHUP is kept, until the daemon installs its own handler."""
    signal.signal(signal.SIGHUP, _took)


def came_early() -> bool:
    """Whether a SIGHUP came while it was held (said once: asking forgets it)."""
    came = _came.is_set()
    _came.clear()
    return came
