"""Process exit codes, the same for every command (the scheduler and systemd read them)."""

from __future__ import annotations

import enum


class Exit(enum.IntEnum):
    OK = 0  # pass done (changes or not), or another pass holds the lock
    FAILED = 1  # ProxySQL admin unreachable, or a plan could not be applied
    BAD_INPUT = 2  # bad configuration, credentials or rows: nothing was changed
